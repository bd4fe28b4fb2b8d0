#include "planner/core/hf_import.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "planner/core/json_reader.hpp"
#include "planner/core/limits.hpp"

namespace planner {
namespace {

enum class Style {
  kLlama,
  kMixtral,
  kQwen2Moe,
  kQwen3Moe,
  kDeepseek,
  kGlm4Moe,
  kGptOss,
  kLlama4,
  kDbrx,
  kOlmoe,
  kNemotronH,
  kQwen3Next,
  kGemma,
  kGpt2,
  kNeoX,
  kFalcon,
  kBloom,
  kOpt,
  kMpt,
  kOlmo
};

struct Architecture {
  std::string_view name;
  std::string_view model_type;
  Style style;
  std::string_view family;
};

constexpr std::array<Architecture, 32> kArchitectures{{
    {"LlamaForCausalLM", "llama", Style::kLlama, "llama"},
    {"MistralForCausalLM", "mistral", Style::kLlama, "mistral"},
    {"Qwen2ForCausalLM", "qwen2", Style::kLlama, "qwen2"},
    {"Qwen3ForCausalLM", "qwen3", Style::kLlama, "qwen3"},
    {"MixtralForCausalLM", "mixtral", Style::kMixtral, "mixtral"},
    {"Qwen2MoeForCausalLM", "qwen2_moe", Style::kQwen2Moe, "qwen2-moe"},
    {"Qwen3MoeForCausalLM", "qwen3_moe", Style::kQwen3Moe, "qwen3-moe"},
    {"DeepseekV3ForCausalLM", "deepseek_v3", Style::kDeepseek, "deepseek-v3"},
    {"DeepseekV2ForCausalLM", "deepseek_v2", Style::kDeepseek, "deepseek-v2"},
    {"Glm4MoeForCausalLM", "glm4_moe", Style::kGlm4Moe, "glm4-moe"},
    {"GptOssForCausalLM", "gpt_oss", Style::kGptOss, "gpt-oss"},
    {"Llama4ForConditionalGeneration", "llama4", Style::kLlama4, "llama4"},
    {"Llama4ForCausalLM", "llama4_text", Style::kLlama4, "llama4"},
    {"DbrxForCausalLM", "dbrx", Style::kDbrx, "dbrx"},
    {"OlmoeForCausalLM", "olmoe", Style::kOlmoe, "olmoe"},
    {"NemotronHForCausalLM", "nemotron_h", Style::kNemotronH, "nemotron-h"},
    {"Qwen3NextForCausalLM", "qwen3_next", Style::kQwen3Next, "qwen3-next"},
    {"GemmaForCausalLM", "gemma", Style::kGemma, "gemma"},
    {"Gemma2ForCausalLM", "gemma2", Style::kGemma, "gemma2"},
    {"GPT2LMHeadModel", "gpt2", Style::kGpt2, "gpt2"},
    {"GPTNeoXForCausalLM", "gpt_neox", Style::kNeoX, "gpt-neox"},
    {"FalconForCausalLM", "falcon", Style::kFalcon, "falcon"},
    {"RWForCausalLM", "RefinedWeb", Style::kFalcon, "falcon"},
    {"Gemma3ForCausalLM", "gemma3_text", Style::kGemma, "gemma3"},
    // Mistral's and Phi-3's sliding_window (every layer) is not imported: planner models causal
    // attention over the whole sequence, an upper bound of its cost beyond the window.
    {"Phi3ForCausalLM", "phi3", Style::kLlama, "phi3"},
    {"Olmo2ForCausalLM", "olmo2", Style::kLlama, "olmo2"},
    {"OlmoForCausalLM", "olmo", Style::kOlmo, "olmo"},
    {"BloomForCausalLM", "bloom", Style::kBloom, "bloom"},
    {"OPTForCausalLM", "opt", Style::kOpt, "opt"},
    {"MPTForCausalLM", "mpt", Style::kMpt, "mpt"},
    {"MptForCausalLM", "mpt", Style::kMpt, "mpt"},
}};

// The JSON pointer of a top-level key. Built by appending: GCC 12 at -O3 reports a false
// -Wrestrict on `"/" + std::string` (GCC bug 105329).
std::string pointer_to(std::string_view key) {
  std::string pointer = "/";
  pointer += json_pointer_escape(key);
  return pointer;
}

// The largest value a Hugging Face integer key may take: the planner model document's limit for
// the field it becomes (limits.hpp), below INT_MAX for the fields planner keeps in an int. Widths
// (hidden, intermediate sizes) and anything not listed: limits::kMaxModelDim.
std::int64_t integer_limit(std::string_view key) {
  static constexpr std::array<std::pair<std::string_view, std::int64_t>, 19> kLimits{{
      {"num_hidden_layers", limits::kMaxLayers},
      {"n_layer", limits::kMaxLayers},
      {"n_layers", limits::kMaxLayers},
      {"n_heads", limits::kMaxHeads},
      {"max_seq_len", limits::kMaxPositions},
      {"decoder_sparse_step", limits::kMaxLayers},
      {"num_attention_heads", limits::kMaxHeads},
      {"n_head", limits::kMaxHeads},
      {"num_key_value_heads", limits::kMaxHeads},
      {"num_kv_heads", limits::kMaxHeads},
      {"n_head_kv", limits::kMaxHeads},
      {"head_dim", limits::kMaxHeads},
      {"num_local_experts", limits::kMaxExperts},
      {"num_experts", limits::kMaxExperts},
      {"num_experts_per_tok", limits::kMaxExperts},
      {"vocab_size", limits::kMaxVocab},
      {"max_position_embeddings", limits::kMaxPositions},
      {"n_positions", limits::kMaxPositions},
      {"n_ctx", limits::kMaxPositions},
  }};
  for (const auto& [name, max] : kLimits) {
    if (name == key) return max;
  }
  return limits::kMaxModelDim;
}

// Reads HF keys leniently (unknown keys are fine) but type-checks what it uses. A reader over a
// nested object (Llama 4's text_config, DBRX's attn_config) reports pointers below its key.
class HfReader {
 public:
  HfReader(const Json& root, Diagnostics& diag, std::string prefix = {})
      : root_(root), diag_(diag), prefix_(std::move(prefix)) {}

