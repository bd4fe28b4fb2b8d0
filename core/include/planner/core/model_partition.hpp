// How a model is cut into pipeline stages and model chunks, and which parameters one rank holds.
//
// Layers: with p stages and v chunks per stage, every chunk holds L / (p·v) consecutive layers;
// chunk c of stage s is virtual stage c·p + s and holds layers [(c·p + s)·L/(pv), ...). Under
// dualpipev (schedule.hpp) chunk 1 of stage s is virtual stage 2p − 1 − s: the second half of the
// layers runs back from stage p − 1 to stage 0, which holds the LM head beside the embedding.
// Uneven stages (ParallelConfig::first_stage_layers / last_stage_layers, Megatron-core's
// --decoder-first/last-pipeline-num-layers): stage s holds n_s layers, the first and the last
// as given and the others (L − first − last) / (p − given) each; each chunk of stage s holds
// n_s / v of them (under dualpipev n_s need not be even: chunk 0 takes ⌈n_s / 2⌉), and the
// virtual stages hold consecutive layers in their order. The
// embedding sits on virtual stage 0 (stage 0), the final norm and LM head on virtual stage pv − 1
// (stage p − 1). With tied embeddings and more than one stage, the last stage keeps its own copy of
// the word embedding as LM head (Megatron-LM), kept equal by an all-reduce of their gradients.
//
// Parameters per rank (elements), tensor-parallel degree t (Megatron-LM layouts):
//   attn_norm, mlp_norm, final_norm  replicated on the tp ranks (LayerNorm weight + bias, RMSNorm
//   weight) attn_qkv     hidden × (q_dim + 2·kv_dim) / t  (+ bias (q_dim + 2·kv_dim) / t) attn_out
//   q_dim / t × hidden  (+ bias hidden, replicated) mlp_gate, mlp_up   hidden × ffn / t each (gate
//   only for gated MLPs; + bias ffn / t) mlp_down     ffn / t × hidden  (+ bias hidden, replicated)
//   moe_router   hidden × experts, replicated
//   expert_gate/up/down   experts / ep local experts, each split over etp (expert tensor
//                         parallelism) like the dense MLP over tp; held by the expert grid's
//                         ranks (rank_grid.hpp) and reduced over expert data parallelism
//   shared_gate/up/down   the shared experts, split over tp like the dense MLP;
//                         shared_expert_gate (Qwen2-MoE) hidden, replicated
//   MLA        mla_q_down (hidden × q_lora) and mla_kv_down (hidden × (kv_lora + rope)) and the
//              latent norms replicated; mla_q_up and mla_kv_up column parallel; attn_out
//              v_dim / t × hidden
//   Mamba-2    mamba_in_proj hidden × in_proj_dim / t, mamba_conv conv_dim / t × (kernel + 1),
//              mamba_scan (A_log, D, dt_bias) 3·heads / t, mamba_norm d_inner / t, mamba_out
//              d_inner / t × hidden; the block's norm is attn_norm (mlp_norm for MLP blocks).
//              Gated DeltaNet in the same roles: no conv bias, mamba_scan (A_log, dt_bias)
//              2·heads / t, mamba_norm head_dim replicated (one weight shared by the heads)
//   MTP        on the last stage after the LM head, per module: mtp_norm (two norms), mtp_proj
//              2·hidden × hidden / t, its block (layer num_layers + i) and its final_norm; the
//              modules share the LM head and the word embedding, of which a model with several
//              stages (and untied embeddings) keeps a copy on the last stage (embedding, layer
//              num_layers), all-reduced with the first stage's like a tied embedding
//   embedding    vocab / t × hidden  (+ learned positions max_seq_len × hidden, replicated)
//   lm_head      vocab / t × hidden (untied, or the tied copy on the last of several stages)
// "Replicated" parameters are identical on the tp ranks; under sequence parallelism their
// gradients are summed over tp (Megatron's layernorm-grad all-reduce).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "planner/core/model_spec.hpp"
#include "planner/core/parallel_config.hpp"
#include "planner/core/program.hpp"
#include "planner/core/schedule.hpp"
#include "planner/core/status.hpp"

