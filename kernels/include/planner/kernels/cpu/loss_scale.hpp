// Loss scaling for fp16-style mixed precision: checking and unscaling gradients, and the dynamic
// scale's update rule. Conventions as in gemm.hpp.
//
// Recipe per step: multiply the loss gradient by scale() (cross_entropy_backward's grad_scale), run
// the backward, unscale_and_check every gradient shard with 1 / scale(), reduce "all finite" over
// the ranks (a logical AND), then update(); skip the optimizer step when it returns false.
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

// True when no element of x[0, n) is inf or NaN.
bool all_finite(const float* x, std::int64_t n);

// x[i] *= inv_scale for i < n; returns all_finite of x before scaling (inf * s stays inf, so the
// check survives the multiply).
bool unscale_and_check(float* x, std::int64_t n, float inv_scale);

// The dynamic loss scale of PyTorch's torch.cuda.amp.GradScaler (and its defaults): start at
// initial_scale; a step with a non-finite gradient multiplies the scale by backoff_factor and is
// skipped; growth_interval finite steps in a row multiply it by growth_factor.
class DynamicLossScale {
 public:
  static constexpr float kDefaultInitialScale = 65536.0f;  // 2^16, GradScaler init_scale
  static constexpr float kDefaultGrowthFactor = 2.0f;
  static constexpr float kDefaultBackoffFactor = 0.5f;
  static constexpr int kDefaultGrowthInterval = 2000;

  explicit DynamicLossScale(float initial_scale = kDefaultInitialScale,
                            float growth_factor = kDefaultGrowthFactor,
                            float backoff_factor = kDefaultBackoffFactor,
                            int growth_interval = kDefaultGrowthInterval);

  float scale() const { return scale_; }
  int finite_steps() const { return finite_steps_; }

  // Records one step's outcome (all gradients finite on all ranks, or not) and updates the scale.
  // Returns whether the optimizer should apply this step.
  bool update(bool all_gradients_finite);

 private:
  float scale_;
  float growth_factor_;
  float backoff_factor_;
  int growth_interval_;
  int finite_steps_ = 0;
};

}  // namespace planner::kernels::cpu