  // The nested object under `key`; reports a non-object. Falls back to this reader's own object
  // when the key is absent and `optional`.
  std::optional<HfReader> object(std::string_view key, bool optional) {
    if (!has(key)) {
      if (optional) return HfReader(root_, diag_, prefix_);
      diag_.add(pointer_to(key), "missing required key");
      return std::nullopt;
    }
    const Json& v = root_.at(key);
    if (!v.is_object()) {
      diag_.add(pointer_to(key), "expected an object, got " + describe_json(v));
      return std::nullopt;
    }
    return HfReader(v, diag_, pointer_to(key));
  }
  // An array of integers (Qwen's mlp_only_layers); nullopt (reported) when it is not one.
  std::optional<std::vector<std::int64_t>> integers(std::string_view key) {
    std::vector<std::int64_t> out;
    if (!has(key)) return out;
    const Json& v = root_.at(key);
    bool ok = v.is_array();
    for (std::size_t i = 0; ok && i < v.size(); ++i) {
      ok = v[i].is_number_integer() && v[i].get<std::int64_t>() >= 0;
      if (ok) out.push_back(v[i].get<std::int64_t>());
    }
    if (!ok) {
      diag_.add(pointer_to(key), "expected an array of layer indices, got " + describe_json(v));
      return std::nullopt;
    }
    return out;
  }
  // An array of strings (GPT-OSS's layer_types); nullopt (reported) when it is not one.
  std::optional<std::vector<std::string>> strings(std::string_view key) {
    std::vector<std::string> out;
    if (!has(key)) return out;
    const Json& v = root_.at(key);
    bool ok = v.is_array();
    for (std::size_t i = 0; ok && i < v.size(); ++i) {
      ok = v[i].is_string();
      if (ok) out.push_back(v[i].get<std::string>());
    }
    if (!ok) {
      diag_.add(pointer_to(key), "expected an array of strings, got " + describe_json(v));
      return std::nullopt;
    }
    return out;
  }
  // A non-negative integer where 0 or null means "none" (DeepSeek's q_lora_rank, n_shared_experts).
  std::int64_t count(std::string_view key, std::int64_t fallback) {
    if (!has(key)) return fallback;
    const Json& v = root_.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
      diag_.add(pointer_to(key), "expected a non-negative integer, got " + describe_json(v));
      return fallback;
    }
    return v.get<std::int64_t>();
  }
  // Reports a problem with `key`.
  void fail(std::string_view key, std::string message) {
    diag_.add(pointer_to(key), std::move(message));
  }
  // A key's pointer below this reader's object.
  std::string pointer_to(std::string_view key) const { return prefix_ + planner::pointer_to(key); }

  bool has(std::string_view key) const { return root_.contains(key) && !root_.at(key).is_null(); }

  // A positive integer within the limit for `key` (integer_limit()), read as 64 bits and checked,
  // never cut to a narrower type.
  std::int64_t integer(std::string_view key, std::int64_t fallback, bool required) {
    if (!has(key)) {
      if (required) diag_.add(pointer_to(key), "missing required key");
      return fallback;
    }
    const Json& v = root_.at(key);
    const std::int64_t max = integer_limit(key);
    const bool too_big =
        v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max);
    if (!v.is_number_integer() || (!too_big && v.get<std::int64_t>() < 1)) {
      diag_.add(pointer_to(key), "expected a positive integer, got " + describe_json(v));
      return fallback;
    }
    if (too_big || v.get<std::int64_t>() > max) {
      diag_.add(pointer_to(key), "must be <= " + std::to_string(max) + ", got " + describe_json(v));
      return fallback;
    }
    return v.get<std::int64_t>();
  }
  // The first of several alternative keys that is present.
  std::int64_t integer_of(std::initializer_list<std::string_view> keys, std::int64_t fallback,
                          bool required) {
    for (std::string_view k : keys) {
      if (has(k)) return integer(k, fallback, false);
    }
    if (required) {
      std::string names;
      for (std::string_view k : keys)
        names += (names.empty() ? "" : " or ") + std::string(k);
      diag_.add(pointer_to(*keys.begin()), "missing required key (" + names + ")");
    }
    return fallback;
  }
  bool boolean(std::string_view key, bool fallback) {
    if (!has(key)) return fallback;
    const Json& v = root_.at(key);
    if (!v.is_boolean()) {
      diag_.add(pointer_to(key), "expected true or false, got " + describe_json(v));
      return fallback;
    }
    return v.get<bool>();
  }
  std::string string(std::string_view key, std::string fallback) {
    if (!has(key)) return fallback;
    const Json& v = root_.at(key);
    if (!v.is_string()) {
      diag_.add(pointer_to(key), "expected a string, got " + describe_json(v));
      return fallback;
    }
    return v.get<std::string>();
  }

