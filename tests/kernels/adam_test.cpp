#include "planner/kernels/cpu/adam.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace planner::kernels::cpu {
namespace {

AdamConfig config(float weight_decay, WeightDecayMode mode) {
  AdamConfig c;
  c.lr = 0.1f;
  c.beta1 = 0.9f;
  c.beta2 = 0.999f;
  c.eps = 1e-8f;
  c.weight_decay = weight_decay;
  c.decay_mode = mode;
  return c;
}

TEST(Adam, TwoStepsByHand) {
  // Moments are checked to 2e-5 relative: 1 - 0.999f is 1.3e-5 off 0.001 in float.
  // p = 1, lr = 0.1. Step 1, g = 0.5: m = 0.1 * 0.5 = 0.05, v = 0.001 * 0.25 = 2.5e-4; bias
  // corrections 0.1 and 0.001 give m^ = 0.5, sqrt(v^) = 0.5, so p = 1 - 0.1 * 0.5 / (0.5 + 1e-8) =
  // 0.9. Step 2, g = -0.25: m = 0.045 - 0.025 = 0.02, v = 2.4975e-4 + 6.25e-5 = 3.1225e-4; p = 0.9
  // - (0.1 / 0.19) * 0.02 / (sqrt(3.1225e-4 / 0.001999) + 1e-8) = 0.8733663.
  std::vector<float> p = {1.0f}, m = {0.0f}, v = {0.0f};
  const AdamConfig c = config(0.0f, WeightDecayMode::kDecoupled);
  const float g1 = 0.5f, g2 = -0.25f;
  adam_step(c, 1, 1, 1.0f, &g1, p.data(), m.data(), v.data());
  EXPECT_NEAR(p[0], 0.9f, 1e-7);
  EXPECT_NEAR(m[0], 0.05f, 1e-7);
  EXPECT_NEAR(v[0], 2.5e-4f, 5e-9);
  adam_step(c, 2, 1, 1.0f, &g2, p.data(), m.data(), v.data());
  EXPECT_NEAR(p[0], 0.8733663f, 2e-7);
  EXPECT_NEAR(m[0], 0.02f, 1e-7);
  EXPECT_NEAR(v[0], 3.1225e-4f, 6e-9);
}

TEST(Adam, WeightDecayModesAndGradScale) {
  // First steps move every parameter by lr * sign(g) (m^ / sqrt(v^) = g / |g|), which makes the
  // decay modes easy to tell apart by hand. p = 1, g = 0.5, weight decay 0.1:
  const float g = 0.5f;
  std::vector<float> p = {1.0f}, m = {0.0f}, v = {0.0f};
  // AdamW: p = 1 * (1 - 0.1 * 0.1) - 0.1 = 0.89.
  adam_step(config(0.1f, WeightDecayMode::kDecoupled), 1, 1, 1.0f, &g, p.data(), m.data(),
            v.data());
  EXPECT_NEAR(p[0], 0.89f, 1e-7);
  // Adam + L2: g' = 0.5 + 0.1 * 1 = 0.6, still p = 1 - 0.1 = 0.9, but m = 0.1 * 0.6.
  p = {1.0f}, m = {0.0f}, v = {0.0f};
  adam_step(config(0.1f, WeightDecayMode::kL2), 1, 1, 1.0f, &g, p.data(), m.data(), v.data());
  EXPECT_NEAR(p[0], 0.9f, 1e-7);
  EXPECT_NEAR(m[0], 0.06f, 1e-7);
  // grad_scale multiplies the gradient first: 0.25 * 2 behaves like 0.5.
  p = {1.0f}, m = {0.0f}, v = {0.0f};
  const float quarter = 0.25f;
  adam_step(config(0.0f, WeightDecayMode::kDecoupled), 1, 1, 2.0f, &quarter, p.data(), m.data(),
            v.data());
  EXPECT_NEAR(m[0], 0.05f, 1e-7);
}

TEST(Adam, ManyElementsMatchTheScalarRule) {
  // The vectorised loop over a length that is not a multiple of any vector width equals the formula
  // applied element by element in double.
  const std::int64_t n = 1003;
  std::vector<float> p(n), g(n), m(n), v(n);
  for (std::int64_t i = 0; i < n; ++i) {
    p[i] = std::sin(0.1f * static_cast<float>(i));
    g[i] = std::cos(0.37f * static_cast<float>(i));
    m[i] = 0.01f * g[i];
    v[i] = 0.001f * g[i] * g[i];
  }
  const auto p0 = p, m0 = m, v0 = v;
  const AdamConfig c = config(0.01f, WeightDecayMode::kDecoupled);
  adam_step(c, 3, n, 0.5f, g.data(), p.data(), m.data(), v.data());
  for (std::int64_t i = 0; i < n; ++i) {
    const double gi = 0.5 * g[i];
    const double mi = 0.9 * m0[i] + 0.1 * gi;
    const double vi = 0.999 * v0[i] + 0.001 * gi * gi;
    const double pi =
        p0[i] * (1 - 0.1 * 0.01) - 0.1 / (1 - std::pow(0.9, 3)) * mi /
                                       (std::sqrt(vi) / std::sqrt(1 - std::pow(0.999, 3)) + 1e-8);
    ASSERT_NEAR(p[i], pi, 1e-6) << i;
    ASSERT_NEAR(m[i], mi, 1e-7) << i;
    ASSERT_NEAR(v[i], vi, 1e-8) << i;
  }
}

TEST(Adam, ClipCoefficient) {
  EXPECT_FLOAT_EQ(clip_coefficient(10.0, 1.0), static_cast<float>(1.0 / (10.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0f);
  EXPECT_EQ(clip_coefficient(0.0, 1.0), 1.0f);
}

}  // namespace
}  // namespace planner::kernels::cpu
