#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../attention_cases.hpp"
#include "gpu_test_support.hpp"
#include "planner/kernels/cpu/attention.hpp"
#include "planner/kernels/cuda/attention.hpp"

namespace planner::kernels::cuda::testing {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Results {
  std::vector<float> o, lse, dq, dk, dv;
};

struct Inputs {
  std::vector<float> q, k, v, dout;
};

template <class T>
Inputs make_inputs(const AttentionShape& s, std::uint64_t seed) {
  const auto nq = static_cast<std::size_t>(s.batch * s.q_len * s.heads * s.head_dim);
  const auto nk = static_cast<std::size_t>(s.batch * s.kv_len * s.kv_heads * s.head_dim);
  return {quantize<T>(random_floats(nq, seed)), quantize<T>(random_floats(nk, seed + 1)),
          quantize<T>(random_floats(nk, seed + 2)), quantize<T>(random_floats(nq, seed + 3))};
}

std::int64_t rows_of(const AttentionShape& s) {
  return s.batch * s.q_len * s.heads;
}

// The CPU reference for element type T: o is rounded to T before delta = rowsum(dout * o), as the
// GPU stores o in T and computes delta from it. (Without the rounding, rows where dP and delta
// nearly cancel gave bf16 dq 30-60% off on an H200 for both GPU algorithms alike, while fp32 and
// fp16 matched.)
template <class T = float>
Results run_cpu(const AttentionShape& s, const Inputs& in) {
  Results r;
  r.o.assign(in.q.size(), 0.0f);
  r.lse.assign(static_cast<std::size_t>(rows_of(s)), 0.0f);
  cpu::attention_forward(s, in.q.data(), in.k.data(), in.v.data(), r.o.data(), r.lse.data());
  std::vector<float> delta(r.lse.size());
  const std::vector<float> o_stored = quantize<T>(r.o);
  cpu::attention_backward_delta(rows_of(s), s.head_dim, o_stored.data(), in.dout.data(),
                                delta.data());
  r.dq.assign(in.q.size(), 0.0f);
  r.dk.assign(in.k.size(), 0.0f);
  r.dv.assign(in.v.size(), 0.0f);
  cpu::attention_backward(s, in.q.data(), in.k.data(), in.v.data(), in.dout.data(), r.lse.data(),
                          delta.data(), r.dq.data(), r.dk.data(), r.dv.data());
  return r;
}

constexpr AttentionAlgorithm kAlgorithms[] = {AttentionAlgorithm::kTiled,
                                              AttentionAlgorithm::kGemm};

std::string name_of(AttentionAlgorithm a) {
  return a == AttentionAlgorithm::kGemm ? "gemm" : "tiled";
}

template <class T>
Results run_gpu(const AttentionShape& s, const Inputs& in, cudaStream_t stream,
                AttentionAlgorithm algorithm) {
  auto q = upload<T>(in.q, stream);
  auto k = upload<T>(in.k, stream);
  auto v = upload<T>(in.v, stream);
  auto dout = upload<T>(in.dout, stream);
  auto o = zeros<T>(static_cast<std::int64_t>(in.q.size()), stream);
  auto lse = zeros<float>(rows_of(s), stream);
  auto delta = zeros<float>(rows_of(s), stream);
  auto dq = zeros<T>(static_cast<std::int64_t>(in.q.size()), stream);
  auto dk = zeros<T>(static_cast<std::int64_t>(in.k.size()), stream);
  auto dv = zeros<T>(static_cast<std::int64_t>(in.v.size()), stream);
  require(
      attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data(), stream, algorithm));
  require(attention_backward_delta(rows_of(s), s.head_dim, o.data(), dout.data(), delta.data(),
                                   stream));
  require(attention_backward(s, q.data(), k.data(), v.data(), dout.data(), lse.data(), delta.data(),
                             dq.data(), dk.data(), dv.data(), stream, algorithm));
  return {download(o, stream), download(lse, stream), download(dq, stream), download(dk, stream),
          download(dv, stream)};
}

double max_abs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x)
    m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

