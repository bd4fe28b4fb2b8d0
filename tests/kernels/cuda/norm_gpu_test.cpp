#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_support.hpp"
#include "planner/kernels/cpu/norm.hpp"
#include "planner/kernels/cuda/norm.hpp"

namespace planner::kernels::cuda::testing {
namespace {

template <class T>
class CudaNorm : public GpuTest {};
TYPED_TEST_SUITE(CudaNorm, ElementTypes);

constexpr float kEps = 1e-5f;

// Rows with a large mean (so a one-pass variance would cancel), dims below, at and above the
// block's 256 threads.
struct NormCase {
  std::int64_t rows, dim;
};
constexpr NormCase kCases[] = {{7, 1}, {33, 64}, {65, 256}, {40, 1000}, {9, 4099}};

TYPED_TEST(CudaNorm, LayerNormMatchesTheCpu) {
  using T = TypeParam;
  for (const NormCase& c : kCases) {
    const std::int64_t n = c.rows * c.dim;
    std::vector<float> x = random_floats(n, 11);
    for (float& v : x)
      v += 3.0f;
    x = quantize<T>(x);
    const auto gamma = quantize<T>(random_floats(c.dim, 12, 0.5f, 1.5f));
    const auto beta = quantize<T>(random_floats(c.dim, 13));
    const auto dy = quantize<T>(random_floats(n, 14));
    const auto dgamma0 = random_floats(c.dim, 15);
    const auto dbeta0 = random_floats(c.dim, 16);
    const std::string what = "layernorm dim " + std::to_string(c.dim);

    std::vector<float> y(n), mean(c.rows), rstd(c.rows), dx(n), dgamma = dgamma0, dbeta = dbeta0;
    cpu::layernorm_forward(x.data(), gamma.data(), beta.data(), c.rows, c.dim, kEps, y.data(),
                           mean.data(), rstd.data());
    cpu::layernorm_backward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), c.rows,
                            c.dim, dx.data(), dgamma.data(), dbeta.data());

    auto d_x = upload<T>(x, this->stream());
    auto d_gamma = upload<T>(gamma, this->stream());
    auto d_beta = upload<T>(beta, this->stream());
    auto d_y = zeros<T>(n, this->stream());
    auto d_mean = zeros<float>(c.rows, this->stream());
    auto d_rstd = zeros<float>(c.rows, this->stream());
    require(layernorm_forward(d_x.data(), d_gamma.data(), d_beta.data(), c.rows, c.dim, kEps,
                              d_y.data(), d_mean.data(), d_rstd.data(), this->stream()));
    expect_matches_cpu<T>(download(d_y, this->stream()), y, KernelKind::kReduction, what + " y");
    expect_close_fp32(download(d_mean, this->stream()), mean, KernelKind::kReduction,
                      what + " mean");
    expect_close_fp32(download(d_rstd, this->stream()), rstd, KernelKind::kReduction,
                      what + " rstd");

    // Backward in place (dx = dy), from the CPU's statistics, accumulating into dgamma/dbeta.
    auto d_dy = upload<T>(dy, this->stream());
    auto d_dgamma = upload<float>(dgamma0, this->stream());
    auto d_dbeta = upload<float>(dbeta0, this->stream());
    auto cpu_mean = upload<float>(mean, this->stream());
    auto cpu_rstd = upload<float>(rstd, this->stream());
    require(layernorm_backward(d_dy.data(), d_x.data(), d_gamma.data(), cpu_mean.data(),
                               cpu_rstd.data(), c.rows, c.dim, d_dy.data(), d_dgamma.data(),
                               d_dbeta.data(), this->stream()));
    expect_matches_cpu<T>(download(d_dy, this->stream()), dx, KernelKind::kReduction, what + " dx");
    expect_close_fp32(download(d_dgamma, this->stream()), dgamma, KernelKind::kReduction,
                      what + " dgamma");
    expect_close_fp32(download(d_dbeta, this->stream()), dbeta, KernelKind::kReduction,
                      what + " dbeta");
  }
}

TYPED_TEST(CudaNorm, RmsNormMatchesTheCpu) {
  using T = TypeParam;
  for (const NormCase& c : kCases) {
    const std::int64_t n = c.rows * c.dim;
    const auto x = quantize<T>(random_floats(n, 21, -2.0f, 2.0f));
    const auto gamma = quantize<T>(random_floats(c.dim, 22, 0.5f, 1.5f));
    const auto dy = quantize<T>(random_floats(n, 23));
    const auto dgamma0 = random_floats(c.dim, 24);
    const std::string what = "rmsnorm dim " + std::to_string(c.dim);

    std::vector<float> y(n), rstd(c.rows), dx(n), dgamma = dgamma0;
    cpu::rmsnorm_forward(x.data(), gamma.data(), c.rows, c.dim, kEps, y.data(), rstd.data());
    cpu::rmsnorm_backward(dy.data(), x.data(), gamma.data(), rstd.data(), c.rows, c.dim, dx.data(),
                          dgamma.data());

    auto d_x = upload<T>(x, this->stream());
    auto d_gamma = upload<T>(gamma, this->stream());
    auto d_y = zeros<T>(n, this->stream());
    auto d_rstd = zeros<float>(c.rows, this->stream());
    require(rmsnorm_forward(d_x.data(), d_gamma.data(), c.rows, c.dim, kEps, d_y.data(),
                            d_rstd.data(), this->stream()));
    expect_matches_cpu<T>(download(d_y, this->stream()), y, KernelKind::kReduction, what + " y");
    expect_close_fp32(download(d_rstd, this->stream()), rstd, KernelKind::kReduction,
                      what + " rstd");

    auto d_dy = upload<T>(dy, this->stream());
    auto d_dx = zeros<T>(n, this->stream());
    auto d_dgamma = upload<float>(dgamma0, this->stream());
    auto cpu_rstd = upload<float>(rstd, this->stream());
    require(rmsnorm_backward(d_dy.data(), d_x.data(), d_gamma.data(), cpu_rstd.data(), c.rows,
                             c.dim, d_dx.data(), d_dgamma.data(), this->stream()));
    expect_matches_cpu<T>(download(d_dx, this->stream()), dx, KernelKind::kReduction, what + " dx");
    expect_close_fp32(download(d_dgamma, this->stream()), dgamma, KernelKind::kReduction,
                      what + " dgamma");
  }
}

}  // namespace
}  // namespace planner::kernels::cuda::testing
