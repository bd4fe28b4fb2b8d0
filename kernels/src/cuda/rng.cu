// Compiled with --fmad=false (kernels/CMakeLists.txt): with the shared generator in
// common/philox.hpp this rounds exactly like cpu/rng.cpp, which is compiled with
// -ffp-contract=off.
#include <string>

#include "common/philox.hpp"
#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/rng.hpp"

namespace planner::kernels::cuda {
namespace {

// The value of one element from its Philox block, as cpu::uniform_at / normal_at / fill_tokens.
struct Uniform {
  float lo, hi;
  __device__ float operator()(const common::PhiloxBlock& b) const {
    return lo + (hi - lo) * common::uniform_from_word(b.w[0]);
  }
};
struct Normal {
  float mean, stddev;
  __device__ float operator()(const common::PhiloxBlock& b) const {
    return mean + stddev * common::normal_from_words(b.w[0], b.w[1]);
  }
};
struct Token {
  std::int64_t vocab;
  __device__ std::int32_t operator()(const common::PhiloxBlock& b) const {
    return common::token_from_word(b.w[0], vocab);
  }
};

// out[j] = value(block of element first_index + j) for j < n.
template <class Value, class Out>
Status fill(const char* kernel, std::uint64_t seed, std::uint64_t stream_id,
            std::uint64_t first_index, std::int64_t n, Value value, Out* out, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "n", n, 0));
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t j) {
        out[j] = value(
            common::philox_block(seed, stream_id, first_index + static_cast<std::uint64_t>(j)));
      },
      stream, kernel);
}

}  // namespace

Status fill_uniform(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_index,
                    std::int64_t n, float lo, float hi, float* out, cudaStream_t stream) {
  return fill("fill_uniform", seed, stream_id, first_index, n, Uniform{lo, hi}, out, stream);
}

Status fill_normal(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_index,
                   std::int64_t n, float mean, float stddev, float* out, cudaStream_t stream) {
  return fill("fill_normal", seed, stream_id, first_index, n, Normal{mean, stddev}, out, stream);
}

Status fill_normal_block(std::uint64_t seed, std::uint64_t stream_id, std::int64_t full_cols,
                         std::int64_t row0, std::int64_t col0, std::int64_t rows, std::int64_t cols,
                         float mean, float stddev, float* out, cudaStream_t stream) {
  const char* kernel = "fill_normal_block";
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "cols", cols, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "row0", row0, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "col0", col0, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "full_cols", full_cols, col0 + cols));
  if (cols == 0) return Status::ok();
  const Normal value{mean, stddev};
  return detail::launch_elementwise(
      rows * cols,
      [=] __device__(std::int64_t i) {
        const std::int64_t r = i / cols;
        const std::int64_t c = i % cols;
        const auto index = static_cast<std::uint64_t>((row0 + r) * full_cols + col0 + c);
        out[i] = value(common::philox_block(seed, stream_id, index));
      },
      stream, kernel);
}

Status fill_tokens(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_index,
                   std::int64_t n, std::int64_t vocab, std::int32_t* out, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("fill_tokens", "vocab", vocab, 1));
  if (vocab > INT32_MAX) {
    return Status::invalid_input("fill_tokens: vocab must be <= 2^31 - 1, got " +
                                 std::to_string(vocab));
  }
  return fill("fill_tokens", seed, stream_id, first_index, n, Token{vocab}, out, stream);
}

}  // namespace planner::kernels::cuda
