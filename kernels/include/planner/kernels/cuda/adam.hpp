// Fused Adam / AdamW step on the GPU with fp32 master weights and optimizer state, mirroring
// cpu/adam.hpp. Conventions in dtype.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "planner/core/status.hpp"
#include "planner/kernels/cpu/adam.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

using AdamConfig = cpu::AdamConfig;
using WeightDecayMode = cpu::WeightDecayMode;

// One step of cpu::adam_step on n fp32 parameters (grad, param, exp_avg, exp_avg_sq are fp32 device
// arrays), rounding exactly as the CPU kernel does (bias corrections computed on the host in double
// by the same expressions, then the same fp32 operations without fused multiply-adds), so the
// results are bit-identical to cpu::adam_step. When model_param is not null it also receives the
// updated parameter converted to T (the bf16/fp16 weights the forward pass reads); pass
// static_cast<float*>(nullptr) with T = float when there is no separate copy. Gradient clipping:
// cpu::clip_coefficient(sqrt(sum_of_squares), max_norm) is host arithmetic; pass it in grad_scale.
template <class T>
Status adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n, float grad_scale,
                 const float* grad, float* param, float* exp_avg, float* exp_avg_sq, T* model_param,
                 cudaStream_t stream);

}  // namespace planner::kernels::cuda
