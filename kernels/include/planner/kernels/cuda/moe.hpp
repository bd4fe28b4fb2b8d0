// Mixture-of-experts routing and row-movement kernels on the GPU, mirroring cpu/moe.hpp (same
// selection, tie-breaking, normalisation and summation order, so fp32 results match the CPU's up
// to the exponential's rounding). Conventions in dtype.hpp: logits and rows are T; scores,
// weights and their gradients fp32; expert and position indices int32 device arrays.
//
// One thread per token row for the routing (experts are few: a row's selection loops over them);
// one block per row for the combine, the others elementwise. No atomics: every output element has
// one writer.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "planner/core/status.hpp"
#include "planner/kernels/cpu/moe.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

using kernels::cpu::MoeRouteConfig;

template <class T>
Status moe_route(const T* logits, std::int64_t rows, const MoeRouteConfig& config, float* scores,
                 std::int32_t* experts, float* weights, cudaStream_t stream);

template <class T>
Status moe_route_backward(const float* scores, const std::int32_t* experts, const float* weights,
                          const float* dweights, std::int64_t rows, const MoeRouteConfig& config,
                          T* dlogits, cudaStream_t stream);

template <class T>
Status gather_rows(const T* src, const std::int32_t* index, std::int64_t rows, std::int64_t cols,
                   T* dst, cudaStream_t stream);

template <class T>
Status moe_combine(const T* src, const std::int32_t* pos, const float* weights, std::int64_t rows,
                   std::int64_t k, std::int64_t cols, bool accumulate, T* dst, cudaStream_t stream);

template <class T>
Status moe_combine_backward(const T* dy, const T* src, const std::int32_t* pos,
                            const float* weights, std::int64_t rows, std::int64_t k,
                            std::int64_t cols, T* dsrc, float* dweights, cudaStream_t stream);

}  // namespace planner::kernels::cuda