 private:
  const Json& root_;
  Diagnostics& diag_;
  std::string prefix_;
};

// Every int field is read with a limit below INT_MAX (integer_limit()), so this never truncates.
int as_int(std::int64_t v) {
  static_assert(limits::kMaxLayers <= INT_MAX && limits::kMaxHeads <= INT_MAX &&
                limits::kMaxExperts <= INT_MAX && limits::kMaxModelDim <= INT_MAX);
  return static_cast<int>(v);
}

void read_llama_like(HfReader& r, ModelSpec& m) {
  m.num_layers = as_int(r.integer("num_hidden_layers", 0, true));
  m.hidden = r.integer("hidden_size", 0, true);
  m.heads = as_int(r.integer("num_attention_heads", 0, true));
  m.kv_heads = as_int(r.integer("num_key_value_heads", m.heads, false));
  m.ffn_hidden = r.integer("intermediate_size", 0, true);
  m.vocab = r.integer("vocab_size", 0, true);
  m.max_seq_len = r.integer("max_position_embeddings", 0, false);
  m.norm = NormKind::kRmsNorm;
  m.mlp = MlpKind::kSwiglu;
  m.position_embedding = PositionEmbedding::kRope;
  m.bias = r.boolean("attention_bias", false) || r.boolean("mlp_bias", false);
  if (r.has("head_dim")) m.head_dim = as_int(r.integer("head_dim", 0, false));
}

// A model name from the config's path: "qwen2-7b.config.json" -> "qwen2-7b", and for the usual
// "<model>/config.json" the directory's name ("Qwen1.5-MoE-A2.7B/config.json" ->
// "Qwen1.5-MoE-A2.7B"). Empty when neither says anything.
std::string name_from_path(std::string_view source) {
  namespace fs = std::filesystem;
  const fs::path path{std::string(source)};
  std::string stem = path.filename().string();
  for (std::string_view suffix : {".json", ".config", "_config", "-config"}) {
    if (stem.size() > suffix.size() && stem.ends_with(suffix)) {
      stem.resize(stem.size() - suffix.size());
    }
  }
  if (stem != "config") return stem;
  std::error_code ec;
  const fs::path dir = fs::absolute(path, ec).parent_path().filename();
  return ec ? std::string() : dir.string();
}

// The experts of a Hugging Face MoE config whose keys are named in `keys`.
struct MoeKeys {
  std::string_view experts;
  std::string_view top_k = "num_experts_per_tok";
  std::string_view expert_ffn = "moe_intermediate_size";
};

// A config.json describes the architecture, not how it is trained: the experts are dropless
// (capacity factor 0), Megatron-core's default (--moe-expert-capacity-factor unset) and how
// DeepSeek-V3 (arXiv:2412.19437 §2.1.2: "does not drop any tokens"), Qwen3-MoE, GPT-OSS and
// Llama 4 were trained, as planner's presets of them say; a plan sets a capacity factor to drop.
MoeSpec read_moe(HfReader& r, const ModelSpec& m, const MoeKeys& keys) {
  MoeSpec moe;
  moe.capacity_factor = 0;
  moe.num_experts = as_int(r.integer(keys.experts, 0, true));
  moe.top_k = as_int(r.integer(keys.top_k, 0, true));
  moe.expert_ffn_hidden =
      keys.expert_ffn.empty() ? m.ffn_hidden : r.integer(keys.expert_ffn, m.ffn_hidden, true);
  return moe;
}

// Qwen's decoder_sparse_step and mlp_only_layers: planner places dense layers first
// (first_dense_layers), so mlp_only_layers must be a prefix 0..k-1.
void read_qwen_sparsity(HfReader& r, MoeSpec& moe) {
  moe.layer_freq = as_int(r.integer("decoder_sparse_step", 1, false));
  if (auto dense = r.integers("mlp_only_layers")) {
    for (std::size_t i = 0; i < dense->size(); ++i) {
      if ((*dense)[i] != static_cast<std::int64_t>(i)) {
        r.fail("mlp_only_layers",
               "planner keeps dense MLPs only in the first layers (0, 1, ..., k-1); got layer " +
                   std::to_string((*dense)[i]) + " at position " + std::to_string(i));
        return;
      }
    }
    moe.first_dense_layers = static_cast<int>(dense->size());
  }
}

// DeepSeek's MoE block (DeepseekV3MoE, and GLM-4.5's Glm4MoeMoE after it): fine-grained routed
// experts of moe_intermediate_size, n_shared_experts of the same width, the first
// first_k_dense_replace layers dense, group-limited routing (n_group, topk_group), and the
// multi-token-prediction modules (num_nextn_predict_layers). `scoring`: the router's function when
// the config does not name one (scoring_func).
void read_deepseek_moe(HfReader& r, ModelSpec& m, std::string_view scoring_default) {
  MoeSpec moe = read_moe(r, m, {"n_routed_experts"});
  moe.shared_experts = as_int(r.count("n_shared_experts", 0));
  moe.shared_expert_ffn_hidden = moe.expert_ffn_hidden;
  moe.first_dense_layers = as_int(r.count("first_k_dense_replace", 0));
  // DeepseekV3DecoderLayer: layer l >= first_k_dense_replace is MoE when l % moe_layer_freq == 0,
  // which differs from planner's (l + 1) % layer_freq == 0 unless the frequency is 1 (as in every
  // published DeepSeek config).
  if (r.integer("moe_layer_freq", 1, false) != 1) {
    r.fail("moe_layer_freq",
           "planner imports DeepSeek configs with moe_layer_freq 1 (MoE in every "
           "layer after the first_k_dense_replace dense ones)");
  }
  moe.expert_groups = as_int(r.integer("n_group", 1, false));
  moe.group_top_k = as_int(r.integer("topk_group", moe.expert_groups, false));
  const std::string scoring = r.string("scoring_func", std::string(scoring_default));
  if (scoring == "sigmoid") {
    moe.scoring = RouterScoring::kSigmoid;
  } else if (scoring != "softmax") {
    r.fail("scoring_func", "expected \"softmax\" or \"sigmoid\", got \"" + scoring + "\"");
  }
  m.moe = moe;
  m.mtp_layers = as_int(r.count("num_nextn_predict_layers", 0));
  m.tied_embeddings = r.boolean("tie_word_embeddings", false);
}

