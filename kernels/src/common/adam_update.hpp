// The arithmetic of one Adam / AdamW step (the update rule of cpu/adam.hpp), written once for
// cpu::adam_step and cuda::adam_step so that both round identically: the same fp32 operations in
// the same order, compiled without fused multiply-adds on either side (-ffp-contract=off for the
// CPU kernels, --fmad=false for kernels/src/cuda/adam.cu). Internal to planner::kernels.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/host_device.hpp"
#include "planner/kernels/cpu/adam.hpp"

namespace planner::kernels::common {

// The per-step scalars, computed on the host.
struct AdamCoefficients {
  float grad_scale = 1;
  float step_size = 0;  // lr / (1 - beta1^step)
  float beta1 = 0;
  float beta2 = 0;
  float one_minus_beta1 = 0;
  float one_minus_beta2 = 0;
  float bias_correction2_sqrt = 0;  // sqrt(1 - beta2^step)
  float eps = 0;
  float l2 = 0;     // weight_decay for kL2, else 0
  float decay = 1;  // 1 - lr * weight_decay for kDecoupled, else 1
};

inline AdamCoefficients adam_coefficients(const cpu::AdamConfig& config, std::int64_t step,
                                          float grad_scale) {
  const double t = static_cast<double>(step);
  AdamCoefficients c;
  c.grad_scale = grad_scale;
  c.step_size = config.lr / static_cast<float>(1.0 - std::pow(config.beta1, t));
  c.beta1 = config.beta1;
  c.beta2 = config.beta2;
  c.one_minus_beta1 = 1.0f - config.beta1;
  c.one_minus_beta2 = 1.0f - config.beta2;
  c.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(config.beta2, t)));
  c.eps = config.eps;
  const bool decoupled = config.decay_mode == cpu::WeightDecayMode::kDecoupled;
  c.l2 = decoupled ? 0.0f : config.weight_decay;
  c.decay = decoupled ? 1.0f - config.lr * config.weight_decay : 1.0f;
  return c;
}

// Updates one parameter and its moments in place.
PLANNER_HOST_DEVICE inline void adam_update(const AdamCoefficients& c, float grad, float& param,
                                            float& exp_avg, float& exp_avg_sq) {
  float p = param;
  const float g = grad * c.grad_scale + c.l2 * p;
  p *= c.decay;
  const float m = c.beta1 * exp_avg + c.one_minus_beta1 * g;
  const float v = c.beta2 * exp_avg_sq + c.one_minus_beta2 * g * g;
  exp_avg = m;
  exp_avg_sq = v;
  param = p - c.step_size * (m / (std::sqrt(v) / c.bias_correction2_sqrt + c.eps));
}

}  // namespace planner::kernels::common
