// Elementwise kernels and reductions on fp32 arrays: residual adds, gradient accumulation, scaling,
// bias add, and the sum of squares behind the global gradient norm. Conventions as in gemm.hpp.
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

// out[i] = a[i] + b[i] for i < n. out may be a or b. The residual connection's forward; its
// backward hands the same gradient to both branches (axpy it into each).
void add(const float* a, const float* b, std::int64_t n, float* out);

// y[i] += alpha * x[i] for i < n (gradient accumulation; alpha == 1 is a plain sum).
void axpy(std::int64_t n, float alpha, const float* x, float* y);

// x[i] *= factor for i < n.
void scale(float* x, std::int64_t n, float factor);

// x[r, c] += bias[c] for x of shape rows x cols (contiguous).
void bias_add(float* x, const float* bias, std::int64_t rows, std::int64_t cols);

// dbias[c] += sum over r of dy[r, c] (accumulates; rows are summed in ascending order).
void bias_backward(const float* dy, std::int64_t rows, std::int64_t cols, float* dbias);

// Sum of x[i]^2 for i < n, accumulated in double. The global gradient norm is the square root of
// these sums added over all gradient shards (all-reduced across ranks).
double sum_of_squares(const float* x, std::int64_t n);

}  // namespace planner::kernels::cpu
