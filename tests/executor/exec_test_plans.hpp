// Tiny models and plans for the executor's tests: small enough that 20 training steps on 8
// oversubscribed ranks take seconds, while exercising every code path of the runner (LayerNorm and
// RMSNorm, GeLU and SwiGLU, learned positions and RoPE, MHA and GQA, biases, tied embeddings,
// mixtures of experts with and without a shared expert).
#pragma once

#include <cstdint>
#include <string>

#include "planner/core/catalog.hpp"
#include "planner/core/plan.hpp"

namespace planner::exec::testing {

// GPT-style: LayerNorm, GeLU, learned positions, multi-head attention, biases.
inline ModelSpec gpt_test_model(bool tied = false) {
  ModelSpec m;
  m.name = tied ? "gpt-test-tied" : "gpt-test";
  m.num_layers = 4;
  m.hidden = 32;
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 8;
  m.ffn_hidden = 128;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position_embedding = PositionEmbedding::kLearned;
  m.vocab = 64;
  m.tied_embeddings = tied;
  m.max_seq_len = 64;
  m.bias = true;
  return m;
}

// Llama-style: RMSNorm, SwiGLU, RoPE, grouped-query attention (2 query heads per K/V head), no
// biases.
inline ModelSpec llama_test_model() {
  ModelSpec m;
  m.name = "llama-test";
  m.num_layers = 4;
  m.hidden = 32;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 8;
  m.ffn_hidden = 64;
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.position_embedding = PositionEmbedding::kRope;
  m.vocab = 64;
  m.max_seq_len = 64;
  m.bias = false;
  return m;
}

// Mixture of experts on the Llama-style layer: 8 experts of ffn 32, top 2, dropless; `shared`
// adds a shared expert of ffn 32 and routes DeepSeek-V3 style (sigmoid scores, 4 expert groups of
// which a token uses 2).
inline ModelSpec moe_test_model(bool shared = false) {
  ModelSpec m = llama_test_model();
  m.name = shared ? "moe-test-shared" : "moe-test";
  m.moe = MoeSpec{};
  m.moe->num_experts = 8;
  m.moe->top_k = 2;
  m.moe->expert_ffn_hidden = 32;
  m.moe->capacity_factor = 0.0;  // dropless
  if (shared) {
    m.moe->first_dense_layers = 1;
    m.moe->shared_experts = 1;
    m.moe->shared_expert_ffn_hidden = 32;
    m.moe->scoring = RouterScoring::kSigmoid;
    m.moe->expert_groups = 4;
    m.moe->group_top_k = 2;
  }
  return m;
}

inline ParallelConfig par(int tp, int pp, int dp, int cp = 1) {
  ParallelConfig p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.cp = cp;
  return p;
}

// A plan on the cpu-host pseudo-GPU with one host holding every rank.
inline Plan test_plan(const ModelSpec& model, const ParallelConfig& parallel,
                      Optimizer optimizer = Optimizer::kAdam, std::int64_t global_batch = 8,
                      std::int64_t seq = 16) {
  Plan p;
  p.name = model.name + " " + short_label(parallel);
  p.model = model;
  p.gpu = *builtin_catalog().find_gpu("cpu-host");
  p.cluster.nodes = 1;
  p.cluster.gpus_per_node = static_cast<int>(parallel.world_size());
  p.cluster.gpu = "cpu-host";
  p.training.global_batch_size = global_batch;
  p.training.seq_length = seq;
  p.training.precision = Precision::kFp32;
  p.training.optimizer = optimizer;
  p.training.seed = 7;
  p.parallel = parallel;
  return p;
}

// The test plan in `precision` on an H100 (the cpu-host pseudo-GPU has only fp32 rates and plans
// are checked against their GPU's precisions; nothing else of the GPU matters to these tests).
inline Plan precision_plan(const ModelSpec& model, const ParallelConfig& parallel,
                           Precision precision) {
  Plan p = test_plan(model, parallel);
  p.gpu = *builtin_catalog().find_gpu("H100");
  p.cluster.gpu = p.gpu.name;
  p.training.precision = precision;
  p.name += std::string(" ") + std::string(to_string(precision));
  return p;
}

}  // namespace planner::exec::testing
