#include "planner/kernels/cpu/elementwise.hpp"

#include <cassert>

#include "cpu/vector_math.hpp"

namespace planner::kernels::cpu {

PLANNER_CPU_KERNEL
void add(const float* a, const float* b, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i)
    out[i] = a[i] + b[i];
}

PLANNER_CPU_KERNEL
void axpy(std::int64_t n, float alpha, const float* x, float* y) {
  for (std::int64_t i = 0; i < n; ++i)
    y[i] += alpha * x[i];
}

PLANNER_CPU_KERNEL
void scale(float* x, std::int64_t n, float factor) {
  for (std::int64_t i = 0; i < n; ++i)
    x[i] *= factor;
}

PLANNER_CPU_KERNEL
void bias_add(float* x, const float* bias, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    for (std::int64_t c = 0; c < cols; ++c)
      row[c] += bias[c];
  }
}

PLANNER_CPU_KERNEL
void bias_backward(const float* dy, std::int64_t rows, std::int64_t cols, float* dbias) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = dy + r * cols;
    for (std::int64_t c = 0; c < cols; ++c)
      dbias[c] += row[c];
  }
}

PLANNER_CPU_KERNEL
double sum_of_squares(const float* x, std::int64_t n) {
  assert(n >= 0);
  return detail::sum_of<double>(n, [x](std::int64_t i) {
    const double v = x[i];
    return v * v;
  });
}

}  // namespace planner::kernels::cpu
