// The counter-based generator behind planner::kernels::cpu's and planner::kernels::cuda's rng.hpp,
// written once for the host and the device so that both produce the same bits. Internal to
// planner::kernels.
//
// Bit-identical results need the same sequence of correctly rounded IEEE operations on both sides:
// the integer Philox rounds are exact anywhere; the floating-point parts below use only +, -, *,
// / and sqrt (no libm call, whose last bit differs between glibc and CUDA), and every file that
// includes this header is compiled without contraction into fused multiply-adds
// (-ffp-contract=off for the CPU kernels, --fmad=false for kernels/src/cuda/rng.cu).
#pragma once

#include <cmath>
#include <cstdint>

#include "common/host_device.hpp"

namespace planner::kernels::common {

struct PhiloxBlock {
  std::uint32_t w[4];
};

// Philox4x32 round multipliers and Weyl key increments (Salmon et al. 2011, table 2; Random123).
inline constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
inline constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1
inline constexpr int kPhiloxRounds = 10;

inline constexpr double kTwoPow32 = 4294967296.0;
inline constexpr float kTwoPowMinus24 = 1.0f / 16777216.0f;

// Philox4x32-10 of a 128-bit counter under a 64-bit key.
PLANNER_HOST_DEVICE inline PhiloxBlock philox4x32_10(PhiloxBlock c, std::uint32_t k0,
                                                     std::uint32_t k1) {
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(kPhiloxM0) * c.w[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kPhiloxM1) * c.w[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32);
    const auto lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32);
    const auto lo1 = static_cast<std::uint32_t>(p1);
    c = PhiloxBlock{{hi1 ^ c.w[1] ^ k0, lo1, hi0 ^ c.w[3] ^ k1, lo0}};
  }
  return c;
}