// DeepSeek-V2/V3: MLA, fine-grained and shared experts, the first k layers dense, group-limited
// routing, and V3's sigmoid scoring and multi-token prediction.
void read_deepseek(HfReader& r, ModelSpec& m) {
  read_llama_like(r, m);
  m.kv_heads = m.heads;  // MLA: num_key_value_heads repeats the heads
  MlaSpec mla;
  mla.q_lora_rank = as_int(r.count("q_lora_rank", 0));
  mla.kv_lora_rank = as_int(r.integer("kv_lora_rank", 0, true));
  mla.qk_nope_head_dim = as_int(r.integer("qk_nope_head_dim", 0, true));
  mla.qk_rope_head_dim = as_int(r.integer("qk_rope_head_dim", 0, true));
  mla.v_head_dim = as_int(r.integer("v_head_dim", 0, true));
  m.mla = mla;
  m.head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
  read_deepseek_moe(r, m, "softmax");
}

// GLM-4.5 (transformers' Glm4MoeForCausalLM): grouped-query attention with head_dim, biases on q,
// k and v only (attention_bias; negligible, as for Qwen2), and DeepSeek-V3's MoE block with its
// router always sigmoid-scored (Glm4MoeTopkRouter) and its MTP layer. Partial rotary embedding and
// the optional q/k norms change no GEMM.
void read_glm4_moe(HfReader& r, ModelSpec& m) {
  read_llama_like(r, m);
  m.bias = false;
  read_deepseek_moe(r, m, "sigmoid");
}

// GPT-OSS: every layer MoE (intermediate_size is the expert width), biases on attention and
// experts, alternating sliding-window and full attention.
// Local (sliding-window) attention in some layers: `layer_types` where the config lists them
// (full_attention every n-th layer, sliding_attention elsewhere: GPT-OSS, Gemma 2 and 3 in current
// transformers), else full attention every `full_every`-th layer (0: every layer local).
void read_local_attention(HfReader& r, ModelSpec& m, int full_every) {
  if (!r.has("sliding_window")) return;
  m.sliding_window = as_int(r.integer("sliding_window", 0, false));
  m.full_attention_every = full_every;
  auto types = r.strings("layer_types");
  if (!types || types->empty()) return;
  // full_attention every n-th layer (1-based), sliding otherwise.
  int every = 0;
  for (std::size_t i = 0; i < types->size(); ++i) {
    if ((*types)[i] == "full_attention") {
      every = static_cast<int>(i) + 1;
      break;
    }
  }
  bool periodic = true;
  for (std::size_t i = 0; i < types->size(); ++i) {
    const bool full = every > 0 && (static_cast<int>(i) + 1) % every == 0;
    const std::string& want = full ? "full_attention" : "sliding_attention";
    periodic = periodic && (*types)[i] == want;
  }
  if (!periodic) {
    r.fail("layer_types",
           "planner models full attention in every n-th layer and sliding "
           "attention elsewhere; this pattern is not periodic");
  }
  m.full_attention_every = every;
}

void read_gpt_oss(HfReader& r, ModelSpec& m) {
  read_llama_like(r, m);
  MoeSpec moe = read_moe(r, m, {"num_local_experts", "num_experts_per_tok", ""});
  m.moe = moe;
  m.bias = r.boolean("attention_bias", false);
  m.tied_embeddings = r.boolean("tie_word_embeddings", false);
  read_local_attention(r, m, 0);
}

// Gemma: GeGLU, tied embeddings, head_dim independent of hidden / heads. Gemma 2 alternates local
// and global attention (Gemma2DecoderLayer: layer i is local when i is even, so every second layer
// is global); Gemma 3 has one global layer in sliding_window_pattern (6: five local, then one
// global; Gemma3DecoderLayer: local unless (i + 1) % pattern == 0). Gemma 3's q/k norms and
// Gemma 2/3's extra pre/post norms (hidden or head_dim weights each) are not counted.
void read_gemma(HfReader& r, ModelSpec& m, std::string_view family) {
  read_llama_like(r, m);
  m.mlp = MlpKind::kGeglu;
  m.tied_embeddings = r.boolean("tie_word_embeddings", true);
  if (family == "gemma2") read_local_attention(r, m, 2);
  if (family == "gemma3") {
    read_local_attention(r, m, as_int(r.integer("sliding_window_pattern", 6, false)));
  }
}

