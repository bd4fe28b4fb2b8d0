#include "planner/kernels/cpu/norm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_support.hpp"

namespace planner::kernels::cpu {
namespace {

using testing::random_floats;
using testing::to_double;

// Tolerances: fp32 forward against the double reference within rtol 1e-5 (+ 1e-5 absolute); fp32
// gradients against central differences of the double reference within rtol 1e-4 (+ 1e-4 absolute).
constexpr double kForwardRtol = 1e-5, kForwardAtol = 1e-5;
constexpr double kBackwardRtol = 1e-4, kBackwardAtol = 1e-4;
constexpr float kEps = 1e-5f;

std::vector<double> layernorm_ref(const std::vector<double>& x, const std::vector<double>& gamma,
                                  const std::vector<double>& beta, std::int64_t rows,
                                  std::int64_t dim) {
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (std::int64_t c = 0; c < dim; ++c)
      mean += x[r * dim + c];
    mean /= dim;
    for (std::int64_t c = 0; c < dim; ++c)
      var += (x[r * dim + c] - mean) * (x[r * dim + c] - mean);
    var /= dim;
    const double rstd = 1.0 / std::sqrt(var + kEps);
    for (std::int64_t c = 0; c < dim; ++c) {
      y[r * dim + c] = (x[r * dim + c] - mean) * rstd * gamma[c] + beta[c];
    }
  }
  return y;
}

std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& gamma,
                                std::int64_t rows, std::int64_t dim) {
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (std::int64_t c = 0; c < dim; ++c)
      ms += x[r * dim + c] * x[r * dim + c];
    const double rstd = 1.0 / std::sqrt(ms / dim + kEps);
    for (std::int64_t c = 0; c < dim; ++c)
      y[r * dim + c] = x[r * dim + c] * rstd * gamma[c];
  }
  return y;
}

class NormTest : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(NormTest, LayerNormForwardAndBackward) {
  const std::int64_t rows = 3, dim = GetParam();
  // An offset mean, as real activations have, exercises the two-pass variance.
  const auto x = random_floats(rows * dim, 1, 2.0f, 5.0f);
  const auto gamma = random_floats(dim, 2, 0.5f, 1.5f);
  const auto beta = random_floats(dim, 3);
  const auto dy = random_floats(rows * dim, 4);
  std::vector<float> y(rows * dim), mean(rows), rstd(rows);
  layernorm_forward(x.data(), gamma.data(), beta.data(), rows, dim, kEps, y.data(), mean.data(),
                    rstd.data());
  const auto xd = to_double(x), gd = to_double(gamma), bd = to_double(beta), dyd = to_double(dy);
  testing::expect_close(y, layernorm_ref(xd, gd, bd, rows, dim), kForwardRtol, kForwardAtol, "y");

  std::vector<float> dx(rows * dim), dgamma(dim, 0.0f), dbeta(dim, 0.0f);
  layernorm_backward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), rows, dim,
                     dx.data(), dgamma.data(), dbeta.data());
  const auto fd_x = testing::numeric_gradient(
      [&](const std::vector<double>& v) {
        return testing::weighted_sum(layernorm_ref(v, gd, bd, rows, dim), dyd);
      },
      xd);
  const auto fd_gamma = testing::numeric_gradient(
      [&](const std::vector<double>& v) {
        return testing::weighted_sum(layernorm_ref(xd, v, bd, rows, dim), dyd);
      },
      gd);
  const auto fd_beta = testing::numeric_gradient(
      [&](const std::vector<double>& v) {
        return testing::weighted_sum(layernorm_ref(xd, gd, v, rows, dim), dyd);
      },
      bd);
  testing::expect_close(dx, fd_x, kBackwardRtol, kBackwardAtol, "dx");
  testing::expect_close(dgamma, fd_gamma, kBackwardRtol, kBackwardAtol, "dgamma");
  testing::expect_close(dbeta, fd_beta, kBackwardRtol, kBackwardAtol, "dbeta");

  // Parameter gradients accumulate; dbeta may be omitted; dx may overwrite dy.
  auto dgamma2 = dgamma;
  auto dx_in_place = dy;
  layernorm_backward(dx_in_place.data(), x.data(), gamma.data(), mean.data(), rstd.data(), rows,
                     dim, dx_in_place.data(), dgamma2.data(), nullptr);
  EXPECT_EQ(dx_in_place, dx);
  for (std::int64_t c = 0; c < dim; ++c)
    EXPECT_NEAR(dgamma2[c], 2 * dgamma[c], 1e-5);
}

TEST_P(NormTest, RmsNormForwardAndBackward) {
  const std::int64_t rows = 3, dim = GetParam();
  const auto x = random_floats(rows * dim, 5, -2.0f, 2.0f);
  const auto gamma = random_floats(dim, 6, 0.5f, 1.5f);
  const auto dy = random_floats(rows * dim, 7);
  std::vector<float> y(rows * dim), rstd(rows);
  rmsnorm_forward(x.data(), gamma.data(), rows, dim, kEps, y.data(), rstd.data());
  const auto xd = to_double(x), gd = to_double(gamma), dyd = to_double(dy);
  testing::expect_close(y, rmsnorm_ref(xd, gd, rows, dim), kForwardRtol, kForwardAtol, "y");

  std::vector<float> dx(rows * dim), dgamma(dim, 0.0f);
  rmsnorm_backward(dy.data(), x.data(), gamma.data(), rstd.data(), rows, dim, dx.data(),
                   dgamma.data());
  const auto fd_x = testing::numeric_gradient(
      [&](const std::vector<double>& v) {
        return testing::weighted_sum(rmsnorm_ref(v, gd, rows, dim), dyd);
      },
      xd);
  const auto fd_gamma = testing::numeric_gradient(
      [&](const std::vector<double>& v) {
        return testing::weighted_sum(rmsnorm_ref(xd, v, rows, dim), dyd);
      },
      gd);
  testing::expect_close(dx, fd_x, kBackwardRtol, kBackwardAtol, "dx");
  testing::expect_close(dgamma, fd_gamma, kBackwardRtol, kBackwardAtol, "dgamma");
}

// Widths below, at and above the 16-lane reduction width, and one not a multiple of it.
INSTANTIATE_TEST_SUITE_P(Widths, NormTest, ::testing::Values(1, 7, 16, 37, 64));

}  // namespace
}  // namespace planner::kernels::cpu