// The block of element `index` of stream `stream` under `seed`: counter (index, stream), key seed.
PLANNER_HOST_DEVICE inline PhiloxBlock philox_block(std::uint64_t seed, std::uint64_t stream,
                                                    std::uint64_t index) {
  return philox4x32_10(
      PhiloxBlock{{static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                   static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)}},
      static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

// Uniform in [0, 1) from one word: its top 24 bits times 2^-24 (exact).
PLANNER_HOST_DEVICE inline float uniform_from_word(std::uint32_t w) {
  return static_cast<float>(w >> 8) * kTwoPowMinus24;
}

// ln(x) for a positive normal double, to a few units in the last place, with basic operations only.
// x = 2^e f with f in [sqrt(1/2), sqrt(2)); ln f = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...) with
// s = (f - 1) / (f + 1), |s| <= 0.1716, so the series through s^23 leaves a relative error below
// 1e-18; ln 2 is split as in fdlibm's e_log.c so that e * kLn2Hi is exact.
PLANNER_HOST_DEVICE inline double portable_log(double x) {
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kSqrt2 = 1.41421356237309504880;
  constexpr std::uint64_t kExponentMask = 0x7ff0000000000000ull;
  constexpr std::uint64_t kExponentOne = 0x3ff0000000000000ull;  // exponent field of 1.0
  constexpr int kExponentBias = 1023;
  constexpr int kMantissaBits = 52;
  std::uint64_t bits = 0;
  static_assert(sizeof(bits) == sizeof(x));
#if defined(__CUDA_ARCH__)
  bits = static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  __builtin_memcpy(&bits, &x, sizeof(bits));
#endif
  int e = static_cast<int>((bits & kExponentMask) >> kMantissaBits) - kExponentBias;
  const std::uint64_t f_bits = (bits & ~kExponentMask) | kExponentOne;
  double f = 0;
#if defined(__CUDA_ARCH__)
  f = __longlong_as_double(static_cast<long long>(f_bits));
#else
  __builtin_memcpy(&f, &f_bits, sizeof(f));
#endif
  if (f > kSqrt2) {
    f = f * 0.5;
    e += 1;
  }
  const double s = (f - 1.0) / (f + 1.0);
  const double z = s * s;
  double p = 1.0 / 23.0;
  p = p * z + 1.0 / 21.0;
  p = p * z + 1.0 / 19.0;
  p = p * z + 1.0 / 17.0;
  p = p * z + 1.0 / 15.0;
  p = p * z + 1.0 / 13.0;
  p = p * z + 1.0 / 11.0;
  p = p * z + 1.0 / 9.0;
  p = p * z + 1.0 / 7.0;
  p = p * z + 1.0 / 5.0;
  p = p * z + 1.0 / 3.0;
  const double two_s = 2.0 * s;
  const double log_f = two_s + two_s * (z * p);
  const double de = static_cast<double>(e);
  return de * kLn2Hi + (log_f + de * kLn2Lo);
}

// cos(2 pi u) for u in [0, 1) given in turns, with basic operations only: u = k/4 + r with
// |r| <= 1/8 (exact for u with at most 50 fractional bits), then the Taylor series of cos or sin
// at a = 2 pi r, |a| <= pi/4, through a^20 (truncation below 4e-18).
PLANNER_HOST_DEVICE inline double portable_cos_2pi(double u) {
  constexpr double kTwoPi = 6.28318530717958647692;
  const double quarter_turns = u * 4.0;                // exact
  int k = static_cast<int>(quarter_turns + 0.5);       // nearest quarter turn (u >= 0)
  const double r = u - static_cast<double>(k) * 0.25;  // exact
  const double a = r * kTwoPi;
  const double z = a * a;
  double c = 1.0 / 2432902008176640000.0;  // 1 / 20!
  c = c * z - 1.0 / 6402373705728000.0;    // 18!
  c = c * z + 1.0 / 20922789888000.0;      // 16!
  c = c * z - 1.0 / 87178291200.0;         // 14!
  c = c * z + 1.0 / 479001600.0;           // 12!
  c = c * z - 1.0 / 3628800.0;             // 10!
  c = c * z + 1.0 / 40320.0;               // 8!
  c = c * z - 1.0 / 720.0;                 // 6!
  c = c * z + 1.0 / 24.0;                  // 4!
  c = c * z - 0.5;
  const double cos_a = c * z + 1.0;
  double s = 1.0 / 121645100408832000.0;  // 1 / 19!
  s = s * z - 1.0 / 355687428096000.0;    // 17!
  s = s * z + 1.0 / 1307674368000.0;      // 15!
  s = s * z - 1.0 / 6227020800.0;         // 13!
  s = s * z + 1.0 / 39916800.0;           // 11!
  s = s * z - 1.0 / 362880.0;             // 9!
  s = s * z + 1.0 / 5040.0;               // 7!
  s = s * z - 1.0 / 120.0;                // 5!
  s = s * z + 1.0 / 6.0;                  // 3!
  const double sin_a = a - a * (z * s);
  switch (k & 3) {
    case 0:
      return cos_a;
    case 1:
      return -sin_a;
    case 2:
      return -cos_a;
    default:
      return sin_a;
  }
}

// Standard normal by Box-Muller from two words: sqrt(-2 ln u1) cos(2 pi u2), u1 = (w0 + 1/2) / 2^32
// in (0, 1) so the log is finite, u2 = w1 / 2^32; computed in double, rounded to float.
PLANNER_HOST_DEVICE inline float normal_from_words(std::uint32_t w0, std::uint32_t w1) {
  const double u1 = (static_cast<double>(w0) + 0.5) / kTwoPow32;  // exact
  const double u2 = static_cast<double>(w1) / kTwoPow32;          // exact
  return static_cast<float>(std::sqrt(-2.0 * portable_log(u1)) * portable_cos_2pi(u2));
}

// Token id uniform in [0, vocab) from one word (Lemire's multiply-shift).
PLANNER_HOST_DEVICE inline std::int32_t token_from_word(std::uint32_t w, std::int64_t vocab) {
  return static_cast<std::int32_t>(
      (static_cast<std::uint64_t>(w) * static_cast<std::uint64_t>(vocab)) >> 32);
}

}  // namespace planner::kernels::common
