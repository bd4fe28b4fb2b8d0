#include "planner/kernels/cpu/adam.hpp"

#include <cassert>
#include <cmath>

#include "common/adam_update.hpp"
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
  const common::AdamCoefficients c = common::adam_coefficients(config, step, grad_scale);
  for (std::int64_t i = 0; i < n; ++i)
    common::adam_update(c, grad[i], param[i], exp_avg[i], exp_avg_sq[i]);
}

float clip_coefficient(double global_norm, double max_norm) {
  assert(global_norm >= 0 && max_norm > 0);
  const double coefficient = max_norm / (global_norm + kClipEpsilon);
  return coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
}

}  // namespace planner::kernels::cpu
