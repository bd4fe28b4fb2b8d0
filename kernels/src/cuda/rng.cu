// Compiled with --fmad=false (kernels/CMakeLists.txt): with the shared generator in
// common/philox.hpp this rounds exactly like cpu/rng.cpp, which is compiled with
// -ffp-contract=off.
#include "common/philox.hpp"
#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/rng.hpp"

namespace planner::kernels::cuda {

Status fill_uniform(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_index,
                    std::int64_t n, float lo, float hi, float* out, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("fill_uniform", "n", n, 0));
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t j) {
        const common::PhiloxBlock b =
            common::philox_block(seed, stream_id, first_index + static_cast<std::uint64_t>(j));
        out[j] = lo + (hi - lo) * common::uniform_from_word(b.w[0]);
      },
      stream, "fill_uniform", DType::kF32);
}

Status fill_normal(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_index,
                   std::int64_t n, float mean, float stddev, float* out, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("fill_normal", "n", n, 0));
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t j) {
        const common::PhiloxBlock b =
            common::philox_block(seed, stream_id, first_index + static_cast<std::uint64_t>(j));
        out[j] = mean + stddev * common::normal_from_words(b.w[0], b.w[1]);
      },
      stream, "fill_normal", DType::kF32);
}

Status fill_normal_block(std::uint64_t seed, std::uint64_t stream_id, std::int64_t full_cols,
                         std::int64_t row0, std::int64_t col0, std::int64_t rows, std::int64_t cols,
                         float mean, float stddev, float* out, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("fill_normal_block", "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("fill_normal_block", "cols", cols, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("fill_normal_block", "row0", row0, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("fill_normal_block", "col0", col0, 0));
  PLANNER_RETURN_IF_ERROR(
      detail::check_at_least("fill_normal_block", "full_cols", full_cols, col0 + cols));
  if (cols == 0) return Status::ok();
  return detail::launch_elementwise(
      rows * cols,
      [=] __device__(std::int64_t i) {
        const std::int64_t r = i / cols;
        const std::int64_t c = i % cols;
        const auto index = static_cast<std::uint64_t>((row0 + r) * full_cols + col0 + c);
        const common::PhiloxBlock b = common::philox_block(seed, stream_id, index);
        out[i] = mean + stddev * common::normal_from_words(b.w[0], b.w[1]);
      },
      stream, "fill_normal_block", DType::kF32);
}

Status fill_tokens(std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_index,
                   std::int64_t n, std::int64_t vocab, std::int32_t* out, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("fill_tokens", "n", n, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("fill_tokens", "vocab", vocab, 1));
  if (vocab > INT32_MAX) {
    return Status::invalid_input("fill_tokens: vocab must be <= 2^31 - 1, got " +
                                 std::to_string(vocab));
  }
  return detail::launch_elementwise(
      n,
      [=] __device__(std::int64_t j) {
        const common::PhiloxBlock b =
            common::philox_block(seed, stream_id, first_index + static_cast<std::uint64_t>(j));
        out[j] = common::token_from_word(b.w[0], vocab);
      },
      stream, "fill_tokens");
}

}  // namespace planner::kernels::cuda
