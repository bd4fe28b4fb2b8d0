// Fused causal multi-head / grouped-query attention on the GPU (flash-attention style), forward and
// backward, with the context-parallel block offsets and the combine of partial results. Mirrors
// cpu/attention.hpp: same AttentionShape, layouts (token-major q/o/dout/dq: batch x q_len x heads x
// head_dim; k/v/dk/dv: batch x kv_len x kv_heads x head_dim; lse/delta: batch x q_len x heads),
// masking rule with global positions, -inf lse for rows that see no key, and accumulate rules (dq,
// dk and dv accumulate). Conventions in dtype.hpp: q, k, v, o, dout, dq, dk, dv are T (float, bf16
// or fp16); lse and delta are fp32; scores, softmax and all accumulators are fp32.
//
// Never stores the q_len x kv_len matrix. A thread block works on 32 rows of its own (queries in
// the forward and the dq pass, keys in the dk/dv pass) against 32-row tiles of the other side held
// in shared memory, four threads per own row, scores in registers; the forward keeps an online
// softmax (running max and sum) and the output accumulator in registers and writes o and lse once.
// The backward recomputes the probabilities from lse in two passes, one over key tiles (dk, dv,
// summing the GQA group's query heads in order) and one over query tiles (dq), so every output
// element is owned by one thread and results are deterministic without atomics. The scores use the
// CUDA cores in fp32 (no tensor cores): simple and exact-enough rather than fast.
//
// For long sequences the same contracts are met by cuBLAS GEMMs around a row-softmax kernel
// (AttentionAlgorithm::kGemm, attention_gemm.cu): score blocks of at most 256 MiB in fp32, the
// tensor cores for the products of two T operands, fp32 for those with the probabilities, one
// rounding of o, dq, dk and dv to T. kAuto takes it from kGemmMinScores scores per head on.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "planner/core/status.hpp"
#include "planner/kernels/cpu/attention.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

using AttentionShape = cpu::AttentionShape;

enum class AttentionAlgorithm {
  kAuto,   // kGemm from kGemmMinScores (q_len x kv_len) on, else kTiled
  kTiled,  // the fused tiled kernels
  kGemm,   // cuBLAS GEMMs and a softmax kernel
};
inline constexpr std::int64_t kGemmMinScores = std::int64_t{128} * 128;
// kGemm's fp32 score blocks (S and dP together) take at most this many bytes; queries are taken in
// blocks that fit.
inline constexpr std::size_t kGemmAttentionScoreBytes = std::size_t{256} << 20;
// Sets that budget for kernels called from this host thread (0: the default). Smaller budgets
// mean more, smaller GEMMs; tests use it to exercise the query blocks.
void set_gemm_attention_score_bytes(std::size_t bytes);

// Largest head_dim the kernels take (the widest in planner's model presets is 160).
inline constexpr std::int64_t kMaxAttentionHeadDim = 256;

// kInvalidInput unless 1 <= kv_heads, heads % kv_heads == 0, 1 <= head_dim <= kMaxAttentionHeadDim,
// batch, q_len and kv_len >= 0, offsets >= 0, and the launch grid fits CUDA's limits.
Status check_attention_shape(const AttentionShape& shape);

// o = softmax(scale q k^T, masked) v and lse per query row.
template <class T>
Status attention_forward(const AttentionShape& shape, const T* q, const T* k, const T* v, T* o,
                         float* lse, cudaStream_t stream,
                         AttentionAlgorithm algorithm = AttentionAlgorithm::kAuto);

// Merges a partial result over disjoint keys into (o, lse) in place, per row (cpu::
// attention_combine): rows = batch * q_len * heads, o and o_part are rows x head_dim.
template <class T>
Status attention_combine(std::int64_t rows, std::int64_t head_dim, T* o, float* lse,
                         const T* o_part, const float* lse_part, cudaStream_t stream);

// delta[r] = sum_d dout[r, d] * o[r, d] from the final (merged) o.
template <class T>
Status attention_backward_delta(std::int64_t rows, std::int64_t head_dim, const T* o, const T* dout,
                                float* delta, cudaStream_t stream);

// Accumulates (+=) this key/value block's gradients into dq, dk and dv, from the final lse and
// delta of every query row.
template <class T>
Status attention_backward(const AttentionShape& shape, const T* q, const T* k, const T* v,
                          const T* dout, const float* lse, const float* delta, T* dq, T* dk, T* dv,
                          cudaStream_t stream,
                          AttentionAlgorithm algorithm = AttentionAlgorithm::kAuto);

}  // namespace planner::kernels::cuda
