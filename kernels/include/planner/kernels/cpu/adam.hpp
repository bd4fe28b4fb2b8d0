// Fused Adam / AdamW step on fp32 master weights, and gradient clipping by global norm.
// Conventions as in gemm.hpp.
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

enum class WeightDecayMode {
  kL2,  // Adam (Kingma & Ba 2015) with L2 regularisation: weight_decay * param joins the gradient
  kDecoupled,  // AdamW (Loshchilov & Hutter 2019): param *= 1 - lr * weight_decay before the update
};

// Hyper-parameters; defaults are PyTorch's torch.optim.AdamW defaults except weight_decay (0 here).
struct AdamConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  WeightDecayMode decay_mode = WeightDecayMode::kDecoupled;
};

// One optimizer step (step = 1 for the first) over n parameters, with the update rule of PyTorch's
// torch.optim.Adam / AdamW:
//   g = grad * grad_scale (+ weight_decay * param with kL2)
//   param *= 1 - lr * weight_decay (kDecoupled)
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// grad_scale folds loss-scale unscaling and the clip coefficient into the step (1 when neither is
// used). exp_avg (m) and exp_avg_sq (v) start at zero. A ZeRO shard calls this on its own slice.
void adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n, float grad_scale,
               const float* grad, float* param, float* exp_avg, float* exp_avg_sq);

// Gradient clipping by global norm (PyTorch clip_grad_norm_, Megatron-LM clip_grad_norm_fp32):
// returns max_norm / (global_norm + 1e-6) when that is below 1, else 1. global_norm is the L2 norm
// of all gradients (sqrt of the all-reduced sum_of_squares); multiply the gradients by the result,
// or pass it to adam_step as grad_scale.
float clip_coefficient(double global_norm, double max_norm);

}  // namespace planner::kernels::cpu
