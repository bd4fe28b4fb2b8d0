// Rotary position embedding (RoPE; Su et al. 2021, "RoFormer"), as Llama applies it to queries and
// keys, forward and backward. Conventions as in gemm.hpp.
//
// Layout "rotate half" (GPT-NeoX, Hugging Face Llama, Megatron-LM's default): within each head of
// head_dim (even) values, pair p < head_dim / 2 is (x[p], x[p + head_dim / 2]) and is rotated by
// the angle position * theta^(-2p / head_dim):
//   x'[p]        = x[p] cos - x[p + half] sin
//   x'[p + half] = x[p + half] cos + x[p] sin
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

// The rotation angles' cosines and sines for seq positions (positions[s] is the global position of
// local slot s, as in position_embedding_forward, so a context-parallel rank lists its own):
// table[s * head_dim + p] = cos(angle(s, p)) and table[s * head_dim + half + p] = sin(angle(s, p))
// for p < half, computed in double. table has seq x head_dim entries; compute it once per sequence
// layout and reuse it for every layer, for queries and keys.
void rope_table(const std::int32_t* positions, std::int64_t seq, std::int64_t head_dim,
                double theta, float* table);

// Rotates x in place: x is batch x seq x heads x head_dim (the attention layout of q or k).
void rope_forward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                  std::int64_t head_dim, float* x);

// The backward is the inverse rotation (the transpose of an orthogonal map), applied in place to
// the gradient dx of the rotated tensor, giving the gradient of the unrotated one.
void rope_backward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                   std::int64_t head_dim, float* dx);

}  // namespace planner::kernels::cpu
