// LayerNorm and RMSNorm on the GPU, forward and backward, mirroring cpu/norm.hpp (same formulas,
// saved statistics and accumulate rules). Conventions in dtype.hpp: x, y, dy, dx, gamma and beta
// are T (float, bf16 or fp16); mean and rstd are fp32; dgamma and dbeta are fp32 and accumulate.
//
// One thread block per row computes the row's sums in a fixed tree; the parameter gradients are
// summed per column by a second kernel (32 row lanes per column, added in lane order), so results
// are deterministic without atomics.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "planner/core/status.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

// y = (x - mean) * rstd * gamma + beta per row; writes mean[rows] and rstd[rows]. y may be x.
template <class T>
Status layernorm_forward(const T* x, const T* gamma, const T* beta, std::int64_t rows,
                         std::int64_t dim, float eps, T* y, float* mean, float* rstd,
                         cudaStream_t stream);

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma; dgamma += sum_rows dy *
// xhat; dbeta += sum_rows dy (dbeta may be null). dx may be dy.
template <class T>
Status layernorm_backward(const T* dy, const T* x, const T* gamma, const float* mean,
                          const float* rstd, std::int64_t rows, std::int64_t dim, T* dx,
                          float* dgamma, float* dbeta, cudaStream_t stream);

// y = x * rstd * gamma per row; writes rstd[rows]. y may be x.
template <class T>
Status rmsnorm_forward(const T* x, const T* gamma, std::int64_t rows, std::int64_t dim, float eps,
                       T* y, float* rstd, cudaStream_t stream);

// dx = rstd * (g - xhat * mean(g * xhat)); dgamma += sum_rows dy * xhat. dx may be dy.
template <class T>
Status rmsnorm_backward(const T* dy, const T* x, const T* gamma, const float* rstd,
                        std::int64_t rows, std::int64_t dim, T* dx, float* dgamma,
                        cudaStream_t stream);

}  // namespace planner::kernels::cuda
