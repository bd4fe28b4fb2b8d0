#include "planner/kernels/cpu/convert.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace planner::kernels::cpu {
namespace {

bool is_nan16(std::uint16_t bits, int exp_bits) {
  const int mant_bits = 15 - exp_bits;
  const std::uint32_t exp_mask = ((1u << exp_bits) - 1u) << mant_bits;
  return (bits & exp_mask) == exp_mask && (bits & ((1u << mant_bits) - 1u)) != 0;
}

TEST(Convert, EveryBf16AndFp16ValueRoundTrips) {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    if (!is_nan16(bits, 8)) {
      EXPECT_EQ(float_to_bf16(bf16_to_float(bits)), bits) << b;
    } else {
      EXPECT_TRUE(std::isnan(bf16_to_float(bits))) << b;
    }
    if (!is_nan16(bits, 5)) {
      EXPECT_EQ(float_to_fp16(fp16_to_float(bits)), bits) << b;
    } else {
      EXPECT_TRUE(std::isnan(fp16_to_float(bits))) << b;
    }
  }
}

TEST(Convert, KnownValues) {
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_float(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
}

// Half-way cases round to the neighbour with an even significand; anything past half-way rounds
// away from zero.
TEST(Convert, RoundsToNearestEven) {
  // bf16 steps of 2^-7 at 1: 1 + 2^-8 ties to 1 (even), 1 + 3 * 2^-8 ties to 1 + 2^-6.
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))),
            1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))),
            1.0f + std::ldexp(1.0f, -7));
  // fp16 steps of 2^-10 at 1.
  EXPECT_EQ(fp16_to_float(float_to_fp16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(fp16_to_float(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11))),
            1.0f + std::ldexp(1.0f, -9));
  // The largest finite fp16 and the overflow boundary (65520 ties away from 65504's odd
  // significand, to inf).
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_fp16(1e6f), 0x7c00);
  // Subnormals: 2^-25 ties to 0, 3 x 2^-25 ties to 2 x 2^-24, tiny values flush to signed zero.
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_fp16(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(float_to_fp16(-std::ldexp(1.0f, -40)), 0x8000);
  // Just below the smallest normal rounds up to it.
  EXPECT_EQ(float_to_fp16(std::nextafter(std::ldexp(1.0f, -14), 0.0f)), 0x0400);
}

TEST(Convert, ArraysMatchTheScalarConversions) {
  std::vector<float> x;
  for (int i = -50; i < 50; ++i)
    x.push_back(static_cast<float>(i) * 0.731f + 1e-3f * static_cast<float>(i * i));
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<std::uint16_t> b(x.size()), h(x.size());
  std::vector<float> bx(x.size()), hx(x.size());
  float_to_bf16(x.data(), n, b.data());
  float_to_fp16(x.data(), n, h.data());
  bf16_to_float(b.data(), n, bx.data());
  fp16_to_float(h.data(), n, hx.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(b[i], float_to_bf16(x[i]));
    EXPECT_EQ(h[i], float_to_fp16(x[i]));
    EXPECT_EQ(bx[i], bf16_to_float(b[i]));
    EXPECT_EQ(hx[i], fp16_to_float(h[i]));
    EXPECT_LE(std::abs(bx[i] - x[i]), std::abs(x[i]) * std::ldexp(1.0f, -8));
    EXPECT_LE(std::abs(hx[i] - x[i]), std::abs(x[i]) * std::ldexp(1.0f, -11));
  }
}

}  // namespace
}  // namespace planner::kernels::cpu
