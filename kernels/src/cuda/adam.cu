// Compiled with --fmad=false (kernels/CMakeLists.txt): with the update shared with the CPU kernel
// (common/adam_update.hpp) it rounds exactly like cpu::adam_step.
#include "common/adam_update.hpp"
#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/adam.hpp"

namespace planner::kernels::cuda {

template <class T>
Status adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n, float grad_scale,
                 const float* grad, float* param, float* exp_avg, float* exp_avg_sq, T* model_param,
                 cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("adam_step", "step", step, 1));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("adam_step", "n", n, 0));
  const common::AdamCoefficients c = common::adam_coefficients(config, step, grad_scale);
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t i) {
        common::adam_update(c, grad[i], param[i], exp_avg[i], exp_avg_sq[i]);
        if (model_param != nullptr) model_param[i] = detail::from_float<T>(param[i]);
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
