// Compiled with --fmad=false (kernels/CMakeLists.txt): the update rounds exactly like
// cpu::adam_step, operation by operation.
#include <cmath>

#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/adam.hpp"

namespace planner::kernels::cuda {

template <class T>
Status adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n, float grad_scale,
                 const float* grad, float* param, float* exp_avg, float* exp_avg_sq, T* model_param,
                 cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("adam_step", "step", step, 1));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("adam_step", "n", n, 0));
  // The scalars exactly as cpu::adam_step computes them.
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
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t i) {
        float p = param[i];
        const float g = grad[i] * grad_scale + l2 * p;
        p *= decay;
        const float m = beta1 * exp_avg[i] + one_minus_beta1 * g;
        const float v = beta2 * exp_avg_sq[i] + one_minus_beta2 * g * g;
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        p = p - step_size * (m / (sqrtf(v) / bias_correction2_sqrt + eps));
        param[i] = p;
        if (model_param != nullptr) model_param[i] = detail::from_float<T>(p);
      },
      stream, "adam_step", kDTypeOf<T>);
}

template Status adam_step<float>(const AdamConfig&, std::int64_t, std::int64_t, float, const float*,
                                 float*, float*, float*, float*, cudaStream_t);
template Status adam_step<bf16>(const AdamConfig&, std::int64_t, std::int64_t, float, const float*,
                                float*, float*, float*, bf16*, cudaStream_t);
template Status adam_step<fp16>(const AdamConfig&, std::int64_t, std::int64_t, float, const float*,
                                float*, float*, float*, fp16*, cudaStream_t);

}  // namespace planner::kernels::cuda
