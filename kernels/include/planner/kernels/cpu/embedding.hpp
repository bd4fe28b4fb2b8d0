// Token and learned position embeddings, forward and backward. Conventions as in gemm.hpp.
//
// The token embedding is vocabulary-parallel like Megatron-LM's VocabParallelEmbedding: a rank
// holds rows [vocab_start, vocab_start + vocab_rows) of the full vocab x dim table (one rank:
// vocab_start = 0, vocab_rows = vocab). Backward kernels accumulate (+=) into the weight gradients,
// walking tokens in ascending order, so the result does not depend on which ids repeat or how they
// are distributed.
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

// out[t, :] = weight[ids[t] - vocab_start, :] when ids[t] is in this rank's rows, else 0, for
// t < tokens. out is tokens x dim; weight is vocab_rows x dim. The sum of out over the ranks of a
// vocabulary split (an all-reduce) is the full lookup.
void embedding_forward(const std::int32_t* ids, std::int64_t tokens, const float* weight,
                       std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                       float* out);

// dweight[ids[t] - vocab_start, :] += dout[t, :] for every t < tokens whose id is in this rank's
// rows.
void embedding_backward(const std::int32_t* ids, std::int64_t tokens, const float* dout,
                        std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                        float* dweight);

// Learned absolute position embedding (GPT-2): x[b, s, :] += pos_weight[positions[s], :] for x of
// shape batch x seq x dim. positions[s] is the global position of local slot s (seq entries, each
// below the table's rows); they need not be contiguous, so a context-parallel rank holding two
// chunks of the sequence lists the positions of both.
void position_embedding_forward(const std::int32_t* positions, std::int64_t batch, std::int64_t seq,
                                const float* pos_weight, std::int64_t dim, float* x);

// dpos_weight[positions[s], :] += dx[b, s, :] for every b < batch and s < seq (b outer, s inner).
void position_embedding_backward(const std::int32_t* positions, std::int64_t batch,
                                 std::int64_t seq, const float* dx, std::int64_t dim,
                                 float* dpos_weight);

}  // namespace planner::kernels::cpu