namespace planner {

// One parameter tensor as held by one rank.
struct ParamTensor {
  OpRole role = OpRole::kAttnQkv;  // the op whose (weight-)gradient produces its gradient
  int layer = OpId::kNone;         // global layer; kNone for embedding, final norm, LM head
  std::int64_t elements = 0;       // on this rank, including tp_replicated
  std::int64_t tp_replicated = 0;  // of which identical on all tp ranks
  bool expert = false;             // expert weights: sharded over expert data parallelism
  int grad_producers = 1;          // ops adding to its gradient per micro-batch (2: tied, pp = 1)
};

// A data-parallel gradient bucket (Megatron-LM's DDP buckets): the tensors whose gradients are
// reduced together, laid out in one flat buffer in the order listed.
struct GradBucket {
  bool expert = false;        // expert weights (reduced over expert data parallelism)
  std::int64_t elements = 0;  // sum of the tensors' elements
  std::vector<int> tensors;   // indices into StageParams::tensors, in flat-buffer order
};

// The parameter tensors of one rank of a stage and their gradient buckets.
struct StageParams {
  std::vector<ParamTensor> tensors;  // every chunk, chunk by chunk, in registration order
  std::vector<int> tensor_bucket;    // bucket of each tensor
  std::vector<GradBucket> buckets;   // chunk by chunk: dense buckets, then expert buckets
};

// Parameter elements on one rank, by how they are synchronised.
struct RankParams {
  std::int64_t dense = 0;      // reduced over dp (dp-cp): attention, dense MLP, router, norms
  std::int64_t expert = 0;     // reduced over expert data parallel
  std::int64_t embedding = 0;  // of `dense`: word/position embedding, LM head, final norm
  std::int64_t tp_replicated = 0;
  std::int64_t total() const { return dense + expert; }
};

// The layers of each pipeline stage under `p` (its first_stage_layers and last_stage_layers, the
// rest shared evenly); kInvalidInput, naming the field, when they do not add up to `layers`, a
// stage would be left without a layer, or a stage's layers do not split into its
// virtual_stages chunks.
Result<std::vector<int>> stage_layer_counts(int layers, const ParallelConfig& p);

// The layers the LM head's stage carries beyond its decoder layers, for a balanced split: the LM
// head with the loss counts as one, and each multi-token-prediction module as two more (its
// transformer layer, and its own LM head with the loss).
inline int lm_head_units(const ModelSpec& m) {
  return 1 + 2 * m.mtp_layers;
}

// The uneven split to use when pp × virtual_stages does not divide `layers`: the first and last
// stage's layers (0, 0 when the even split works). The embedding and the LM head with the loss
// count as one layer each, as Megatron-core's --account-for-embedding-in-pipeline-split and
// --account-for-loss-in-pipeline-split and DeepSpeed's 'type:transformer|embedding' partition
// count them (`head_units`: the LM head stage's extra layers, lm_head_units()), and the split
// minimises the largest stage: Llama 3 405B's 126 layers on pp 16 give 7 + 14 × 8 + 7, BLOOM's
// 70 on pp 12 give 5 + 10 × 6 + 5, DeepSeek-V3's 61 with its MTP module on pp 16 4 + 14 × 4 + 1.
// nullopt when no split exists, or when the best one leaves a stage more than virtual_stages
// layers above the even share ⌈(layers + 1 + head_units) / pp⌉ (94 layers on pp 32 in 2 chunks a
// stage: 18 + 30 × 2 + 16).
std::optional<std::pair<int, int>> balanced_stage_split(int layers, int pp, int virtual_stages,
                                                        int head_units = 1);

// Chunks of unequal size where no uneven split of the stages works (Megatron-core's
// --pipeline-model-parallel-layout): the decoder layers of each of the pp × virtual_stages virtual
// stages (ParallelConfig::layout), the embedding and the LM head with the loss counted as one
// layer and `head_units` layers, no virtual stage holding more than its share ⌈units / chunks⌉
// and every one a layer or more; the layers left over come off the middle virtual stages from the
// last back. Qwen3-235B's 94 layers on pp 8 with 4 chunks: 2 + 30 × 3 + 2 (Megatron-core's
// account-for-embedding and -loss split); DeepSeek-V3's 61 on pp 8 with 4: 1 + 29 × 2 + 1 + 1,
// with its MTP module on the last (head_units 3) and pp 4: 4 + 13 × 4 + 3 + 2.
// nullopt with fewer layers than virtual stages.
std::optional<std::vector<int>> balanced_layout(int layers, int pp, int virtual_stages,
                                                int head_units = 1);

// The same for dualpipev, whose stage 0 holds the embedding and the LM head (each counted as a
// layer, the head as `head_units`) and whose stages need not split their layers evenly in two:
// the first and last stage's layers (at least 2 each; 0, 0 when pp divides the layers), the others
// an equal share, the largest stage smallest. DeepSeek-V3's 61 layers on pp 16: 2 + 14 × 4 + 3.
// nullopt when the layers are fewer than 2·pp.
std::optional<std::pair<int, int>> balanced_v_split(int layers, int pp, int head_units = 1);

class ModelPartition {
 public:
  // Fails when the layers do not split into the stages and chunks (stage_layer_counts) or a size
  // is < 1.
  static Result<ModelPartition> create(const ModelSpec& model, const ParallelConfig& parallel);