// BLOOM (arXiv:2211.05100): ALiBi, LayerNorm (and one more over the embeddings, 2 x hidden, not
// counted), biases, a 4 x hidden GeLU MLP, tied embeddings; trained at 2048 tokens (§3.3), which
// its configs do not state (ALiBi has no position table).
void read_bloom(HfReader& r, ModelSpec& m) {
  m.num_layers = as_int(r.integer_of({"n_layer", "num_hidden_layers"}, 0, true));
  m.hidden = r.integer_of({"hidden_size", "n_embed"}, 0, true);
  m.heads = as_int(r.integer_of({"n_head", "num_attention_heads"}, 0, true));
  m.kv_heads = m.heads;
  m.ffn_hidden = 4 * m.hidden;
  m.vocab = r.integer("vocab_size", 0, true);
  m.max_seq_len = 2048;
  m.norm = NormKind::kLayerNorm;
  m.mlp = MlpKind::kGelu;
  m.position_embedding = PositionEmbedding::kAlibi;
  m.bias = true;
  m.tied_embeddings = r.boolean("tie_word_embeddings", true);
}

// OPT (arXiv:2205.01068): learned positions, LayerNorm, biases (enable_bias), a ReLU MLP of
// ffn_dim (planner's two-matrix GeLU MLP: the same weights and FLOPs, the activation one
// elementwise kernel either way), tied embeddings. OPT-350m's embeddings narrower than the model
// (word_embed_proj_dim, with project_in/out) are not modelled.
void read_opt(HfReader& r, ModelSpec& m) {
  m.num_layers = as_int(r.integer("num_hidden_layers", 0, true));
  m.hidden = r.integer("hidden_size", 0, true);
  m.heads = as_int(r.integer("num_attention_heads", 0, true));
  m.kv_heads = m.heads;
  m.ffn_hidden = r.integer("ffn_dim", 0, true);
  m.vocab = r.integer("vocab_size", 0, true);
  m.max_seq_len = r.integer("max_position_embeddings", 2048, false);
  m.norm = NormKind::kLayerNorm;
  m.mlp = MlpKind::kGelu;
  m.position_embedding = PositionEmbedding::kLearned;
  m.bias = r.boolean("enable_bias", true);
  m.tied_embeddings = r.boolean("tie_word_embeddings", true);
  const std::int64_t projected = r.integer("word_embed_proj_dim", m.hidden, false);
  if (m.hidden > 0 && projected != m.hidden) {
    r.fail("word_embed_proj_dim",
           "embeddings of another width than hidden_size (" + std::to_string(m.hidden) +
               ", projected in and out) are not modelled, got " + std::to_string(projected));
  }
}

// MosaicML MPT (llm-foundry's MPTConfig): d_model, n_heads, n_layers, an MLP of
// expansion_ratio x d_model (mptmlp: GeLU), LayerNorm, ALiBi (attn_config.alibi) or learned
// positions, no biases when no_bias, embeddings always tied (the output layer reuses wte).
void read_mpt(HfReader& r, ModelSpec& m) {
  m.num_layers = as_int(r.integer("n_layers", 0, true));
  m.hidden = r.integer("d_model", 0, true);
  m.heads = as_int(r.integer("n_heads", 0, true));
  m.kv_heads = m.heads;
  const std::int64_t ratio = r.integer("expansion_ratio", 4, false);
  if (m.hidden > 0 && ratio > limits::kMaxModelDim / m.hidden) {
    r.fail("expansion_ratio",
           "expansion_ratio x d_model must be <= " + std::to_string(limits::kMaxModelDim) +
               ", got " + std::to_string(ratio) + " x " + std::to_string(m.hidden));
  } else {
    m.ffn_hidden = ratio * m.hidden;
  }
  m.vocab = r.integer("vocab_size", 0, true);
  m.max_seq_len = r.integer("max_seq_len", 2048, false);
  m.norm = NormKind::kLayerNorm;
  m.mlp = MlpKind::kGelu;
  m.bias = !r.boolean("no_bias", false);
  m.tied_embeddings = true;
  bool alibi = false;
  if (auto attn = r.has("attn_config") ? r.object("attn_config", false) : std::nullopt) {
    alibi = attn->boolean("alibi", false);
    const std::string type = attn->string("attn_type", "multihead_attention");
    if (type == "multiquery_attention") {
      m.kv_heads = 1;
    } else if (type == "grouped_query_attention") {
      m.kv_heads = as_int(attn->integer("kv_n_heads", m.heads, true));
    } else if (type != "multihead_attention") {
      attn->fail("attn_type",
                 "expected multihead_attention, multiquery_attention or "
                 "grouped_query_attention, got \"" +
                     type + "\"");
    }
  }
  m.position_embedding = alibi ? PositionEmbedding::kAlibi : PositionEmbedding::kLearned;
  if (auto ffn = r.has("ffn_config") ? r.object("ffn_config", false) : std::nullopt) {
    const std::string type = ffn->string("ffn_type", "mptmlp");
    if (type != "mptmlp") {
      ffn->fail("ffn_type", "planner imports MPT's mptmlp feed-forward, got \"" + type + "\"");
    }
  }
}

// Llama 4: the text model in text_config (Llama4ForConditionalGeneration) or at the top level;
// one shared expert of the expert width, MoE every interleave_moe_layer_step-th layer, dense
// layers of intermediate_size_mlp.
void read_llama4(HfReader& top, ModelSpec& m) {
  auto text = top.object("text_config", /*optional=*/true);
  if (!text) return;
  HfReader& r = *text;
  read_llama_like(r, m);
  MoeSpec moe = read_moe(r, m, {"num_local_experts", "num_experts_per_tok", "intermediate_size"});
  m.ffn_hidden = r.integer("intermediate_size_mlp", m.ffn_hidden, false);
  moe.layer_freq = as_int(r.integer("interleave_moe_layer_step", 1, false));
  moe.shared_experts = 1;
  moe.shared_expert_ffn_hidden = moe.expert_ffn_hidden;
  moe.scoring = RouterScoring::kSigmoid;  // Llama4TextMoe: sigmoid of the top-k router logits
  m.moe = moe;
  m.tied_embeddings = r.boolean("tie_word_embeddings", false);
}

