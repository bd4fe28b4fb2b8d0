// Checked 64-bit integer arithmetic for sizes that multiply (world sizes, element and byte counts).
//
// Products of user-given sizes can exceed 64 bits long before any single size is absurd
// (tp x cp x dp x pp with each axis at its schema limit of 2^20 is 2^80). These helpers detect
// the overflow instead of wrapping, so a size is either exact or known to be too large.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>

namespace planner {

// a x b, or nullopt when it does not fit in 64 bits.
inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of `factors`, or nullopt when it (or a partial product) does not fit in 64 bits.
inline std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t out = 1;
  for (std::int64_t f : factors) {
    if (__builtin_mul_overflow(out, f, &out)) return std::nullopt;
  }
  return out;
}

// The product of non-negative `factors`, saturated at INT64_MAX when it does not fit: never
// negative, never wrapped, and never equal to a real size that fits (every such size is smaller).
inline std::int64_t saturating_product(std::initializer_list<std::int64_t> factors) {
  return checked_product(factors).value_or(std::numeric_limits<std::int64_t>::max());
}

}  // namespace planner
