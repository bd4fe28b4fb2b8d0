#include "planner/kernels/cpu/attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_cases.hpp"
#include "kernel_test_support.hpp"

namespace planner::kernels::cpu {
namespace {

using testing::add_positions;
using testing::random_floats;
using testing::shape_of;
using testing::slice_positions;
using testing::to_double;

// Tolerances of the fused fp32 kernels against the double reference: outputs and lse within 2e-5
// absolute (+ 1e-4 relative); gradients within 1e-4 of the largest gradient magnitude (+ 1e-4
// relative). Inputs are uniform in [-1, 1).
constexpr double kOutRtol = 1e-4, kOutAtol = 2e-5;
constexpr double kGradRtol = 1e-4, kGradAtol = 1e-4;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

// Naive attention in double that materialises every q_len x kv_len score matrix, forward and
// (when dout is given) backward, with the same layouts and masking rule as the fused kernel.
Reference reference_attention(const AttentionShape& s, const std::vector<double>& q,
                              const std::vector<double>& k, const std::vector<double>& v,
                              const std::vector<double>* dout) {
  const std::int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  Reference r;
  r.o.assign(q.size(), 0.0);
  r.lse.assign(static_cast<std::size_t>(s.batch * s.q_len * s.heads), kNegInf);
  r.dq.assign(q.size(), 0.0);
  r.dk.assign(k.size(), 0.0);
  r.dv.assign(v.size(), 0.0);
  auto qi = [&](std::int64_t b, std::int64_t i, std::int64_t h) {
    return ((b * s.q_len + i) * s.heads + h) * d;
  };
  auto kj = [&](std::int64_t b, std::int64_t j, std::int64_t g) {
    return ((b * s.kv_len + j) * s.kv_heads + g) * d;
  };
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      const std::int64_t g = h / group;
      std::vector<double> p(static_cast<std::size_t>(s.q_len * s.kv_len), 0.0);
      for (std::int64_t i = 0; i < s.q_len; ++i) {
        std::vector<double> sc(static_cast<std::size_t>(s.kv_len), kNegInf);
        double mx = kNegInf;
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          if (s.causal && s.kv_offset + j > s.q_offset + i) continue;
          double dot = 0;
          for (std::int64_t c = 0; c < d; ++c)
            dot += q[qi(b, i, h) + c] * k[kj(b, j, g) + c];
          sc[j] = s.scale * dot;
          mx = std::max(mx, sc[j]);
        }
        if (mx == kNegInf) continue;  // sees no key: o = 0, lse = -inf
        double sum = 0;
        for (std::int64_t j = 0; j < s.kv_len; ++j)
          sum += std::exp(sc[j] - mx);
        r.lse[(b * s.q_len + i) * s.heads + h] = mx + std::log(sum);
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          p[i * s.kv_len + j] = std::exp(sc[j] - mx) / sum;
          for (std::int64_t c = 0; c < d; ++c) {
            r.o[qi(b, i, h) + c] += p[i * s.kv_len + j] * v[kj(b, j, g) + c];
          }
        }
      }
      if (dout == nullptr) continue;
      for (std::int64_t i = 0; i < s.q_len; ++i) {
        // dP = dO V^T; dS = P (dP - sum_j P dP).
        std::vector<double> dp(static_cast<std::size_t>(s.kv_len), 0.0);
        double row = 0;
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          for (std::int64_t c = 0; c < d; ++c)
            dp[j] += (*dout)[qi(b, i, h) + c] * v[kj(b, j, g) + c];
          row += p[i * s.kv_len + j] * dp[j];
        }
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          const double pij = p[i * s.kv_len + j];
          const double ds = pij * (dp[j] - row) * s.scale;
          for (std::int64_t c = 0; c < d; ++c) {
            r.dv[kj(b, j, g) + c] += pij * (*dout)[qi(b, i, h) + c];
            r.dq[qi(b, i, h) + c] += ds * k[kj(b, j, g) + c];
            r.dk[kj(b, j, g) + c] += ds * q[qi(b, i, h) + c];
          }
        }
      }
    }
  }
  return r;
}

struct Inputs {
  std::vector<float> q, k, v, dout;
};

Inputs make_inputs(const AttentionShape& s, std::uint64_t seed) {
  const auto nq = static_cast<std::size_t>(s.batch * s.q_len * s.heads * s.head_dim);
  const auto nk = static_cast<std::size_t>(s.batch * s.kv_len * s.kv_heads * s.head_dim);
  return {random_floats(nq, seed), random_floats(nk, seed + 1), random_floats(nk, seed + 2),
          random_floats(nq, seed + 3)};
}

