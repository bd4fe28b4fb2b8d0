#include "planner/kernels/cpu/attention.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/vector_math.hpp"
#include "planner/kernels/cpu/gemm.hpp"

namespace planner::kernels::cpu {
namespace {

// Tile sizes: a kTileQ x kTileK score tile (64 KiB) plus the kTileQ x head_dim accumulator stay in
// L2, and the tile GEMMs are large enough for OpenBLAS to run near its single-core peak and to gain
// from a second thread (bench/kernels_bench.cpp: 128 x 128 was the best of 64..256 x 64..256).
constexpr std::int64_t kTileQ = 128;
constexpr std::int64_t kTileK = 128;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Keys of a tile visible to row ii: with causal masking, query q_offset + i0 + ii sees key
// kv_offset + j0 + jj when jj < diag + ii, where diag = q_offset + i0 - (kv_offset + j0) + 1.
inline std::int64_t visible_keys(bool causal, std::int64_t diag, std::int64_t ii, std::int64_t tk) {
  return causal ? std::clamp<std::int64_t>(diag + ii, 0, tk) : tk;
}

// Where one (batch, head) slice starts, in elements, and the row strides of its matrices.
struct HeadView {
  std::int64_t q_base;    // offset of (b, 0, h, 0) in q, o, dout, dq
  std::int64_t kv_base;   // offset of (b, 0, g, 0) in k, v, dk, dv, g = the head's key/value head
  std::int64_t lse_base;  // offset of (b, 0, h) in lse and delta, whose rows are `heads` apart
  std::int64_t ld_q;      // heads * head_dim
  std::int64_t ld_kv;     // kv_heads * head_dim
};

// Calls fn(view) for every (batch, head) in ascending order.
template <class Fn>
void for_each_head(const AttentionShape& s, Fn fn) {
  const std::int64_t group = s.heads / s.kv_heads;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      fn(HeadView{(b * s.q_len * s.heads + h) * s.head_dim,
                  (b * s.kv_len * s.kv_heads + h / group) * s.head_dim, b * s.q_len * s.heads + h,
                  s.heads * s.head_dim, s.kv_heads * s.head_dim});
    }
  }
}

void check_shape(const AttentionShape& s) {
  assert(s.batch >= 0 && s.heads >= 1 && s.kv_heads >= 1 && s.heads % s.kv_heads == 0);
  assert(s.head_dim >= 1 && s.q_len >= 0 && s.kv_len >= 0);
  (void)s;
}

// Online-softmax update of a score tile (tq x tk, row stride kTileK) into the running row maxima m,
// row sums l and output accumulator acc (tq x d). Leaves the tile holding exp(s - m_new), zero
// where masked, ready for acc += P v.
PLANNER_CPU_KERNEL
void online_softmax_tile(float* s, std::int64_t tq, std::int64_t tk, bool causal, std::int64_t diag,
                         float* m, float* l, float* acc, std::int64_t d) {
  for (std::int64_t ii = 0; ii < tq; ++ii) {
    float* row = s + ii * kTileK;
    const std::int64_t n = visible_keys(causal, diag, ii, tk);
    std::fill(row + n, row + tk, 0.0f);
    if (n == 0) continue;
    const float m_new = std::max(m[ii], detail::max(row, n));
    const float correction = detail::exp_approx(m[ii] - m_new);  // 0 while m[ii] is -inf
    const float row_sum = detail::exp_shifted_inplace(row, n, m_new);
    l[ii] = l[ii] * correction + row_sum;
    m[ii] = m_new;
    float* a = acc + ii * d;
    for (std::int64_t c = 0; c < d; ++c)
      a[c] *= correction;
  }
}

// o = acc / l and lse = m + log(l) for the tile's rows; rows that saw no key get o = 0, lse = -inf.
PLANNER_CPU_KERNEL
void finish_rows(const float* acc, const float* m, const float* l, std::int64_t tq, std::int64_t d,
                 float* o, std::int64_t ld_o, float* lse, std::int64_t ld_lse) {
  for (std::int64_t ii = 0; ii < tq; ++ii) {
    float* orow = o + ii * ld_o;
    const float* a = acc + ii * d;
    if (l[ii] == 0.0f) {
      std::fill(orow, orow + d, 0.0f);
      lse[ii * ld_lse] = kNegInf;
      continue;
    }
    const float inv = 1.0f / l[ii];
    for (std::int64_t c = 0; c < d; ++c)
      orow[c] = a[c] * inv;
    lse[ii * ld_lse] = m[ii] + std::log(l[ii]);
  }
}

