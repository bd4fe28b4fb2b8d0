#include "planner/core/units.hpp"

#include <gtest/gtest.h>

namespace planner {
namespace {

using namespace planner::literals;

TEST(Units, TimeLiteralsArePicoseconds) {
  EXPECT_EQ((1_ns).raw(), 1000);
  EXPECT_EQ((1_us).raw(), 1'000'000);
  EXPECT_EQ((2_ms).raw(), 2'000'000'000);
  EXPECT_EQ((1_s).raw(), 1'000'000'000'000);
  EXPECT_EQ((1.5_ms).raw(), 1'500'000'000);
  EXPECT_DOUBLE_EQ(to_seconds(250_ms), 0.25);
}

TEST(Units, ArithmeticStaysInKind) {
  Time t = 3_us + 2_us - 1_us;
  EXPECT_EQ(t, 4_us);
  EXPECT_EQ(t * 3, 12_us);
  EXPECT_EQ(t / 4, 1_us);
  EXPECT_DOUBLE_EQ(12_us / 4_us, 3.0);
  EXPECT_EQ((10_us).scaled(0.25), microseconds(2.5));
  EXPECT_LT(1_us, 2_us);
}

TEST(Units, BytesOverBandwidthIsTime) {
  // 1 GB at 100 GB/s is 10 ms, exactly.
  EXPECT_EQ(bytes(1'000'000'000) / GBps(100), 10_ms);
  // 200 Gb/s is 25 GB/s.
  EXPECT_DOUBLE_EQ(to_GBps(Gbps(200)), 25.0);
  EXPECT_EQ(GBps(25) * 4_ms, bytes(100'000'000));
  EXPECT_EQ(1_GiB, bytes(1073741824));
  EXPECT_DOUBLE_EQ(to_GiB(512_MiB), 0.5);
}

TEST(Units, FlopsOverRateIsTime) {
  // 312 TFLOP at 312 TFLOP/s is one second.
  EXPECT_EQ(flops(312e12) / 312_TFLOPs, 1_s);
  EXPECT_DOUBLE_EQ(to_tflops_per_s(rate_of(flops(1e12), 1_s)), 1.0);
  EXPECT_DOUBLE_EQ(to_GBps(rate_of(bytes(2'000'000'000), 1_s)), 2.0);
}

}  // namespace
}  // namespace planner
