// Token routing of an MoE layer as the step program and the memory model see it: how many tokens
// the busiest expert-parallel rank's experts process, and how many bytes its all-to-alls move.
//
// Tokens. Each rank of a stage feeds Ts tokens into an MoE layer (its sequence-parallel shard,
// b·s/(cp·tp), or b·s/cp without tensor parallelism); the router sends each token to top_k of the
// E experts. The experts of one expert-parallel rank (E / ep of them, split over etp ranks) see
// the tokens of the ep × etp ranks that feed them, so an expert's mean load is
//   mean = etp × Ts × top_k × ep / E  tokens.
// Routing is never perfectly balanced: `imbalance` r (ParallelConfig::moe_imbalance, >= 1) is
// the hottest expert's load over the mean, the figure Megatron-LM logs and DeepSeek-V3 §2.1.2
// balances (r = 1 is NVIDIA's force-balanced benchmark setting; measured training runs see 10-20%
// slower steps than balanced, reference data moe_runs.json). The busiest expert-parallel rank
// holds the hottest expert and E/ep − 1 experts at the mean, and it sets the step: every rank's
// program carries its sizes. Its hottest expert processes
//   dropless                      r × mean (Megatron's default, DeepSeek-V3, Qwen3)
//   capacity factor c             min(r, c) × mean: tokens beyond c × mean are dropped (Switch /
//                                 GShard token dropping; Megatron's --moe-expert-capacity-factor)
//   c, padded to capacity         c × mean for every expert (--moe-pad-expert-input-to-capacity)
// so the rank's experts process, per local expert on average,
//   tokens_per_expert = ceil(mean × (E_l − 1 + hot) / E_l),  E_l = E / ep,
// (c × mean when padded), in one grouped GEMM per projection. The capacity factor comes from the
// parallel config (moe_capacity_factor) or, when that is unset, the model (moe.capacity_factor,
// 0 = dropless).
//
// All-to-all. Dispatch and combine carry what the busiest rank receives (an all-to-all ends when
// its largest receiver has its data): tokens_per_expert × E_l / etp tokens of hidden elements,
// each 16-bit (the training precision's activation type), or 1 byte in the forward dispatch with
// FP8 dispatch (DeepSeek-V3 §3.3.2: FP8 dispatch, BF16 combine; backward in BF16).
#pragma once

#include <cstdint>

#include "planner/core/model_spec.hpp"
#include "planner/core/parallel_config.hpp"

namespace planner {

struct MoeRouting {
  bool dropless = true;
  double capacity_factor = 0;   // 0 when dropless
  double hot = 1;               // the hottest expert's processed load over the mean
  double mean = 0;              // mean tokens per expert (after the etp gather)
  std::int64_t per_expert = 0;  // tokens per local expert on the busiest rank
  std::int64_t local_experts = 0;
  std::int64_t expert_ffn = 0;  // an expert's ffn width on one rank (expert_ffn_hidden / etp)
  std::int64_t received = 0;    // tokens the busiest rank receives (before the etp gather)
  std::int64_t tokens_in = 0;   // Ts: tokens entering the layer on a rank
};

// The routing of one MoE layer for one micro-batch (parallel.micro_batch_size sequences of `seq`
// tokens). `parallel` must pass check_parallel(); a dense model gives the default MoeRouting.
MoeRouting moe_routing(const ModelSpec& model, const ParallelConfig& parallel, std::int64_t seq);

}  // namespace planner
