// Attention as cuBLAS GEMMs around a row-softmax kernel (AttentionAlgorithm::kGemm, see
// attention.hpp): for long sequences, where the fused tiled kernel's fp32 CUDA-core arithmetic is
// far below the tensor cores' rate (measured on an H200: the tiled kernel 0.5-1.4 TFLOP/s at
// 256-1,024 positions, cuBLAS bf16 GEMMs of these shapes hundreds of TFLOP/s).
//
// Per batch b, block of query rows [i0, i0 + qn) and member g of the GQA groups, one strided-
// batched GEMM per product covers the kv heads (query head h = kvh * group + g reads kv head kvh):
//   forward   S = scale Q K^T (fp32)  ->  P = exp(S - lse), lse per row (masked by global position)
//             O = P V
//   backward  S = scale Q K^T, dP = dO V^T (fp32)  ->  P, dS = P (dP - delta)
//             dV += P^T dO,  dQ += scale dS K,  dK += scale dS^T Q
// Keys a causal block cannot see are left out of its GEMMs (the score matrix is about half
// computed). The score blocks live in a scratch buffer of at most kScoreBytes; queries are taken in
// blocks that fit it.
//
// Precision: the products with two T operands (Q K^T, dO V^T) run on T's tensor cores with fp32
// accumulation (exact products of the T inputs, as on the CPU). The products with an fp32 operand
// (P or dS) run in fp32 (no TF32) on fp32 copies of V, dO, K and Q (exact).
// o, dq, dk and dv are accumulated in fp32 and rounded to T once. Deterministic: fixed GEMM
// configurations and a fixed order of blocks and group members.
//
// The cuBLAS handle and the scratch belong to the calling host thread (one per thread, grown on
// demand with cudaMalloc, kept until the thread ends); the scratch is not counted by the
// executor's caching allocator.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "cuda/attention_gemm.hpp"
#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/device_buffer.hpp"
#include "planner/kernels/cuda/elementwise.hpp"
#include "planner/kernels/cuda/gemm.hpp"

namespace planner::kernels::cuda::detail {
namespace {

// Bytes of the two fp32 score blocks together (S and dP), per host thread.
thread_local std::size_t score_bytes = kGemmAttentionScoreBytes;

struct Context {
  CublasHandle handle;
  void* scratch = nullptr;
  std::size_t bytes = 0;
  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() {
    if (scratch != nullptr) (void)device_free(scratch);
  }
};

// This thread's handle and at least `bytes` of scratch (cudaFree waits for work in flight).
Result<Context*> context(std::size_t bytes) {
  thread_local Context ctx;
  if (ctx.handle.empty()) {
    PLANNER_ASSIGN_OR_RETURN(ctx.handle, CublasHandle::create());
  }
  if (ctx.bytes < bytes) {
    if (ctx.scratch != nullptr) PLANNER_RETURN_IF_ERROR(device_free(ctx.scratch));
    ctx.scratch = nullptr;
    ctx.bytes = 0;
    PLANNER_ASSIGN_OR_RETURN(ctx.scratch, device_malloc(bytes));
    ctx.bytes = bytes;
  }
  return &ctx;
}

// Carves aligned pieces out of the scratch.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  template <class T>
  T* take(std::int64_t count) {
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += round_up(static_cast<std::size_t>(count) * sizeof(T));
    return p;
  }
  template <class T>
  static std::size_t size_of(std::int64_t count) {
    return round_up(static_cast<std::size_t>(count) * sizeof(T));
  }

