#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/activation.hpp"

namespace planner::kernels::cuda {
namespace {

using detail::from_float;
using detail::to_float;

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;              // GPT-2 / Megatron-LM tanh-GeLU coefficient

// s = 0.5 (1 + tanh(u)) = 1 / (1 + e^{-2u}) without the cancellation of 1 + tanh(u) below x = -2
// (cpu/activation.cpp gives the identities).
__device__ __forceinline__ float gelu_half_one_plus_tanh(float v) {
  return 1.0f / (1.0f + expf(-2.0f * kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
}

__device__ __forceinline__ float sigmoid(float g) {
  return 1.0f / (1.0f + expf(-g));
}

Status check_swiglu(const char* kernel, std::int64_t rows, std::int64_t cols, std::int64_t ld_in) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "cols", cols, 0));
  return detail::check_at_least(kernel, "ld_in", ld_in, cols);
}

}  // namespace

template <class T>
Status gelu_forward(const T* x, std::int64_t n, T* y, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("gelu_forward", "n", n, 0));
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t i) {
        const float v = to_float(x[i]);
        y[i] = from_float<T>(v * gelu_half_one_plus_tanh(v));
      },
      stream, "gelu_forward", kDTypeOf<T>);
}

template <class T>
Status gelu_backward(const T* x, const T* dy, std::int64_t n, T* dx, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("gelu_backward", "n", n, 0));
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t i) {
        const float v = to_float(x[i]);
        const float s = gelu_half_one_plus_tanh(v);
        const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
        dx[i] = from_float<T>(to_float(dy[i]) * (s + 2.0f * v * s * (1.0f - s) * du));
      },
      stream, "gelu_backward", kDTypeOf<T>);
}

template <class T>
Status swiglu_forward(const T* gate, const T* up, std::int64_t rows, std::int64_t cols,
                      std::int64_t ld_in, T* out, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_swiglu("swiglu_forward", rows, cols, ld_in));
  return detail::launch_elementwise(
      rows * cols,
      [=] __device__(std::int64_t i) {
        const std::int64_t in = (i / cols) * ld_in + i % cols;
        const float g = to_float(gate[in]);
        out[i] = from_float<T>(g * sigmoid(g) * to_float(up[in]));
      },
      stream, "swiglu_forward", kDTypeOf<T>);
}

template <class T>
Status swiglu_backward(const T* gate, const T* up, const T* dout, std::int64_t rows,
                       std::int64_t cols, std::int64_t ld_in, T* dgate, T* dup,
                       cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_swiglu("swiglu_backward", rows, cols, ld_in));
  return detail::launch_elementwise(
      rows * cols,
      [=] __device__(std::int64_t i) {
        const std::int64_t in = (i / cols) * ld_in + i % cols;
        const float g = to_float(gate[in]);
        const float u = to_float(up[in]);  // both read before writing: may be in place
        const float s = sigmoid(g);
        const float grad = to_float(dout[i]);
        dgate[in] = from_float<T>(grad * u * (s * (1.0f + g * (1.0f - s))));
        dup[in] = from_float<T>(grad * (g * s));
      },
      stream, "swiglu_backward", kDTypeOf<T>);
}

#define PLANNER_INSTANTIATE(T)                                                                    \
  template Status gelu_forward<T>(const T*, std::int64_t, T*, cudaStream_t);                      \
  template Status gelu_backward<T>(const T*, const T*, std::int64_t, T*, cudaStream_t);           \
  template Status swiglu_forward<T>(const T*, const T*, std::int64_t, std::int64_t, std::int64_t, \
                                    T*, cudaStream_t);                                            \
  template Status swiglu_backward<T>(const T*, const T*, const T*, std::int64_t, std::int64_t,    \
                                     std::int64_t, T*, T*, cudaStream_t);
PLANNER_INSTANTIATE(float)
PLANNER_INSTANTIATE(bf16)
PLANNER_INSTANTIATE(fp16)
#undef PLANNER_INSTANTIATE

}  // namespace planner::kernels::cuda