// DBRX: MPT-style names with attention and FFN settings in nested objects.
void read_dbrx(HfReader& r, ModelSpec& m) {
  m.num_layers = as_int(r.integer("n_layers", 0, true));
  m.hidden = r.integer("d_model", 0, true);
  m.heads = as_int(r.integer("n_heads", 0, true));
  m.vocab = r.integer("vocab_size", 0, true);
  m.max_seq_len = r.integer("max_seq_len", 0, false);
  m.norm = NormKind::kLayerNorm;
  m.mlp = MlpKind::kSwiglu;
  m.position_embedding = PositionEmbedding::kRope;
  m.tied_embeddings = r.boolean("tie_word_embeddings", false);
  m.kv_heads = m.heads;
  if (auto attn = r.object("attn_config", false)) {
    m.kv_heads = as_int(attn->integer("kv_n_heads", m.heads, false));
  }
  if (auto ffn = r.object("ffn_config", false)) {
    m.ffn_hidden = ffn->integer("ffn_hidden_size", 0, true);
    MoeSpec moe;
    moe.num_experts = as_int(ffn->integer("moe_num_experts", 0, true));
    moe.top_k = as_int(ffn->integer("moe_top_k", 0, true));
    moe.expert_ffn_hidden = m.ffn_hidden;
    m.moe = moe;
  }
}

// Nemotron-H (Nemotron 3): hybrid_override_pattern of Mamba-2, attention, MLP and MoE blocks,
// squared-ReLU MLPs and experts, one shared expert, sigmoid routing.
void read_nemotron_h(HfReader& r, ModelSpec& m) {
  read_llama_like(r, m);
  m.mlp = MlpKind::kSquaredRelu;
  m.bias = r.boolean("use_bias", false) || r.boolean("mlp_bias", false);
  const std::string act = r.string("mlp_hidden_act", "relu2");
  if (act != "relu2") {
    r.fail("mlp_hidden_act",
           "planner models Nemotron-H with squared-ReLU MLPs (relu2), got \"" + act + "\"");
  }
  m.layer_pattern = r.string("hybrid_override_pattern", "");
  if (m.layer_pattern.empty()) r.fail("hybrid_override_pattern", "missing required key");
  MambaSpec mamba;
  mamba.heads = as_int(r.integer("mamba_num_heads", 0, true));
  mamba.head_dim = as_int(r.integer("mamba_head_dim", 0, true));
  mamba.state_dim = as_int(r.integer("ssm_state_size", 0, true));
  mamba.groups = as_int(r.integer("n_groups", 1, false));
  mamba.conv_kernel = as_int(r.integer("conv_kernel", 4, false));
  mamba.chunk = as_int(r.integer("chunk_size", 128, false));
  m.mamba = mamba;
  if (m.layer_pattern.find(kPatternMoe) != std::string::npos) {
    MoeSpec moe = read_moe(r, m, {"n_routed_experts"});
    const std::int64_t shared = r.count("moe_shared_expert_intermediate_size", 0);
    if (shared > 0) {
      moe.shared_experts = 1;
      moe.shared_expert_ffn_hidden = shared;
    }
    moe.scoring = RouterScoring::kSigmoid;
    moe.expert_groups = as_int(r.integer("n_group", 1, false));
    moe.group_top_k = as_int(r.integer("topk_group", moe.expert_groups, false));
    m.moe = moe;
  }
  m.tied_embeddings = r.boolean("tie_word_embeddings", false);
}

