// Building blocks shared by the CPU kernels: a vectorisable exp, fixed-order reductions, and the
// attribute that compiles a hot loop for several x86-64 levels. Internal to planner::kernels.
//
// Every reduction here sums in an order fixed by the source (kLanes interleaved partial sums, then
// a fixed pairwise combine), never by the compiler or the vector width, and the kernels are
// compiled with -ffp-contract=off (no fused multiply-adds), so results are reproducible run to run
// and identical between the baseline, AVX2 and AVX-512 clones of a kernel.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

// PLANNER_CPU_KERNEL before a function definition builds it for baseline x86-64, x86-64-v3 (AVX2,
// FMA) and x86-64-v4 (AVX-512) and selects the best one for the running CPU when the program loads.
// Elsewhere (other architectures, sanitizer builds where ifunc resolvers run before the runtime is
// up) it is empty and the baseline build is used.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define PLANNER_CPU_KERNEL \
  __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define PLANNER_CPU_KERNEL
#endif

namespace planner::kernels::cpu::detail {

// Number of interleaved partial sums in reductions: one AVX-512 register of floats, or four SSE
// ones.
inline constexpr std::int64_t kLanes = 16;

// exp(x) in float, written so that a loop calling it vectorises (no libm call, no branch).
// Cody-Waite range reduction x = k ln2 + r, |r| <= ln2/2, and the Cephes expf polynomial for e^r
// (S. L. Moshier, Cephes Math Library, expf.c); error within 2 ulp of the correctly rounded result
// (tests/kernels/vector_math_test.cpp). x < -87.33 (results below about 1.2e-38, near FLT_MIN)
// gives +0; x > ln(FLT_MAX) gives +inf; NaN gives NaN; exp(-inf) == 0.
inline float exp_approx(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // Cephes: ln 2 split so that k * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic =
      12582912.0f;  // 1.5 * 2^23: (v + magic) - magic rounds v to an integer
  // Just above ln(FLT_MIN) = -87.33654: every argument from here up has k >= -126 with r > 0 at
  // k == -126, so the result below is a normal float.
  constexpr float kMinArg = -87.33f;
  constexpr float kMaxArg = 88.7228394f;   // ln(FLT_MAX)
  constexpr float kP0 = 1.9875691500e-4f;  // Cephes expf polynomial coefficients
  constexpr float kP1 = 1.3981999507e-3f;
  constexpr float kP2 = 8.3334519073e-3f;
  constexpr float kP3 = 4.1665795894e-2f;
  constexpr float kP4 = 1.6666665459e-1f;
  constexpr float kP5 = 5.0000001201e-1f;

  float xc = x > kMinArg ? x : kMinArg;  // also maps NaN to kMinArg, patched below
  xc = xc < kMaxArg ? xc : kMaxArg;
  const float shifted =
      xc * kLog2e + kRoundMagic;  // k = round(x / ln 2) sits in the low mantissa bits
  const float k = shifted - kRoundMagic;
  const float r = (xc - k * kLn2Hi) - k * kLn2Lo;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  p = p * r * r + r + 1.0f;
  // Multiply by 2^k by adding k to the exponent field (unsigned arithmetic wraps like two's
  // complement). p is within [0.7, 1.42], and k is in [-126, 128] with r > 0 when k == -126 and
  // r < 0 when k == 128, so the result is a normal float (or overflows to inf at the very top).
  const std::uint32_t k_bits =
      std::bit_cast<std::uint32_t>(shifted) - std::bit_cast<std::uint32_t>(kRoundMagic);
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(p) + (k_bits << 23);
  float result = std::bit_cast<float>(bits);
  result = x < kMinArg ? 0.0f : result;
  result = x > kMaxArg ? std::numeric_limits<float>::infinity() : result;
  result = x != x ? x : result;
  return result;
}

// Combines kLanes partial sums pairwise in a fixed order (lane l with lane l + w, halving w).
template <class T>
inline T combine_lanes(T (&acc)[kLanes]) {
  for (std::int64_t w = kLanes / 2; w > 0; w /= 2) {
    for (std::int64_t l = 0; l < w; ++l)
      acc[l] += acc[l + w];
  }
  return acc[0];
}

// Sum of term(i) over i in [0, n): kLanes interleaved partial sums (lane l takes the i with
// i % kLanes == l, in ascending order), then combine_lanes. Accumulates in T.
template <class T = float, class Term>
inline T sum_of(std::int64_t n, Term term) {
  T acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l)
      acc[l] += term(i + l);
  }
  for (std::int64_t l = 0; i + l < n; ++l)
    acc[l] += term(i + l);
  return combine_lanes(acc);
}

// Two sums in one pass over [0, n), each in the order of sum_of.
template <class TermA, class TermB>
inline void sum_of_pair(std::int64_t n, TermA term_a, TermB term_b, float& sum_a, float& sum_b) {
  float acc_a[kLanes] = {};
  float acc_b[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l) {
      acc_a[l] += term_a(i + l);
      acc_b[l] += term_b(i + l);
    }
  }
  for (std::int64_t l = 0; i + l < n; ++l) {
    acc_a[l] += term_a(i + l);
    acc_b[l] += term_b(i + l);
  }
  sum_a = combine_lanes(acc_a);
  sum_b = combine_lanes(acc_b);
}

inline float sum(const float* x, std::int64_t n) {
  return sum_of(n, [x](std::int64_t i) { return x[i]; });
}

inline float dot(const float* x, const float* y, std::int64_t n) {
  return sum_of(n, [x, y](std::int64_t i) { return x[i] * y[i]; });
}

// Largest element of x[0, n); -inf when n == 0. NaN elements are skipped.
inline float max(const float* x, std::int64_t n) {
  float acc[kLanes];
  for (std::int64_t l = 0; l < kLanes; ++l)
    acc[l] = -std::numeric_limits<float>::infinity();
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l)
      acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  }
  for (std::int64_t l = 0; i + l < n; ++l)
    acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  for (std::int64_t w = kLanes / 2; w > 0; w /= 2) {
    for (std::int64_t l = 0; l < w; ++l)
      acc[l] = acc[l + w] > acc[l] ? acc[l + w] : acc[l];
  }
  return acc[0];
}

// x[i] = exp(x[i] - shift) for i in [0, n); returns the sum of the results (order as in sum()).
inline float exp_shifted_inplace(float* x, std::int64_t n, float shift) {
  for (std::int64_t i = 0; i < n; ++i)
    x[i] = exp_approx(x[i] - shift);
  return sum(x, n);
}

}  // namespace planner::kernels::cpu::detail
