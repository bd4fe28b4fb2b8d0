#include "planner/kernels/cpu/loss_scale.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace planner::kernels::cpu {
namespace {

TEST(LossScale, FindsInfAndNaNAnywhere) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::int64_t n = 37;  // not a multiple of the vector width: the tail is checked too
  for (float bad : {inf, -inf, nan}) {
    for (std::int64_t at : {0, 15, 36}) {
      std::vector<float> x(n, 1.5f);
      EXPECT_TRUE(all_finite(x.data(), n));
      x[at] = bad;
      EXPECT_FALSE(all_finite(x.data(), n)) << at;
      EXPECT_FALSE(unscale_and_check(x.data(), n, 0.5f)) << at;
      EXPECT_EQ(x[(at + 1) % n], 0.75f);
    }
  }
  std::vector<float> big(n, std::numeric_limits<float>::max());
  EXPECT_TRUE(unscale_and_check(big.data(), n, 0.5f));  // finite before scaling
  EXPECT_TRUE(all_finite(nullptr, 0));
}

TEST(LossScale, DynamicScaleBacksOffAndGrows) {
  DynamicLossScale s(1024.0f, 2.0f, 0.5f, 3);
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_FALSE(s.update(false));  // overflow: skip the step, halve
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_TRUE(s.update(true));  // third finite step in a row: double
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.finite_steps(), 0);
  EXPECT_TRUE(s.update(true));
  EXPECT_FALSE(s.update(false));  // an overflow resets the run of finite steps
  EXPECT_EQ(s.finite_steps(), 0);
  EXPECT_EQ(s.scale(), 512.0f);
  const DynamicLossScale defaults;
  EXPECT_EQ(defaults.scale(), 65536.0f);
}

}  // namespace
}  // namespace planner::kernels::cpu