// Qwen3-Next (Qwen3NextForCausalLM): every layer a mixer and an MoE MLP, the mixer Gated DeltaNet
// (linear_attention) except every full_attention_interval-th layer (or as layer_types says), which
// is gated attention (the query projection also yields the output's sigmoid gate). planner's
// layer pattern has one block per mixer and per MLP: "GEGEGE*E" for 4 layers. The MoE block is
// Qwen2-MoE's: routed experts of moe_intermediate_size, one shared expert behind a sigmoid gate;
// mlp_only_layers and decoder_sparse_step place dense MLPs of intermediate_size.
void read_qwen3_next(HfReader& r, ModelSpec& m) {
  read_llama_like(r, m);
  m.tied_embeddings = r.boolean("tie_word_embeddings", false);
  m.attention_output_gate = true;
  const int layers = m.num_layers;
  std::vector<bool> linear(static_cast<std::size_t>(std::max(layers, 0)), false);
  if (auto types = r.strings("layer_types"); types && !types->empty()) {
    if (static_cast<int>(types->size()) != layers) {
      r.fail("layer_types", "must name one type per layer (" + std::to_string(layers) + "), got " +
                                std::to_string(types->size()));
      return;
    }
    for (std::size_t i = 0; i < types->size(); ++i) {
      const std::string& t = (*types)[i];
      if (t != "linear_attention" && t != "full_attention") {
        r.fail("layer_types", "layer " + std::to_string(i) + " is \"" + t +
                                  "\"; expected \"linear_attention\" or \"full_attention\"");
        return;
      }
      linear[i] = t == "linear_attention";
    }
  } else {
    const std::int64_t every = r.integer("full_attention_interval", 4, false);
    for (int l = 0; l < layers && every > 0; ++l)
      linear[static_cast<std::size_t>(l)] = (l + 1) % every != 0;
  }
  MambaSpec gdn;
  gdn.kind = RecurrentMixer::kGatedDeltaNet;
  gdn.groups = as_int(r.integer("linear_num_key_heads", 0, true));
  gdn.state_dim = as_int(r.integer("linear_key_head_dim", 0, true));
  gdn.heads = as_int(r.integer("linear_num_value_heads", 0, true));
  gdn.head_dim = as_int(r.integer("linear_value_head_dim", 0, true));
  gdn.conv_kernel = as_int(r.integer("linear_conv_kernel_dim", 4, false));
  gdn.chunk = 64;  // fla's chunk_gated_delta_rule
  if (gdn.groups > 0 && gdn.heads % gdn.groups != 0) {
    r.fail("linear_num_key_heads", "must divide linear_num_value_heads (" +
                                       std::to_string(gdn.heads) + "), got " +
                                       std::to_string(gdn.groups));
  }
  m.mamba = gdn;
  MoeSpec moe = read_moe(r, m, {"num_experts", "num_experts_per_tok", "moe_intermediate_size"});
  const std::int64_t shared = r.count("shared_expert_intermediate_size", 0);
  if (shared > 0) {
    moe.shared_experts = 1;
    moe.shared_expert_ffn_hidden = shared;
    moe.shared_expert_gate = true;
  }
  const std::int64_t step = r.integer("decoder_sparse_step", 1, false);
  std::vector<std::int64_t> dense_layers;
  if (auto dense = r.integers("mlp_only_layers")) dense_layers = *dense;
  m.layer_pattern.clear();
  for (int l = 0; l < layers; ++l) {
    const bool sparse =
        moe.num_experts > 0 && step > 0 && (l + 1) % step == 0 &&
        std::find(dense_layers.begin(), dense_layers.end(), l) == dense_layers.end();
    m.layer_pattern += linear[static_cast<std::size_t>(l)] ? kPatternDeltaNet : kPatternAttention;
    m.layer_pattern += sparse ? kPatternMoe : kPatternDense;
  }
  m.num_layers = static_cast<int>(m.layer_pattern.size());
  m.moe = moe;
}

}  // namespace

std::string supported_hf_architectures() {
  std::string out;
  for (const Architecture& a : kArchitectures)
    out += (out.empty() ? "" : ", ") + std::string(a.name);
  return out;
}

