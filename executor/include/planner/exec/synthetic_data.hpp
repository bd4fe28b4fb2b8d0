// The executor's training data: a synthetic, deterministic token stream, and which sequences each
// data-parallel rank reads in each step.
//
// Sequence g (g = 0, 1, 2, ...) has seq_length + 1 tokens; the model reads tokens 0 .. seq_length-1
// and predicts tokens 1 .. seq_length. Its tokens come from a first-order Markov chain that a
// language model can learn (so the loss curve falls), drawn with the counter-based Philox generator
// (kernels/cpu/rng.hpp), so token p of sequence g is a pure function of (seed, g, p):
//   t_0 = r_0;  t_p = successor(t_{p-1}) with probability kFollowProbability, else r_p,
//   successor(v) = (kSuccessorMultiplier * v + kSuccessorIncrement) mod vocab,
// r_p uniform over the vocabulary. The expected loss of a perfect model is therefore well below
// ln(vocab): about -(0.75 + 0.25/V) ln(0.75 + 0.25/V) - 0.25 (1 - 1/V) ln(0.25/V) nats.
//
// Shard assignment (Megatron-LM's MegatronPretrainingSampler order): in step s, with global batch
// B, data-parallel size dp and micro-batch size mbs, data-parallel rank d reads sequences s·B +
// d·(B/dp) + j·mbs + i for micro-batch j and sample i < mbs. Tensor-, pipeline- and
// context-parallel ranks of one replica read the same sequences (context-parallel ranks their own
// chunks of them).
#pragma once

#include <cstdint>
#include <string>

#include "planner/core/parallel_config.hpp"
#include "planner/core/training_spec.hpp"

namespace planner::exec {

class SyntheticTokens {
 public:
  static constexpr float kFollowProbability = 0.75f;
  static constexpr std::int64_t kSuccessorMultiplier = 5;
  static constexpr std::int64_t kSuccessorIncrement = 3;

  SyntheticTokens(std::uint64_t seed, std::int64_t vocab, std::int64_t seq_length);

  std::int64_t sequence_tokens() const { return seq_length_ + 1; }
  // Writes the seq_length + 1 tokens of sequence `index` to out.
  void sequence(std::int64_t index, std::int32_t* out) const;

 private:
  std::uint64_t seed_;
  std::int64_t vocab_;
  std::int64_t seq_length_;
};

// The index of sample `sample` of micro-batch `microbatch` read by data-parallel rank `dp_rank` in
// step `step` (see the header).
std::int64_t sequence_index(const TrainingSpec& training, const ParallelConfig& parallel,
                            std::int64_t step, int dp_rank, std::int64_t microbatch,
                            std::int64_t sample);

// One line for logs and the run record: the generator, its seed, and which sequences each
// data-parallel rank reads in step s ("dp 1 -> 8s+4..8s+7"), so a run can be reproduced.
std::string describe_data(const TrainingSpec& training, const ParallelConfig& parallel,
                          std::int64_t vocab);

}  // namespace planner::exec
