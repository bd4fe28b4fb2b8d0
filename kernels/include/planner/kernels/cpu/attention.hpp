// Fused causal multi-head / grouped-query attention (flash-attention style), forward and backward,
// with the block decomposition that context parallelism builds on. Conventions as in gemm.hpp.
//
// Never materialises the q_len x kv_len score matrix: the forward walks key tiles with an online
// softmax (Dao et al., "FlashAttention", 2022; "FlashAttention-2", 2023) and saves only the output
// and the log-sum-exp of each row; the backward recomputes the scores tile by tile from them.
//
// Layouts (row-major, contiguous, token-major so that a block of positions is a pointer offset):
//   q, o, dout, dq : batch x q_len x heads x head_dim
//   k, v, dk, dv   : batch x kv_len x kv_heads x head_dim
//   lse, delta     : batch x q_len x heads
// Query head h reads key/value head h / (heads / kv_heads) (GQA; heads == kv_heads is MHA).
// Scores are s = scale * q . k; lse is the natural log of sum_j exp(s_j) over the keys a query
// sees.
//
// Causality uses global positions: query i of the block is at q_offset + i, key j at kv_offset + j,
// and with causal the query sees exactly the keys with kv_offset + j <= q_offset + i. A query that
// sees no key of the block gets o = 0 and lse = -inf.
//
// Context parallelism (ring attention): a rank holding queries Q_r runs attention_forward against
// each key/value block it receives (with that block's kv_offset) and merges the partial results
// with attention_combine; the merged o and lse equal attention over all keys. For the backward it
// computes delta once from the merged o, then calls attention_backward for every key/value block
// with the merged lse: dq accumulates locally, and each block's dk/dv contributions go back to the
// block's owner, which sums them. A Megatron-style load-balanced split (two chunks per rank) is two
// query blocks with their own offsets.
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

struct AttentionShape {
  std::int64_t batch = 1;
  std::int64_t heads = 1;     // query heads on this rank
  std::int64_t kv_heads = 1;  // key/value heads on this rank; divides heads
  std::int64_t head_dim = 1;
  std::int64_t q_len = 0;      // query positions in this block
  std::int64_t kv_len = 0;     // key/value positions in this block
  std::int64_t q_offset = 0;   // global position of the block's first query
  std::int64_t kv_offset = 0;  // global position of the block's first key
  bool causal = true;
  float scale = 1.0f;  // score scale, usually attention_default_scale(head_dim)
};

// 1 / sqrt(head_dim) (Vaswani et al. 2017).
float attention_default_scale(std::int64_t head_dim);

// o = softmax(scale * q k^T, masked) v and lse per query row. Writes o and lse (see layouts above).
void attention_forward(const AttentionShape& shape, const float* q, const float* k, const float* v,
                       float* o, float* lse);

// Merges a partial result over a disjoint set of keys into an accumulator, in place, per row:
//   lse' = log(exp(lse) + exp(lse_part)),
//   o'   = o * exp(lse - lse') + o_part * exp(lse_part - lse').
// rows = batch * q_len * heads; o and o_part are rows x head_dim, lse and lse_part have rows
// entries. Rows where one side is -inf (saw no key) take the other side unchanged. Start the
// accumulator from the first block's forward, or from o = 0 and lse = -inf.
void attention_combine(std::int64_t rows, std::int64_t head_dim, float* o, float* lse,
                       const float* o_part, const float* lse_part);

// delta[r] = sum_d dout[r, d] * o[r, d], rows = batch * q_len * heads, from the final (merged) o.
void attention_backward_delta(std::int64_t rows, std::int64_t head_dim, const float* o,
                              const float* dout, float* delta);

// Gradients of attention over this key/value block, given the final lse and delta of every query
// row (over all keys, when the keys are split into blocks). Accumulates (+=) into dq, dk and dv,
// because with context parallelism they sum contributions of several blocks, and with GQA several
// query heads share one key/value head: zero them before the first call of a step.
void attention_backward(const AttentionShape& shape, const float* q, const float* k, const float* v,
                        const float* dout, const float* lse, const float* delta, float* dq,
                        float* dk, float* dv);

// Query/key pairs the forward evaluates (unmasked), summed over batch and heads. Forward FLOPs are
// 4 * head_dim * pairs (two GEMMs); the backward's are 10 * head_dim * pairs (five).
double attention_pairs(const AttentionShape& shape);

}  // namespace planner::kernels::cpu
