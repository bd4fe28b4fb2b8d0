// Counter-based random numbers for parameter initialisation and synthetic data.
//
// Element `index` of stream `stream` under `seed` is a pure function of (seed, stream, index): the
// Philox4x32-10 block of counter (index, stream) under key seed. Initialise a weight by giving it a
// stream id (e.g. tensor_stream_id("layers.3.mlp.fc1.weight")) and drawing element i of the *full,
// unsharded* tensor (row-major index) for every element a rank holds; then every sharding - tensor,
// pipeline, ZeRO - holds exactly the values of the single-process model, which is what makes a
// parallel run's loss equal the single-process loss.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace planner::kernels::cpu {

// Philox4x32 with 10 rounds (Salmon, Moraes, Dror & Shaw, "Parallel Random Numbers: As Easy as 1,
// 2, 3", SC'11; the generator of Random123 and cuRAND's Philox): four 32-bit outputs for a 128-bit
// counter and a 64-bit key.
std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key);

// A 64-bit stream id from a name (FNV-1a), stable across runs, builds and machines.
std::uint64_t tensor_stream_id(std::string_view name);

// Uniform in [0, 1), a multiple of 2^-24 (every such float is exact).
float uniform_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

// Standard normal (mean 0, variance 1) by Box-Muller from the first two words of the block,
// computed in double and rounded to float; |value| < 6.8. The log and cosine are planner's own
// (basic IEEE operations only, accurate to a few double ulps), so the CUDA kernels
// (planner::kernels::cuda::fill_normal) produce the same bits.
float normal_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

// out[j] = lo + (hi - lo) * uniform_at(seed, stream, first_index + j) for j < n.
void fill_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t first_index,
                  std::int64_t n, float lo, float hi, float* out);

// out[j] = mean + stddev * normal_at(seed, stream, first_index + j) for j < n.
void fill_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t first_index,
                 std::int64_t n, float mean, float stddev, float* out);

// The rows x cols block at (row0, col0) of a matrix with full_cols columns, filled as fill_normal
// fills the whole matrix: out[r * cols + c] = mean + stddev * normal_at(seed, stream,
// (row0 + r) * full_cols + col0 + c). A column-parallel shard is the block (0, rank * cols).
void fill_normal_block(std::uint64_t seed, std::uint64_t stream, std::int64_t full_cols,
                       std::int64_t row0, std::int64_t col0, std::int64_t rows, std::int64_t cols,
                       float mean, float stddev, float* out);

// Token ids uniform in [0, vocab): out[j] = floor(w * vocab / 2^32) with w the first word of block
// first_index + j (Lemire's multiply-shift; bias below vocab / 2^32). 1 <= vocab <= 2^31 - 1.
void fill_tokens(std::uint64_t seed, std::uint64_t stream, std::uint64_t first_index,
                 std::int64_t n, std::int64_t vocab, std::int32_t* out);

}  // namespace planner::kernels::cpu