// Score tile -> probabilities exp(s - lse) (zero where masked or where the row saw no key at all).
PLANNER_CPU_KERNEL
void probabilities_tile(float* s, std::int64_t tq, std::int64_t tk, bool causal, std::int64_t diag,
                        const float* lse, std::int64_t ld_lse) {
  for (std::int64_t ii = 0; ii < tq; ++ii) {
    float* row = s + ii * kTileK;
    const float row_lse = lse[ii * ld_lse];
    const std::int64_t n = row_lse == kNegInf ? 0 : visible_keys(causal, diag, ii, tk);
    for (std::int64_t jj = 0; jj < n; ++jj)
      row[jj] = detail::exp_approx(row[jj] - row_lse);
    std::fill(row + n, row + tk, 0.0f);
  }
}

// dP tile -> score gradients scale * P * (dP - delta), in place in dp.
PLANNER_CPU_KERNEL
void score_grad_tile(const float* p, float* dp, std::int64_t tq, std::int64_t tk,
                     const float* delta, std::int64_t ld_delta, float scale) {
  for (std::int64_t ii = 0; ii < tq; ++ii) {
    const float* prow = p + ii * kTileK;
    float* drow = dp + ii * kTileK;
    const float dl = delta[ii * ld_delta];
    for (std::int64_t jj = 0; jj < tk; ++jj)
      drow[jj] = scale * prow[jj] * (drow[jj] - dl);
  }
}

}  // namespace

float attention_default_scale(std::int64_t head_dim) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

void attention_forward(const AttentionShape& shape, const float* q, const float* k, const float* v,
                       float* o, float* lse) {
  check_shape(shape);
  const std::int64_t d = shape.head_dim;
  std::vector<float> scores(static_cast<std::size_t>(kTileQ * kTileK));
  std::vector<float> acc(static_cast<std::size_t>(kTileQ * d));
  std::vector<float> row_max(kTileQ);
  std::vector<float> row_sum(kTileQ);
  for_each_head(shape, [&](const HeadView& view) {
    for (std::int64_t i0 = 0; i0 < shape.q_len; i0 += kTileQ) {
      const std::int64_t tq = std::min(kTileQ, shape.q_len - i0);
      const float* q_tile = q + view.q_base + i0 * view.ld_q;
      // Keys past the tile's last query are masked for every row of the tile.
      const std::int64_t j_end =
          shape.causal ? std::clamp<std::int64_t>(shape.q_offset + i0 + tq - shape.kv_offset, 0,
                                                  shape.kv_len)
                       : shape.kv_len;
      std::fill(row_max.begin(), row_max.end(), kNegInf);
      std::fill(row_sum.begin(), row_sum.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t j0 = 0; j0 < j_end; j0 += kTileK) {
        const std::int64_t tk = std::min(kTileK, j_end - j0);
        const float* k_tile = k + view.kv_base + j0 * view.ld_kv;
        const float* v_tile = v + view.kv_base + j0 * view.ld_kv;
        gemm(Transpose::kNo, Transpose::kYes, tq, tk, d, shape.scale, q_tile, view.ld_q, k_tile,
             view.ld_kv, 0.0f, scores.data(), kTileK);
        const std::int64_t diag = shape.q_offset + i0 - (shape.kv_offset + j0) + 1;
        online_softmax_tile(scores.data(), tq, tk, shape.causal, diag, row_max.data(),
                            row_sum.data(), acc.data(), d);
        gemm(Transpose::kNo, Transpose::kNo, tq, d, tk, 1.0f, scores.data(), kTileK, v_tile,
             view.ld_kv, 1.0f, acc.data(), d);
      }
      finish_rows(acc.data(), row_max.data(), row_sum.data(), tq, d,
                  o + view.q_base + i0 * view.ld_q, view.ld_q,
                  lse + view.lse_base + i0 * shape.heads, shape.heads);
    }
  });
}

PLANNER_CPU_KERNEL
void attention_combine(std::int64_t rows, std::int64_t head_dim, float* o, float* lse,
                       const float* o_part, const float* lse_part) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float a = lse[r];
    const float b = lse_part[r];
    if (b == kNegInf) continue;
    float* orow = o + r * head_dim;
    const float* prow = o_part + r * head_dim;
    if (a == kNegInf) {
      std::copy(prow, prow + head_dim, orow);
      lse[r] = b;
      continue;
    }
    // log(e^a + e^b) = hi + log(1 + e^(lo - hi)), with no overflow.
    const float hi = std::max(a, b);
    const float merged = hi + std::log1p(std::exp(std::min(a, b) - hi));
    const float wa = std::exp(a - merged);
    const float wb = std::exp(b - merged);
    for (std::int64_t c = 0; c < head_dim; ++c)
      orow[c] = orow[c] * wa + prow[c] * wb;
    lse[r] = merged;
  }
}

