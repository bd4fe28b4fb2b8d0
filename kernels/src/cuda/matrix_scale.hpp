// C = beta * C for a rows x cols row-major matrix with leading dimension ld (beta == 0 writes
// zeros, ignoring NaN), for gemm() with k == 0. Defined in elementwise.cu. Internal to
// planner::kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "planner/core/status.hpp"

namespace planner::kernels::cuda::detail {

template <class T>
Status scale_matrix(std::int64_t rows, std::int64_t cols, std::int64_t ld, float beta, T* c,
                    cudaStream_t stream);

}  // namespace planner::kernels::cuda::detail