// lse: -inf exactly where the CPU has it, within tolerance elsewhere.
void expect_lse_matches(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  std::vector<float> g = got, w = want;
  for (std::size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(g[i] == kNegInf, w[i] == kNegInf) << what << " lse[" << i << "]";
    if (w[i] == kNegInf) g[i] = w[i] = 0.0f;
  }
  expect_close_fp32(g, w, KernelKind::kAttention, what + " lse");
}

template <class T>
void expect_gpu_matches_cpu(const AttentionShape& s, const Results& got, const Results& want,
                            const std::string& what) {
  expect_matches_cpu<T>(got.o, want.o, KernelKind::kAttention, what + " o");
  expect_lse_matches(got.lse, want.lse, what);
  // Gradients: the attention tolerance, with the absolute part scaled by the largest gradient.
  const Tolerance t = tolerance(KernelKind::kAttention, kDTypeOf<T>);
  const double g = std::max({max_abs(want.dq), max_abs(want.dk), max_abs(want.dv), 1e-3});
  const std::string label = what + " <" + std::string(to_string(kDTypeOf<T>)) + ">";
  cpu::testing::expect_close(got.dq, want.dq, t.rtol, 4 * t.atol * g, label + " dq");
  cpu::testing::expect_close(got.dk, want.dk, t.rtol, 4 * t.atol * g, label + " dk");
  cpu::testing::expect_close(got.dv, want.dv, t.rtol, 4 * t.atol * g, label + " dv");
  (void)s;
}

using Case = cpu::testing::AttentionCase;
using cpu::testing::case_name;
using cpu::testing::shape_of;

class CudaAttention : public GpuTest, public ::testing::WithParamInterface<Case> {};

