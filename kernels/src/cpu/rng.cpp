#include "planner/kernels/cpu/rng.hpp"

#include <cassert>

#include "common/philox.hpp"

namespace planner::kernels::cpu {
namespace {

// FNV-1a 64-bit parameters (Fowler, Noll, Vo; IETF draft-eastlake-fnv).
constexpr std::uint64_t kFnvOffsetBasis = 14695981039346656037ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

}  // namespace

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key) {
  const common::PhiloxBlock out = common::philox4x32_10(
      common::PhiloxBlock{{counter[0], counter[1], counter[2], counter[3]}}, key[0], key[1]);
  return {out.w[0], out.w[1], out.w[2], out.w[3]};
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
  return common::uniform_from_word(common::philox_block(seed, stream, index).w[0]);
}

float normal_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const common::PhiloxBlock b = common::philox_block(seed, stream, index);
  return common::normal_from_words(b.w[0], b.w[1]);
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
    out[j] = common::token_from_word(
        common::philox_block(seed, stream, first_index + static_cast<std::uint64_t>(j)).w[0],
        vocab);
  }
}

}  // namespace planner::kernels::cpu
