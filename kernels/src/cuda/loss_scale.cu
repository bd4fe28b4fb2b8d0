// Compiled with --fmad=false (kernels/CMakeLists.txt), like elementwise.cu.
#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/loss_scale.hpp"

namespace planner::kernels::cuda {
namespace {

// An fp32 value is inf or NaN exactly when its 8 exponent bits are all ones (bf16 and fp16 values
// convert to fp32 exactly, infinities and NaNs included).
constexpr unsigned kExponentMask = 0x7f800000u;

__device__ __forceinline__ bool non_finite(float v) {
  return (__float_as_uint(v) & kExponentMask) == kExponentMask;
}

}  // namespace

template <class T>
Status check_finite(const T* x, std::int64_t n, std::int32_t* found_nonfinite,
                    cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("check_finite", "n", n, 0));
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t i) {
        if (non_finite(detail::to_float(x[i]))) *found_nonfinite = 1;
      },
      stream, "check_finite", kDTypeOf<T>);
}

template <class T>
Status unscale_and_check(T* x, std::int64_t n, float inv_scale, std::int32_t* found_nonfinite,
                         cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("unscale_and_check", "n", n, 0));
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t i) {
        const float v = detail::to_float(x[i]);
        if (non_finite(v)) *found_nonfinite = 1;
        x[i] = detail::from_float<T>(v * inv_scale);
      },
      stream, "unscale_and_check", kDTypeOf<T>);
}

#define PLANNER_INSTANTIATE(T)                                                          \
  template Status check_finite<T>(const T*, std::int64_t, std::int32_t*, cudaStream_t); \
  template Status unscale_and_check<T>(T*, std::int64_t, float, std::int32_t*, cudaStream_t);
PLANNER_INSTANTIATE(float)
PLANNER_INSTANTIATE(bf16)
PLANNER_INSTANTIATE(fp16)
#undef PLANNER_INSTANTIATE

}  // namespace planner::kernels::cuda
