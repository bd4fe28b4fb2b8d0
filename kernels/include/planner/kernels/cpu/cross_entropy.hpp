// Softmax cross-entropy over the vocabulary, plain and vocabulary-parallel. Conventions as in
// gemm.hpp.
//
// logits is tokens x vocab_local, contiguous: this rank holds columns [vocab_start, vocab_start +
// vocab_local) of the full tokens x vocab logits (the output of a column-parallel LM head).
// targets[t] are global ids in [0, vocab). Per token, with lse = log(sum_v exp(logit_v)):
//   loss = lse - logit_target,   dloss/dlogit_v = softmax_v - [v == target].
//
// Vocabulary-parallel recipe (Megatron-LM's vocab_parallel_cross_entropy), all-reduces over the
// tensor-parallel group:
//   1. cross_entropy_local_max          -> all-reduce MAX of max[tokens]
//   2. cross_entropy_local_sum_exp      -> all-reduce SUM of sum_exp[tokens]
//   3. cross_entropy_local_target_logit -> all-reduce SUM of target_logit[tokens]
//      (2 and 3 may write into one buffer of 2 x tokens and share a single all-reduce)
//   4. cross_entropy_loss               -> loss[tokens] and lse[tokens], identical on every rank
//   5. cross_entropy_backward           -> this rank's dlogits, no communication
// With one rank (vocab_start = 0, vocab_local = vocab) steps 1-4 are cross_entropy_forward.
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

// max[t] = largest logit of row t among this rank's columns.
void cross_entropy_local_max(const float* logits, std::int64_t tokens, std::int64_t vocab_local,
                             float* max);

// sum_exp[t] = sum over this rank's columns of exp(logit - global_max[t]).
void cross_entropy_local_sum_exp(const float* logits, std::int64_t tokens, std::int64_t vocab_local,
                                 const float* global_max, float* sum_exp);

// target_logit[t] = logits[t, targets[t] - vocab_start] when this rank holds the target, else 0.
void cross_entropy_local_target_logit(const float* logits, std::int64_t tokens,
                                      std::int64_t vocab_local, std::int64_t vocab_start,
                                      const std::int32_t* targets, float* target_logit);

// From the reduced statistics: lse[t] = global_max[t] + log(global_sum_exp[t]) and
// loss[t] = lse[t] - global_target_logit[t] (natural log, in nats).
void cross_entropy_loss(std::int64_t tokens, const float* global_max, const float* global_sum_exp,
                        const float* global_target_logit, float* loss, float* lse);

// dlogits[t, v] = grad_scale * (exp(logits[t, v] - lse[t]) - [vocab_start + v == targets[t]]) for
// this rank's columns; grad_scale is d(objective)/d(loss[t]), e.g. 1 / (tokens in the global batch)
// for a mean, times the loss scale. dlogits may be logits (in place).
void cross_entropy_backward(const float* logits, std::int64_t tokens, std::int64_t vocab_local,
                            std::int64_t vocab_start, const std::int32_t* targets, const float* lse,
                            float grad_scale, float* dlogits);

// Plain (one rank) forward: loss[t] and lse[t] from logits of shape tokens x vocab. The backward is
// cross_entropy_backward with vocab_start = 0 and vocab_local = vocab.
void cross_entropy_forward(const float* logits, std::int64_t tokens, std::int64_t vocab,
                           const std::int32_t* targets, float* loss, float* lse);

}  // namespace planner::kernels::cpu
