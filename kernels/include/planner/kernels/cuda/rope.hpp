// Rotary position embedding on the GPU (rotate-half layout), mirroring cpu/rope.hpp. Conventions
// in dtype.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "planner/core/status.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

// The cos/sin table of cpu::rope_table (seq x head_dim floats, cosines then sines per position),
// computed on the device in double from device `positions`. CUDA's double pow/cos/sin are within 2
// ulps (double) of glibc's, so after rounding to float an entry equals the CPU's or differs by one
// float ulp in rare cases; copy a CPU-computed table instead where bit-equality matters.
Status rope_table(const std::int32_t* positions, std::int64_t seq, std::int64_t head_dim,
                  double theta, float* table, cudaStream_t stream);

// Rotates x (batch x seq x heads x head_dim, T) in place by the table's angles. In fp32 the
// rotation rounds like the CPU's, so with the same table the results are bit-identical.
template <class T>
Status rope_forward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                    std::int64_t head_dim, T* x, cudaStream_t stream);

// The inverse rotation, applied in place to the gradient.
template <class T>
Status rope_backward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                     std::int64_t head_dim, T* dx, cudaStream_t stream);

}  // namespace planner::kernels::cuda
