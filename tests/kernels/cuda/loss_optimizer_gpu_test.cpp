// Cross-entropy (plain and vocabulary-parallel), Adam/AdamW and the RNG against the CPU kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gpu_test_support.hpp"
#include "planner/kernels/cpu/adam.hpp"
#include "planner/kernels/cpu/cross_entropy.hpp"
#include "planner/kernels/cpu/rng.hpp"
#include "planner/kernels/cuda/adam.hpp"
#include "planner/kernels/cuda/cross_entropy.hpp"
#include "planner/kernels/cuda/rng.hpp"

namespace planner::kernels::cuda::testing {
namespace {

template <class T>
class CudaCrossEntropy : public GpuTest {};
TYPED_TEST_SUITE(CudaCrossEntropy, ElementTypes);

TYPED_TEST(CudaCrossEntropy, PlainForwardAndInPlaceBackward) {
  using T = TypeParam;
  const std::int64_t tokens = 37, vocab = 5003;
  const auto logits = quantize<T>(random_floats(tokens * vocab, 61, -8.0f, 8.0f));
  const auto targets = random_ids(tokens, static_cast<std::int32_t>(vocab), 62);
  std::vector<float> loss(tokens), lse(tokens);
  cpu::cross_entropy_forward(logits.data(), tokens, vocab, targets.data(), loss.data(), lse.data());

  auto d_logits = upload<T>(logits, this->stream());
  auto d_targets = upload_ids(targets, this->stream());
  auto d_loss = zeros<float>(tokens, this->stream());
  auto d_lse = zeros<float>(tokens, this->stream());
  require(cross_entropy_forward(d_logits.data(), tokens, vocab, d_targets.data(), d_loss.data(),
                                d_lse.data(), this->stream()));
  expect_close_fp32(download(d_loss, this->stream()), loss, KernelKind::kReduction, "loss");
  expect_close_fp32(download(d_lse, this->stream()), lse, KernelKind::kReduction, "lse");

  const float grad_scale = 1.0f / static_cast<float>(tokens);
  std::vector<float> dlogits(tokens * vocab);
  cpu::cross_entropy_backward(logits.data(), tokens, vocab, 0, targets.data(), lse.data(),
                              grad_scale, dlogits.data());
  auto cpu_lse = upload<float>(lse, this->stream());
  require(cross_entropy_backward(d_logits.data(), tokens, vocab, 0, d_targets.data(),
                                 cpu_lse.data(), grad_scale, d_logits.data(), this->stream()));
  expect_matches_cpu<T>(download(d_logits, this->stream()), dlogits, KernelKind::kElementwise,
                        "dlogits");
}

TYPED_TEST(CudaCrossEntropy, VocabParallelStepsMatchTheCpu) {
  using T = TypeParam;
  // Two ranks holding columns [0, 1200) and [1200, 3001); the all-reduces are done on the host.
  const std::int64_t tokens = 20, vocab = 3001, split = 1200;
  const auto full = quantize<T>(random_floats(tokens * vocab, 71, -5.0f, 5.0f));
  const auto targets = random_ids(tokens, static_cast<std::int32_t>(vocab), 72);
  auto d_targets = upload_ids(targets, this->stream());
  const std::int64_t starts[2] = {0, split};
  const std::int64_t widths[2] = {split, vocab - split};
  std::vector<std::vector<float>> shards(2);
  std::vector<float> gmax(tokens, -INFINITY), gsum(tokens, 0.0f), gtarget(tokens, 0.0f);
  for (int r = 0; r < 2; ++r) {
    for (std::int64_t t = 0; t < tokens; ++t) {
      shards[r].insert(shards[r].end(), full.begin() + t * vocab + starts[r],
                       full.begin() + t * vocab + starts[r] + widths[r]);
    }
  }
  std::vector<DeviceBuffer<T>> d_shards;
  for (int r = 0; r < 2; ++r)
    d_shards.push_back(upload<T>(shards[r], this->stream()));
  // Step 1 and its MAX all-reduce.
  for (int r = 0; r < 2; ++r) {
    auto d_max = zeros<float>(tokens, this->stream());
    require(cross_entropy_local_max(d_shards[r].data(), tokens, widths[r], d_max.data(),
                                    this->stream()));
    std::vector<float> want(tokens);
    cpu::cross_entropy_local_max(shards[r].data(), tokens, widths[r], want.data());
    const auto got = download(d_max, this->stream());
    EXPECT_EQ(got, want) << "local max is exact";
    for (std::int64_t t = 0; t < tokens; ++t)
      gmax[t] = std::max(gmax[t], got[t]);
  }
  // Steps 2 and 3 and their SUM all-reduces.
  auto d_gmax = upload<float>(gmax, this->stream());
  for (int r = 0; r < 2; ++r) {
    auto d_sum = zeros<float>(tokens, this->stream());
    auto d_target = zeros<float>(tokens, this->stream());
    require(cross_entropy_local_sum_exp(d_shards[r].data(), tokens, widths[r], d_gmax.data(),
                                        d_sum.data(), this->stream()));
    require(cross_entropy_local_target_logit(d_shards[r].data(), tokens, widths[r], starts[r],
                                             d_targets.data(), d_target.data(), this->stream()));
    std::vector<float> want_sum(tokens), want_target(tokens);
    cpu::cross_entropy_local_sum_exp(shards[r].data(), tokens, widths[r], gmax.data(),
                                     want_sum.data());
    cpu::cross_entropy_local_target_logit(shards[r].data(), tokens, widths[r], starts[r],
                                          targets.data(), want_target.data());
    const auto got_sum = download(d_sum, this->stream());
    const auto got_target = download(d_target, this->stream());
    expect_close_fp32(got_sum, want_sum, KernelKind::kReduction, "local sum_exp");
    EXPECT_EQ(got_target, want_target) << "target logit is a copy";
    for (std::int64_t t = 0; t < tokens; ++t) {
      gsum[t] += got_sum[t];
      gtarget[t] += got_target[t];
    }
  }
  // Step 4 equals the plain forward over the whole vocabulary.
  auto d_gsum = upload<float>(gsum, this->stream());
  auto d_gtarget = upload<float>(gtarget, this->stream());
  auto d_loss = zeros<float>(tokens, this->stream());
  auto d_lse = zeros<float>(tokens, this->stream());
  require(cross_entropy_loss(tokens, d_gmax.data(), d_gsum.data(), d_gtarget.data(), d_loss.data(),
                             d_lse.data(), this->stream()));
  std::vector<float> loss(tokens), lse(tokens);
  cpu::cross_entropy_forward(full.data(), tokens, vocab, targets.data(), loss.data(), lse.data());
  expect_close_fp32(download(d_loss, this->stream()), loss, KernelKind::kReduction, "cp loss");
  const auto got_lse = download(d_lse, this->stream());
  expect_close_fp32(got_lse, lse, KernelKind::kReduction, "cp lse");
  // Step 5 per rank.
  auto d_lse_cpu = upload<float>(lse, this->stream());
  for (int r = 0; r < 2; ++r) {
    auto d_grad = zeros<T>(tokens * widths[r], this->stream());
    require(cross_entropy_backward(d_shards[r].data(), tokens, widths[r], starts[r],
                                   d_targets.data(), d_lse_cpu.data(), 0.5f, d_grad.data(),
                                   this->stream()));
    std::vector<float> want(tokens * widths[r]);
    cpu::cross_entropy_backward(shards[r].data(), tokens, widths[r], starts[r], targets.data(),
                                lse.data(), 0.5f, want.data());
    expect_matches_cpu<T>(download(d_grad, this->stream()), want, KernelKind::kElementwise,
                          "cp dlogits rank " + std::to_string(r));
  }
}

template <class T>
class CudaAdam : public GpuTest {};
TYPED_TEST_SUITE(CudaAdam, ElementTypes);

TYPED_TEST(CudaAdam, StepsAreBitIdenticalToTheCpu) {
  using T = TypeParam;
  const std::int64_t n = 54321;
  for (const auto mode : {WeightDecayMode::kDecoupled, WeightDecayMode::kL2}) {
    AdamConfig config;
    config.lr = 3e-4f;
    config.weight_decay = 0.1f;
    config.decay_mode = mode;
    std::vector<float> param = random_floats(n, 81), m(n, 0.0f), v(n, 0.0f);
    auto d_param = upload<float>(param, this->stream());
    auto d_m = zeros<float>(n, this->stream());
    auto d_v = zeros<float>(n, this->stream());
    auto d_copy = zeros<T>(n, this->stream());
    for (std::int64_t step = 1; step <= 3; ++step) {
      const auto grad = random_floats(n, 82 + step, -2.0f, 2.0f);
      auto d_grad = upload<float>(grad, this->stream());
      const float grad_scale = step == 2 ? 0.25f : 1.0f;  // e.g. unscaling or clipping
      require(adam_step<T>(config, step, n, grad_scale, d_grad.data(), d_param.data(), d_m.data(),
                           d_v.data(), d_copy.data(), this->stream()));
      cpu::adam_step(config, step, n, grad_scale, grad.data(), param.data(), m.data(), v.data());
    }
    EXPECT_EQ(download(d_param, this->stream()), param);
    EXPECT_EQ(download(d_m, this->stream()), m);
    EXPECT_EQ(download(d_v, this->stream()), v);
    EXPECT_EQ(download(d_copy, this->stream()), quantize<T>(param)) << "model copy";
  }
}

using CudaRng = GpuTest;

TEST_F(CudaRng, ValuesAreBitIdenticalToTheCpu) {
  const std::uint64_t seed = 1234, stream_id = cpu::tensor_stream_id("layers.0.mlp.fc1.weight");
  const std::int64_t n = 1 << 20;
  // Indices from 0 and from beyond 2^32 (the counter's second word).
  for (const std::uint64_t first : {std::uint64_t{0}, (std::uint64_t{1} << 40) + 17}) {
    auto d = zeros<float>(n, stream());
    std::vector<float> want(n);
    require(fill_normal(seed, stream_id, first, n, 0.0f, 0.02f, d.data(), stream()));
    cpu::fill_normal(seed, stream_id, first, n, 0.0f, 0.02f, want.data());
    EXPECT_EQ(download(d, stream()), want) << "normal from " << first;
    require(fill_uniform(seed, stream_id, first, n, -0.5f, 2.0f, d.data(), stream()));
    cpu::fill_uniform(seed, stream_id, first, n, -0.5f, 2.0f, want.data());
    EXPECT_EQ(download(d, stream()), want) << "uniform from " << first;
    auto ids = zeros<std::int32_t>(n, stream());
    std::vector<std::int32_t> want_ids(n);
    require(fill_tokens(seed, stream_id, first, n, 128256, ids.data(), stream()));
    cpu::fill_tokens(seed, stream_id, first, n, 128256, want_ids.data());
    EXPECT_EQ(require(to_host(ids, stream())), want_ids) << "tokens from " << first;
  }
  // A column-parallel shard.
  const std::int64_t rows = 96, full_cols = 400, cols = 100;
  auto shard = zeros<float>(rows * cols, stream());
  std::vector<float> want(rows * cols);
  require(fill_normal_block(seed, stream_id, full_cols, 0, 2 * cols, rows, cols, 1.0f, 0.5f,
                            shard.data(), stream()));
  cpu::fill_normal_block(seed, stream_id, full_cols, 0, 2 * cols, rows, cols, 1.0f, 0.5f,
                         want.data());
  EXPECT_EQ(download(shard, stream()), want) << "block";
}

}  // namespace
}  // namespace planner::kernels::cuda::testing