 private:
  static std::size_t round_up(std::size_t n) { return (n + 255) / 256 * 256; }
  char* base_;
  std::size_t used_ = 0;
};

struct Plan {
  AttentionShape s;
  std::int64_t group, ld_q, ld_kv, qb;
};

Plan plan_of(const AttentionShape& s) {
  Plan p{s, s.heads / s.kv_heads, s.heads * s.head_dim, s.kv_heads * s.head_dim, 0};
  const auto per_row = static_cast<std::int64_t>(sizeof(float)) * 2 * s.kv_heads *
                       std::max<std::int64_t>(s.kv_len, 1);
  const std::int64_t fit = static_cast<std::int64_t>(score_bytes) / per_row;
  p.qb = std::clamp<std::int64_t>(fit >= 64 ? fit / 64 * 64 : fit, 1,
                                  std::max<std::int64_t>(s.q_len, 1));
  return p;
}

// Keys [0, end) that queries [i0, i0 + qn) can see: all without causal masking; at least 1 so
// that a block of rows seeing no key still runs (the mask then zeroes it).
std::int64_t keys_for(const AttentionShape& s, std::int64_t i0, std::int64_t qn) {
  if (!s.causal) return s.kv_len;
  const std::int64_t end = s.q_offset + i0 + qn - s.kv_offset;
  return std::clamp<std::int64_t>(end, 1, s.kv_len);
}

struct RowGeometry {
  std::int64_t q_offset, kv_offset, kv_len, heads, group, q_len;
  std::int64_t b, i0, qn, kv_n, g;
  float scale;
  bool causal;
};

// Row r of a score block: kv head r / qn, query i0 + r % qn; its index in lse/delta.
__device__ __forceinline__ std::int64_t stat_index(const RowGeometry& rg, std::int64_t r,
                                                   std::int64_t* qi) {
  const std::int64_t kvh = r / rg.qn;
  *qi = rg.i0 + r % rg.qn;
  const std::int64_t h = kvh * rg.group + rg.g;
  return (rg.b * rg.q_len + *qi) * rg.heads + h;
}

__device__ __forceinline__ bool sees(const RowGeometry& rg, std::int64_t qi, std::int64_t j) {
  return j < rg.kv_len && (!rg.causal || rg.kv_offset + j <= rg.q_offset + qi);
}

// One warp per row: S -> P = exp(S - lse) in place and lse; rows that see no key get P = 0 and
// lse = -inf.
__global__ void softmax_rows_kernel(RowGeometry rg, std::int64_t rows, float* s, float* lse) {
  const std::int64_t r =
      static_cast<std::int64_t>(blockIdx.x) * (kBlockThreads / kWarpSize) + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;  // uniform over the warp
  std::int64_t qi = 0;
  const std::int64_t stat = stat_index(rg, r, &qi);
  float* row = s + r * rg.kv_n;
  float m = kNegInf;
  for (std::int64_t j = lane; j < rg.kv_n; j += kWarpSize)
    if (sees(rg, qi, j)) m = fmaxf(m, row[j]);
  m = warp_max(m);
  if (m == kNegInf) {
    for (std::int64_t j = lane; j < rg.kv_n; j += kWarpSize)
      row[j] = 0.0f;
    if (lane == 0) lse[stat] = kNegInf;
    return;
  }
  float sum = 0.0f;
  for (std::int64_t j = lane; j < rg.kv_n; j += kWarpSize)
    if (sees(rg, qi, j)) sum += expf(row[j] - m);
  sum = warp_sum(sum);
  const float l = m + logf(sum);
  for (std::int64_t j = lane; j < rg.kv_n; j += kWarpSize)
    row[j] = sees(rg, qi, j) ? expf(row[j] - l) : 0.0f;
  if (lane == 0) lse[stat] = l;
}

// One warp per row: S -> P = exp(S - lse) and dP -> dS = P (dP - delta), both in place.
__global__ void softmax_backward_rows_kernel(RowGeometry rg, std::int64_t rows, float* s, float* dp,
                                             const float* lse, const float* delta) {
  const std::int64_t r =
      static_cast<std::int64_t>(blockIdx.x) * (kBlockThreads / kWarpSize) + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;
  std::int64_t qi = 0;
  const std::int64_t stat = stat_index(rg, r, &qi);
  const float l = lse[stat];
  const float d = delta[stat];
  float* srow = s + r * rg.kv_n;
  float* dprow = dp + r * rg.kv_n;
  for (std::int64_t j = lane; j < rg.kv_n; j += kWarpSize) {
    const float p = (l != kNegInf && sees(rg, qi, j)) ? expf(srow[j] - l) : 0.0f;
    srow[j] = p;
    dprow[j] = p * (dprow[j] - d);
  }
}

__global__ void fill_kernel(std::int64_t n, float value, float* x) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}

