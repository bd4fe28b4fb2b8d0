#include "planner/kernels/cpu/rope.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_support.hpp"

namespace planner::kernels::cpu {
namespace {

using testing::random_floats;
using testing::to_double;

constexpr std::int64_t kBatch = 2, kSeq = 5, kHeads = 3, kDim = 8;
constexpr double kTheta = 10000.0;

std::vector<double> rope_ref(const std::vector<double>& x, const std::vector<std::int32_t>& pos) {
  std::vector<double> y(x.size());
  const std::int64_t half = kDim / 2;
  for (std::int64_t b = 0; b < kBatch; ++b) {
    for (std::int64_t s = 0; s < kSeq; ++s) {
      for (std::int64_t h = 0; h < kHeads; ++h) {
        const std::int64_t base = ((b * kSeq + s) * kHeads + h) * kDim;
        for (std::int64_t p = 0; p < half; ++p) {
          const double angle = pos[s] * std::pow(kTheta, -2.0 * p / kDim);
          const double a = x[base + p], c = x[base + p + half];
          y[base + p] = a * std::cos(angle) - c * std::sin(angle);
          y[base + p + half] = c * std::cos(angle) + a * std::sin(angle);
        }
      }
    }
  }
  return y;
}

std::vector<float> table_for(const std::vector<std::int32_t>& pos) {
  std::vector<float> table(pos.size() * kDim);
  rope_table(pos.data(), static_cast<std::int64_t>(pos.size()), kDim, kTheta, table.data());
  return table;
}

TEST(Rope, ForwardMatchesReferenceAndBackwardMatchesFiniteDifferences) {
  const std::vector<std::int32_t> pos = {0, 1, 7, 100, 4000};  // e.g. a context-parallel slice
  const auto table = table_for(pos);
  const auto x0 = random_floats(kBatch * kSeq * kHeads * kDim, 1);
  auto x = x0;
  rope_forward(table.data(), kBatch, kSeq, kHeads, kDim, x.data());
  testing::expect_close(x, rope_ref(to_double(x0), pos), 1e-5, 1e-6, "rope");

  const auto dy = random_floats(x0.size(), 2);
  auto dx = dy;
  rope_backward(table.data(), kBatch, kSeq, kHeads, kDim, dx.data());
  const auto dyd = to_double(dy);
  const auto fd = testing::numeric_gradient(
      [&](const std::vector<double>& v) { return testing::weighted_sum(rope_ref(v, pos), dyd); },
      to_double(x0));
  testing::expect_close(dx, fd, 1e-4, 1e-6, "rope dx");

  // Backward undoes forward.
  rope_backward(table.data(), kBatch, kSeq, kHeads, kDim, x.data());
  testing::expect_close(x, to_double(x0), 1e-5, 1e-6, "round trip");
}

TEST(Rope, ScoresDependOnlyOnRelativePosition) {
  const auto q = random_floats(kDim, 3), k = random_floats(kDim, 4);
  auto score = [&](std::int32_t m, std::int32_t n) {
    auto qr = q, kr = k;
    const auto tq = table_for({m}), tk = table_for({n});
    rope_forward(tq.data(), 1, 1, 1, kDim, qr.data());
    rope_forward(tk.data(), 1, 1, 1, kDim, kr.data());
    double s = 0;
    for (std::int64_t i = 0; i < kDim; ++i)
      s += static_cast<double>(qr[i]) * kr[i];
    return s;
  };
  EXPECT_NEAR(score(9, 4), score(109, 104), 1e-5);
  EXPECT_NEAR(score(3, 3), score(50, 50), 1e-5);
  EXPECT_GT(std::abs(score(9, 4) - score(9, 8)), 1e-4);  // it does depend on the offset
}

}  // namespace
}  // namespace planner::kernels::cpu
