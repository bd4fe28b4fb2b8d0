#include "planner/core/model_partition.hpp"

#include <algorithm>
#include <string>

namespace planner {
namespace {

std::int64_t norm_elements(const ModelSpec& m) {
  return m.norm == NormKind::kLayerNorm ? 2 * m.hidden : m.hidden;
}

}  // namespace

Result<std::vector<int>> stage_layer_counts(int layers, const ParallelConfig& p) {
  const int pp = p.pp;
  const int v = p.virtual_stages;
  const int first = p.first_stage_layers;
  const int last = p.last_stage_layers;
  const auto str = [](std::int64_t x) { return std::to_string(x); };
  if (first < 0 || last < 0) {
    return Status::invalid_input("first_stage_layers and last_stage_layers must be >= 0");
  }
  // dualpipev's V splits a stage's layers in two, the odd one to chunk 0.
  const bool v_shape = p.schedule == Schedule::kDualPipeV;
  if (!p.layout.empty()) {
    if (first > 0 || last > 0) {
      return Status::invalid_input(
          "a layout gives every virtual stage's layers: first_stage_layers and "
          "last_stage_layers must be 0 with it");
    }
    if (v_shape) return Status::invalid_input("a layout is not supported with dualpipev");
    const std::int64_t chunks = static_cast<std::int64_t>(pp) * v;
    if (static_cast<std::int64_t>(p.layout.size()) != chunks) {
      return Status::invalid_input("the layout has " +
                                   str(static_cast<std::int64_t>(p.layout.size())) +
                                   " virtual stages, pp x virtual_stages is " + str(pp) + " x " +
                                   str(v) + " = " + str(chunks));
    }
    std::vector<int> counts(static_cast<std::size_t>(pp), 0);
    std::int64_t sum = 0;
    for (std::size_t vs = 0; vs < p.layout.size(); ++vs) {
      if (p.layout[vs] < 1) {
        return Status::invalid_input("the layout's virtual stage " +
                                     str(static_cast<std::int64_t>(vs)) +
                                     " holds no decoder layer (planner models every virtual stage "
                                     "with one or more)");
      }
      sum += p.layout[vs];
      counts[vs % static_cast<std::size_t>(pp)] += p.layout[vs];
    }
    if (sum != layers) {
      return Status::invalid_input("the layout holds " + str(sum) +
                                   " decoder layers, the model has " + str(layers));
    }
    return counts;
  }
  const int per_chunk = v_shape ? 1 : v;  // what a stage's layers must be a multiple of
  if (first == 0 && last == 0) {
    const std::int64_t chunks = static_cast<std::int64_t>(pp) * v;
    if (v_shape && layers >= chunks && layers % pp == 0) {
      return std::vector<int>(static_cast<std::size_t>(pp), layers / pp);
    }
    if (layers < 1 || layers % chunks != 0) {
      return Status::invalid_input("pp x virtual_stages (" + str(pp) + " x " + str(v) +
                                   ") must divide layers (" + str(layers) +
                                   "), or set first_stage_layers / last_stage_layers");
    }
    return std::vector<int>(static_cast<std::size_t>(pp), layers / pp);
  }
  if (pp < 2) {
    return Status::invalid_input("first_stage_layers and last_stage_layers need pp >= 2");
  }
  std::vector<int> counts(static_cast<std::size_t>(pp), 0);
  const int given = (first > 0 ? 1 : 0) + (last > 0 ? 1 : 0);
  const int others = pp - given;
  const std::int64_t rest = static_cast<std::int64_t>(layers) - first - last;
  const std::string what = "first_stage_layers " + str(first) + " and last_stage_layers " +
                           str(last) + " of " + str(layers) + " layers";
  if (rest < 0) return Status::invalid_input(what + ": more than the model has");
  if (others == 0 && rest != 0) {
    return Status::invalid_input(what + ": with pp 2 they must add up to the layers");
  }
  if (others > 0 && (rest < others || rest % others != 0)) {
    return Status::invalid_input(what + " leave " + str(rest) + " layers, which the other " +
                                 str(others) + " stages cannot share evenly");
  }
  const int each = others > 0 ? static_cast<int>(rest / others) : 0;
  for (int s = 0; s < pp; ++s) {
    int n = each;
    if (s == 0 && first > 0) n = first;
    if (s == pp - 1 && last > 0) n = last;
    if (n % per_chunk != 0 || n < v) {
      return Status::invalid_input("stage " + str(s) + "'s " + str(n) + " layers (" + what +
                                   ") do not split into virtual_stages " + str(v) + " chunks");
    }
    counts[static_cast<std::size_t>(s)] = n;
  }
  return counts;
}

std::optional<std::pair<int, int>> balanced_stage_split(int layers, int pp, int v, int head_units) {
  if (pp < 2 || v < 1 || layers < pp * v) return std::nullopt;
  if (layers % (pp * v) == 0) return std::pair{0, 0};
  const int middle_stages = pp - 2;
  std::optional<std::pair<int, int>> best;
  int best_cost = 0;
  // Each middle stage's layers m (a multiple of v); the first and last share the rest, as evenly
  // as v and their ends allow (on a tie the first takes the odd chunk: the last also computes the
  // LM head and the loss). A split is balanced when no stage holds more than one layer per chunk
  // beyond the even share ⌈(layers + 1 + head_units) / pp⌉: 94 layers on pp 32 with 2 chunks a
  // stage have only 18 + 30 × 2 + 16, whose first stage, six times the share, would set the step;
  // such a layout needs chunks of unequal size (Megatron-core's --pipeline-model-parallel-layout),
  // which planner does not model.
  const int share = (layers + 1 + head_units + pp - 1) / pp;
  const int max_m = middle_stages > 0 ? layers / middle_stages : 0;
  for (int m = middle_stages > 0 ? v : 0; m <= max_m; m += middle_stages > 0 ? v : 1) {
    const int rest = layers - middle_stages * m;
    if (rest < 2 * v || rest % v != 0) {
      if (middle_stages == 0) break;
      continue;
    }
    const int chunks = rest / v;
    // The embedding counts as a layer, the LM head's end as head_units.
    int first = 0, ends = 0;
    for (int c = chunks - 1; c >= 1; --c) {
      const int e = std::max(c * v + 1, (chunks - c) * v + head_units);
      if (first == 0 || e < ends) {
        first = c * v;
        ends = e;
      }
    }
    const int last = rest - first;
    const int cost = std::max(ends, m);
    // On a tie, the larger middle share: fewer layers beside the embedding and the LM head.
    if (!best || cost <= best_cost) {
      best = std::pair{first, last};
      best_cost = cost;
    }
    if (middle_stages == 0) break;
  }
  if (best && best_cost > share + v) return std::nullopt;
  return best;
}

std::optional<std::vector<int>> balanced_layout(int layers, int pp, int v, int head_units) {
  const std::int64_t chunks = static_cast<std::int64_t>(pp) * v;
  if (pp < 1 || v < 1 || chunks < 2 || chunks > layers) return std::nullopt;
  // Every virtual stage holds at most `cap` units; the embedding's and the LM head's take their
  // place in the first and the last.
  const std::int64_t units = static_cast<std::int64_t>(layers) + 1 + head_units;
  const int cap = static_cast<int>((units + chunks - 1) / chunks);
  std::vector<int> out(static_cast<std::size_t>(chunks), cap);
  out.front() = std::max(1, cap - 1);
  out.back() = std::max(1, cap - head_units);
  std::int64_t excess = -static_cast<std::int64_t>(layers);
  for (int n : out)
    excess += n;
  // One layer fewer each for the middle virtual stages from the last back, round after round.
  for (bool removed = true; excess > 0 && removed;) {
    removed = false;
    for (std::int64_t vs = chunks - 2; vs >= 1 && excess > 0; --vs) {
      int& n = out[static_cast<std::size_t>(vs)];
      if (n > 1) {
        --n;
        --excess;
        removed = true;
      }
    }
  }
  if (excess != 0) return std::nullopt;
  return out;
}

std::optional<std::pair<int, int>> balanced_v_split(int layers, int pp, int head_units) {
  if (pp < 2 || layers < 2 * pp) return std::nullopt;
  if (layers % pp == 0) return std::pair{0, 0};
  const int middle_stages = pp - 2;
  std::optional<std::pair<int, int>> best;
  int best_cost = 0;
  for (int k = middle_stages > 0 ? 2 : 0; k <= (middle_stages > 0 ? layers / middle_stages : 0);
       ++k) {
    const int rest = layers - middle_stages * k;
    if (rest < 4) break;
    // Stage 0 also runs the embedding and the LM head's end: as many layers fewer balance it.
    const int first = std::max(2, (rest - 1 - head_units) / 2);
    const int last = rest - first;  // >= 2: first <= rest / 2 once rest >= 4
    const int cost = std::max({first + 1 + head_units, last, k});
    if (!best || cost <= best_cost) {
      best = std::pair{first, last};
      best_cost = cost;
    }
  }
  return best;
}

Result<ModelPartition> ModelPartition::create(const ModelSpec& model, const ParallelConfig& p) {
  if (p.tp < 1 || p.pp < 1 || p.ep < 1 || p.virtual_stages < 1) {
    return Status::invalid_input("model partition: tp, pp, ep and virtual_stages must be >= 1");
  }
  auto counts = stage_layer_counts(model.num_layers, p);
  if (!counts) return Status::invalid_input("model partition: " + counts.status().message());
  ModelPartition part;
  part.model_ = model;
  part.tp_ = p.tp;
  part.ep_ = p.ep;
  part.etp_ = p.expert_tp();
  part.stages_ = p.pp;
  part.chunks_ = p.virtual_stages;
  const bool v_shape = p.schedule == Schedule::kDualPipeV && p.virtual_stages == 2;
  part.layout_ = v_shape ? Schedule::kDualPipeV : Schedule::k1F1B;
  const int v = p.virtual_stages;
  const int pv = p.pp * v;
  part.vs_start_.assign(1, 0);
  for (int vs = 0; vs < pv; ++vs) {
    if (!p.layout.empty()) {  // stage_layer_counts checked it: pv entries, in virtual-stage order
      part.vs_start_.push_back(part.vs_start_.back() + p.layout[static_cast<std::size_t>(vs)]);
      continue;
    }
    const int s = stage_of_virtual(part.layout_, p.pp, vs);
    const int c = chunk_of_virtual(part.layout_, p.pp, vs);
    const int n = (*counts)[static_cast<std::size_t>(s)];
    const int layers = n / v + (c < n % v ? 1 : 0);
    part.vs_start_.push_back(part.vs_start_.back() + layers);
  }
  return part;
}

int ModelPartition::virtual_stage_of_layer(int layer) const {
  const auto it = std::upper_bound(vs_start_.begin(), vs_start_.end(), layer);
  return static_cast<int>(it - vs_start_.begin()) - 1;
}

std::vector<ParamTensor> ModelPartition::chunk_params(int stage, int chunk) const {
  const ModelSpec& m = model_;
  const std::int64_t t = tp_;
  const std::int64_t h = m.hidden;
  const std::int64_t bias = m.bias ? 1 : 0;
  const std::int64_t norm = norm_elements(m);
  std::vector<ParamTensor> out;
  auto add = [&](OpRole role, int layer, std::int64_t split, std::int64_t replicated,
                 bool expert = false) {
    out.push_back({role, layer, split + replicated, replicated, expert, 1});
  };
  const bool single_stage = stages_ * chunks_ == 1 || v_shape();
  const bool single_stage_tied = m.tied_embeddings && single_stage;
  // Ops adding to the gradients of the embedding (and of the LM head): the lookup, the LM head
  // when tied, and each MTP module's lookup and LM head.
  const int mtp = m.mtp_layers;
  if (has_embedding(stage, chunk)) {
    const std::int64_t positions =
        m.position_embedding == PositionEmbedding::kLearned ? m.max_seq_len * h : 0;
    add(OpRole::kEmbedding, OpId::kNone, m.vocab / t * h, positions);
    if (single_stage_tied) out.back().grad_producers = 2 + 2 * mtp;
    if (single_stage && !m.tied_embeddings) out.back().grad_producers = 1 + mtp;
  }
  const int first = first_layer(stage, chunk);
  for (int layer = first; layer < first + layers_per_chunk(stage, chunk); ++layer)
    layer_params(layer, out);
  if (has_lm_head(stage, chunk)) {
    add(OpRole::kFinalNorm, OpId::kNone, 0, norm);
    if (!single_stage_tied) {
      add(OpRole::kLmHead, OpId::kNone, m.vocab / t * h, 0);
      // The tied copy on the last of several stages also serves the MTP modules' lookups.
      out.back().grad_producers = 1 + mtp + (m.tied_embeddings ? mtp : 0);
    }
    for (int i = 0; i < m.mtp_layers; ++i) {
      const int layer = m.num_layers + i;
      if (i == 0 && !single_stage && !m.tied_embeddings) {
        // The word embedding's copy for the MTP modules' lookups, kept equal to the first
        // stage's by the embedding group's gradient all-reduce (as Megatron-core does).
        add(OpRole::kEmbedding, layer, m.vocab / t * h, 0);
        out.back().grad_producers = mtp;
      }
      // enorm and hnorm, eh_proj (column parallel), the block, the module's final norm.
      add(OpRole::kMtpNorm, layer, 0, 2 * norm);
      add(OpRole::kMtpProj, layer, 2 * h * h / t + bias * h / t, 0);
      layer_params(layer, out);
      add(OpRole::kFinalNorm, layer, 0, norm);
    }
  }
  return out;
}

void ModelPartition::layer_params(int layer, std::vector<ParamTensor>& out) const {
  const ModelSpec& m = model_;
  const std::int64_t t = tp_;
  const std::int64_t h = m.hidden;
  const std::int64_t bias = m.bias ? 1 : 0;
  const std::int64_t norm = norm_elements(m);
  auto add = [&](OpRole role, std::int64_t split, std::int64_t replicated, bool expert = false) {
    out.push_back({role, layer, split + replicated, replicated, expert, 1});
  };
  const LayerKind kind = m.layer_kind(layer);
  const bool gated = is_gated(m.mlp);
  if (kind.mixer == Mixer::kAttention && m.mla) {
    const MlaSpec& a = *m.mla;
    const std::int64_t H = m.heads, qk = m.qk_head_dim();
    const std::int64_t kv_latent = static_cast<std::int64_t>(a.kv_lora_rank) + a.qk_rope_head_dim;
    add(OpRole::kAttnNorm, 0, norm);
    if (a.q_lora_rank > 0) {
      add(OpRole::kMlaQDown, 0, h * a.q_lora_rank + bias * a.q_lora_rank);
      add(OpRole::kMlaQNorm, 0, a.q_lora_rank);
      add(OpRole::kMlaQUp, a.q_lora_rank * H * qk / t + bias * H * qk / t, 0);
    } else {
      add(OpRole::kMlaQUp, h * H * qk / t + bias * H * qk / t, 0);
    }
    add(OpRole::kMlaKvDown, 0, h * kv_latent + bias * kv_latent);
    add(OpRole::kMlaKvNorm, 0, a.kv_lora_rank);
    const std::int64_t kv_up = H * (a.qk_nope_head_dim + a.v_head_dim);
    add(OpRole::kMlaKvUp, a.kv_lora_rank * kv_up / t + bias * kv_up / t, 0);
    add(OpRole::kAttnOut, m.v_dim() / t * h, bias * h);
  } else if (kind.mixer == Mixer::kAttention) {
    const std::int64_t qkv = (m.attention_output_gate ? 2 : 1) * m.q_dim() + 2 * m.kv_dim();
    add(OpRole::kAttnNorm, 0, norm);
    add(OpRole::kAttnQkv, h * qkv / t + bias * qkv / t, 0);
    add(OpRole::kAttnOut, m.q_dim() / t * h, bias * h);
  } else if (kind.mixer == Mixer::kMamba) {
    const MambaSpec& s = *m.mamba;
    add(OpRole::kAttnNorm, 0, norm);
    add(OpRole::kMambaInProj, h * s.in_proj_dim() / t + bias * s.in_proj_dim() / t, 0);
    add(OpRole::kMambaConv, s.conv_dim() / t * (s.conv_kernel + (s.conv_bias() ? 1 : 0)), 0);
    add(OpRole::kMambaScan, s.head_params() / t, 0);
    if (s.delta()) {
      add(OpRole::kMambaNorm, 0, s.gated_norm_params());  // one head's weight, shared
    } else {
      add(OpRole::kMambaNorm, s.gated_norm_params() / t, 0);
    }
    add(OpRole::kMambaOut, s.d_inner() / t * h, bias * h);
  }
  if (kind.ffn == FfnKind::kMoe) {
    const std::int64_t local = m.moe->num_experts / ep_;
    const std::int64_t f = m.moe->expert_ffn_hidden / etp_;
    add(OpRole::kMlpNorm, 0, norm);
    add(OpRole::kRouter, 0, h * m.moe->num_experts);
    if (gated) add(OpRole::kExpertGate, local * (h * f + bias * f), 0, true);
    add(OpRole::kExpertUp, local * (h * f + bias * f), 0, true);
    // The down projections' biases are replicated over the expert tensor parallel group.
    add(OpRole::kExpertDown, local * f * h + (etp_ > 1 ? 0 : local * bias * h),
        etp_ > 1 ? local * bias * h : 0, true);
    if (m.moe->shared_ffn() > 0) {
      const std::int64_t fs = m.moe->shared_ffn() / t;
      if (gated) add(OpRole::kSharedGate, h * fs + bias * fs, 0);
      add(OpRole::kSharedUp, h * fs + bias * fs, 0);
      add(OpRole::kSharedDown, fs * h, bias * h);
      if (m.moe->shared_expert_gate) add(OpRole::kSharedExpertGate, 0, h);
    }
  } else if (kind.ffn == FfnKind::kDense) {
    const std::int64_t f = m.ffn_hidden / t;
    add(OpRole::kMlpNorm, 0, norm);
    if (gated) add(OpRole::kMlpGate, h * f + bias * f, 0);
    add(OpRole::kMlpUp, h * f + bias * f, 0);
    add(OpRole::kMlpDown, f * h, bias * h);
  }
}

RankParams ModelPartition::rank_params(int stage) const {
  RankParams r;
  for (int c = 0; c < chunks_; ++c) {
    for (const ParamTensor& p : chunk_params(stage, c)) {
      (p.expert ? r.expert : r.dense) += p.elements;
      if (p.layer == OpId::kNone) r.embedding += p.elements;
      r.tp_replicated += p.tp_replicated;
    }
  }
  return r;
}

StageParams ModelPartition::stage_params(int stage, std::int64_t bucket_elements) const {
  StageParams out;
  for (int c = 0; c < chunks_; ++c) {
    const std::vector<ParamTensor> tensors = chunk_params(stage, c);
    const std::size_t base = out.tensors.size();
    out.tensors.insert(out.tensors.end(), tensors.begin(), tensors.end());
    out.tensor_bucket.resize(out.tensors.size(), -1);
    for (bool expert : {false, true}) {
      int open = -1;
      for (std::size_t i = tensors.size(); i-- > 0;) {
        if (tensors[i].expert != expert) continue;
        if (open < 0) {
          out.buckets.push_back({});
          out.buckets.back().expert = expert;
          open = static_cast<int>(out.buckets.size()) - 1;
        }
        GradBucket& b = out.buckets[static_cast<std::size_t>(open)];
        b.elements += tensors[i].elements;
        b.tensors.push_back(static_cast<int>(base + i));
        out.tensor_bucket[base + i] = open;
        if (b.elements >= bucket_elements) open = -1;
      }
    }
  }
  return out;
}

}  // namespace planner