unsigned row_blocks(std::int64_t rows) {
  constexpr std::int64_t kRowsPerBlock = kBlockThreads / kWarpSize;
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

RowGeometry row_geometry(const Plan& p, std::int64_t b, std::int64_t i0, std::int64_t qn,
                         std::int64_t kv_n, std::int64_t g) {
  const AttentionShape& s = p.s;
  return RowGeometry{s.q_offset, s.kv_offset, s.kv_len, s.heads, p.group, s.q_len, b,
                     i0,         qn,          kv_n,     g,       s.scale, s.causal};
}

// Makes an fp32 copy of a T tensor (or returns it when T is float).
template <class T>
Result<const float*> as_float(const T* x, std::int64_t n, float* copy, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    (void)copy;
    (void)n;
    (void)stream;
    return x;
  } else {
    PLANNER_RETURN_IF_ERROR((convert<T, float>(x, n, copy, stream)));
    return static_cast<const float*>(copy);
  }
}

// The products with the probabilities stay in fp32: TF32 (10 mantissa bits) errs by about 2^-11 of
// sum |P| |V|, far more than the cancelling sums of attention outputs allow (measured on an H200:
// bf16 outputs 3% off the CPU's with TF32, within the fp32 tolerance without it).
constexpr GemmOptions kFp32Products{false};

// S (qn x kv_n per kv head, fp32) = scale * Q[b, i0.., h(kvh, g)] K[b, 0..kv_n, kvh]^T.
template <class T>
Status scores(CublasHandle& h, const Plan& p, const T* q, const T* k, std::int64_t b,
              std::int64_t i0, std::int64_t qn, std::int64_t kv_n, std::int64_t g, float* s,
              cudaStream_t stream) {
  const AttentionShape& sh = p.s;
  const std::int64_t d = sh.head_dim;
  return gemm_strided_batched<T, float>(h, Transpose::kNo, Transpose::kYes, qn, kv_n, d, sh.scale,
                                        q + ((b * sh.q_len + i0) * sh.heads + g) * d, p.ld_q,
                                        p.group * d, k + b * sh.kv_len * p.ld_kv, p.ld_kv, d, 0.0f,
                                        s, kv_n, qn * kv_n, sh.kv_heads, stream, GemmOptions{});
}

}  // namespace

template <class T>
Status attention_forward_gemm(const AttentionShape& sh, const T* q, const T* k, const T* v, T* o,
                              float* lse, cudaStream_t stream) {
  const std::int64_t d = sh.head_dim;
  const std::int64_t nq = sh.batch * sh.q_len * sh.heads * d;
  const std::int64_t nk = sh.batch * sh.kv_len * sh.kv_heads * d;
  const std::int64_t rows_all = sh.batch * sh.q_len * sh.heads;
  if (rows_all == 0) return Status::ok();
  if (sh.kv_len == 0) {  // no key: o = 0, lse = -inf
    PLANNER_CUDA_CHECK(cudaMemsetAsync(o, 0, static_cast<std::size_t>(nq) * sizeof(T), stream));
    fill_kernel<<<static_cast<unsigned>((rows_all + kBlockThreads - 1) / kBlockThreads),
                  kBlockThreads, 0, stream>>>(rows_all, kNegInf, lse);
    return launch_status("attention_gemm_fill");
  }
  const Plan p = plan_of(sh);
  constexpr bool kFloat = std::is_same_v<T, float>;
  const std::int64_t score = sh.kv_heads * p.qb * sh.kv_len;
  const std::size_t bytes = Carver::size_of<float>(score) +
                            (kFloat ? 0 : Carver::size_of<float>(nk) + Carver::size_of<float>(nq));
  PLANNER_ASSIGN_OR_RETURN(Context * ctx, context(bytes));
  PLANNER_RETURN_IF_ERROR(ctx->handle.bind(stream));
  Carver carve(ctx->scratch);
  float* s = carve.take<float>(score);
  float* v32_copy = kFloat ? nullptr : carve.take<float>(nk);
  float* o32 = kFloat ? reinterpret_cast<float*>(o) : carve.take<float>(nq);
  PLANNER_ASSIGN_OR_RETURN(const float* v32, as_float(v, nk, v32_copy, stream));
  for (std::int64_t b = 0; b < sh.batch; ++b) {
    for (std::int64_t i0 = 0; i0 < sh.q_len; i0 += p.qb) {
      const std::int64_t qn = std::min(p.qb, sh.q_len - i0);
      const std::int64_t kv_n = keys_for(sh, i0, qn);
      const std::int64_t rows = sh.kv_heads * qn;
      for (std::int64_t g = 0; g < p.group; ++g) {
        PLANNER_RETURN_IF_ERROR(scores(ctx->handle, p, q, k, b, i0, qn, kv_n, g, s, stream));
        softmax_rows_kernel<<<row_blocks(rows), kBlockThreads, 0, stream>>>(
            row_geometry(p, b, i0, qn, kv_n, g), rows, s, lse);
        PLANNER_RETURN_IF_ERROR(launch_status("attention_gemm_softmax"));
        // O[b, i0.., h] = P V[b, 0..kv_n, kvh]
        PLANNER_RETURN_IF_ERROR((gemm_strided_batched<float, float>(
            ctx->handle, Transpose::kNo, Transpose::kNo, qn, d, kv_n, 1.0f, s, kv_n, qn * kv_n,
            v32 + b * sh.kv_len * p.ld_kv, p.ld_kv, d, 0.0f,
            o32 + ((b * sh.q_len + i0) * sh.heads + g) * d, p.ld_q, p.group * d, sh.kv_heads,
            stream, kFp32Products)));
      }
    }
  }
  if constexpr (!kFloat) PLANNER_RETURN_IF_ERROR((convert<float, T>(o32, nq, o, stream)));
  return Status::ok();
}

