#include "planner/kernels/cpu/rng.hpp"

#include <cassert>
#include <cmath>
#include <numbers>

namespace planner::kernels::cpu {
namespace {

// Philox4x32 round multipliers and Weyl key increments (Salmon et al. 2011, table 2; Random123).
constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1
constexpr int kPhiloxRounds = 10;

// FNV-1a 64-bit parameters (Fowler, Noll, Vo; IETF draft-eastlake-fnv).
constexpr std::uint64_t kFnvOffsetBasis = 14695981039346656037ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

constexpr double kTwoPow32 = 4294967296.0;
constexpr float kTwoPowMinus24 = 1.0f / 16777216.0f;

std::array<std::uint32_t, 4> block(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return philox4x32_10(
      {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
       static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

}  // namespace

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key) {
  std::array<std::uint32_t, 4> c = counter;
  std::array<std::uint32_t, 2> k = key;
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) {
      k[0] += kPhiloxW0;
      k[1] += kPhiloxW1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(kPhiloxM0) * c[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kPhiloxM1) * c[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32);
    const auto lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32);
    const auto lo1 = static_cast<std::uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

std::uint64_t tensor_stream_id(std::string_view name) {
  std::uint64_t h = kFnvOffsetBasis;
  for (const char ch : name) {
    h ^= static_cast<unsigned char>(ch);
    h *= kFnvPrime;
  }
  return h;
}

float uniform_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return static_cast<float>(block(seed, stream, index)[0] >> 8) * kTwoPowMinus24;
}

float normal_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const std::array<std::uint32_t, 4> w = block(seed, stream, index);
  const double u1 = (static_cast<double>(w[0]) + 0.5) / kTwoPow32;  // in (0, 1): log is finite
  const double u2 = static_cast<double>(w[1]) / kTwoPow32;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

void fill_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t first_index,
                  std::int64_t n, float lo, float hi, float* out) {
  for (std::int64_t j = 0; j < n; ++j) {
    out[j] = lo + (hi - lo) * uniform_at(seed, stream, first_index + static_cast<std::uint64_t>(j));
  }
}

void fill_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t first_index,
                 std::int64_t n, float mean, float stddev, float* out) {
  for (std::int64_t j = 0; j < n; ++j) {
    out[j] = mean + stddev * normal_at(seed, stream, first_index + static_cast<std::uint64_t>(j));
  }
}

void fill_normal_block(std::uint64_t seed, std::uint64_t stream, std::int64_t full_cols,
                       std::int64_t row0, std::int64_t col0, std::int64_t rows, std::int64_t cols,
                       float mean, float stddev, float* out) {
  assert(row0 >= 0 && col0 >= 0 && col0 + cols <= full_cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    fill_normal(seed, stream, static_cast<std::uint64_t>((row0 + r) * full_cols + col0), cols, mean,
                stddev, out + r * cols);
  }
}

void fill_tokens(std::uint64_t seed, std::uint64_t stream, std::uint64_t first_index,
                 std::int64_t n, std::int64_t vocab, std::int32_t* out) {
  assert(vocab >= 1 && vocab <= INT32_MAX);
  for (std::int64_t j = 0; j < n; ++j) {
    const std::uint64_t w = block(seed, stream, first_index + static_cast<std::uint64_t>(j))[0];
    out[j] = static_cast<std::int32_t>((w * static_cast<std::uint64_t>(vocab)) >> 32);
  }
}

}  // namespace planner::kernels::cpu