void attention_backward_delta(std::int64_t rows, std::int64_t head_dim, const float* o,
                              const float* dout, float* delta) {
  for (std::int64_t r = 0; r < rows; ++r) {
    delta[r] = detail::dot(o + r * head_dim, dout + r * head_dim, head_dim);
  }
}

void attention_backward(const AttentionShape& shape, const float* q, const float* k, const float* v,
                        const float* dout, const float* lse, const float* delta, float* dq,
                        float* dk, float* dv) {
  check_shape(shape);
  const std::int64_t d = shape.head_dim;
  std::vector<float> probs(static_cast<std::size_t>(kTileQ * kTileK));
  std::vector<float> dprobs(static_cast<std::size_t>(kTileQ * kTileK));
  for_each_head(shape, [&](const HeadView& view) {
    const std::int64_t ld_q = view.ld_q;
    const std::int64_t ld_kv = view.ld_kv;
    for (std::int64_t j0 = 0; j0 < shape.kv_len; j0 += kTileK) {
      const std::int64_t tk = std::min(kTileK, shape.kv_len - j0);
      const float* k_tile = k + view.kv_base + j0 * ld_kv;
      const float* v_tile = v + view.kv_base + j0 * ld_kv;
      float* dk_tile = dk + view.kv_base + j0 * ld_kv;
      float* dv_tile = dv + view.kv_base + j0 * ld_kv;
      // Queries before the tile's first key see none of it.
      const std::int64_t i_begin =
          shape.causal
              ? std::clamp<std::int64_t>(shape.kv_offset + j0 - shape.q_offset, 0, shape.q_len)
              : 0;
      for (std::int64_t i0 = i_begin; i0 < shape.q_len; i0 += kTileQ) {
        const std::int64_t tq = std::min(kTileQ, shape.q_len - i0);
        const float* q_tile = q + view.q_base + i0 * ld_q;
        const float* do_tile = dout + view.q_base + i0 * ld_q;
        float* dq_tile = dq + view.q_base + i0 * ld_q;
        const float* lse_tile = lse + view.lse_base + i0 * shape.heads;
        const float* delta_tile = delta + view.lse_base + i0 * shape.heads;
        const std::int64_t diag = shape.q_offset + i0 - (shape.kv_offset + j0) + 1;
        gemm(Transpose::kNo, Transpose::kYes, tq, tk, d, shape.scale, q_tile, ld_q, k_tile, ld_kv,
             0.0f, probs.data(), kTileK);
        probabilities_tile(probs.data(), tq, tk, shape.causal, diag, lse_tile, shape.heads);
        // dV += P^T dO
        gemm(Transpose::kYes, Transpose::kNo, tk, d, tq, 1.0f, probs.data(), kTileK, do_tile, ld_q,
             1.0f, dv_tile, ld_kv);
        // dP = dO V^T, then dS = scale * P * (dP - delta)
        gemm(Transpose::kNo, Transpose::kYes, tq, tk, d, 1.0f, do_tile, ld_q, v_tile, ld_kv, 0.0f,
             dprobs.data(), kTileK);
        score_grad_tile(probs.data(), dprobs.data(), tq, tk, delta_tile, shape.heads, shape.scale);
        // dQ += dS K, dK += dS^T Q
        gemm(Transpose::kNo, Transpose::kNo, tq, d, tk, 1.0f, dprobs.data(), kTileK, k_tile, ld_kv,
             1.0f, dq_tile, ld_q);
        gemm(Transpose::kYes, Transpose::kNo, tk, d, tq, 1.0f, dprobs.data(), kTileK, q_tile, ld_q,
             1.0f, dk_tile, ld_kv);
      }
    }
  });
}

double attention_pairs(const AttentionShape& shape) {
  double pairs = 0;
  for (std::int64_t i = 0; i < shape.q_len; ++i) {
    pairs += static_cast<double>(
        shape.causal
            ? std::clamp<std::int64_t>(shape.q_offset + i - shape.kv_offset + 1, 0, shape.kv_len)
            : shape.kv_len);
  }
  return pairs * static_cast<double>(shape.batch * shape.heads);
}

}  // namespace planner::kernels::cpu
