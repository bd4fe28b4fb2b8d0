#include "planner/fit/moe_record_model.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "planner/core/limits.hpp"
#include "planner/core/loaders.hpp"

namespace planner::fit {
namespace {

// How far the built model's parameter count may stray from the record's nominal one before the
// note says the notes may be incomplete.
constexpr double kParamsTolerance = 0.1;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// The record's model.arch_notes, lower-cased, searched for the config keys they quote. A key
// matches where no letter, digit or underscore touches it on either side ("head_dim" is not found
// in "v_head_dim").
class Notes {
 public:
  explicit Notes(std::string_view text) : text_(lower(text)) {}

  // Where the text after the first whole-word `key` starts; npos when the key is absent.
  std::size_t after(std::string_view key) const {
    for (std::size_t at = text_.find(key); at != std::string::npos; at = text_.find(key, at + 1)) {
      const std::size_t end = at + key.size();
      if ((at == 0 || !is_word_char(text_[at - 1])) &&
          (end >= text_.size() || !is_word_char(text_[end]))) {
        return end;
      }
    }
    return std::string::npos;
  }
  bool says(std::string_view key) const { return after(key) != std::string::npos; }
  bool mentions(std::string_view part) const { return text_.find(part) != std::string::npos; }

  // The value after `key` and its separators (spaces, '=', ':', quotes): "head_dim 128",
  // "first_k_dense_replace=3", "kv_lora_rank: 512".
  std::string_view value(std::string_view key) const {
    std::size_t at = after(key);
    if (at == std::string::npos) return {};
    while (at < text_.size() && (text_[at] == ' ' || text_[at] == '=' || text_[at] == ':'))
      ++at;
    std::size_t end = at;
    if (end < text_.size() && text_[end] == '"') {
      end = text_.find('"', at + 1);
      return end == std::string::npos ? std::string_view{}
                                      : std::string_view(text_).substr(at + 1, end - at - 1);
    }
    while (end < text_.size() && (is_word_char(text_[end]) || text_[end] == '*' ||
                                  text_[end] == '-' || text_[end] == '[' || text_[end] == ']')) {
      ++end;
    }
    return std::string_view(text_).substr(at, end - at);
  }

  // The integer after `key`; "null" and "none" read as 0 (DeepSeek-V2-Lite's q_lora_rank).
  std::optional<std::int64_t> integer(std::string_view key) const {
    const std::string_view v = value(key);
    if (v == "null" || v == "none") return 0;
    std::int64_t out = 0;
    std::size_t i = 0;
    for (; i < v.size() && std::isdigit(static_cast<unsigned char>(v[i])) != 0; ++i) {
      if (out > (INT64_MAX - 9) / 10) return std::nullopt;
      out = out * 10 + (v[i] - '0');
    }
    if (i == 0) return std::nullopt;
    return out;
  }
  std::optional<std::int64_t> integer_of(std::initializer_list<std::string_view> keys,
                                         std::string_view* which = nullptr) const {
    for (std::string_view k : keys) {
      if (auto v = integer(k)) {
        if (which != nullptr) *which = k;
        return v;
      }
    }
    return std::nullopt;
  }

  // The list after `key`: "mlp_only_layers [0, 1, 2]" (an empty list is empty).
  std::optional<std::vector<std::int64_t>> list(std::string_view key) const {
    std::size_t at = after(key);
    if (at == std::string::npos) return std::nullopt;
    while (at < text_.size() && (text_[at] == ' ' || text_[at] == '=' || text_[at] == ':'))
      ++at;
    if (at >= text_.size() || text_[at] != '[') return std::nullopt;
    const std::size_t end = text_.find(']', at);
    if (end == std::string::npos) return std::nullopt;
    std::vector<std::int64_t> out;
    std::int64_t v = 0;
    bool digits = false;
    for (std::size_t i = at + 1; i <= end; ++i) {
      if (std::isdigit(static_cast<unsigned char>(text_[i])) != 0) {
        v = v * 10 + (text_[i] - '0');
        digits = true;
      } else if (digits) {
        out.push_back(v);
        v = 0;
        digits = false;
      }
    }
    return out;
  }

