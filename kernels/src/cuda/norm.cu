#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/norm.hpp"

namespace planner::kernels::cuda {
namespace {

using detail::block_sum;
using detail::from_float;
using detail::kBlockThreads;
using detail::to_float;

// One block per row for the forward kernels and the dx part of the backward; kCentered selects
// LayerNorm (mean subtracted, beta added) over RMSNorm.
template <bool kCentered, class T>
__global__ void __launch_bounds__(kBlockThreads)
    norm_forward_kernel(const T* x, const T* gamma, const T* beta, std::int64_t dim, float eps,
                        T* y, float* mean, float* rstd) {
  __shared__ float scratch[detail::kWarpSize];
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * dim;
  T* yr = y + row * dim;
  const float inv_dim = 1.0f / static_cast<float>(dim);
  float mu = 0.0f;
  if constexpr (kCentered) {
    float sum = 0.0f;
    for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      sum += to_float(xr[c]);
    mu = block_sum(sum, scratch) * inv_dim;
  }
  // Two passes (mean first, then squared deviations), as the CPU kernel.
  float squares = 0.0f;
  for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    const float d = to_float(xr[c]) - mu;
    squares += d * d;
  }
  const float rs = 1.0f / sqrtf(block_sum(squares, scratch) * inv_dim + eps);
  for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    float v = (to_float(xr[c]) - mu) * rs * to_float(gamma[c]);
    if constexpr (kCentered) v += to_float(beta[c]);
    yr[c] = from_float<T>(v);
  }
  if (threadIdx.x == 0) {
    if constexpr (kCentered) mean[row] = mu;
    rstd[row] = rs;
  }
}

template <bool kCentered, class T>
__global__ void __launch_bounds__(kBlockThreads)
    norm_backward_dx_kernel(const T* dy, const T* x, const T* gamma, const float* mean,
                            const float* rstd, std::int64_t dim, T* dx) {
  __shared__ float scratch[detail::kWarpSize];
  const std::int64_t row = blockIdx.x;
  const T* dyr = dy + row * dim;
  const T* xr = x + row * dim;
  T* dxr = dx + row * dim;
  const float inv_dim = 1.0f / static_cast<float>(dim);
  const float mu = kCentered ? mean[row] : 0.0f;
  const float rs = rstd[row];
  float sum_g = 0.0f;
  float sum_gx = 0.0f;
  for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    const float g = to_float(dyr[c]) * to_float(gamma[c]);
    sum_g += g;
    sum_gx += g * ((to_float(xr[c]) - mu) * rs);
  }
  const float mean_g = kCentered ? block_sum(sum_g, scratch) * inv_dim : 0.0f;
  const float mean_gx = block_sum(sum_gx, scratch) * inv_dim;
  for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    const float xhat = (to_float(xr[c]) - mu) * rs;
    const float d = to_float(dyr[c]);  // read before the write: dx may be dy
    dxr[c] = from_float<T>(rs * (d * to_float(gamma[c]) - mean_g - xhat * mean_gx));
  }
}

Status check_rows(const char* kernel, std::int64_t rows, std::int64_t dim) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "dim", dim, 1));
  return detail::check_grid(kernel, "rows", rows, detail::kMaxGridX);
}

template <bool kCentered, class T>
Status norm_forward(const char* kernel, const T* x, const T* gamma, const T* beta,
                    std::int64_t rows, std::int64_t dim, float eps, T* y, float* mean, float* rstd,
                    cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_rows(kernel, rows, dim));
  if (rows == 0) return Status::ok();
  norm_forward_kernel<kCentered><<<static_cast<unsigned>(rows), kBlockThreads, 0, stream>>>(
      x, gamma, beta, dim, eps, y, mean, rstd);
  return launch_status(kernel, kDTypeOf<T>);
}

// The parameter gradients first (they read dy, which dx may overwrite), then dx.
template <bool kCentered, class T>
Status norm_backward(const char* kernel, const T* dy, const T* x, const T* gamma, const float* mean,
                     const float* rstd, std::int64_t rows, std::int64_t dim, T* dx, float* dgamma,
                     float* dbeta, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_rows(kernel, rows, dim));
  if (rows == 0) return Status::ok();
  PLANNER_RETURN_IF_ERROR(detail::launch_column_sum(
      rows, dim,
      [=] __device__(std::int64_t r, std::int64_t c) {
        const float mu = kCentered ? mean[r] : 0.0f;
        const float d = to_float(dy[r * dim + c]);
        return make_float2(d * ((to_float(x[r * dim + c]) - mu) * rstd[r]), d);
      },
      dgamma, kCentered ? dbeta : nullptr, stream, kernel, kDTypeOf<T>));
  norm_backward_dx_kernel<kCentered><<<static_cast<unsigned>(rows), kBlockThreads, 0, stream>>>(
      dy, x, gamma, mean, rstd, dim, dx);
  return launch_status(kernel, kDTypeOf<T>);
}

}  // namespace

template <class T>
Status layernorm_forward(const T* x, const T* gamma, const T* beta, std::int64_t rows,
                         std::int64_t dim, float eps, T* y, float* mean, float* rstd,
                         cudaStream_t stream) {
  return norm_forward<true>("layernorm_forward", x, gamma, beta, rows, dim, eps, y, mean, rstd,
                            stream);
}

template <class T>
Status layernorm_backward(const T* dy, const T* x, const T* gamma, const float* mean,
                          const float* rstd, std::int64_t rows, std::int64_t dim, T* dx,
                          float* dgamma, float* dbeta, cudaStream_t stream) {
  return norm_backward<true>("layernorm_backward", dy, x, gamma, mean, rstd, rows, dim, dx, dgamma,
                             dbeta, stream);
}

template <class T>
Status rmsnorm_forward(const T* x, const T* gamma, std::int64_t rows, std::int64_t dim, float eps,
                       T* y, float* rstd, cudaStream_t stream) {
  return norm_forward<false>("rmsnorm_forward", x, gamma, static_cast<const T*>(nullptr), rows, dim,
                             eps, y, static_cast<float*>(nullptr), rstd, stream);
}

template <class T>
Status rmsnorm_backward(const T* dy, const T* x, const T* gamma, const float* rstd,
                        std::int64_t rows, std::int64_t dim, T* dx, float* dgamma,
                        cudaStream_t stream) {
  return norm_backward<false>("rmsnorm_backward", dy, x, gamma, static_cast<const float*>(nullptr),
                              rstd, rows, dim, dx, dgamma, static_cast<float*>(nullptr), stream);
}

#define PLANNER_INSTANTIATE(T)                                                                    \
  template Status layernorm_forward<T>(const T*, const T*, const T*, std::int64_t, std::int64_t,  \
                                       float, T*, float*, float*, cudaStream_t);                  \
  template Status layernorm_backward<T>(const T*, const T*, const T*, const float*, const float*, \
                                        std::int64_t, std::int64_t, T*, float*, float*,           \
                                        cudaStream_t);                                            \
  template Status rmsnorm_forward<T>(const T*, const T*, std::int64_t, std::int64_t, float, T*,   \
                                     float*, cudaStream_t);                                       \
  template Status rmsnorm_backward<T>(const T*, const T*, const T*, const float*, std::int64_t,   \
                                      std::int64_t, T*, float*, cudaStream_t);
PLANNER_INSTANTIATE(float)
PLANNER_INSTANTIATE(bf16)
PLANNER_INSTANTIATE(fp16)
#undef PLANNER_INSTANTIATE

}  // namespace planner::kernels::cuda
