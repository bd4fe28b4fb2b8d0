#include "planner/kernels/cpu/moe.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "kernel_test_support.hpp"

namespace planner::kernels::cpu {
namespace {

using testing::random_floats;

constexpr std::int64_t kRows = 12;

// The routing weights of one row in double, for the experts `chosen` (fixed): scores normalised
// over them.
std::vector<double> weights_of(const std::vector<double>& logits, const std::int32_t* chosen, int k,
                               bool sigmoid) {
  std::vector<double> s(logits.size());
  if (sigmoid) {
    for (std::size_t e = 0; e < s.size(); ++e)
      s[e] = 1.0 / (1.0 + std::exp(-logits[e]));
  } else {
    double sum = 0;
    for (std::size_t e = 0; e < s.size(); ++e)
      sum += s[e] = std::exp(logits[e]);
    for (double& v : s)
      v /= sum;
  }
  double total = 0;
  for (int j = 0; j < k; ++j)
    total += s[static_cast<std::size_t>(chosen[j])];
  std::vector<double> w(static_cast<std::size_t>(k));
  for (int j = 0; j < k; ++j)
    w[static_cast<std::size_t>(j)] = s[static_cast<std::size_t>(chosen[j])] / total;
  return w;
}

TEST(MoeRoute, SoftmaxTopKPicksTheLargestAndNormalises) {
  MoeRouteConfig c{8, 3, 1, 1, false};
  const auto logits = random_floats(kRows * 8, 1, -2.0f, 2.0f);
  std::vector<float> scores(kRows * 8), w(kRows * 3);
  std::vector<std::int32_t> idx(kRows * 3);
  moe_route(logits.data(), kRows, c, scores.data(), idx.data(), w.data());
  for (std::int64_t r = 0; r < kRows; ++r) {
    std::vector<int> order(8);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return logits[r * 8 + a] > logits[r * 8 + b]; });
    float sum = 0;
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(idx[r * 3 + j], order[static_cast<std::size_t>(j)]) << r;
      sum += w[r * 3 + j];
    }
    EXPECT_NEAR(sum, 1.0f, 1e-6f);
    EXPECT_NEAR(std::accumulate(scores.begin() + r * 8, scores.begin() + r * 8 + 8, 0.0f), 1.0f,
                1e-6f);
  }
}

// DeepSeek-V3's group-limited routing: 8 experts in 4 groups, each token keeps the 2 groups with
// the largest sum of their two best sigmoid scores and picks its top 2 there.
TEST(MoeRoute, GroupLimitedSigmoidRouting) {
  MoeRouteConfig c{8, 2, 4, 2, true};
  // Row 0: expert 0 is the best alone, but group 1 (experts 2, 3) and group 3 (6, 7) have the
  // best pairs, so expert 0 is out.
  const std::vector<float> logits = {3.0f, -3.0f, 2.0f, 2.0f, -1.0f, -1.0f, 1.5f, 1.5f};
  std::vector<float> scores(8), w(2);
  std::vector<std::int32_t> idx(2);
  moe_route(logits.data(), 1, c, scores.data(), idx.data(), w.data());
  EXPECT_EQ(idx[0], 2);
  EXPECT_EQ(idx[1], 3);
  EXPECT_NEAR(scores[0], 1.0f / (1.0f + std::exp(-3.0f)), 1e-6f);
  EXPECT_NEAR(w[0], 0.5f, 1e-6f);
  // Without the group limit expert 0 wins.
  c.groups = 1;
  moe_route(logits.data(), 1, c, scores.data(), idx.data(), w.data());
  EXPECT_EQ(idx[0], 0);
}

TEST(MoeRoute, BackwardMatchesCentralDifferences) {
  for (bool sigmoid : {false, true}) {
    MoeRouteConfig c{6, 2, 1, 1, sigmoid};
    const auto logits = random_floats(kRows * 6, 2, -2.0f, 2.0f);
    const auto dw = random_floats(kRows * 2, 3);
    std::vector<float> scores(kRows * 6), w(kRows * 2), dlogits(kRows * 6);
    std::vector<std::int32_t> idx(kRows * 2);
    moe_route(logits.data(), kRows, c, scores.data(), idx.data(), w.data());
    moe_route_backward(scores.data(), idx.data(), w.data(), dw.data(), kRows, c, dlogits.data());
    for (std::int64_t r = 0; r < kRows; ++r) {
      const std::vector<double> x(logits.begin() + r * 6, logits.begin() + r * 6 + 6);
      const auto want = testing::numeric_gradient(
          [&](const std::vector<double>& v) {
            const auto wt = weights_of(v, idx.data() + r * 2, 2, sigmoid);
            return wt[0] * dw[r * 2] + wt[1] * dw[r * 2 + 1];
          },
          x);
      for (int e = 0; e < 6; ++e)
        EXPECT_NEAR(dlogits[r * 6 + e], want[static_cast<std::size_t>(e)], 1e-5)
            << (sigmoid ? "sigmoid" : "softmax") << " row " << r << " expert " << e;
    }
  }
}

TEST(MoeCombine, ForwardBackwardAndGather) {
  const std::int64_t rows = 5, k = 2, cols = 7;
  // Positions: a permutation of the 10 (token, k) pairs.
  const std::vector<std::int32_t> pos = {3, 7, 0, 9, 4, 1, 8, 2, 6, 5};
  const auto src = random_floats(rows * k * cols, 4);
  const auto w = random_floats(rows * k, 5, 0.0f, 1.0f);
  std::vector<float> out(rows * cols, 9.0f);
  moe_combine(src.data(), pos.data(), w.data(), rows, k, cols, false, out.data());
  for (std::int64_t t = 0; t < rows; ++t) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const float want =
          w[t * k] * src[pos[t * k] * cols + c] + w[t * k + 1] * src[pos[t * k + 1] * cols + c];
      EXPECT_FLOAT_EQ(out[t * cols + c], want);
    }
  }
  // Accumulating with unit weights adds the k rows.
  std::vector<float> acc(rows * cols, 1.0f);
  moe_combine(src.data(), pos.data(), nullptr, rows, k, cols, true, acc.data());
  EXPECT_FLOAT_EQ(acc[cols + 2], 1.0f + src[pos[2] * cols + 2] + src[pos[3] * cols + 2]);
  // Backward: L = sum dy · out is linear, so its gradients are exact.
  const auto dy = random_floats(rows * cols, 6);
  std::vector<float> dsrc(rows * k * cols, 0.0f), dw(rows * k);
  moe_combine_backward(dy.data(), src.data(), pos.data(), w.data(), rows, k, cols, dsrc.data(),
                       dw.data());
  for (std::int64_t t = 0; t < rows; ++t) {
    for (std::int64_t j = 0; j < k; ++j) {
      float dot = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        EXPECT_FLOAT_EQ(dsrc[pos[t * k + j] * cols + c], w[t * k + j] * dy[t * cols + c]);
        dot += dy[t * cols + c] * src[pos[t * k + j] * cols + c];
      }
      EXPECT_NEAR(dw[t * k + j], dot, 1e-5f);
    }
  }
  std::vector<float> gathered(3 * cols);
  const std::vector<std::int32_t> index = {9, 0, 4};
  gather_rows(src.data(), index.data(), 3, cols, gathered.data());
  EXPECT_EQ(gathered[cols], src[0]);
  EXPECT_EQ(gathered[2 * cols + 3], src[4 * cols + 3]);
}

}  // namespace
}  // namespace planner::kernels::cpu