  // The layer pattern after `key`, in its original case (Nemotron-H's alphabet is upper-case).
  std::string pattern(std::string_view original, std::string_view key) const {
    const std::string_view v = value(key);
    if (v.empty()) return {};
    const auto at = static_cast<std::size_t>(v.data() - text_.data());
    return std::string(original.substr(at, v.size()));
  }

 private:
  std::string text_;
};

// The first word of a model name ("Qwen3-30B-A3B" -> "qwen3", "Llama-4-Scout" -> "llama4").
std::string family_word(std::string_view name) {
  std::string n = lower(name);
  n.erase(std::remove_if(n.begin(), n.end(), [](char c) { return c == ' '; }), n.end());
  std::string out;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      out += c;
    } else if ((c == '-' || c == '_') && !out.empty() &&
               std::isalpha(static_cast<unsigned char>(out.back())) != 0 && i + 1 < n.size() &&
               std::isdigit(static_cast<unsigned char>(n[i + 1])) != 0 &&
               (i + 2 >= n.size() || !std::isalnum(static_cast<unsigned char>(n[i + 2])))) {
      continue;  // "llama-4-..." -> "llama4": a version digit after a dash
    } else {
      break;
    }
  }
  return out;
}

std::string str(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

std::optional<int> head_dim_from_notes(std::string_view arch_notes) {
  const Notes text(arch_notes);
  const auto hd = text.integer_of({"head_dim", "kv_channels"});
  if (!hd || *hd <= 0 || *hd > limits::kMaxModelDim) return std::nullopt;
  return static_cast<int>(*hd);
}

Result<ModelSpec> moe_model_from_record(const PublishedRun& run, const Catalog& catalog,
                                        std::vector<ChosenField>& notes) {
  const PublishedModel& r = run.model;
  const Notes text(r.arch_notes);
  auto missing = [&](const std::string& field, const std::string& why) {
    return Status::invalid_input("model." + field + " is not published" + why +
                                 ": no MoE preset has the record's shape, so planner builds the "
                                 "model from the record's fields and model.arch_notes");
  };
  for (const auto& [name, present] : {std::pair<const char*, bool>{"layers", r.layers.has_value()},
                                      {"hidden", r.hidden.has_value()},
                                      {"heads", r.heads.has_value()},
                                      {"experts", r.experts.has_value()},
                                      {"top_k", r.top_k.has_value()},
                                      {"expert_ffn_hidden", r.expert_ffn_hidden.has_value()},
                                      {"seq_len", r.seq_len.has_value()}}) {
    if (!present) return missing(name, "");
  }

  ModelSpec m;
  m.name = r.name.empty() ? run.id : r.name;
  m.family = "published";
  m.source = run.source + (r.arch_source.empty() ? "" : "; architecture: " + r.arch_source);
  m.num_layers = *r.layers;
  m.hidden = *r.hidden;
  m.heads = *r.heads;
  m.max_seq_len = *r.seq_len;
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.position_embedding = PositionEmbedding::kRope;
  std::string from_notes;  // the config keys read from the notes, for the structure note
  auto took = [&](std::string_view what) {
    from_notes += (from_notes.empty() ? "" : ", ") + std::string(what);
  };

  // Attention: MLA where the notes give its ranks, else grouped-query attention.
  const auto kv_lora = text.integer("kv_lora_rank");
  const auto nope = text.integer("qk_nope_head_dim");
  const auto rope = text.integer("qk_rope_head_dim");
  const auto v_head = text.integer("v_head_dim");
  if (kv_lora || nope || rope || v_head) {
    if (!kv_lora || !nope || !rope || !v_head) {
      return Status::invalid_input(
          "model.arch_notes name multi-head latent attention but not all of kv_lora_rank, "
          "qk_nope_head_dim, qk_rope_head_dim and v_head_dim (as the model's config.json does)");
    }
    MlaSpec mla;
    mla.q_lora_rank = static_cast<int>(text.integer("q_lora_rank").value_or(0));
    mla.kv_lora_rank = static_cast<int>(*kv_lora);
    mla.qk_nope_head_dim = static_cast<int>(*nope);
    mla.qk_rope_head_dim = static_cast<int>(*rope);
    mla.v_head_dim = static_cast<int>(*v_head);
    m.mla = mla;
    m.kv_heads = m.heads;
    m.head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
    took("multi-head latent attention (q_lora_rank " + str(mla.q_lora_rank) + ", kv_lora_rank " +
         str(mla.kv_lora_rank) + ")");
  } else {
    m.kv_heads = r.kv_heads.value_or(m.heads);
    if (!r.kv_heads) {
      notes.push_back({"/model/kv_heads", str(m.kv_heads), "not published: multi-head attention"});
    }
    if (const auto hd = head_dim_from_notes(r.arch_notes)) {
      m.head_dim = *hd;
      took("head_dim " + str(*hd));
    } else if (m.heads > 0 && m.hidden % m.heads == 0) {
      m.head_dim = static_cast<int>(m.hidden / m.heads);
    } else {
      return missing("head_dim", " (the notes give no head_dim and heads do not divide hidden)");
    }
  }
  if (text.value("attention_bias") == "true") {
    m.bias = true;
    took("attention_bias");
  }
  std::optional<std::int64_t> window = text.integer("sliding_window");
  if (!window && text.mentions("sliding")) window = text.integer("window");  // "(window 128)"
  if (window && *window > 0) {
    m.sliding_window = static_cast<int>(*window);
    if (const auto every = text.integer("sliding_window_pattern")) {
      m.full_attention_every = static_cast<int>(*every);
    } else if (text.mentions("alternat")) {
      m.full_attention_every = 2;
    }
    took("sliding window " + str(*window) +
         (m.full_attention_every > 0
              ? ", full attention every " + str(m.full_attention_every) + " layers"
              : " in every layer"));
  }

  // The experts.
  MoeSpec moe;
  moe.num_experts = *r.experts;
  moe.top_k = *r.top_k;
  moe.expert_ffn_hidden = *r.expert_ffn_hidden;
  moe.capacity_factor = 0;  // dropless; the record's parallel fields set token dropping
  const int shared = r.shared_experts.value_or(0);
  std::string_view shared_key;
  if (auto width =
          text.integer_of({"shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
                           "shared expert intermediate"},
                          &shared_key)) {
    const int count = std::max(shared, 1);
    moe.shared_experts = *width % count == 0 ? count : 1;
    moe.shared_expert_ffn_hidden = *width / moe.shared_experts;
    took(std::string(shared_key) + " " + str(*width));
  } else if (shared > 0) {
    moe.shared_experts = shared;
    moe.shared_expert_ffn_hidden = moe.expert_ffn_hidden;
    notes.push_back({"/model/shared_expert_ffn_hidden", str(moe.expert_ffn_hidden),
                     "not published: each shared expert as wide as a routed one (DeepSeek's "
                     "n_shared_experts)"});
  }
  const std::string family = family_word(m.name);
  if (moe.shared_experts > 0 && (family.starts_with("qwen2") || family.starts_with("qwen1"))) {
    moe.shared_expert_gate = true;  // Qwen2MoeSparseMoeBlock's sigmoid shared-expert gate
  }
  std::string_view dense_key;
  if (auto k = text.integer_of({"first_k_dense_replace"}, &dense_key)) {
    moe.first_dense_layers = static_cast<int>(*k);
    took("first_k_dense_replace " + str(*k));
  } else if (auto dense = text.list("mlp_only_layers")) {
    for (std::size_t i = 0; i < dense->size(); ++i) {
      if ((*dense)[i] != static_cast<std::int64_t>(i)) {
        return Status::invalid_input(
            "model.arch_notes: mlp_only_layers must list the first layers (0, 1, ..., k-1): "
            "planner keeps dense MLPs only there; got layer " +
            str((*dense)[i]) + " at position " + str(static_cast<std::int64_t>(i)));
      }
    }
    moe.first_dense_layers = static_cast<int>(dense->size());
    if (!dense->empty()) took("mlp_only_layers (" + str(moe.first_dense_layers) + ")");
  }
  std::string_view freq_key;
  if (auto f = text.integer_of(
          {"decoder_sparse_step", "interleave_moe_layer_step", "moe_layer_freq"}, &freq_key)) {
    moe.layer_freq = static_cast<int>(*f);
    if (*f != 1) took(std::string(freq_key) + " " + str(*f));
  }
  if (auto groups = text.integer("n_group")) {
    moe.expert_groups = static_cast<int>(*groups);
    moe.group_top_k = static_cast<int>(text.integer("topk_group").value_or(*groups));
    if (*groups > 1) took("n_group " + str(*groups) + " / topk_group " + str(moe.group_top_k));
  }
  if (text.says("sigmoid")) {
    moe.scoring = RouterScoring::kSigmoid;
    took("sigmoid routing");
  }
  m.moe = moe;
  if (auto mtp = text.integer_of({"num_nextn_predict_layers", "mtp_num_layers"})) {
    m.mtp_layers = static_cast<int>(*mtp);
    if (*mtp > 0) took("MTP " + str(*mtp));
  }

  // A hybrid Mamba-2 model (Nemotron-H): its layer pattern and mixer.
  if (std::string pattern = text.pattern(r.arch_notes, "hybrid_override_pattern");
      !pattern.empty()) {
    m.layer_pattern = pattern;
    MambaSpec mamba;
    const auto heads = text.integer("mamba_num_heads");
    const auto head_dim = text.integer("mamba_head_dim");
    const auto state = text.integer_of({"mamba_state_dim", "ssm_state_size"});
    if (!heads || !head_dim || !state) {
      return Status::invalid_input(
          "model.arch_notes give a hybrid_override_pattern but not the Mamba-2 mixer's "
          "mamba_num_heads, mamba_head_dim and mamba_state_dim (or ssm_state_size)");
    }
    mamba.heads = static_cast<int>(*heads);
    mamba.head_dim = static_cast<int>(*head_dim);
    mamba.state_dim = static_cast<int>(*state);
    mamba.groups = static_cast<int>(text.integer("n_groups").value_or(1));
    mamba.conv_kernel = static_cast<int>(text.integer("conv_kernel").value_or(4));
    mamba.chunk = static_cast<int>(text.integer("chunk_size").value_or(128));
    m.mamba = mamba;
    took("hybrid_override_pattern, Mamba-2 " + str(mamba.heads) + " x " + str(mamba.head_dim) +
         " heads of state " + str(mamba.state_dim) + ", " + str(mamba.groups) + " groups");
  }
  // A Gated DeltaNet hybrid (Qwen3-Next): the record's layers each a mixer and an MLP, the mixer
  // Gated DeltaNet but every full_attention_interval-th, which is attention; planner's pattern has
  // one block per mixer and per MLP (hf_import.cpp, read_qwen3_next).
  if (const auto value_heads = text.integer("linear_num_value_heads");
      value_heads || text.says("gated deltanet") || text.says("gated delta")) {
    const auto key_heads = text.integer("linear_num_key_heads");
    const auto key_dim = text.integer("linear_key_head_dim");
    const auto value_dim = text.integer("linear_value_head_dim");
    if (!value_heads || !key_heads || !key_dim || !value_dim || *key_heads == 0) {
      return Status::invalid_input(
          "model.arch_notes name Gated DeltaNet layers but not all of linear_num_key_heads, "
          "linear_key_head_dim, linear_num_value_heads and linear_value_head_dim (as the model's "
          "config.json does)");
    }
    if (!m.layer_pattern.empty()) {
      return Status::invalid_input(
          "model.arch_notes give both a hybrid_override_pattern and Gated DeltaNet layers: "
          "planner models one recurrent mixer per model");
    }
    MambaSpec gdn;
    gdn.kind = RecurrentMixer::kGatedDeltaNet;
    gdn.heads = static_cast<int>(*value_heads);
    gdn.head_dim = static_cast<int>(*value_dim);
    gdn.groups = static_cast<int>(*key_heads);
    gdn.state_dim = static_cast<int>(*key_dim);
    gdn.conv_kernel = static_cast<int>(text.integer("linear_conv_kernel_dim").value_or(4));
    gdn.chunk = 64;
    m.mamba = gdn;
    const std::int64_t every = text.integer("full_attention_interval").value_or(4);
    for (int l = 0; l < *r.layers; ++l) {
      const bool sparse = l >= moe.first_dense_layers && (l + 1) % std::max(moe.layer_freq, 1) == 0;
      m.layer_pattern += every > 0 && (l + 1) % every == 0 ? kPatternAttention : kPatternDeltaNet;
      m.layer_pattern += sparse ? kPatternMoe : kPatternDense;
    }
    m.num_layers = static_cast<int>(m.layer_pattern.size());
    m.moe->first_dense_layers = 0;
    m.moe->layer_freq = 1;
    // Qwen3-Next's attention is gated, and its shared expert too (Qwen3NextSparseMoeBlock).
    const bool qwen = family.starts_with("qwen");
    if (qwen || text.says("gated attention") || text.value("attn_output_gate") == "true") {
      m.attention_output_gate = true;
    }
    if (qwen && m.moe->shared_experts > 0) m.moe->shared_expert_gate = true;
    took("Gated DeltaNet " + str(gdn.heads) + " x " + str(gdn.head_dim) + " value heads, " +
         str(gdn.groups) + " x " + str(gdn.state_dim) + " key heads, full attention every " +
         str(every) + " layers" + (m.attention_output_gate ? " (gated)" : ""));
  }
  if (text.says("squared-relu") || text.says("squared relu") || text.says("relu2")) {
    m.mlp = MlpKind::kSquaredRelu;
    took("squared-ReLU MLPs");
  }
  if (text.says("layernorm") && !text.says("rmsnorm")) {
    m.norm = NormKind::kLayerNorm;
    took("LayerNorm");
  }
  if (text.value("tie_word_embeddings") == "true") {
    m.tied_embeddings = true;
    took("tied embeddings");
  }

  // The dense FFN: the first dense layers', the layers between MoE ones and a pattern's '-'.
  const bool dense_layers = moe.first_dense_layers > 0 || moe.layer_freq > 1 ||
                            m.layer_pattern.find(kPatternDense) != std::string::npos;
  if (r.ffn_hidden) {
    m.ffn_hidden = *r.ffn_hidden;
  } else if (dense_layers) {
    return missing("ffn_hidden", " and the notes give the model dense layers");
  } else {
    m.ffn_hidden = moe.expert_ffn_hidden;  // no dense MLP: the width is never used
  }

  // The vocabulary: the record's, else the family's preset's.
  if (r.vocab) {
    m.vocab = *r.vocab;
  } else {
    const ModelSpec* same_family = nullptr;
    for (const ModelSpec& p : catalog.models()) {
      if (p.is_moe() && !family.empty() && family_word(p.name) == family) {
        same_family = &p;
        break;
      }
    }
    if (same_family == nullptr) {
      return missing("vocab",
                     " and no MoE preset of the model's family (\"" + family + "\") gives one");
    }
    m.vocab = same_family->vocab;
    notes.push_back({"/model/vocab", str(m.vocab),
                     "not published: the vocabulary of " + same_family->name +
                         ", an MoE preset of the same family"});
  }

  // Validated as a model document would be.
  auto checked = parse_model(to_json_text(m), "record " + run.id + ": its model");
  if (!checked) return checked.status();
  ModelSpec out = std::move(*checked);
  std::string why = "no MoE preset has the record's shape; built from the record's fields";
  if (!from_notes.empty()) why += " and its notes (" + from_notes + ")";
  why +=
      "; what they do not say is the common MoE transformer's (SwiGLU MLPs, RMSNorm, rotary "
      "positions, untied embeddings, softmax routing, no biases)";
  const double billions = static_cast<double>(out.total_params()) / 1e9;
  char count[96];
  std::snprintf(count, sizeof count, "; %.1f B parameters (%.1f B active)", billions,
                static_cast<double>(out.active_params()) / 1e9);
  why += count;
  if (r.params_billion && *r.params_billion > 0) {
    std::snprintf(count, sizeof count, ", the record says %.4g B", *r.params_billion);
    why += count;
    // Nominal counts ("30B") round; a model off by more than a tenth is not the one the record
    // names: the notes leave out part of its structure (dense layers, interleaving, a head width).
    const double off = billions / *r.params_billion - 1;
    if (std::abs(off) > kParamsTolerance) {
      std::snprintf(count, sizeof count,
                    " (%+.0f %%: the notes may leave out part of the structure)", 100 * off);
      why += count;
    }
  }
  notes.push_back({"model structure", "from the record", why});
  return out;
}

}  // namespace planner::fit