  int stages() const { return stages_; }
  int chunks() const { return chunks_; }
  int virtual_stages() const { return stages_ * chunks_; }
  // Layers of chunk `chunk` of `stage` (all alike unless the stages are uneven; under dualpipev
  // chunk 0 takes the odd layer of a stage whose layers do not split in two).
  int layers_per_chunk(int stage, int chunk) const {
    const auto vs = static_cast<std::size_t>(virtual_stage(stage, chunk));
    return vs_start_[vs + 1] - vs_start_[vs];
  }
  int first_layer(int stage, int chunk) const {
    return vs_start_[static_cast<std::size_t>(virtual_stage(stage, chunk))];
  }
  // Layers of all chunks of `stage`, and those of its chunks before `chunk`.
  int stage_layers(int stage) const { return local_first(stage, chunks_); }
  int local_first(int stage, int chunk) const {
    int n = 0;
    for (int c = 0; c < chunk; ++c)
      n += layers_per_chunk(stage, c);
    return n;
  }
  // The virtual stage of chunk `chunk` of `stage` (schedule.hpp's virtual_stage_of).
  int virtual_stage(int stage, int chunk) const {
    return virtual_stage_of(layout_, stages_, stage, chunk);
  }
  // Where a global layer lives: its virtual stage, chunk and stage.
  int virtual_stage_of_layer(int layer) const;
  int chunk_of_layer(int layer) const {
    return chunk_of_virtual(layout_, stages_, virtual_stage_of_layer(layer));
  }
  int stage_of_layer(int layer) const {
    return stage_of_virtual(layout_, stages_, virtual_stage_of_layer(layer));
  }
  bool has_embedding(int stage, int chunk) const { return stage == 0 && chunk == 0; }
  bool has_lm_head(int stage, int chunk) const {
    return stage == (v_shape() ? 0 : stages_ - 1) && chunk == chunks_ - 1;
  }
  // True when the embedding and the LM head sit on one stage (one stage, or dualpipev's V).
  bool ends_on_one_stage() const { return stages_ == 1 || v_shape(); }
  // Parameter tensors of one model chunk on one rank of `stage`, in registration (forward)
  // order: embedding, then per layer attn_norm, attn_qkv, attn_out, mlp_norm, MLP or MoE
  // tensors, then final_norm and lm_head.
  std::vector<ParamTensor> chunk_params(int stage, int chunk) const;
  // Totals over all chunks of a rank of `stage`.
  RankParams rank_params(int stage) const;
  // All tensors of a rank of `stage` and their gradient buckets: per chunk, dense and expert
  // tensors apart, walked in reverse registration order (the order backward produces their
  // gradients); a bucket closes once it holds at least `bucket_elements` (>= 1) elements. The
  // lowering reduces these buckets; the executor lays its gradient buffers out the same way.
  StageParams stage_params(int stage, std::int64_t bucket_elements) const;

 private:
  // Appends the tensors of layer `layer` (an MTP block when >= layers) on one rank.
  void layer_params(int layer, std::vector<ParamTensor>& out) const;

  ModelSpec model_;
  int tp_ = 1;
  int ep_ = 1;
  int etp_ = 1;
  int stages_ = 1;
  int chunks_ = 1;
  bool v_shape() const { return layout_ == Schedule::kDualPipeV; }

  // How chunks map to virtual stages: kDualPipeV for its V, k1F1B for every other schedule.
  Schedule layout_ = Schedule::k1F1B;
  std::vector<int> vs_start_;  // per virtual stage (and one past the last): its first layer
};

}  // namespace planner
