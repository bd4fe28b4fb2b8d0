#include "cpu/vector_math.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernel_test_support.hpp"

namespace planner::kernels::cpu {
namespace {

// Distance in units in the last place between two positive finite floats.
std::int64_t ulp_distance(float a, float b) {
  return std::abs(static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a)) -
                  static_cast<std::int64_t>(std::bit_cast<std::int32_t>(b)));
}

TEST(VectorMath, ExpIsWithinTwoUlpOverTheNormalRange) {
  std::int64_t worst = 0;
  float worst_x = 0;
  for (double xd = -87.33; xd <= 88.72; xd += 7.3e-4) {
    const auto x = static_cast<float>(xd);
    const auto want = static_cast<float>(std::exp(static_cast<double>(x)));
    const std::int64_t d = ulp_distance(detail::exp_approx(x), want);
    if (d > worst) {
      worst = d;
      worst_x = x;
    }
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
}

TEST(VectorMath, ExpSpecialValues) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(detail::exp_approx(0.0f), 1.0f);
  EXPECT_EQ(detail::exp_approx(-kInf), 0.0f);
  EXPECT_EQ(detail::exp_approx(-100.0f), 0.0f);
  EXPECT_EQ(detail::exp_approx(kInf), kInf);
  EXPECT_EQ(detail::exp_approx(89.0f), kInf);
  EXPECT_TRUE(std::isnan(detail::exp_approx(std::numeric_limits<float>::quiet_NaN())));
  // Near the ends of the range the result is still a normal float close to exp.
  for (float x : {-87.33f, 88.7f, 88.72f}) {
    EXPECT_NEAR(detail::exp_approx(x) / std::exp(static_cast<double>(x)), 1.0, 3e-7) << x;
  }
}

TEST(VectorMath, ReductionsMatchDoubleAndFollowTheLaneOrder) {
  for (std::int64_t n : {0, 1, 15, 16, 17, 100, 1000}) {
    const auto x = testing::random_floats(static_cast<std::size_t>(n), 7 + n);
    const auto y = testing::random_floats(static_cast<std::size_t>(n), 8 + n);
    double s = 0, d = 0;
    float m = -std::numeric_limits<float>::infinity();
    // The documented order: lane l sums x[l], x[l + 16], ...; lanes then combine pairwise.
    float lanes[detail::kLanes] = {};
    for (std::int64_t i = 0; i < n; ++i) {
      s += x[i];
      d += static_cast<double>(x[i]) * y[i];
      m = std::max(m, x[i]);
      lanes[i % detail::kLanes] += x[i];
    }
    for (std::int64_t w = detail::kLanes / 2; w > 0; w /= 2) {
      for (std::int64_t l = 0; l < w; ++l)
        lanes[l] += lanes[l + w];
    }
    EXPECT_EQ(detail::sum(x.data(), n), lanes[0]) << n;
    EXPECT_NEAR(detail::sum(x.data(), n), s, 1e-5 * (1 + n)) << n;
    EXPECT_NEAR(detail::dot(x.data(), y.data(), n), d, 1e-5 * (1 + n)) << n;
    EXPECT_EQ(detail::max(x.data(), n), m) << n;
  }
}

}  // namespace
}  // namespace planner::kernels::cpu
