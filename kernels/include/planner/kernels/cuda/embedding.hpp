// Token and learned position embeddings on the GPU, forward and backward, mirroring
// cpu/embedding.hpp (vocabulary-parallel rows, same layouts). Conventions in dtype.hpp: tables,
// outputs and incoming gradients are T (float, bf16 or fp16); the weight gradients are fp32 and
// accumulate. ids and positions are device arrays.
//
// Deterministic backward without sorting or atomics: one thread block per token slot; the block of
// the first slot holding an id owns that table row and adds the gradients of every slot with that
// id in ascending slot order (batch outer for position embeddings), which is exactly the CPU's
// order, so fp32 results are bit-identical to cpu::. Finding the first slot costs O(slots^2 /
// threads) id comparisons, independent of the vocabulary size.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "planner/core/status.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

// out[t, :] = weight[ids[t] - vocab_start, :] when this rank holds the id, else 0.
template <class T>
Status embedding_forward(const std::int32_t* ids, std::int64_t tokens, const T* weight,
                         std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                         T* out, cudaStream_t stream);

// dweight[ids[t] - vocab_start, :] += dout[t, :] for the ids this rank holds.
template <class T>
Status embedding_backward(const std::int32_t* ids, std::int64_t tokens, const T* dout,
                          std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                          float* dweight, cudaStream_t stream);

// x[b, s, :] += pos_weight[positions[s], :] for x of shape batch x seq x dim.
template <class T>
Status position_embedding_forward(const std::int32_t* positions, std::int64_t batch,
                                  std::int64_t seq, const T* pos_weight, std::int64_t dim, T* x,
                                  cudaStream_t stream);

// dpos_weight[positions[s], :] += dx[b, s, :] for every b and s (b outer, s inner).
template <class T>
Status position_embedding_backward(const std::int32_t* positions, std::int64_t batch,
                                   std::int64_t seq, const T* dx, std::int64_t dim,
                                   float* dpos_weight, cudaStream_t stream);

}  // namespace planner::kernels::cuda
