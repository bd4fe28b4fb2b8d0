// Mixture-of-experts routing kernels (fp32): the router's top-k selection and its gradient, and
// the row movements of token dispatch and combine. Conventions as in gemm.hpp (row-major).
//
// Routing (moe_route): scores are the softmax of a row's logits over all experts (Mixtral, Qwen,
// Megatron's default) or their sigmoid (DeepSeek-V3). With expert groups (group-limited routing,
// DeepSeek-V2/V3) a token first keeps the group_top_k groups with the highest group score (the
// largest score in the group for softmax, the sum of its two largest for sigmoid, as DeepSeek-V2
// and V3 rank groups) and picks its top_k experts among them. The weights are the chosen scores
// normalised to sum to 1 (Mixtral's and Megatron's renormalised top-k; DeepSeek-V3's
// norm_topk_prob). Ties go to the lower expert index; experts are listed in descending score.
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

struct MoeRouteConfig {
  int experts = 0;
  int top_k = 0;
  int groups = 1;       // expert groups (1: no group limit)
  int group_top_k = 1;  // groups a token may use
  bool sigmoid = false;
};

// For each of `rows` rows of `logits` (rows x experts): scores (rows x experts, fp32), the chosen
// experts (rows x top_k) and their weights (rows x top_k).
void moe_route(const float* logits, std::int64_t rows, const MoeRouteConfig& config, float* scores,
               std::int32_t* experts, float* weights);

// The logits' gradient (rows x experts, overwritten) from the weights' gradient dweights
// (rows x top_k), through the normalisation and the softmax or sigmoid; the selection itself has
// no gradient.
void moe_route_backward(const float* scores, const std::int32_t* experts, const float* weights,
                        const float* dweights, std::int64_t rows, const MoeRouteConfig& config,
                        float* dlogits);

// dst[i, :] = src[index[i], :] for i < rows (cols columns).
void gather_rows(const float* src, const std::int32_t* index, std::int64_t rows, std::int64_t cols,
                 float* dst);

// dst[t, :] (+)= sum over j < k of w[t, j] · src[pos[t, j], :] for t < rows, j ascending; w null
// means 1. Overwrites dst unless `accumulate`.
void moe_combine(const float* src, const std::int32_t* pos, const float* w, std::int64_t rows,
                 std::int64_t k, std::int64_t cols, bool accumulate, float* dst);

// The combine's gradients: dsrc[pos[t, j], :] = w[t, j] · dy[t, :] and
// dw[t, j] = dy[t, :] · src[pos[t, j], :].
void moe_combine_backward(const float* dy, const float* src, const std::int32_t* pos,
                          const float* w, std::int64_t rows, std::int64_t k, std::int64_t cols,
                          float* dsrc, float* dw);

}  // namespace planner::kernels::cpu