struct Fused {
  std::vector<float> o, lse, dq, dk, dv;
};

Fused run_fused(const AttentionShape& s, const Inputs& in) {
  Fused f;
  f.o.assign(in.q.size(), 0.0f);
  f.lse.assign(static_cast<std::size_t>(s.batch * s.q_len * s.heads), 0.0f);
  attention_forward(s, in.q.data(), in.k.data(), in.v.data(), f.o.data(), f.lse.data());
  std::vector<float> delta(f.lse.size());
  attention_backward_delta(static_cast<std::int64_t>(f.lse.size()), s.head_dim, f.o.data(),
                           in.dout.data(), delta.data());
  f.dq.assign(in.q.size(), 0.0f);
  f.dk.assign(in.k.size(), 0.0f);
  f.dv.assign(in.v.size(), 0.0f);
  attention_backward(s, in.q.data(), in.k.data(), in.v.data(), in.dout.data(), f.lse.data(),
                     delta.data(), f.dq.data(), f.dk.data(), f.dv.data());
  return f;
}

// lse with -inf entries compared exactly there and with tolerance elsewhere.
void expect_lse_close(const std::vector<float>& got, const std::vector<double>& want,
                      const std::string& what) {
  std::vector<double> g(got.begin(), got.end()), w = want;
  for (std::size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(std::isinf(g[i]), std::isinf(w[i])) << what << " lse[" << i << "]";
    if (std::isinf(w[i]) && std::isinf(g[i])) g[i] = w[i] = 0;
  }
  testing::expect_close(g, w, kOutRtol, kOutAtol, what + " lse");
}

void expect_matches_reference(const AttentionShape& s, std::uint64_t seed,
                              const std::string& what) {
  const Inputs in = make_inputs(s, seed);
  const auto dout = to_double(in.dout);
  const Reference ref =
      reference_attention(s, to_double(in.q), to_double(in.k), to_double(in.v), &dout);
  const Fused f = run_fused(s, in);
  testing::expect_close(f.o, ref.o, kOutRtol, kOutAtol, what + " o");
  expect_lse_close(f.lse, ref.lse, what);
  const double g = std::max(
      {testing::max_abs(ref.dq), testing::max_abs(ref.dk), testing::max_abs(ref.dv), 1e-3});
  testing::expect_close(f.dq, ref.dq, kGradRtol, kGradAtol * g, what + " dq");
  testing::expect_close(f.dk, ref.dk, kGradRtol, kGradAtol * g, what + " dk");
  testing::expect_close(f.dv, ref.dv, kGradRtol, kGradAtol * g, what + " dv");
}

TEST(AttentionReference, BackwardMatchesFiniteDifferences) {
  // The naive reference's own backward, checked once on a tiny GQA problem with offsets.
  AttentionShape s = shape_of(1, 2, 1, 3, 4, true);
  s.kv_len = 5;
  s.q_offset = 2;
  s.kv_offset = 1;
  const Inputs in = make_inputs(s, 11);
  const auto q = to_double(in.q), k = to_double(in.k), v = to_double(in.v),
             dout = to_double(in.dout);
  const Reference ref = reference_attention(s, q, k, v, &dout);
  auto loss = [&](const std::vector<double>& qq, const std::vector<double>& kk,
                  const std::vector<double>& vv) {
    return testing::weighted_sum(reference_attention(s, qq, kk, vv, nullptr).o, dout);
  };
  const auto fd_q = testing::numeric_gradient([&](const auto& x) { return loss(x, k, v); }, q);
  const auto fd_k = testing::numeric_gradient([&](const auto& x) { return loss(q, x, v); }, k);
  const auto fd_v = testing::numeric_gradient([&](const auto& x) { return loss(q, k, x); }, v);
  testing::expect_close(ref.dq, fd_q, 1e-6, 1e-8, "reference dq");
  testing::expect_close(ref.dk, fd_k, 1e-6, 1e-8, "reference dk");
  testing::expect_close(ref.dv, fd_v, 1e-6, 1e-8, "reference dv");
}

using Case = testing::AttentionCase;

class AttentionVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionVsReference, ForwardAndBackward) {
  const Case c = GetParam();
  expect_matches_reference(c.shape(), static_cast<std::uint64_t>(c.len * 131 + c.head_dim),
                           "fused");
}

