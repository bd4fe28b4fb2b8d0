#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "gpu_test_support.hpp"
#include "planner/kernels/cpu/activation.hpp"
#include "planner/kernels/cpu/elementwise.hpp"
#include "planner/kernels/cpu/loss_scale.hpp"
#include "planner/kernels/cuda/activation.hpp"
#include "planner/kernels/cuda/elementwise.hpp"
#include "planner/kernels/cuda/loss_scale.hpp"

namespace planner::kernels::cuda::testing {
namespace {

template <class T>
class CudaElementwise : public GpuTest {};
TYPED_TEST_SUITE(CudaElementwise, ElementTypes);

// 10^5 + 3 elements: many blocks and a ragged end.
constexpr std::int64_t kN = 100003;

TYPED_TEST(CudaElementwise, AddAxpyScaleMatchTheCpuBitwise) {
  using T = TypeParam;
  const auto a = quantize<T>(random_floats(kN, 1));
  const auto b = quantize<T>(random_floats(kN, 2));
  auto da = upload<T>(a, this->stream());
  auto db = upload<T>(b, this->stream());
  auto out = zeros<T>(kN, this->stream());

  require(add(da.data(), db.data(), kN, out.data(), this->stream()));
  std::vector<float> want(kN);
  cpu::add(a.data(), b.data(), kN, want.data());
  expect_matches_cpu<T>(download(out, this->stream()), want, KernelKind::kExact, "add");

  require(axpy(kN, -0.75f, da.data(), db.data(), this->stream()));
  want = b;
  cpu::axpy(kN, -0.75f, a.data(), want.data());
  expect_matches_cpu<T>(download(db, this->stream()), want, KernelKind::kExact, "axpy");

  require(scale(da.data(), kN, 0.3f, this->stream()));
  want = a;
  cpu::scale(want.data(), kN, 0.3f);
  expect_matches_cpu<T>(download(da, this->stream()), want, KernelKind::kExact, "scale");
}

TYPED_TEST(CudaElementwise, BiasAddAndBackward) {
  using T = TypeParam;
  const std::int64_t rows = 1000, cols = 77;
  const auto x = quantize<T>(random_floats(rows * cols, 3));
  const auto bias = quantize<T>(random_floats(cols, 4));
  auto dx = upload<T>(x, this->stream());
  auto dbias_in = upload<T>(bias, this->stream());
  require(bias_add(dx.data(), dbias_in.data(), rows, cols, this->stream()));
  std::vector<float> want = x;
  cpu::bias_add(want.data(), bias.data(), rows, cols);
  expect_matches_cpu<T>(download(dx, this->stream()), want, KernelKind::kExact, "bias_add");

  // dbias accumulates into existing values.
  const std::vector<float> start = random_floats(cols, 5);
  auto dbias = upload<float>(start, this->stream());
  auto dy = upload<T>(x, this->stream());
  require(bias_backward(dy.data(), rows, cols, dbias.data(), this->stream()));
  std::vector<float> want_dbias = start;
  cpu::bias_backward(x.data(), rows, cols, want_dbias.data());
  expect_close_fp32(download(dbias, this->stream()), want_dbias, KernelKind::kReduction,
                    "bias_backward");
}

TYPED_TEST(CudaElementwise, SumOfSquares) {
  using T = TypeParam;
  for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1000}, kN * 7}) {
    const auto x = quantize<T>(random_floats(static_cast<std::size_t>(n), 6, -3.0f, 3.0f));
    auto dx = upload<T>(x, this->stream());
    auto workspace = require(DeviceBuffer<double>::allocate(kSumOfSquaresWorkspace));
    auto result = require(DeviceBuffer<double>::allocate(1));
    require(sum_of_squares(dx.data(), n, workspace.data(), result.data(), this->stream()));
    const double got = require(to_host(result, this->stream()))[0];
    // Both sum exact double squares of floats; only the order differs (n * 2^-53 relative).
    EXPECT_NEAR(got, cpu::sum_of_squares(x.data(), n), 1e-12 * (1.0 + got)) << n;
    // accumulate = true adds onto the result (the executor sums the norm over many shards).
    require(sum_of_squares(dx.data(), n, workspace.data(), result.data(), this->stream(), true));
    const double twice = require(to_host(result, this->stream()))[0];
    EXPECT_NEAR(twice, 2 * cpu::sum_of_squares(x.data(), n), 2e-12 * (1.0 + twice)) << n;
  }
}

