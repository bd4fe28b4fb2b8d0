// Helpers for the CPU kernel tests: reproducible random inputs, central finite differences in
// double, and a closeness check that names the worst element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace planner::kernels::cpu::testing {

// Uniform values in [lo, hi) from mt19937_64 (whose output the C++ standard fixes), mapped by hand
// so the inputs are the same with every standard library.
inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937_64 gen(seed);
  std::vector<float> out(n);
  for (float& v : out) {
    const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53;
    v = static_cast<float>(lo + (hi - lo) * u);
  }
  return out;
}

inline std::vector<std::int32_t> random_ids(std::size_t n, std::int32_t bound, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<std::int32_t> out(n);
  for (auto& v : out)
    v = static_cast<std::int32_t>(gen() % static_cast<std::uint64_t>(bound));
  return out;
}

inline std::vector<double> to_double(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// Gradient of f at x by central differences: (f(x + h e_i) - f(x - h e_i)) / 2h for every i.
// f is evaluated in double, so with h = 1e-6 the error is about 1e-9 relative for smooth f.
inline std::vector<double> numeric_gradient(
    const std::function<double(const std::vector<double>&)>& f, std::vector<double> x,
    double h = 1e-6) {
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

// Sum of w[i] * y[i]: the scalar loss whose gradient with respect to y is w.
inline double weighted_sum(const std::vector<double>& y, const std::vector<double>& w) {
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    s += y[i] * w[i];
  return s;
}

// Checks |got[i] - want[i]| <= atol + rtol * |want[i]| for every i and reports the worst element.
template <class Got, class Want>
void expect_close(const std::vector<Got>& got, const std::vector<Want>& want, double rtol,
                  double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst_excess = -1;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    const double w = static_cast<double>(want[i]);
    const double excess = std::abs(g - w) - (atol + rtol * std::abs(w));
    if (!(excess <= 0) && (std::isnan(excess) || excess > worst_excess)) {
      worst_excess = std::isnan(excess) ? 1e300 : excess;
      worst = i;
    }
  }
  EXPECT_LT(worst_excess, 0) << what << ": element " << worst << " is " << got[worst]
                             << ", expected " << want[worst] << " (rtol " << rtol << ", atol "
                             << atol << ")";
}

// Positions [begin, end) of a [batch, len, row] tensor, as a context-parallel rank holds them.
inline std::vector<float> slice_positions(const std::vector<float>& x, std::int64_t batch,
                                          std::int64_t len, std::int64_t row, std::int64_t begin,
                                          std::int64_t end) {
  std::vector<float> out;
  for (std::int64_t b = 0; b < batch; ++b)
    out.insert(out.end(), x.begin() + (b * len + begin) * row, x.begin() + (b * len + end) * row);
  return out;
}

// x[b, begin + i, :] += part[b, i, :]: the inverse of slice_positions, summing.
inline void add_positions(const std::vector<float>& part, std::int64_t batch, std::int64_t len,
                          std::int64_t row, std::int64_t begin, std::int64_t end,
                          std::vector<float>& x) {
  const std::int64_t n = end - begin;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i < n * row; ++i)
      x[(b * len + begin) * row + i] += part[b * n * row + i];
  }
}

inline double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x)
    m = std::max(m, std::abs(v));
  return m;
}

}  // namespace planner::kernels::cpu::testing