Result<ModelSpec> import_hf_config(std::string_view text, std::string_view source,
                                   std::string name) {
  Diagnostics diag{std::string(source)};
  auto json = parse_json_text(text, diag);
  if (!json) return diag.to_status();
  if (!json->is_object()) {
    diag.add("", "expected a Hugging Face config object, got " + describe_json(*json));
    return diag.to_status();
  }
  const Json& root = *json;
  HfReader r(root, diag);

  const Architecture* arch = nullptr;
  std::string declared;
  if (root.contains("architectures") && root.at("architectures").is_array() &&
      !root.at("architectures").empty()) {
    const Json& first = root.at("architectures").at(0);
    declared = first.is_string() ? first.get<std::string>() : describe_json(first);
    for (const Architecture& a : kArchitectures) {
      if (a.name == declared) arch = &a;
    }
    if (arch == nullptr) {
      diag.add("/architectures/0", "unsupported architecture \"" + declared +
                                       "\"; planner imports: " + supported_hf_architectures());
      return diag.to_status();
    }
  } else {
    declared = r.string("model_type", "");
    for (const Architecture& a : kArchitectures) {
      if (a.model_type == declared) arch = &a;
    }
    if (arch == nullptr) {
      diag.add(declared.empty() ? "/architectures" : "/model_type",
               declared.empty() ? "missing: a Hugging Face config names its architecture in "
                                  "\"architectures\" or \"model_type\""
                                : "unsupported model_type \"" + declared +
                                      "\"; planner imports: " + supported_hf_architectures());
      return diag.to_status();
    }
  }

  ModelSpec m;
  m.family = std::string(arch->family);
  m.source = "Hugging Face config.json (" + std::string(arch->name) + ") imported from " +
             std::string(source);
  switch (arch->style) {
    case Style::kLlama:
      read_llama_like(r, m);
      if (arch->family == "qwen2") m.bias = false;  // q/k/v biases only: 3 x hidden, negligible
      m.tied_embeddings = r.boolean("tie_word_embeddings", false);
      break;
    case Style::kMixtral:
      read_llama_like(r, m);
      m.tied_embeddings = r.boolean("tie_word_embeddings", false);
      m.moe = read_moe(r, m, {"num_local_experts", "num_experts_per_tok", ""});
      break;
    case Style::kQwen2Moe:
    case Style::kQwen3Moe:
    case Style::kOlmoe: {
      read_llama_like(r, m);
      if (arch->style == Style::kQwen2Moe) m.bias = false;  // q/k/v biases only, as for Qwen2
      m.tied_embeddings = r.boolean("tie_word_embeddings", false);
      MoeSpec moe =
          read_moe(r, m,
                   {"num_experts", "num_experts_per_tok",
                    arch->style == Style::kOlmoe ? "intermediate_size" : "moe_intermediate_size"});
      if (arch->style != Style::kOlmoe) read_qwen_sparsity(r, moe);
      if (arch->style == Style::kQwen2Moe) {
        // Qwen2MoeSparseMoeBlock: one shared expert of shared_expert_intermediate_size, scaled by
        // sigmoid(shared_expert_gate(x)).
        const std::int64_t shared = r.count("shared_expert_intermediate_size", 0);
        if (shared > 0) {
          moe.shared_experts = 1;
          moe.shared_expert_ffn_hidden = shared;
          moe.shared_expert_gate = true;
        }
      }
      m.moe = moe;
      break;
    }
    case Style::kDeepseek:
      read_deepseek(r, m);
      break;
    case Style::kGlm4Moe:
      read_glm4_moe(r, m);
      break;
    case Style::kGptOss:
      read_gpt_oss(r, m);
      break;
    case Style::kLlama4:
      read_llama4(r, m);
      break;
    case Style::kDbrx:
      read_dbrx(r, m);
      break;
    case Style::kNemotronH:
      read_nemotron_h(r, m);
      break;
    case Style::kQwen3Next:
      read_qwen3_next(r, m);
      break;
    case Style::kGemma:
      read_gemma(r, m, arch->family);
      break;
    case Style::kBloom:
      read_bloom(r, m);
      break;
    case Style::kOpt:
      read_opt(r, m);
      break;
    case Style::kMpt:
      read_mpt(r, m);
      break;
    case Style::kOlmo:
      // OLMo (2024): Llama's layout with a LayerNorm that has no weights (planner counts 2 x
      // hidden per norm: 0.01 % of OLMo-7B).
      read_llama_like(r, m);
      m.norm = NormKind::kLayerNorm;
      m.tied_embeddings = r.boolean("tie_word_embeddings", false);
      break;
    case Style::kGpt2:
      m.num_layers = as_int(r.integer("n_layer", 0, true));
      m.hidden = r.integer("n_embd", 0, true);
      m.heads = as_int(r.integer("n_head", 0, true));
      m.kv_heads = m.heads;
      m.ffn_hidden = r.integer("n_inner", 4 * m.hidden, false);
      m.vocab = r.integer("vocab_size", 0, true);
      m.max_seq_len = r.integer("n_positions", 1024, false);
      m.norm = NormKind::kLayerNorm;
      m.mlp = MlpKind::kGelu;
      m.position_embedding = PositionEmbedding::kLearned;
      m.bias = true;
      m.tied_embeddings = r.boolean("tie_word_embeddings", true);
      break;
    case Style::kNeoX:
      m.num_layers = as_int(r.integer("num_hidden_layers", 0, true));
      m.hidden = r.integer("hidden_size", 0, true);
      m.heads = as_int(r.integer("num_attention_heads", 0, true));
      m.kv_heads = m.heads;
      m.ffn_hidden = r.integer("intermediate_size", 4 * m.hidden, false);
      m.vocab = r.integer("vocab_size", 0, true);
      m.max_seq_len = r.integer("max_position_embeddings", 0, false);
      m.norm = NormKind::kLayerNorm;
      m.mlp = MlpKind::kGelu;
      m.position_embedding = PositionEmbedding::kRope;
      m.bias = true;
      m.tied_embeddings = r.boolean("tie_word_embeddings", false);
      break;
    case Style::kFalcon: {
      m.num_layers = as_int(r.integer_of({"num_hidden_layers", "n_layer"}, 0, true));
      m.hidden = r.integer("hidden_size", 0, true);
      m.heads = as_int(r.integer_of({"num_attention_heads", "n_head"}, 0, true));
      const bool new_arch = r.boolean("new_decoder_architecture", false);
      const bool multi_query = r.boolean("multi_query", !new_arch);
      if (new_arch) {
        m.kv_heads = as_int(r.integer_of({"num_kv_heads", "n_head_kv"}, m.heads, false));
      } else {
        m.kv_heads = multi_query ? 1 : m.heads;
      }
      m.ffn_hidden = r.integer("ffn_hidden_size", 4 * m.hidden, false);
      m.vocab = r.integer("vocab_size", 0, true);
      m.max_seq_len = r.integer("max_position_embeddings", 2048, false);
      m.norm = NormKind::kLayerNorm;
      m.mlp = MlpKind::kGelu;
      m.position_embedding =
          r.boolean("alibi", false) ? PositionEmbedding::kAlibi : PositionEmbedding::kRope;
      m.bias = r.boolean("bias", false);
      m.tied_embeddings = r.boolean("tie_word_embeddings", true);
      break;
    }
  }
  if (!diag.empty()) return diag.to_status();

  if (m.kv_heads < 1 || m.heads % m.kv_heads != 0) {
    diag.add("/num_key_value_heads", "must divide the attention heads (" + std::to_string(m.heads) +
                                         "), got " + std::to_string(m.kv_heads));
  }
  if (m.head_dim == 0) {
    if (m.hidden % m.heads != 0) {
      diag.add("/num_attention_heads", "must divide hidden_size (" + std::to_string(m.hidden) +
                                           ") when head_dim is not given, got " +
                                           std::to_string(m.heads));
    } else {
      m.head_dim = static_cast<int>(m.hidden / m.heads);
    }
  }
  if (!diag.empty()) return diag.to_status();

  if (name.empty()) {
    name = r.string("_name_or_path", "");
    if (const auto slash = name.find_last_of('/'); slash != std::string::npos) {
      name = name.substr(slash + 1);
    }
  }
  if (name.empty()) name = name_from_path(source);
  if (name.empty()) name = std::string(arch->model_type);
  m.name = name;
  return m;
}

}  // namespace planner
