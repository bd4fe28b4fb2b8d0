// The GEMM formulation of attention (attention_gemm.cu), behind attention.hpp's
// AttentionAlgorithm::kGemm. Internal to planner::kernels; same contracts as attention_forward and
// attention_backward (shapes already checked by the caller).
#pragma once

#include <cuda_runtime_api.h>

#include "planner/core/status.hpp"
#include "planner/kernels/cuda/attention.hpp"

namespace planner::kernels::cuda::detail {

template <class T>
Status attention_forward_gemm(const AttentionShape& shape, const T* q, const T* k, const T* v, T* o,
                              float* lse, cudaStream_t stream);

template <class T>
Status attention_backward_gemm(const AttentionShape& shape, const T* q, const T* k, const T* v,
                               const T* dout, const float* lse, const float* delta, T* dq, T* dk,
                               T* dv, cudaStream_t stream);

}  // namespace planner::kernels::cuda::detail