// MHA, GQA and MQA; head dims from 8 to 256 (both register-array sizes); lengths below, at and
// across the 32-row tiles, including non-multiples; causal and full.
TEST_P(CudaAttention, MatchesTheCpuKernelInEveryPrecision) {
  const Case c = GetParam();
  const AttentionShape s = c.shape();
  const auto seed = static_cast<std::uint64_t>(c.len * 131 + c.head_dim);
  for (const AttentionAlgorithm a : kAlgorithms) {
    const std::string what = case_name(c) + " " + name_of(a);
    {
      const Inputs in = make_inputs<float>(s, seed);
      expect_gpu_matches_cpu<float>(s, run_gpu<float>(s, in, stream(), a), run_cpu(s, in), what);
    }
    {
      const Inputs in = make_inputs<bf16>(s, seed);
      expect_gpu_matches_cpu<bf16>(s, run_gpu<bf16>(s, in, stream(), a), run_cpu<bf16>(s, in),
                                   what);
    }
    {
      const Inputs in = make_inputs<fp16>(s, seed);
      expect_gpu_matches_cpu<fp16>(s, run_gpu<fp16>(s, in, stream(), a), run_cpu<fp16>(s, in),
                                   what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaAttention,
    ::testing::Values(Case{1, 1, 1, 8, 1, true}, Case{2, 3, 3, 16, 17, true},
                      Case{1, 4, 2, 32, 32, true}, Case{1, 4, 2, 64, 33, true},
                      Case{1, 2, 2, 64, 100, true}, Case{1, 4, 1, 128, 130, true},
                      Case{2, 2, 1, 96, 129, true}, Case{1, 2, 1, 160, 70, true},
                      Case{1, 2, 2, 256, 65, true}, Case{1, 2, 1, 24, 260, true},
                      Case{1, 2, 2, 16, 150, false}, Case{2, 4, 2, 8, 65, false},
                      Case{1, 8, 2, 128, 64, false}),
    [](const auto& p) { return case_name(p.param); });

using CudaAttentionBlocks = GpuTest;

TEST_F(CudaAttentionBlocks, OffsetBlockWithRowsThatSeeNoKey) {
  // 150 queries at positions 100..249 against 140 keys at 180..319: the first 80 queries see no
  // key (o = 0, lse = -inf).
  AttentionShape s = shape_of(1, 4, 2, 32, 150, true);
  s.kv_len = 140;
  s.q_offset = 100;
  s.kv_offset = 180;
  const Inputs in = make_inputs<float>(s, 21);
  for (const AttentionAlgorithm a : kAlgorithms) {
    const Results got = run_gpu<float>(s, in, stream(), a);
    expect_gpu_matches_cpu<float>(s, got, run_cpu(s, in), "offset block " + name_of(a));
    EXPECT_EQ(got.lse[0], kNegInf);
    EXPECT_EQ(got.o[0], 0.0f);
  }
}

TEST_F(CudaAttentionBlocks, IsBitwiseReproducible) {
  const AttentionShape s = shape_of(2, 4, 2, 64, 150, true);
  const Inputs in = make_inputs<bf16>(s, 31);
  for (const AttentionAlgorithm algorithm : kAlgorithms) {
    const Results a = run_gpu<bf16>(s, in, stream(), algorithm);
    const Results b = run_gpu<bf16>(s, in, stream(), algorithm);
    EXPECT_EQ(a.o, b.o) << name_of(algorithm);
    EXPECT_EQ(a.lse, b.lse) << name_of(algorithm);
    EXPECT_EQ(a.dq, b.dq) << name_of(algorithm);
    EXPECT_EQ(a.dk, b.dk) << name_of(algorithm);
    EXPECT_EQ(a.dv, b.dv) << name_of(algorithm);
  }
}

// The context-parallel test with one algorithm; the TEST_F below runs it with each.
void context_parallel_blocks_equal_full_attention(cudaStream_t stream, AttentionAlgorithm algo) {
  // Uneven chunks across tile boundaries; each query chunk runs the forward against every key
  // chunk on the GPU, merging with attention_combine, then the backward with the merged lse.
  const std::vector<std::int64_t> bounds = {0, 70, 75, 200, 263};
  const std::int64_t len = bounds.back();
  const AttentionShape full = shape_of(2, 4, 2, 64, len, true);
  const Inputs in = make_inputs<float>(full, 41);
  const Results want = run_cpu(full, in);
  const std::int64_t qrow = full.heads * full.head_dim, kvrow = full.kv_heads * full.head_dim;
  const std::int64_t batch = full.batch, chunks = static_cast<std::int64_t>(bounds.size()) - 1;
  Results got{std::vector<float>(want.o.size(), 0.0f), std::vector<float>(want.lse.size(), 0.0f),
              std::vector<float>(want.dq.size(), 0.0f), std::vector<float>(want.dk.size(), 0.0f),
              std::vector<float>(want.dv.size(), 0.0f)};
  for (std::int64_t qc = 0; qc < chunks; ++qc) {
    const std::int64_t q0 = bounds[qc], q1 = bounds[qc + 1], nq = q1 - q0;
    auto q = upload<float>(slice_positions(in.q, batch, len, qrow, q0, q1), stream);
    auto dout = upload<float>(slice_positions(in.dout, batch, len, qrow, q0, q1), stream);
    const std::int64_t rows = batch * nq * full.heads;
    auto o_acc = zeros<float>(q.size(), stream);
    auto lse_acc = upload<float>(std::vector<float>(rows, kNegInf), stream);
    auto o_part = zeros<float>(q.size(), stream);
    auto lse_part = zeros<float>(rows, stream);
    auto block_shape = [&](std::int64_t kc) {
      AttentionShape s = full;
      s.q_len = nq;
      s.q_offset = q0;
      s.kv_len = bounds[kc + 1] - bounds[kc];
      s.kv_offset = bounds[kc];
      return s;
    };
    for (std::int64_t step = 0; step < chunks; ++step) {
      const std::int64_t kc = (qc + step) % chunks;
      auto k = upload<float>(slice_positions(in.k, batch, len, kvrow, bounds[kc], bounds[kc + 1]),
                             stream);
      auto v = upload<float>(slice_positions(in.v, batch, len, kvrow, bounds[kc], bounds[kc + 1]),
                             stream);
      require(attention_forward(block_shape(kc), q.data(), k.data(), v.data(), o_part.data(),
                                lse_part.data(), stream, algo));
      require(attention_combine(rows, full.head_dim, o_acc.data(), lse_acc.data(), o_part.data(),
                                lse_part.data(), stream));
    }
    auto delta = zeros<float>(rows, stream);
    require(attention_backward_delta(rows, full.head_dim, o_acc.data(), dout.data(), delta.data(),
                                     stream));
    auto dq = zeros<float>(q.size(), stream);
    for (std::int64_t step = 0; step < chunks; ++step) {
      const std::int64_t kc = (qc + step) % chunks;
      const auto k_host = slice_positions(in.k, batch, len, kvrow, bounds[kc], bounds[kc + 1]);
      auto k = upload<float>(k_host, stream);
      auto v = upload<float>(slice_positions(in.v, batch, len, kvrow, bounds[kc], bounds[kc + 1]),
                             stream);
      auto dk = zeros<float>(static_cast<std::int64_t>(k_host.size()), stream);
      auto dv = zeros<float>(static_cast<std::int64_t>(k_host.size()), stream);
      require(attention_backward(block_shape(kc), q.data(), k.data(), v.data(), dout.data(),
                                 lse_acc.data(), delta.data(), dq.data(), dk.data(), dv.data(),
                                 stream, algo));
      add_positions(download(dk, stream), batch, len, kvrow, bounds[kc], bounds[kc + 1], got.dk);
      add_positions(download(dv, stream), batch, len, kvrow, bounds[kc], bounds[kc + 1], got.dv);
    }
    add_positions(download(o_acc, stream), batch, len, qrow, q0, q1, got.o);
    add_positions(download(lse_acc, stream), batch, len, full.heads, q0, q1, got.lse);
    add_positions(download(dq, stream), batch, len, qrow, q0, q1, got.dq);
  }
  expect_gpu_matches_cpu<float>(full, got, want, "context parallel " + name_of(algo));
}

TEST_F(CudaAttentionBlocks, ContextParallelBlocksAndCombineEqualFullAttention) {
  for (const AttentionAlgorithm a : kAlgorithms)
    context_parallel_blocks_equal_full_attention(stream(), a);
}

// Query blocks of kGemm (a score budget of 64 rows here): the same results as the CPU, with GQA,
// causal masking across block edges and an offset block with rows that see no key.
TEST_F(CudaAttentionBlocks, GemmQueryBlocksMatchTheCpu) {
  AttentionShape s = shape_of(2, 4, 2, 64, 300, true);
  set_gemm_attention_score_bytes(64 * 2 * 2 * 300 * sizeof(float));
  for (const bool offset : {false, true}) {
    if (offset) {
      s.kv_len = 260;
      s.q_offset = 100;
      s.kv_offset = 180;
    }
    const std::string what = offset ? "offset gemm blocks" : "gemm blocks";
    const Inputs f = make_inputs<float>(s, 51);
    expect_gpu_matches_cpu<float>(s, run_gpu<float>(s, f, stream(), AttentionAlgorithm::kGemm),
                                  run_cpu(s, f), what);
    const Inputs b = make_inputs<bf16>(s, 52);
    expect_gpu_matches_cpu<bf16>(s, run_gpu<bf16>(s, b, stream(), AttentionAlgorithm::kGemm),
                                 run_cpu<bf16>(s, b), what);
  }
  set_gemm_attention_score_bytes(0);
}

TEST_F(CudaAttentionBlocks, CombineHandlesEmptySides) {
  const std::vector<float> part = {1, 2, 3, 4}, other = {3, 2, 1, 0};
  auto o = zeros<float>(4, stream());
  auto lse = upload<float>({kNegInf}, stream());
  auto d_part = upload<float>(part, stream());
  auto d_other = upload<float>(other, stream());
  auto half = upload<float>({0.5f}, stream());
  auto empty = upload<float>({kNegInf}, stream());
  require(attention_combine(1, 4, o.data(), lse.data(), d_part.data(), half.data(), stream()));
  EXPECT_EQ(download(o, stream()), part);
  require(attention_combine(1, 4, o.data(), lse.data(), d_other.data(), empty.data(), stream()));
  EXPECT_EQ(download(o, stream()), part);
  EXPECT_EQ(download(lse, stream())[0], 0.5f);
  require(attention_combine(1, 4, o.data(), lse.data(), d_other.data(), half.data(), stream()));
  cpu::testing::expect_close(download(o, stream()), std::vector<float>{2, 2, 2, 2}, 1e-6, 1e-6,
                             "equal halves");
  EXPECT_NEAR(download(lse, stream())[0], 0.5 + std::log(2.0), 1e-6);
}

}  // namespace
}  // namespace planner::kernels::cuda::testing
