#include "planner/core/hf_import.hpp"

#include <array>
#include <climits>
#include <filesystem>
#include <functional>

#include "planner/core/json_reader.hpp"
#include "planner/core/limits.hpp"

namespace planner {
namespace {

enum class Style { kLlama, kMixtral, kQwen2Moe, kGemma, kGpt2, kNeoX, kFalcon };

struct Architecture {
  std::string_view name;
  std::string_view model_type;
  Style style;
  std::string_view family;
};

constexpr std::array<Architecture, 11> kArchitectures{{
    {"LlamaForCausalLM", "llama", Style::kLlama, "llama"},
    {"MistralForCausalLM", "mistral", Style::kLlama, "mistral"},
    {"Qwen2ForCausalLM", "qwen2", Style::kLlama, "qwen2"},
    {"MixtralForCausalLM", "mixtral", Style::kMixtral, "mixtral"},
    {"Qwen2MoeForCausalLM", "qwen2_moe", Style::kQwen2Moe, "qwen2-moe"},
    {"GemmaForCausalLM", "gemma", Style::kGemma, "gemma"},
    {"Gemma2ForCausalLM", "gemma2", Style::kGemma, "gemma2"},
    {"GPT2LMHeadModel", "gpt2", Style::kGpt2, "gpt2"},
    {"GPTNeoXForCausalLM", "gpt_neox", Style::kNeoX, "gpt-neox"},
    {"FalconForCausalLM", "falcon", Style::kFalcon, "falcon"},
    {"RWForCausalLM", "RefinedWeb", Style::kFalcon, "falcon"},
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
  static constexpr std::array<std::pair<std::string_view, std::int64_t>, 16> kLimits{{
      {"num_hidden_layers", limits::kMaxLayers},
      {"n_layer", limits::kMaxLayers},
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

// Reads HF keys leniently (unknown keys are fine) but type-checks what it uses.
class HfReader {
 public:
  HfReader(const Json& root, Diagnostics& diag) : root_(root), diag_(diag) {}

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
    case Style::kQwen2Moe: {
      read_llama_like(r, m);
      m.tied_embeddings = r.boolean("tie_word_embeddings", false);
      MoeSpec moe;
      if (arch->style == Style::kMixtral) {
        moe.num_experts = as_int(r.integer("num_local_experts", 0, true));
        moe.expert_ffn_hidden = m.ffn_hidden;
      } else {
        moe.num_experts = as_int(r.integer("num_experts", 0, true));
        moe.expert_ffn_hidden = r.integer("moe_intermediate_size", m.ffn_hidden, true);
        moe.layer_freq = as_int(r.integer("decoder_sparse_step", 1, false));
      }
      moe.top_k = as_int(r.integer("num_experts_per_tok", 0, true));
      m.moe = moe;
      break;
    }
    case Style::kGemma:
      read_llama_like(r, m);
      m.mlp = MlpKind::kGeglu;
      m.tied_embeddings = r.boolean("tie_word_embeddings", true);
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
