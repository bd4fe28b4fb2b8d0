#include "planner/exec/synthetic_data.hpp"

#include <vector>

#include "planner/kernels/cpu/rng.hpp"

namespace planner::exec {
namespace {

namespace cpu = kernels::cpu;

const std::uint64_t kRandomTokenStream = cpu::tensor_stream_id("data.random_token");
const std::uint64_t kFollowStream = cpu::tensor_stream_id("data.follow");

}  // namespace

SyntheticTokens::SyntheticTokens(std::uint64_t seed, std::int64_t vocab, std::int64_t seq_length)
    : seed_(seed), vocab_(vocab), seq_length_(seq_length) {}

void SyntheticTokens::sequence(std::int64_t index, std::int32_t* out) const {
  const std::int64_t n = sequence_tokens();
  const auto first = static_cast<std::uint64_t>(index * n);
  cpu::fill_tokens(seed_, kRandomTokenStream, first, n, vocab_, out);
  for (std::int64_t p = 1; p < n; ++p) {
    if (cpu::uniform_at(seed_, kFollowStream, first + static_cast<std::uint64_t>(p)) <
        kFollowProbability) {
      out[p] = static_cast<std::int32_t>((kSuccessorMultiplier * out[p - 1] + kSuccessorIncrement) %
                                         vocab_);
    }
  }
}

std::int64_t sequence_index(const TrainingSpec& training, const ParallelConfig& parallel,
                            std::int64_t step, int dp_rank, std::int64_t microbatch,
                            std::int64_t sample) {
  const std::int64_t per_replica = training.global_batch_size / parallel.dp;
  return step * training.global_batch_size + dp_rank * per_replica +
         microbatch * parallel.micro_batch_size + sample;
}

std::string describe_data(const TrainingSpec& training, const ParallelConfig& parallel,
                          std::int64_t vocab) {
  const std::int64_t b = training.global_batch_size;
  const std::int64_t per_replica = b / parallel.dp;
  const std::string step = std::to_string(b) + "s";
  auto at = [&](std::int64_t offset) { return step + "+" + std::to_string(offset); };
  std::string s = "synthetic Markov tokens (seed " + std::to_string(training.seed) + ", vocab " +
                  std::to_string(vocab) + ", " + std::to_string(training.seq_length) +
                  " tokens per sequence); step s reads sequences " + at(0) + ".." + at(b - 1) + ":";
  for (int d = 0; d < parallel.dp; ++d) {
    s += " dp " + std::to_string(d) + " -> " + at(d * per_replica) + ".." +
         at((d + 1) * per_replica - 1);
    if (d + 1 < parallel.dp) s += ",";
  }
  s += " (" + std::to_string(per_replica / parallel.micro_batch_size) + " micro-batches of " +
       std::to_string(parallel.micro_batch_size) + " each, in order)";
  return s;
}

}  // namespace planner::exec
