// Softmax cross-entropy over the vocabulary on the GPU, plain and vocabulary-parallel, in the same
// five steps as cpu/cross_entropy.hpp (the all-reduces between steps are the caller's). Conventions
// in dtype.hpp: logits and dlogits are T (float, bf16 or fp16); the per-token statistics, loss and
// lse are fp32; targets are device int32 global ids. One thread block per token row.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "planner/core/status.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

// 1. max[t] = largest logit of row t among this rank's columns (-inf for an empty slice).
template <class T>
Status cross_entropy_local_max(const T* logits, std::int64_t tokens, std::int64_t vocab_local,
                               float* max, cudaStream_t stream);

// 2. sum_exp[t] = sum over this rank's columns of exp(logit - global_max[t]).
template <class T>
Status cross_entropy_local_sum_exp(const T* logits, std::int64_t tokens, std::int64_t vocab_local,
                                   const float* global_max, float* sum_exp, cudaStream_t stream);

// 3. target_logit[t] = the target's logit when this rank holds it, else 0.
template <class T>
Status cross_entropy_local_target_logit(const T* logits, std::int64_t tokens,
                                        std::int64_t vocab_local, std::int64_t vocab_start,
                                        const std::int32_t* targets, float* target_logit,
                                        cudaStream_t stream);

// 4. lse[t] = global_max[t] + log(global_sum_exp[t]); loss[t] = lse[t] - global_target_logit[t].
Status cross_entropy_loss(std::int64_t tokens, const float* global_max, const float* global_sum_exp,
                          const float* global_target_logit, float* loss, float* lse,
                          cudaStream_t stream);

// 5. dlogits[t, v] = grad_scale * (exp(logit - lse[t]) - [vocab_start + v == targets[t]]);
// dlogits may be logits.
template <class T>
Status cross_entropy_backward(const T* logits, std::int64_t tokens, std::int64_t vocab_local,
                              std::int64_t vocab_start, const std::int32_t* targets,
                              const float* lse, float grad_scale, T* dlogits, cudaStream_t stream);

// Steps 1-4 for one rank holding the whole vocabulary, fused into one kernel.
template <class T>
Status cross_entropy_forward(const T* logits, std::int64_t tokens, std::int64_t vocab,
                             const std::int32_t* targets, float* loss, float* lse,
                             cudaStream_t stream);

}  // namespace planner::kernels::cuda
