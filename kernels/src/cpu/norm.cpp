#include "planner/kernels/cpu/norm.hpp"

#include <cassert>
#include <cmath>

#include "cpu/vector_math.hpp"

namespace planner::kernels::cpu {

namespace {

// Backward of y = (x - mean) * rstd * gamma (+ beta), shared by LayerNorm (kCentered: mean and its
// gradient term) and RMSNorm (mean = 0, no mean(g) term, no beta):
//   dx = rstd * (g - [kCentered] mean(g) - xhat * mean(g * xhat)), dgamma += dy * xhat, dbeta +=
//   dy.
template <bool kCentered>
inline void norm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                          const float* rstd, std::int64_t rows, std::int64_t dim, float* dx,
                          float* dgamma, float* dbeta) {
  assert(dim > 0);
  const float inv_dim = 1.0f / static_cast<float>(dim);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * dim;
    const float* xr = x + r * dim;
    float* dxr = dx + r * dim;
    const float mu = kCentered ? mean[r] : 0.0f;
    const float rs = rstd[r];
    float sum_g = 0;
    float sum_gx = 0;
    if constexpr (kCentered) {
      detail::sum_of_pair(
          dim, [=](std::int64_t i) { return dyr[i] * gamma[i]; },
          [=](std::int64_t i) { return dyr[i] * gamma[i] * ((xr[i] - mu) * rs); }, sum_g, sum_gx);
    } else {
      sum_gx =
          detail::sum_of(dim, [=](std::int64_t i) { return dyr[i] * gamma[i] * (xr[i] * rs); });
    }
    const float mean_g = sum_g * inv_dim;
    const float mean_gx = sum_gx * inv_dim;
    // A separate loop: a null check inside the main one stops GCC from vectorising it.
    if (dbeta != nullptr) {
      for (std::int64_t c = 0; c < dim; ++c)
        dbeta[c] += dyr[c];
    }
    for (std::int64_t c = 0; c < dim; ++c) {
      const float xhat = (xr[c] - mu) * rs;
      const float d = dyr[c];
      dgamma[c] += d * xhat;
      dxr[c] = rs * (d * gamma[c] - mean_g - xhat * mean_gx);
    }
  }
}

}  // namespace

PLANNER_CPU_KERNEL
void layernorm_forward(const float* x, const float* gamma, const float* beta, std::int64_t rows,
                       std::int64_t dim, float eps, float* y, float* mean, float* rstd) {
  assert(dim > 0);
  const float inv_dim = 1.0f / static_cast<float>(dim);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float mu = detail::sum(xr, dim) * inv_dim;
    // Two passes (mean first, then squared deviations): no cancellation for rows with a large mean.
    const float var = detail::sum_of(dim,
                                     [xr, mu](std::int64_t i) {
                                       const float d = xr[i] - mu;
                                       return d * d;
                                     }) *
                      inv_dim;
    const float rs = 1.0f / std::sqrt(var + eps);
    for (std::int64_t c = 0; c < dim; ++c)
      yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    mean[r] = mu;
    rstd[r] = rs;
  }
}

PLANNER_CPU_KERNEL
void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                        const float* rstd, std::int64_t rows, std::int64_t dim, float* dx,
                        float* dgamma, float* dbeta) {
  norm_backward<true>(dy, x, gamma, mean, rstd, rows, dim, dx, dgamma, dbeta);
}

PLANNER_CPU_KERNEL
void rmsnorm_forward(const float* x, const float* gamma, std::int64_t rows, std::int64_t dim,
                     float eps, float* y, float* rstd) {
  assert(dim > 0);
  const float inv_dim = 1.0f / static_cast<float>(dim);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float rs = 1.0f / std::sqrt(detail::dot(xr, xr, dim) * inv_dim + eps);
    for (std::int64_t c = 0; c < dim; ++c)
      yr[c] = xr[c] * rs * gamma[c];
    rstd[r] = rs;
  }
}

PLANNER_CPU_KERNEL
void rmsnorm_backward(const float* dy, const float* x, const float* gamma, const float* rstd,
                      std::int64_t rows, std::int64_t dim, float* dx, float* dgamma) {
  norm_backward<false>(dy, x, gamma, nullptr, rstd, rows, dim, dx, dgamma, nullptr);
}

}  // namespace planner::kernels::cpu
