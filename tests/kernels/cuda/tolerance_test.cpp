// The tolerance table of the GPU tests (tolerance.hpp), checked on the host: each precision's
// tolerance admits a correctly rounded output and rejects a clearly wrong one.
#include "tolerance.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gpu_test_support.hpp"

namespace planner::kernels::cuda::testing {
namespace {

template <class T>
void expect_admits_one_rounding_and_rejects_four_ulps(KernelKind kind) {
  const Tolerance t = tolerance(kind, kDTypeOf<T>);
  const double u = unit_roundoff(kDTypeOf<T>);
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (int i = 0; i < 10000; ++i) {
    const float x = dist(gen);
    const float rounded = to_float(from_float<T>(x));
    ASSERT_LE(std::abs(rounded - x), t.atol + t.rtol * std::abs(x))
        << to_string(kDTypeOf<T>) << " " << x;
  }
  // An error of 4 units in the last place of T, on a value of magnitude 1, is out.
  EXPECT_GT(4 * 2 * u, t.atol + t.rtol * 1.0) << to_string(kDTypeOf<T>);
}

TEST(Tolerance, AdmitsOneRoundingAndRejectsFourUlps) {
  for (KernelKind kind :
       {KernelKind::kElementwise, KernelKind::kReduction, KernelKind::kAttention}) {
    expect_admits_one_rounding_and_rejects_four_ulps<bf16>(kind);
    expect_admits_one_rounding_and_rejects_four_ulps<fp16>(kind);
  }
}

TEST(Tolerance, OrderedByPrecisionAndKind) {
  for (KernelKind kind :
       {KernelKind::kElementwise, KernelKind::kReduction, KernelKind::kAttention}) {
    EXPECT_LT(tolerance(kind, DType::kF32).rtol, tolerance(kind, DType::kF16).rtol);
    EXPECT_LT(tolerance(kind, DType::kF16).rtol, tolerance(kind, DType::kBF16).rtol);
  }
  EXPECT_EQ(tolerance(KernelKind::kExact, DType::kBF16).rtol, 0.0);
  EXPECT_LE(tolerance(KernelKind::kElementwise, DType::kF32).rtol,
            tolerance(KernelKind::kAttention, DType::kF32).rtol);
  EXPECT_EQ(unit_roundoff(DType::kBF16), 1.0 / 256);
  EXPECT_EQ(unit_roundoff(DType::kF16), 1.0 / 2048);
}

TEST(Tolerance, HostRoundingIsToNearestEven) {
  // 1 + 2^-8 is halfway between the bf16 neighbours 1 and 1 + 2^-7: it rounds to the even one, 1.
  EXPECT_EQ(to_float(from_float<bf16>(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(to_float(from_float<bf16>(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_EQ(to_float(from_float<fp16>(1.0f + 1.0f / 2048)), 1.0f);
  EXPECT_EQ(quantize<bf16>({0.1f})[0], 0.10009765625f);
}

}  // namespace
}  // namespace planner::kernels::cuda::testing