TYPED_TEST(CudaElementwise, NarrowsTokenIds) {
  if (!std::is_same_v<TypeParam, float>) GTEST_SKIP() << "integer kernel: run once";
  const std::vector<std::int64_t> ids = {0, 1, 63, 50256, 128255, 2147483647};
  auto in = require(to_device(ids, this->stream()));
  auto out = require(DeviceBuffer<std::int32_t>::allocate(static_cast<std::int64_t>(ids.size())));
  require(narrow_int64(in.data(), in.size(), out.data(), this->stream()));
  const std::vector<std::int32_t> got = require(to_host(out, this->stream()));
  for (std::size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(got[i], static_cast<std::int32_t>(ids[i]));
}

TYPED_TEST(CudaElementwise, ActivationsMatchTheCpu) {
  using T = TypeParam;
  const std::int64_t rows = 300, cols = 250;
  const auto x = quantize<T>(random_floats(rows * 2 * cols, 7, -4.0f, 4.0f));
  const auto dy = quantize<T>(random_floats(rows * 2 * cols, 8));
  auto dx_in = upload<T>(x, this->stream());
  auto ddy = upload<T>(dy, this->stream());
  const std::int64_t n = rows * 2 * cols;

  auto y = zeros<T>(n, this->stream());
  require(gelu_forward(dx_in.data(), n, y.data(), this->stream()));
  std::vector<float> want(n);
  cpu::gelu_forward(x.data(), n, want.data());
  expect_matches_cpu<T>(download(y, this->stream()), want, KernelKind::kElementwise,
                        "gelu_forward");
  require(gelu_backward(dx_in.data(), ddy.data(), n, y.data(), this->stream()));
  cpu::gelu_backward(x.data(), dy.data(), n, want.data());
  expect_matches_cpu<T>(download(y, this->stream()), want, KernelKind::kElementwise,
                        "gelu_backward");

  // SwiGLU on the two halves of one fused projection (ld_in = 2 cols).
  const T* gate = dx_in.data();
  const T* up = dx_in.data() + cols;
  auto out = zeros<T>(rows * cols, this->stream());
  require(swiglu_forward(gate, up, rows, cols, 2 * cols, out.data(), this->stream()));
  std::vector<float> want_out(rows * cols);
  cpu::swiglu_forward(x.data(), x.data() + cols, rows, cols, 2 * cols, want_out.data());
  expect_matches_cpu<T>(download(out, this->stream()), want_out, KernelKind::kElementwise,
                        "swiglu_forward");
  // Backward in place over the fused input.
  auto dout = upload<T>(std::vector<float>(dy.begin(), dy.begin() + rows * cols), this->stream());
  require(swiglu_backward(gate, up, dout.data(), rows, cols, 2 * cols, dx_in.data(),
                          dx_in.data() + cols, this->stream()));
  std::vector<float> want_grad = x;
  cpu::swiglu_backward(x.data(), x.data() + cols, dy.data(), rows, cols, 2 * cols, want_grad.data(),
                       want_grad.data() + cols);
  expect_matches_cpu<T>(download(dx_in, this->stream()), want_grad, KernelKind::kElementwise,
                        "swiglu_backward");
}

TYPED_TEST(CudaElementwise, UnscaleAndCheckFindsNonFiniteValues) {
  using T = TypeParam;
  auto x = quantize<T>(random_floats(kN, 9, -100.0f, 100.0f));
  auto flag = zeros<std::int32_t>(1, this->stream());
  auto dx = upload<T>(x, this->stream());
  require(unscale_and_check(dx.data(), kN, 1.0f / 64, flag.data(), this->stream()));
  EXPECT_EQ(require(to_host(flag, this->stream()))[0], 0);
  std::vector<float> want = x;
  EXPECT_TRUE(cpu::unscale_and_check(want.data(), kN, 1.0f / 64));
  expect_matches_cpu<T>(download(dx, this->stream()), want, KernelKind::kExact, "unscale");

  x[kN - 1] = INFINITY;
  x[5] = NAN;
  auto bad = upload<T>(x, this->stream());
  require(check_finite(bad.data(), kN, flag.data(), this->stream()));
  EXPECT_EQ(require(to_host(flag, this->stream()))[0], 1);
}

using CudaConvert = GpuTest;

TEST_F(CudaConvert, RoundsLikeTheHost) {
  const auto x = random_floats(kN, 10, -1000.0f, 1000.0f);
  auto dx = upload<float>(x, stream());
  auto b = zeros<bf16>(kN, stream());
  auto h = zeros<fp16>(kN, stream());
  require(convert(dx.data(), kN, b.data(), stream()));
  require(convert(dx.data(), kN, h.data(), stream()));
  EXPECT_EQ(download(b, stream()), quantize<bf16>(x));
  EXPECT_EQ(download(h, stream()), quantize<fp16>(x));
  auto back = zeros<float>(kN, stream());
  require(convert(b.data(), kN, back.data(), stream()));
  EXPECT_EQ(download(back, stream()), quantize<bf16>(x));
}

}  // namespace
}  // namespace planner::kernels::cuda::testing
