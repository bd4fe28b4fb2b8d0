// Counter-based random initialisation on the GPU, producing exactly the values of cpu/rng.hpp for
// the same (seed, stream id, index): the same Philox4x32-10 blocks and the same basic IEEE
// operations for the uniform, normal (Box-Muller with planner's own log and cosine) and token
// values (kernels/src/common/philox.hpp is shared by both). Outputs are fp32 device arrays (master
// weights; convert() makes bf16/fp16 copies) or int32 token ids.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "planner/core/status.hpp"

namespace planner::kernels::cuda {

// out[j] = lo + (hi - lo) * cpu::uniform_at(seed, stream_id, first_index + j) for j < n.
Status fill_uniform(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_index,
                    std::int64_t n, float lo, float hi, float* out, cudaStream_t stream);

// out[j] = mean + stddev * cpu::normal_at(seed, stream_id, first_index + j) for j < n.
Status fill_normal(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_index,
                   std::int64_t n, float mean, float stddev, float* out, cudaStream_t stream);

// The rows x cols block at (row0, col0) of a matrix with full_cols columns, as
// cpu::fill_normal_block (out is rows x cols, contiguous).
Status fill_normal_block(std::uint64_t seed, std::uint64_t stream_id, std::int64_t full_cols,
                         std::int64_t row0, std::int64_t col0, std::int64_t rows, std::int64_t cols,
                         float mean, float stddev, float* out, cudaStream_t stream);

// Token ids as cpu::fill_tokens: 1 <= vocab <= 2^31 - 1.
Status fill_tokens(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_index,
                   std::int64_t n, std::int64_t vocab, std::int32_t* out, cudaStream_t stream);

}  // namespace planner::kernels::cuda
