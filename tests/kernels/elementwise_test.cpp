#include "planner/kernels/cpu/elementwise.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_support.hpp"

namespace planner::kernels::cpu {
namespace {

using testing::random_floats;

TEST(Elementwise, AddAxpyScale) {
  const std::int64_t n = 37;
  const auto a = random_floats(n, 1);
  const auto b = random_floats(n, 2);
  std::vector<float> out(n);
  add(a.data(), b.data(), n, out.data());
  auto y = a;
  axpy(n, -0.5f, b.data(), y.data());
  auto s = a;
  scale(s.data(), n, 3.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i], a[i] + b[i]);
    EXPECT_EQ(y[i], a[i] + -0.5f * b[i]);
    EXPECT_EQ(s[i], a[i] * 3.0f);
  }
  // In place: out may be one of the inputs.
  auto in_place = a;
  add(in_place.data(), b.data(), n, in_place.data());
  EXPECT_EQ(in_place, out);
}

TEST(Elementwise, BiasBackwardIsTheGradientOfBiasAdd) {
  const std::int64_t rows = 5, cols = 19;
  const auto x = random_floats(rows * cols, 3);
  const auto bias = random_floats(cols, 4);
  const auto dy = random_floats(rows * cols, 5);
  auto y = x;
  bias_add(y.data(), bias.data(), rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c)
      EXPECT_EQ(y[r * cols + c], x[r * cols + c] + bias[c]);
  }
  // L = sum dy * (x + bias): dL/dbias by finite differences in double, against bias_backward.
  const auto dyd = testing::to_double(dy);
  const auto fd = testing::numeric_gradient(
      [&](const std::vector<double>& bd) {
        std::vector<double> yd(rows * cols);
        for (std::int64_t r = 0; r < rows; ++r) {
          for (std::int64_t c = 0; c < cols; ++c)
            yd[r * cols + c] = x[r * cols + c] + bd[c];
        }
        return testing::weighted_sum(yd, dyd);
      },
      testing::to_double(bias));
  std::vector<float> dbias(cols, 1.0f);  // accumulates onto what is there
  bias_backward(dy.data(), rows, cols, dbias.data());
  for (auto& v : dbias)
    v -= 1.0f;
  testing::expect_close(dbias, fd, 1e-5, 1e-5, "dbias");
}

TEST(Elementwise, SumOfSquaresInDouble) {
  for (std::int64_t n : {0, 1, 16, 33, 1000}) {
    const auto x = random_floats(static_cast<std::size_t>(n), 6 + n, -3.0f, 3.0f);
    double want = 0;
    for (float v : x)
      want += static_cast<double>(v) * v;
    EXPECT_NEAR(sum_of_squares(x.data(), n), want, 1e-12 * (1 + want)) << n;
  }
}

}  // namespace
}  // namespace planner::kernels::cpu
