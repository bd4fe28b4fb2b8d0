// Compiled with --fmad=false (kernels/CMakeLists.txt): products and sums round separately, as in
// the CPU kernels, so fp32 results are bit-identical to planner::kernels::cpu.
#include "cuda/device_common.cuh"
#include "cuda/matrix_scale.hpp"
#include "planner/kernels/cuda/elementwise.hpp"

namespace planner::kernels::cuda {

using detail::from_float;
using detail::to_float;

template <class T>
Status add(const T* a, const T* b, std::int64_t n, T* out, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("add", "n", n, 0));
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t i) { out[i] = from_float<T>(to_float(a[i]) + to_float(b[i])); },
      stream, "add", kDTypeOf<T>);
}

template <class T>
Status axpy(std::int64_t n, float alpha, const T* x, T* y, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("axpy", "n", n, 0));
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t i) {
        y[i] = from_float<T>(to_float(y[i]) + alpha * to_float(x[i]));
      },
      stream, "axpy", kDTypeOf<T>);
}

template <class T>
Status scale(T* x, std::int64_t n, float factor, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("scale", "n", n, 0));
  return detail::launch_elementwise(
      n, [=] __device__(std::int64_t i) { x[i] = from_float<T>(to_float(x[i]) * factor); }, stream,
      "scale", kDTypeOf<T>);
}

template <class T>
Status bias_add(T* x, const T* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("bias_add", "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("bias_add", "cols", cols, 0));
  return detail::launch_elementwise(
      rows * cols,
      [=] __device__(std::int64_t i) {
        x[i] = from_float<T>(to_float(x[i]) + to_float(bias[i % cols]));
      },
      stream, "bias_add", kDTypeOf<T>);
}

template <class T>
Status bias_backward(const T* dy, std::int64_t rows, std::int64_t cols, float* dbias,
                     cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("bias_backward", "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("bias_backward", "cols", cols, 0));
  return detail::launch_column_sum(
      rows, cols,
      [=] __device__(std::int64_t r, std::int64_t c) {
        return make_float2(to_float(dy[r * cols + c]), 0.0f);
      },
      dbias, nullptr, stream, "bias_backward", kDTypeOf<T>);
}

namespace {

constexpr int kSumOfSquaresThreads = 256;
constexpr int kFinalThreads = 1024;
static_assert(kSumOfSquaresWorkspace == kFinalThreads, "one final thread per partial sum");

template <class T>
__global__ void __launch_bounds__(kSumOfSquaresThreads)
    sum_of_squares_partial_kernel(const T* x, std::int64_t n, double* partial) {
  __shared__ double scratch[detail::kWarpSize];
  const std::int64_t stride =
      static_cast<std::int64_t>(kSumOfSquaresWorkspace) * kSumOfSquaresThreads;
  double sum = 0.0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kSumOfSquaresThreads + threadIdx.x;
       i < n; i += stride) {
    const double v = to_float(x[i]);
    sum += v * v;
  }
  sum = detail::block_reduce(sum, 0.0, detail::SumOp{}, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

__global__ void __launch_bounds__(kFinalThreads)
    sum_of_squares_final_kernel(const double* partial, double* result, bool accumulate) {
  __shared__ double scratch[detail::kWarpSize];
  const double sum = detail::block_reduce(partial[threadIdx.x], 0.0, detail::SumOp{}, scratch);
  if (threadIdx.x == 0) *result = accumulate ? *result + sum : sum;
}

}  // namespace

template <class T>
Status sum_of_squares(const T* x, std::int64_t n, double* workspace, double* result,
                      cudaStream_t stream, bool accumulate) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("sum_of_squares", "n", n, 0));
  sum_of_squares_partial_kernel<<<kSumOfSquaresWorkspace, kSumOfSquaresThreads, 0, stream>>>(
      x, n, workspace);
  PLANNER_RETURN_IF_ERROR(launch_status("sum_of_squares_partial", kDTypeOf<T>));
  sum_of_squares_final_kernel<<<1, kFinalThreads, 0, stream>>>(workspace, result, accumulate);
  return launch_status("sum_of_squares_final", kDTypeOf<T>);
}

Status narrow_int64(const std::int64_t* in, std::int64_t n, std::int32_t* out,
                    cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("narrow_int64", "n", n, 0));
  return detail::launch_elementwise(
      n, [=] __device__(std::int64_t i) { out[i] = static_cast<std::int32_t>(in[i]); }, stream,
      "narrow_int64");
}

template <class TIn, class TOut>
Status convert(const TIn* x, std::int64_t n, TOut* y, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("convert", "n", n, 0));
  return detail::launch_elementwise(
      n, [=] __device__(std::int64_t i) { y[i] = from_float<TOut>(to_float(x[i])); }, stream,
      "convert_to", kDTypeOf<TOut>);
}

namespace detail {

template <class T>
Status scale_matrix(std::int64_t rows, std::int64_t cols, std::int64_t ld, float beta, T* c,
                    cudaStream_t stream) {
  return launch_elementwise(
      rows * cols,
      [=] __device__(std::int64_t i) {
        T& v = c[(i / cols) * ld + i % cols];
        v = beta == 0.0f ? from_float<T>(0.0f) : from_float<T>(beta * to_float(v));
      },
      stream, "scale_matrix", kDTypeOf<T>);
}

template Status scale_matrix<float>(std::int64_t, std::int64_t, std::int64_t, float, float*,
                                    cudaStream_t);
template Status scale_matrix<bf16>(std::int64_t, std::int64_t, std::int64_t, float, bf16*,
                                   cudaStream_t);
template Status scale_matrix<fp16>(std::int64_t, std::int64_t, std::int64_t, float, fp16*,
                                   cudaStream_t);

}  // namespace detail

#define PLANNER_INSTANTIATE(T)                                                                  \
  template Status add<T>(const T*, const T*, std::int64_t, T*, cudaStream_t);                   \
  template Status axpy<T>(std::int64_t, float, const T*, T*, cudaStream_t);                     \
  template Status scale<T>(T*, std::int64_t, float, cudaStream_t);                              \
  template Status bias_add<T>(T*, const T*, std::int64_t, std::int64_t, cudaStream_t);          \
  template Status bias_backward<T>(const T*, std::int64_t, std::int64_t, float*, cudaStream_t); \
  template Status sum_of_squares<T>(const T*, std::int64_t, double*, double*, cudaStream_t, bool);
PLANNER_INSTANTIATE(float)
PLANNER_INSTANTIATE(bf16)
PLANNER_INSTANTIATE(fp16)
#undef PLANNER_INSTANTIATE

template Status convert<float, bf16>(const float*, std::int64_t, bf16*, cudaStream_t);
template Status convert<bf16, float>(const bf16*, std::int64_t, float*, cudaStream_t);
template Status convert<float, fp16>(const float*, std::int64_t, fp16*, cudaStream_t);
template Status convert<fp16, float>(const fp16*, std::int64_t, float*, cudaStream_t);

}  // namespace planner::kernels::cuda
