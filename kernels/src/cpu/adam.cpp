#include "planner/kernels/cpu/adam.hpp"

#include <cassert>
#include <cmath>

#include "cpu/vector_math.hpp"

namespace planner::kernels::cpu {
namespace {

// Added to the norm before dividing, as PyTorch's clip_grad_norm_ and Megatron-LM do.
constexpr double kClipEpsilon = 1e-6;

}  // namespace

PLANNER_CPU_KERNEL
void adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n, float grad_scale,
               const float* grad, float* param, float* exp_avg, float* exp_avg_sq) {
  assert(step >= 1);
  const double t = static_cast<double>(step);
  const float bias_correction1 = static_cast<float>(1.0 - std::pow(config.beta1, t));
  const float bias_correction2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(config.beta2, t)));
  const float step_size = config.lr / bias_correction1;
  const float beta1 = config.beta1;
  const float beta2 = config.beta2;
  const float one_minus_beta1 = 1.0f - beta1;
  const float one_minus_beta2 = 1.0f - beta2;
  const float eps = config.eps;
  const bool decoupled = config.decay_mode == WeightDecayMode::kDecoupled;
  const float l2 = decoupled ? 0.0f : config.weight_decay;
  const float decay = decoupled ? 1.0f - config.lr * config.weight_decay : 1.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    float p = param[i];
    const float g = grad[i] * grad_scale + l2 * p;
    p *= decay;
    const float m = beta1 * exp_avg[i] + one_minus_beta1 * g;
    const float v = beta2 * exp_avg_sq[i] + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p - step_size * (m / (std::sqrt(v) / bias_correction2_sqrt + eps));
  }
}

float clip_coefficient(double global_norm, double max_norm) {
  assert(global_norm >= 0 && max_norm > 0);
  const double coefficient = max_norm / (global_norm + kClipEpsilon);
  return coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
}

}  // namespace planner::kernels::cpu
