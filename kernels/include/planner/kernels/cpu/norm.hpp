// LayerNorm and RMSNorm over the last dimension, forward and backward. Conventions as in gemm.hpp.
//
// x, y, dy, dx are rows x dim, contiguous (rows = tokens). Forward saves per-row statistics for the
// backward (mean and rstd = 1 / sqrt(var + eps) for LayerNorm; rstd = 1 / sqrt(mean(x^2) + eps) for
// RMSNorm), so the backward never recomputes them. Backward writes dx and accumulates (+=) into the
// parameter gradients dgamma and dbeta, summing rows in ascending order, so gradients of several
// micro-batches add up without a separate accumulation pass.
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

// y = (x - mean) * rstd * gamma + beta per row, with mean and the (biased) variance over dim.
// Writes mean[rows] and rstd[rows]. y may be x.
void layernorm_forward(const float* x, const float* gamma, const float* beta, std::int64_t rows,
                       std::int64_t dim, float eps, float* y, float* mean, float* rstd);

// With xhat = (x - mean) * rstd and g = dy * gamma:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dgamma += sum_rows dy * xhat,
//   dbeta += sum_rows dy.
// dbeta may be null (a LayerNorm without bias). dx may be dy.
void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                        const float* rstd, std::int64_t rows, std::int64_t dim, float* dx,
                        float* dgamma, float* dbeta);

// RMSNorm (Zhang & Sennrich 2019, as in Llama): y = x * rstd * gamma per row. Writes rstd[rows].
// y may be x.
void rmsnorm_forward(const float* x, const float* gamma, std::int64_t rows, std::int64_t dim,
                     float eps, float* y, float* rstd);

// With xhat = x * rstd and g = dy * gamma:
//   dx = rstd * (g - xhat * mean(g * xhat)),  dgamma += sum_rows dy * xhat.  dx may be dy.
void rmsnorm_backward(const float* dy, const float* x, const float* gamma, const float* rstd,
                      std::int64_t rows, std::int64_t dim, float* dx, float* dgamma);

}  // namespace planner::kernels::cpu