// MHA, GQA and MQA; head dims 8 to 128; lengths below, at and across the 128 x 128 tiles, including
// non-multiples; causal and full.
INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionVsReference,
    ::testing::Values(Case{1, 1, 1, 8, 1, true}, Case{2, 3, 3, 16, 17, true},
                      Case{1, 4, 2, 32, 64, true}, Case{1, 2, 2, 64, 100, true},
                      Case{1, 2, 2, 32, 128, true}, Case{1, 4, 1, 64, 130, true},
                      Case{2, 2, 1, 8, 129, true}, Case{1, 2, 2, 128, 70, true},
                      Case{1, 2, 1, 24, 260, true}, Case{1, 2, 2, 16, 150, false},
                      Case{2, 4, 2, 8, 65, false}),
    [](const auto& p) { return testing::case_name(p.param); });

TEST(Attention, BlockWithOffsetsAndRowsThatSeeNoKey) {
  // 150 queries at positions 100..249 against 140 keys at 180..319: the first 80 queries see no
  // key (o = 0, lse = -inf), the rest see a growing prefix.
  AttentionShape s = shape_of(1, 4, 2, 32, 150, true);
  s.kv_len = 140;
  s.q_offset = 100;
  s.kv_offset = 180;
  expect_matches_reference(s, 21, "offset block");
  const Inputs in = make_inputs(s, 21);
  const Fused f = run_fused(s, in);
  EXPECT_EQ(f.lse[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(f.o[0], 0.0f);
  // Queries entirely after a block see all of it: causal equals full there.
  AttentionShape past = s;
  past.q_offset = 400;
  AttentionShape full = past;
  full.causal = false;
  EXPECT_EQ(run_fused(past, in).o, run_fused(full, in).o);
}

TEST(Attention, IsBitwiseReproducible) {
  const AttentionShape s = shape_of(2, 4, 2, 32, 150, true);
  const Inputs in = make_inputs(s, 31);
  const Fused a = run_fused(s, in);
  const Fused b = run_fused(s, in);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.dk, b.dk);
  EXPECT_EQ(a.dv, b.dv);
}

// Context parallelism over the given chunk boundaries of one sequence: every query chunk runs the
// forward against every key chunk and merges with attention_combine, then runs the backward against
// every key chunk with the merged lse and delta. The assembled results must equal full attention.
void expect_block_decomposition_matches(const std::vector<std::int64_t>& bounds) {
  const std::int64_t len = bounds.back();
  const AttentionShape full = shape_of(2, 4, 2, 16, len, true);
  const Inputs in = make_inputs(full, 41);
  const Fused want = run_fused(full, in);
  const std::int64_t qrow = full.heads * full.head_dim, kvrow = full.kv_heads * full.head_dim;
  const std::int64_t batch = full.batch, chunks = static_cast<std::int64_t>(bounds.size()) - 1;

  std::vector<float> o(want.o.size(), 0.0f), lse(want.lse.size(), 0.0f);
  std::vector<float> dq(want.dq.size(), 0.0f), dk(want.dk.size(), 0.0f), dv(want.dv.size(), 0.0f);
  for (std::int64_t qc = 0; qc < chunks; ++qc) {
    const std::int64_t q0 = bounds[qc], q1 = bounds[qc + 1], nq = q1 - q0;
    const auto q = slice_positions(in.q, batch, len, qrow, q0, q1);
    const auto dout = slice_positions(in.dout, batch, len, qrow, q0, q1);
    const std::int64_t rows = batch * nq * full.heads;
    std::vector<float> o_acc(q.size(), 0.0f),
        lse_acc(static_cast<std::size_t>(rows), -std::numeric_limits<float>::infinity());
    std::vector<float> o_part(q.size()), lse_part(static_cast<std::size_t>(rows));
    auto block_shape = [&](std::int64_t kc) {
      AttentionShape s = full;
      s.q_len = nq;
      s.q_offset = q0;
      s.kv_len = bounds[kc + 1] - bounds[kc];
      s.kv_offset = bounds[kc];
      return s;
    };
    // Ring order: start from the rank's own chunk, then the others.
    for (std::int64_t step = 0; step < chunks; ++step) {
      const std::int64_t kc = (qc + step) % chunks;
      const auto k = slice_positions(in.k, batch, len, kvrow, bounds[kc], bounds[kc + 1]);
      const auto v = slice_positions(in.v, batch, len, kvrow, bounds[kc], bounds[kc + 1]);
      attention_forward(block_shape(kc), q.data(), k.data(), v.data(), o_part.data(),
                        lse_part.data());
      attention_combine(rows, full.head_dim, o_acc.data(), lse_acc.data(), o_part.data(),
                        lse_part.data());
    }
    std::vector<float> delta(static_cast<std::size_t>(rows));
    attention_backward_delta(rows, full.head_dim, o_acc.data(), dout.data(), delta.data());
    std::vector<float> dq_part(q.size(), 0.0f);
    for (std::int64_t step = 0; step < chunks; ++step) {
      const std::int64_t kc = (qc + step) % chunks;
      const auto k = slice_positions(in.k, batch, len, kvrow, bounds[kc], bounds[kc + 1]);
      const auto v = slice_positions(in.v, batch, len, kvrow, bounds[kc], bounds[kc + 1]);
      std::vector<float> dk_part(k.size(), 0.0f), dv_part(v.size(), 0.0f);
      attention_backward(block_shape(kc), q.data(), k.data(), v.data(), dout.data(), lse_acc.data(),
                         delta.data(), dq_part.data(), dk_part.data(), dv_part.data());
      add_positions(dk_part, batch, len, kvrow, bounds[kc], bounds[kc + 1],
                    dk);  // sent to the owner
      add_positions(dv_part, batch, len, kvrow, bounds[kc], bounds[kc + 1], dv);
    }
    add_positions(o_acc, batch, len, qrow, q0, q1, o);
    add_positions(dq_part, batch, len, qrow, q0, q1, dq);
    add_positions(lse_acc, batch, len, full.heads, q0, q1, lse);
  }
  testing::expect_close(o, want.o, 1e-5, 1e-6, "cp o");
  testing::expect_close(lse, want.lse, 1e-5, 1e-6, "cp lse");
  testing::expect_close(dq, want.dq, 1e-4, 1e-5, "cp dq");
  testing::expect_close(dk, want.dk, 1e-4, 1e-5, "cp dk");
  testing::expect_close(dv, want.dv, 1e-4, 1e-5, "cp dv");
}

TEST(AttentionContextParallel, FourEqualBlocksEqualFullAttention) {
  expect_block_decomposition_matches({0, 40, 80, 120, 160});
}

// Uneven blocks, some across the 128 x 128 tile boundaries. A load-balanced split (Megatron: with
// cp = 2 rank 0 holds chunks 0 and 3) is the same set of chunk blocks, so it is covered too.
TEST(AttentionContextParallel, UnevenBlocksAcrossTileBoundariesEqualFullAttention) {
  expect_block_decomposition_matches({0, 70, 75, 200, 263});
}

TEST(Attention, CombineHandlesEmptySides) {
  const std::int64_t d = 4;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> o = {0, 0, 0, 0}, lse = {-inf};
  const std::vector<float> part = {1, 2, 3, 4}, lse_part = {0.5f};
  attention_combine(1, d, o.data(), lse.data(), part.data(), lse_part.data());
  EXPECT_EQ(o, part);
  EXPECT_EQ(lse[0], 0.5f);
  const std::vector<float> empty_lse = {-inf};
  attention_combine(1, d, o.data(), lse.data(), part.data(), empty_lse.data());
  EXPECT_EQ(o, part);
  EXPECT_EQ(lse[0], 0.5f);
  // Two equal halves: weights 1/2 each, lse grows by log 2.
  const std::vector<float> other = {3, 2, 1, 0};
  attention_combine(1, d, o.data(), lse.data(), other.data(), lse_part.data());
  EXPECT_EQ(o, (std::vector<float>{2, 2, 2, 2}));
  EXPECT_NEAR(lse[0], 0.5 + std::log(2.0), 1e-6);
}

TEST(Attention, PairCountsAndDefaultScale) {
  AttentionShape s = shape_of(2, 3, 3, 8, 10, true);
  EXPECT_DOUBLE_EQ(attention_pairs(s), 2 * 3 * 55.0);
  s.causal = false;
  EXPECT_DOUBLE_EQ(attention_pairs(s), 2 * 3 * 100.0);
  EXPECT_FLOAT_EQ(attention_default_scale(64), 0.125f);
}

}  // namespace
}  // namespace planner::kernels::cpu
