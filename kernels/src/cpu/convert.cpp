#include "planner/kernels/cpu/convert.hpp"

#include <bit>
#include <cmath>

namespace planner::kernels::cpu {
namespace {

constexpr std::uint32_t kF32SignMask = 0x80000000u;
constexpr std::uint32_t kF32AbsMask = 0x7fffffffu;
constexpr std::uint32_t kF32Inf = 0x7f800000u;
constexpr std::uint16_t kBf16QuietBit = 0x0040u;
constexpr std::uint16_t kF16Inf = 0x7c00u;
constexpr std::uint16_t kF16QuietNan = 0x7e00u;
// 65520 = 0x1.ffep15: from here on fp16 rounds to inf (65504 has an odd significand, so the tie
// goes up).
constexpr std::uint32_t kF16OverflowBits = 0x477ff000u;
// 2^-14, fp16's smallest normal number.
constexpr std::uint32_t kF16MinNormalBits = 0x38800000u;
// fp32 exponent bias minus fp16's (127 - 15).
constexpr std::uint32_t kF16Rebias = 112;
constexpr float kF16SubnormalScale = 16777216.0f;  // 2^24: fp16 subnormals are multiples of 2^-24

}  // namespace

std::uint16_t float_to_bf16(float x) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  if ((f & kF32AbsMask) > kF32Inf) return static_cast<std::uint16_t>((f >> 16) | kBf16QuietBit);
  const std::uint32_t lsb = (f >> 16) & 1u;
  return static_cast<std::uint16_t>((f + 0x7fffu + lsb) >> 16);
}

float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_fp16(float x) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((f & kF32SignMask) >> 16);
  const std::uint32_t a = f & kF32AbsMask;
  if (a >= kF32Inf)
    return static_cast<std::uint16_t>(sign | (a > kF32Inf ? kF16QuietNan : kF16Inf));
  if (a >= kF16OverflowBits) return static_cast<std::uint16_t>(sign | kF16Inf);
  if (a < kF16MinNormalBits) {
    // Subnormal (or zero): a multiple of 2^-24. Scaling by 2^24 is exact, and nearbyint rounds to
    // nearest even in the default rounding mode; 1024 lands on the smallest normal's pattern.
    const float scaled = std::bit_cast<float>(a) * kF16SubnormalScale;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(scaled)));
  }
  std::uint32_t h = (((a >> 23) - kF16Rebias) << 10) | ((a & 0x7fffffu) >> 13);
  const std::uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) ++h;  // a carry bumps the exponent
  return static_cast<std::uint16_t>(sign | h);
}

float fp16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  const std::uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {
    const float v = static_cast<float>(mant) / kF16SubnormalScale;
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) | sign);
  }
  if (exp == 0x1fu) return std::bit_cast<float>(sign | kF32Inf | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + kF16Rebias) << 23) | (mant << 13));
}

void float_to_bf16(const float* x, std::int64_t n, std::uint16_t* y) {
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = float_to_bf16(x[i]);
}

void bf16_to_float(const std::uint16_t* x, std::int64_t n, float* y) {
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = bf16_to_float(x[i]);
}

void float_to_fp16(const float* x, std::int64_t n, std::uint16_t* y) {
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = float_to_fp16(x[i]);
}

void fp16_to_float(const std::uint16_t* x, std::int64_t n, float* y) {
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = fp16_to_float(x[i]);
}

}  // namespace planner::kernels::cpu
