#include "planner/kernels/cpu/cross_entropy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_support.hpp"

namespace planner::kernels::cpu {
namespace {

using testing::random_floats;
using testing::random_ids;
using testing::to_double;

constexpr std::int64_t kTokens = 6, kVocab = 103;

// Mean cross-entropy over the tokens, in double.
double mean_loss_ref(const std::vector<double>& logits, const std::vector<std::int32_t>& targets,
                     std::int64_t tokens, std::int64_t vocab) {
  double total = 0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    double mx = -std::numeric_limits<double>::infinity();
    for (std::int64_t v = 0; v < vocab; ++v)
      mx = std::max(mx, logits[t * vocab + v]);
    double sum = 0;
    for (std::int64_t v = 0; v < vocab; ++v)
      sum += std::exp(logits[t * vocab + v] - mx);
    total += mx + std::log(sum) - logits[t * vocab + targets[t]];
  }
  return total / static_cast<double>(tokens);
}

TEST(CrossEntropy, PlainForwardAndBackwardAgainstDoubleReference) {
  // Logits up to +-20, as an untrained LM head with a large init can give.
  const auto logits = random_floats(kTokens * kVocab, 1, -20.0f, 20.0f);
  const auto targets = random_ids(kTokens, kVocab, 2);
  std::vector<float> loss(kTokens), lse(kTokens);
  cross_entropy_forward(logits.data(), kTokens, kVocab, targets.data(), loss.data(), lse.data());
  double mean = 0;
  for (float l : loss)
    mean += l;
  mean /= kTokens;
  EXPECT_NEAR(mean, mean_loss_ref(to_double(logits), targets, kTokens, kVocab), 1e-5);

  std::vector<float> dlogits(logits.size());
  const float grad_scale = 1.0f / kTokens;  // d(mean)/d(loss_t)
  cross_entropy_backward(logits.data(), kTokens, kVocab, 0, targets.data(), lse.data(), grad_scale,
                         dlogits.data());
  const auto fd = testing::numeric_gradient(
      [&](const std::vector<double>& x) { return mean_loss_ref(x, targets, kTokens, kVocab); },
      to_double(logits));
  testing::expect_close(dlogits, fd, 1e-4, 1e-6, "dlogits");

  // In place over the logits gives the same bits.
  auto in_place = logits;
  cross_entropy_backward(in_place.data(), kTokens, kVocab, 0, targets.data(), lse.data(),
                         grad_scale, in_place.data());
  EXPECT_EQ(in_place, dlogits);
}

// The vocabulary split into `slices` column shards (uneven when it does not divide), each processed
// as a tensor-parallel rank would, with the all-reduces done here by hand.
void expect_vocab_parallel_matches_plain(int slices) {
  const auto logits = random_floats(kTokens * kVocab, 3, -8.0f, 8.0f);
  const auto targets = random_ids(kTokens, kVocab, 4);
  std::vector<float> plain_loss(kTokens), plain_lse(kTokens), plain_grad(logits.size());
  cross_entropy_forward(logits.data(), kTokens, kVocab, targets.data(), plain_loss.data(),
                        plain_lse.data());
  cross_entropy_backward(logits.data(), kTokens, kVocab, 0, targets.data(), plain_lse.data(), 0.25f,
                         plain_grad.data());

  std::vector<std::int64_t> start(slices + 1);
  for (int s = 0; s <= slices; ++s)
    start[s] = kVocab * s / slices;
  std::vector<std::vector<float>> shard(slices);
  for (int s = 0; s < slices; ++s) {
    const std::int64_t w = start[s + 1] - start[s];
    for (std::int64_t t = 0; t < kTokens; ++t) {
      shard[s].insert(shard[s].end(), logits.begin() + t * kVocab + start[s],
                      logits.begin() + t * kVocab + start[s] + w);
    }
  }
  // Step 1: local max, all-reduce MAX.
  std::vector<float> gmax(kTokens, -std::numeric_limits<float>::infinity()), part(kTokens);
  for (int s = 0; s < slices; ++s) {
    cross_entropy_local_max(shard[s].data(), kTokens, start[s + 1] - start[s], part.data());
    for (std::int64_t t = 0; t < kTokens; ++t)
      gmax[t] = std::max(gmax[t], part[t]);
  }
  // Steps 2-3: local sum of exp and target logit, all-reduce SUM.
  std::vector<float> gsum(kTokens, 0.0f), gtarget(kTokens, 0.0f), part2(kTokens);
  for (int s = 0; s < slices; ++s) {
    const std::int64_t w = start[s + 1] - start[s];
    cross_entropy_local_sum_exp(shard[s].data(), kTokens, w, gmax.data(), part.data());
    cross_entropy_local_target_logit(shard[s].data(), kTokens, w, start[s], targets.data(),
                                     part2.data());
    for (std::int64_t t = 0; t < kTokens; ++t) {
      gsum[t] += part[t];
      gtarget[t] += part2[t];
    }
  }
  // Step 4 on every rank, step 5 per shard.
  std::vector<float> loss(kTokens), lse(kTokens);
  cross_entropy_loss(kTokens, gmax.data(), gsum.data(), gtarget.data(), loss.data(), lse.data());
  testing::expect_close(loss, std::vector<double>(plain_loss.begin(), plain_loss.end()), 1e-6, 1e-6,
                        "loss");
  std::vector<float> grad(static_cast<std::size_t>(kTokens * kVocab));
  for (int s = 0; s < slices; ++s) {
    const std::int64_t w = start[s + 1] - start[s];
    std::vector<float> g(shard[s].size());
    cross_entropy_backward(shard[s].data(), kTokens, w, start[s], targets.data(), lse.data(), 0.25f,
                           g.data());
    for (std::int64_t t = 0; t < kTokens; ++t) {
      std::copy(g.begin() + t * w, g.begin() + (t + 1) * w, grad.begin() + t * kVocab + start[s]);
    }
  }
  testing::expect_close(grad, std::vector<double>(plain_grad.begin(), plain_grad.end()), 1e-5, 1e-8,
                        "dlogits");
  if (slices == 1) {
    EXPECT_EQ(loss, plain_loss);  // one slice is the plain path exactly
    EXPECT_EQ(grad, plain_grad);
  }
}

TEST(CrossEntropy, VocabParallelOverOneSliceEqualsPlain) {
  expect_vocab_parallel_matches_plain(1);
}
TEST(CrossEntropy, VocabParallelOverTwoSlicesEqualsPlain) {
  expect_vocab_parallel_matches_plain(2);
}
TEST(CrossEntropy, VocabParallelOverFourSlicesEqualsPlain) {
  expect_vocab_parallel_matches_plain(4);
}

TEST(CrossEntropy, UniformLogitsGiveLogVocab) {
  const std::vector<float> logits(kTokens * kVocab, 3.0f);
  const std::vector<std::int32_t> targets(kTokens, 5);
  std::vector<float> loss(kTokens), lse(kTokens);
  cross_entropy_forward(logits.data(), kTokens, kVocab, targets.data(), loss.data(), lse.data());
  for (float l : loss)
    EXPECT_NEAR(l, std::log(static_cast<double>(kVocab)), 1e-5);
}

}  // namespace
}  // namespace planner::kernels::cpu
