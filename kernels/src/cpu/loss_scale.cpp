#include "planner/kernels/cpu/loss_scale.hpp"

#include <bit>
#include <cassert>
#include <cstdint>

#include "cpu/vector_math.hpp"

namespace planner::kernels::cpu {
namespace {

// An fp32 value is inf or NaN exactly when its 8 exponent bits are all ones.
constexpr std::uint32_t kExponentMask = 0x7f800000u;

inline std::uint32_t non_finite_bit(float v) {
  return (std::bit_cast<std::uint32_t>(v) & kExponentMask) == kExponentMask ? 1u : 0u;
}

}  // namespace

PLANNER_CPU_KERNEL
bool all_finite(const float* x, std::int64_t n) {
  std::uint32_t non_finite = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    non_finite |= non_finite_bit(x[i]);
  }
  return non_finite == 0;
}

PLANNER_CPU_KERNEL
bool unscale_and_check(float* x, std::int64_t n, float inv_scale) {
  std::uint32_t non_finite = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    non_finite |= non_finite_bit(x[i]);
    x[i] *= inv_scale;
  }
  return non_finite == 0;
}

DynamicLossScale::DynamicLossScale(float initial_scale, float growth_factor, float backoff_factor,
                                   int growth_interval)
    : scale_(initial_scale),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {
  assert(initial_scale > 0 && growth_factor > 1 && backoff_factor > 0 && backoff_factor < 1 &&
         growth_interval >= 1);
}

bool DynamicLossScale::update(bool all_gradients_finite) {
  if (!all_gradients_finite) {
    scale_ *= backoff_factor_;
    finite_steps_ = 0;
    return false;
  }
  if (++finite_steps_ == growth_interval_) {
    scale_ *= growth_factor_;
    finite_steps_ = 0;
  }
  return true;
}

}  // namespace planner::kernels::cpu