template <class T>
Status attention_backward_gemm(const AttentionShape& sh, const T* q, const T* k, const T* v,
                               const T* dout, const float* lse, const float* delta, T* dq, T* dk,
                               T* dv, cudaStream_t stream) {
  if (sh.kv_len == 0 || sh.q_len == 0) return Status::ok();  // nothing to add
  const std::int64_t d = sh.head_dim;
  const std::int64_t nq = sh.batch * sh.q_len * sh.heads * d;
  const std::int64_t nk = sh.batch * sh.kv_len * sh.kv_heads * d;
  const Plan p = plan_of(sh);
  constexpr bool kFloat = std::is_same_v<T, float>;
  const std::int64_t score = sh.kv_heads * p.qb * sh.kv_len;
  const std::size_t bytes =
      2 * Carver::size_of<float>(score) +
      (kFloat ? 0 : 3 * Carver::size_of<float>(nq) + 3 * Carver::size_of<float>(nk));
  PLANNER_ASSIGN_OR_RETURN(Context * ctx, context(bytes));
  PLANNER_RETURN_IF_ERROR(ctx->handle.bind(stream));
  Carver carve(ctx->scratch);
  float* s = carve.take<float>(score);
  float* dp = carve.take<float>(score);
  float* q32_copy = kFloat ? nullptr : carve.take<float>(nq);
  float* do32_copy = kFloat ? nullptr : carve.take<float>(nq);
  float* k32_copy = kFloat ? nullptr : carve.take<float>(nk);
  float* dq32 = kFloat ? reinterpret_cast<float*>(dq) : carve.take<float>(nq);
  float* dk32 = kFloat ? reinterpret_cast<float*>(dk) : carve.take<float>(nk);
  float* dv32 = kFloat ? reinterpret_cast<float*>(dv) : carve.take<float>(nk);
  PLANNER_ASSIGN_OR_RETURN(const float* q32, as_float(q, nq, q32_copy, stream));
  PLANNER_ASSIGN_OR_RETURN(const float* do32, as_float(dout, nq, do32_copy, stream));
  PLANNER_ASSIGN_OR_RETURN(const float* k32, as_float(k, nk, k32_copy, stream));
  if constexpr (!kFloat) {  // accumulate onto what the gradients hold
    PLANNER_RETURN_IF_ERROR((convert<T, float>(dq, nq, dq32, stream)));
    PLANNER_RETURN_IF_ERROR((convert<T, float>(dk, nk, dk32, stream)));
    PLANNER_RETURN_IF_ERROR((convert<T, float>(dv, nk, dv32, stream)));
  }
  for (std::int64_t b = 0; b < sh.batch; ++b) {
    const std::int64_t kv_b = b * sh.kv_len * p.ld_kv;
    for (std::int64_t i0 = 0; i0 < sh.q_len; i0 += p.qb) {
      const std::int64_t qn = std::min(p.qb, sh.q_len - i0);
      const std::int64_t kv_n = keys_for(sh, i0, qn);
      const std::int64_t rows = sh.kv_heads * qn;
      for (std::int64_t g = 0; g < p.group; ++g) {
        const std::int64_t q_at = ((b * sh.q_len + i0) * sh.heads + g) * d;
        PLANNER_RETURN_IF_ERROR(scores(ctx->handle, p, q, k, b, i0, qn, kv_n, g, s, stream));
        // dP = dO V^T
        PLANNER_RETURN_IF_ERROR((gemm_strided_batched<T, float>(
            ctx->handle, Transpose::kNo, Transpose::kYes, qn, kv_n, d, 1.0f, dout + q_at, p.ld_q,
            p.group * d, v + kv_b, p.ld_kv, d, 0.0f, dp, kv_n, qn * kv_n, sh.kv_heads, stream,
            GemmOptions{})));
        softmax_backward_rows_kernel<<<row_blocks(rows), kBlockThreads, 0, stream>>>(
            row_geometry(p, b, i0, qn, kv_n, g), rows, s, dp, lse, delta);
        PLANNER_RETURN_IF_ERROR(launch_status("attention_gemm_softmax_backward"));
        // dV[b, 0..kv_n, kvh] += P^T dO
        PLANNER_RETURN_IF_ERROR((gemm_strided_batched<float, float>(
            ctx->handle, Transpose::kYes, Transpose::kNo, kv_n, d, qn, 1.0f, s, kv_n, qn * kv_n,
            do32 + q_at, p.ld_q, p.group * d, 1.0f, dv32 + kv_b, p.ld_kv, d, sh.kv_heads, stream,
            kFp32Products)));
        // dQ[b, i0.., h] += scale dS K
        PLANNER_RETURN_IF_ERROR((gemm_strided_batched<float, float>(
            ctx->handle, Transpose::kNo, Transpose::kNo, qn, d, kv_n, sh.scale, dp, kv_n, qn * kv_n,
            k32 + kv_b, p.ld_kv, d, 1.0f, dq32 + q_at, p.ld_q, p.group * d, sh.kv_heads, stream,
            kFp32Products)));
        // dK[b, 0..kv_n, kvh] += scale dS^T Q
        PLANNER_RETURN_IF_ERROR((gemm_strided_batched<float, float>(
            ctx->handle, Transpose::kYes, Transpose::kNo, kv_n, d, qn, sh.scale, dp, kv_n,
            qn * kv_n, q32 + q_at, p.ld_q, p.group * d, 1.0f, dk32 + kv_b, p.ld_kv, d, sh.kv_heads,
            stream, kFp32Products)));
      }
    }
  }
  if constexpr (!kFloat) {
    PLANNER_RETURN_IF_ERROR((convert<float, T>(dq32, nq, dq, stream)));
    PLANNER_RETURN_IF_ERROR((convert<float, T>(dk32, nk, dk, stream)));
    PLANNER_RETURN_IF_ERROR((convert<float, T>(dv32, nk, dv, stream)));
  }
  return Status::ok();
}

}  // namespace planner::kernels::cuda::detail

namespace planner::kernels::cuda {

void set_gemm_attention_score_bytes(std::size_t bytes) {
  detail::score_bytes = bytes > 0 ? bytes : kGemmAttentionScoreBytes;
}

}  // namespace planner::kernels::cuda

namespace planner::kernels::cuda::detail {

#define PLANNER_INSTANTIATE(T)                                                                    \
  template Status attention_forward_gemm<T>(const AttentionShape&, const T*, const T*, const T*,  \
                                            T*, float*, cudaStream_t);                            \
  template Status attention_backward_gemm<T>(const AttentionShape&, const T*, const T*, const T*, \
                                             const T*, const float*, const float*, T*, T*, T*,    \
                                             cudaStream_t);
PLANNER_INSTANTIATE(float)
PLANNER_INSTANTIATE(bf16)
PLANNER_INSTANTIATE(fp16)
#undef PLANNER_INSTANTIATE

}  // namespace planner::kernels::cuda::detail
