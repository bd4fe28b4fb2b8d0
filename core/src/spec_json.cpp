#include "planner/core/spec_json.hpp"

#include <algorithm>
#include <cstdio>

#include "planner/core/diagnostics.hpp"
#include "planner/core/limits.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/rank_grid.hpp"

namespace planner {
namespace {

constexpr std::int64_t kMaxDim = 10'000'000;

std::string str(std::int64_t v) {
  return std::to_string(v);
}

void read_price(const Json& item, const std::string& pointer, Diagnostics& diag,
                std::vector<PriceEntry>& out) {
  JsonObject obj(item, pointer, diag);
  if (!obj.valid()) return;
  PriceEntry p;
  if (read_price_record(obj, /*in_gpu_document=*/true, p)) out.push_back(std::move(p));
}

// A bound on the model's parameter count, computed in floating point (which cannot overflow)
// from the largest terms of the layer structure in model_spec.hpp, every layer counted with the
// larger of its dense and MoE MLP: at least the exact count.
double params_upper_bound(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.heads) * m.head_dim;
  const double kv = static_cast<double>(m.kv_heads) * m.head_dim;
  const double attention = h * (2 * q + 2 * kv) + 2 * q + 2 * kv + 4 * h;
  const double dense =
      3 * h * static_cast<double>(m.ffn_hidden) + 3 * static_cast<double>(m.ffn_hidden) + 3 * h;
  double moe = 0;
  if (m.moe) {
    const double e = static_cast<double>(m.moe->num_experts);
    const double f = static_cast<double>(m.moe->expert_ffn_hidden);
    moe = e * (3 * h * f + 3 * f + h) + h * e + 3 * h;
  }
  const double layer = attention + std::max(dense, moe);
  return static_cast<double>(m.num_layers) * layer +
         (2 * static_cast<double>(m.vocab) + static_cast<double>(m.max_seq_len) + 2) * h;
}

// The moe object of a model document.
MoeSpec read_moe(JsonObject& mo, const ModelSpec& m, bool have_layers) {
  MoeSpec s;
  s.expert_ffn_hidden = m.ffn_hidden;
  const bool have_experts = mo.read("experts", s.num_experts, Need::kRequired, {2, 1000000});
  if (mo.read("top_k", s.top_k, Need::kRequired, {1, 1000000}) && have_experts &&
      s.top_k > s.num_experts) {
    mo.error("top_k", "must be <= experts (" + str(s.num_experts) + "), got " + str(s.top_k));
  }
  mo.read("expert_ffn_hidden", s.expert_ffn_hidden, Need::kOptional, {1, kMaxDim});
  if (const Json* cf = mo.child("capacity_factor", Need::kOptional)) {
    if (cf->is_string() && cf->get<std::string>() == "dropless") {
      s.capacity_factor = 0.0;
    } else {
      mo.read("capacity_factor", s.capacity_factor, Need::kOptional,
              {0.0, 64.0, true, "tokens per expert over the mean, or \"dropless\""});
    }
  }
  if (mo.read("layer_freq", s.layer_freq, Need::kOptional, {1, 100000}) && have_layers &&
      s.layer_freq > m.num_layers) {
    mo.error("layer_freq",
             "must be <= layers (" + str(m.num_layers) + "), got " + str(s.layer_freq));
  }
  if (mo.read("first_dense_layers", s.first_dense_layers, Need::kOptional, {0, 100000}) &&
      have_layers && s.first_dense_layers >= m.num_layers) {
    mo.error("first_dense_layers", "must leave at least one MoE layer of the " + str(m.num_layers) +
                                       ", got " + str(s.first_dense_layers));
  }
  const bool have_shared = mo.read("shared_experts", s.shared_experts, Need::kOptional, {0, 1024});
  s.shared_expert_ffn_hidden = s.expert_ffn_hidden;
  mo.read("shared_expert_ffn_hidden", s.shared_expert_ffn_hidden, Need::kOptional, {1, kMaxDim});
  mo.read("shared_expert_gate", s.shared_expert_gate, Need::kOptional);
  if ((mo.has("shared_expert_ffn_hidden") || s.shared_expert_gate) &&
      (!have_shared || s.shared_experts == 0)) {
    mo.error("shared_experts",
             "must be >= 1 when shared_expert_ffn_hidden or shared_expert_gate "
             "is given");
  }
  mo.read_enum("scoring", s.scoring, Need::kOptional);
  const bool have_groups = mo.read("expert_groups", s.expert_groups, Need::kOptional, {1, 1000000});
  const bool have_group_k = mo.read("group_top_k", s.group_top_k, Need::kOptional, {1, 1000000});
  if (have_groups && have_experts && s.num_experts % s.expert_groups != 0) {
    mo.error("expert_groups",
             "must divide experts (" + str(s.num_experts) + "), got " + str(s.expert_groups));
  }
  if (have_group_k && s.group_top_k > s.expert_groups) {
    mo.error("group_top_k",
             "must be <= expert_groups (" + str(s.expert_groups) + "), got " + str(s.group_top_k));
  } else if (have_group_k && have_experts && s.expert_groups > 0 &&
             s.num_experts % s.expert_groups == 0 &&
             static_cast<std::int64_t>(s.group_top_k) * (s.num_experts / s.expert_groups) <
                 s.top_k) {
    mo.error("group_top_k",
             "the chosen groups hold " +
                 str(static_cast<std::int64_t>(s.group_top_k) * (s.num_experts / s.expert_groups)) +
                 " experts, fewer than top_k (" + str(s.top_k) + ")");
  }
  if (!have_group_k && have_groups) s.group_top_k = s.expert_groups;
  mo.finish();
  return s;
}

// layer_pattern: one known character per layer, and the specs its characters need.
void check_pattern(JsonObject& obj, const ModelSpec& m) {
  const std::string& p = m.layer_pattern;
  if (m.num_layers > 0 && static_cast<std::int64_t>(p.size()) != m.num_layers) {
    obj.error("layer_pattern", "must have one character per layer (" + str(m.num_layers) +
                                   "), got " + str(static_cast<std::int64_t>(p.size())));
    return;
  }
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c != kPatternMamba && c != kPatternDeltaNet && c != kPatternAttention &&
        c != kPatternDense && c != kPatternMoe) {
      obj.error("layer_pattern", "character " + str(static_cast<std::int64_t>(i)) + " is '" +
                                     std::string(1, c) +
                                     "'; expected M (Mamba-2), G (Gated DeltaNet), * (attention), "
                                     "- (MLP) or E (MoE)");
      return;
    }
  }
  if (p.find(kPatternMamba) != std::string::npos && (!m.mamba || m.mamba->delta())) {
    obj.error("layer_pattern", "has Mamba-2 layers (M) but the model gives no \"mamba\" object");
  }
  if (p.find(kPatternDeltaNet) != std::string::npos && (!m.mamba || !m.mamba->delta())) {
    obj.error("layer_pattern",
              "has Gated DeltaNet layers (G) but the model gives no \"gated_deltanet\" object");
  }
  if (p.find(kPatternMoe) != std::string::npos && !m.moe) {
    obj.error("layer_pattern", "has MoE layers (E) but the model gives no \"moe\" object");
  }
  if (m.moe && p.find(kPatternMoe) == std::string::npos) {
    obj.error("layer_pattern", "has no MoE layer (E) but the model gives a \"moe\" object");
  }
  if (m.moe && (m.moe->first_dense_layers != 0 || m.moe->layer_freq != 1)) {
    obj.error("layer_pattern",
              "places the MoE layers itself: leave out moe.first_dense_layers "
              "and moe.layer_freq");
  }
}

}  // namespace

bool ModelSpec::matches(std::string_view query) const {
  auto iequal = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(a[i])) !=
          std::tolower(static_cast<unsigned char>(b[i]))) {
        return false;
      }
    }
    return true;
  };
  if (iequal(name, query)) return true;
  for (const std::string& a : aliases) {
    if (iequal(a, query)) return true;
  }
  return false;
}

bool read_document_header(JsonObject& root, std::string_view expected_kind) {
  Diagnostics& diag = root.diagnostics();
  const std::size_t before = diag.size();
  int version = 0;
  if (root.read("schema_version", version, Need::kRequired, {1, 1000}) &&
      version != kSchemaVersion) {
    root.error("schema_version", "unsupported schema_version " + str(version) +
                                     " (this planner reads version " + str(kSchemaVersion) + ")");
  }
  std::string kind;
  if (root.read("kind", kind, Need::kRequired) && kind != expected_kind) {
    root.error("kind", "expected \"" + std::string(expected_kind) + "\", got \"" + kind + "\"");
  }
  return diag.size() == before;
}

bool read_model_fields(JsonObject& obj, ModelSpec& m) {
  Diagnostics& diag = obj.diagnostics();
  const std::size_t before = diag.size();
  obj.read_name("name", m.name, Need::kRequired);
  obj.read_names("aliases", m.aliases, Need::kOptional);
  obj.read("family", m.family, Need::kOptional);
  obj.read("source", m.source, Need::kOptional);
  const bool have_layers = obj.read("layers", m.num_layers, Need::kRequired, {1, 100000});
  const bool have_hidden = obj.read("hidden", m.hidden, Need::kRequired, {1, kMaxDim});
  const bool have_heads = obj.read("heads", m.heads, Need::kRequired, {1, 1000000});
  bool have_kv = obj.read("kv_heads", m.kv_heads, Need::kOptional, {1, 1000000});
  const bool have_head_dim = obj.read("head_dim", m.head_dim, Need::kOptional, {1, 1000000});
  obj.read("ffn_hidden", m.ffn_hidden, Need::kRequired, {1, kMaxDim});
  obj.read_enum("mlp", m.mlp, Need::kOptional);
  obj.read_enum("norm", m.norm, Need::kOptional);
  m.position_embedding = PositionEmbedding::kRope;
  obj.read_enum("position_embedding", m.position_embedding, Need::kOptional);
  obj.read("vocab", m.vocab, Need::kRequired, {1, 100'000'000});
  obj.read("tied_embeddings", m.tied_embeddings, Need::kOptional);
  const bool have_max_seq =
      obj.read("max_seq_len", m.max_seq_len, Need::kOptional, {1, 1'000'000'000});
  obj.read("pretrain_seq_len", m.pretrain_seq_len, Need::kOptional, {1, 1'000'000'000});
  if (have_max_seq && m.pretrain_seq_len > m.max_seq_len) {
    obj.error("pretrain_seq_len", "must be at most max_seq_len (" + str(m.max_seq_len) + "), got " +
                                      str(m.pretrain_seq_len));
  }
  obj.read("bias", m.bias, Need::kOptional);

  if (have_heads && !have_kv && !obj.has("kv_heads")) {
    m.kv_heads = m.heads;
    have_kv = true;
  }
  if (have_heads && have_kv && m.heads % m.kv_heads != 0) {
    obj.error("kv_heads", "must divide heads (" + str(m.heads) + "), got " + str(m.kv_heads));
  }
  if (have_heads && have_hidden && !have_head_dim && !obj.has("head_dim") && !obj.has("mla")) {
    if (m.hidden % m.heads != 0) {
      obj.error("heads", "must divide hidden (" + str(m.hidden) + "), got " + str(m.heads) +
                             " (or give head_dim explicitly)");
    } else {
      m.head_dim = static_cast<int>(m.hidden / m.heads);
    }
  }
  if (m.position_embedding == PositionEmbedding::kLearned && !have_max_seq &&
      !obj.has("max_seq_len")) {
    obj.error("max_seq_len", "required with learned position embeddings (it sizes the table)");
  }

  if (const Json* moe = obj.child("moe", Need::kOptional)) {
    if (!moe->is_null()) {
      JsonObject mo(*moe, obj.pointer_of("moe"), diag);
      if (mo.valid()) m.moe = read_moe(mo, m, have_layers);
    }
  }
  if (const Json* mla = obj.child("mla", Need::kOptional)) {
    JsonObject ml(*mla, obj.pointer_of("mla"), diag);
    if (ml.valid()) {
      MlaSpec s;
      const IntRange dim{1, 1'000'000};
      ml.read("q_lora_rank", s.q_lora_rank, Need::kRequired,
              {0, 1'000'000, "0 projects queries without a latent"});
      ml.read("kv_lora_rank", s.kv_lora_rank, Need::kRequired, dim);
      ml.read("qk_nope_head_dim", s.qk_nope_head_dim, Need::kRequired, dim);
      ml.read("qk_rope_head_dim", s.qk_rope_head_dim, Need::kRequired, dim);
      ml.read("v_head_dim", s.v_head_dim, Need::kRequired, dim);
      ml.finish();
      m.mla = s;
      const int qk = s.qk_nope_head_dim + s.qk_rope_head_dim;
      if (have_head_dim && m.head_dim != qk) {
        obj.error("head_dim",
                  "with mla the head dimension is qk_nope_head_dim + qk_rope_head_dim (" + str(qk) +
                      "), got " + str(m.head_dim));
      }
      m.head_dim = qk;
      if (have_heads && have_kv && m.kv_heads != m.heads) {
        obj.error("kv_heads",
                  "multi-head latent attention has one key/value head per query head (" +
                      str(m.heads) + "), got " + str(m.kv_heads));
      }
    }
  }
  if (const Json* mamba = obj.child("mamba", Need::kOptional)) {
    JsonObject mo(*mamba, obj.pointer_of("mamba"), diag);
    if (mo.valid()) {
      MambaSpec s;
      const IntRange dim{1, 1'000'000};
      mo.read("heads", s.heads, Need::kRequired, dim);
      mo.read("head_dim", s.head_dim, Need::kRequired, dim);
      mo.read("state_dim", s.state_dim, Need::kRequired, dim);
      const bool have_groups = mo.read("groups", s.groups, Need::kOptional, dim);
      mo.read("conv_kernel", s.conv_kernel, Need::kOptional, {1, 1024});
      mo.read("chunk", s.chunk, Need::kOptional, {1, 1'000'000});
      if (have_groups && s.heads > 0 && s.heads % s.groups != 0) {
        mo.error("groups", "must divide heads (" + str(s.heads) + "), got " + str(s.groups));
      }
      mo.finish();
      m.mamba = s;
    }
  }
  if (const Json* gdn = obj.child("gated_deltanet", Need::kOptional)) {
    JsonObject go(*gdn, obj.pointer_of("gated_deltanet"), diag);
    if (m.mamba) {
      obj.error("gated_deltanet",
                "a model has one recurrent mixer: give \"mamba\" or "
                "\"gated_deltanet\", not both");
    } else if (go.valid()) {
      MambaSpec s;
      s.kind = RecurrentMixer::kGatedDeltaNet;
      s.chunk = 64;  // the chunk of the fla kernels (chunk_gated_delta_rule)
      const IntRange dim{1, 1'000'000};
      const bool have_keys = go.read("key_heads", s.groups, Need::kRequired, dim);
      go.read("key_head_dim", s.state_dim, Need::kRequired, dim);
      const bool have_values = go.read("value_heads", s.heads, Need::kRequired, dim);
      go.read("value_head_dim", s.head_dim, Need::kRequired, dim);
      go.read("conv_kernel", s.conv_kernel, Need::kOptional, {1, 1024});
      go.read("chunk", s.chunk, Need::kOptional, {1, 1'000'000});
      if (have_keys && have_values && s.heads % s.groups != 0) {
        go.error("key_heads",
                 "must divide value_heads (" + str(s.heads) + "), got " + str(s.groups));
      }
      go.finish();
      m.mamba = s;
    }
  }
  obj.read("attention_output_gate", m.attention_output_gate, Need::kOptional);
  if (m.attention_output_gate && obj.has("mla")) {
    obj.error("attention_output_gate", "is not defined for multi-head latent attention (mla)");
  }
  if (obj.read("layer_pattern", m.layer_pattern, Need::kOptional)) check_pattern(obj, m);
  obj.read("sliding_window", m.sliding_window, Need::kOptional, {1, 1'000'000'000});
  if (obj.read("full_attention_every", m.full_attention_every, Need::kOptional,
               {1, 100000, "every n-th layer attends to the whole sequence; omit for none"}) &&
      !obj.has("sliding_window")) {
    obj.error("full_attention_every", "only used with sliding_window");
  }
  obj.read("mtp_layers", m.mtp_layers, Need::kOptional, {0, 64});
  obj.finish();
  // Within every field's limit a model can still have more parameters than 64-bit counts of its
  // bytes and FLOPs hold (100,000 layers of hidden 10^7): refuse it rather than overflow.
  if (diag.size() == before) {
    if (const double params = params_upper_bound(m);
        params > static_cast<double>(limits::kMaxModelParams)) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "a model of %lld layers of hidden %lld has more parameters than the %.0e "
                    "planner can account for (up to %.2g)",
                    static_cast<long long>(m.num_layers), static_cast<long long>(m.hidden),
                    static_cast<double>(limits::kMaxModelParams), params);
      obj.error("layers", text);
    }
  }
  return diag.size() == before;
}

bool read_gpu_fields(JsonObject& obj, GpuSpec& g) {
  Diagnostics& diag = obj.diagnostics();
  const std::size_t before = diag.size();
  obj.read_name("name", g.name, Need::kRequired);
  obj.read_names("aliases", g.aliases, Need::kOptional);
  obj.read("vendor", g.vendor, Need::kOptional);
  obj.read("arch", g.arch, Need::kOptional);
  if (const Json* peak = obj.child("peak_tflops", Need::kRequired)) {
    JsonObject po(*peak, obj.pointer_of("peak_tflops"), diag);
    if (po.valid()) {
      bool any = false;
      for (const auto& [precision, name] : EnumTraits<Precision>::kNames) {
        const Json* v = po.child(name, Need::kOptional);
        if (v == nullptr || v->is_null()) continue;
        double tflops = 0;
        if (po.read(name, tflops, Need::kOptional,
                    {0.0, 100000.0, true, "dense TFLOP/s, not FLOP/s"})) {
          g.peak[static_cast<std::size_t>(precision)] = tflops_per_s(tflops);
          any = true;
        }
      }
      po.finish();
      if (!any) {
        obj.error("peak_tflops", "must give at least one of " + enum_choices<Precision>());
      }
    }
  }
  double hbm_gib = 0;
  if (obj.read("hbm_GiB", hbm_gib, Need::kRequired, {0.0, 65536.0, true, "GiB, not bytes"})) {
    g.hbm = gibibytes(hbm_gib);
  }
  // At least a DDR channel (~20 GB/s: a CPU host's memory, see presets/gpus/cpu-host.json); the
  // bound catches a bandwidth given in TB/s.
  double hbm_bw = 0;
  if (obj.read("hbm_bandwidth_GBps", hbm_bw, Need::kRequired,
               {10.0, 1e6, false, "GB/s: 3.35 TB/s is 3350"})) {
    g.hbm_bandwidth = GBps(hbm_bw);
  }
  obj.read("tdp_W", g.tdp_watts, Need::kOptional, {1.0, 10000.0, false, "watts"});
  double nvlink = 0;
  if (obj.read("nvlink_bandwidth_GBps", nvlink, Need::kOptional,
               {0.0, 100000.0, false, "GB/s per direction"})) {
    g.nvlink_bandwidth = GBps(nvlink);
  }
  double pcie = 32;
  obj.read("pcie_bandwidth_GBps", pcie, Need::kOptional,
           {1.0, 10000.0, false, "GB/s per direction"});
  g.pcie_bandwidth = GBps(pcie);
  if (const Json* prices = obj.child("prices", Need::kOptional)) {
    if (!prices->is_array()) {
      obj.error("prices", "expected an array of price objects, got " + describe_json(*prices));
    } else {
      for (std::size_t i = 0; i < prices->size(); ++i) {
        read_price((*prices)[i], obj.pointer_of("prices") + "/" + str(static_cast<std::int64_t>(i)),
                   diag, g.prices);
      }
    }
  }
  if (const Json* as = obj.child("price_as", Need::kOptional)) {
    JsonObject ao(*as, obj.pointer_of("price_as"), diag);
    if (ao.valid()) {
      PriceAs pa;
      ao.read("gpu", pa.gpu, Need::kRequired);
      ao.read("reason", pa.reason, Need::kRequired);
      ao.finish();
      g.price_as = std::move(pa);
    }
  }
  obj.read("source", g.source, Need::kRequired);
  obj.read("notes", g.notes, Need::kOptional, /*allow_empty=*/true);
  obj.finish();
  return diag.size() == before;
}

bool read_training_fields(JsonObject& obj, TrainingSpec& t) {
  const std::size_t before = obj.diagnostics().size();
  obj.read("global_batch_size", t.global_batch_size, Need::kRequired,
           {1, 100'000'000, "in sequences, not tokens"});
  obj.read("seq_length", t.seq_length, Need::kRequired, {1, 100'000'000});
  obj.read_enum("precision", t.precision, Need::kOptional);
  obj.read_enum("fp8_recipe", t.fp8_recipe, Need::kOptional);
  obj.read_enum("optimizer", t.optimizer, Need::kOptional);
  obj.read("token_budget", t.token_budget, Need::kOptional, {0.0, 1e16, true, "tokens"});
  obj.read("seed", t.seed, Need::kOptional, {0, std::int64_t{1} << 53});
  obj.finish();
  return obj.diagnostics().size() == before;
}

bool read_parallel_fields(JsonObject& obj, ParallelConfig& p) {
  const std::size_t before = obj.diagnostics().size();
  const IntRange axis{1, 1 << 20};
  obj.read("tp", p.tp, Need::kRequired, axis);
  obj.read("pp", p.pp, Need::kRequired, axis);
  p.dp = 0;
  obj.read("dp", p.dp, Need::kOptional, axis);
  obj.read("cp", p.cp, Need::kOptional, axis);
  obj.read("ep", p.ep, Need::kOptional, axis);
  obj.read("etp", p.etp, Need::kOptional, axis);
  if (const Json* cf = obj.child("moe_capacity_factor", Need::kOptional)) {
    if (cf->is_string() && cf->get<std::string>() == "dropless") {
      p.moe_capacity_factor = 0.0;
    } else {
      obj.read("moe_capacity_factor", p.moe_capacity_factor, Need::kOptional,
               {0.0, 64.0, true, "tokens per expert over the mean, or \"dropless\""});
    }
  }
  obj.read("moe_pad_to_capacity", p.moe_pad_to_capacity, Need::kOptional);
  obj.read("moe_imbalance", p.moe_imbalance, Need::kOptional,
           {1.0, 1000.0, false, "the hottest expert's tokens over the mean: 1 is balanced"});
  obj.read("moe_fp8_dispatch", p.moe_fp8_dispatch, Need::kOptional);
  obj.read_enum("moe_a2a", p.moe_a2a, Need::kOptional);
  obj.read("moe_a2a_overlap", p.moe_a2a_overlap, Need::kOptional);
  obj.read("tp_comm_overlap", p.tp_comm_overlap, Need::kOptional);
  obj.read("sequence_parallel", p.sequence_parallel, Need::kOptional);
  obj.read("micro_batch_size", p.micro_batch_size, Need::kOptional, {1, 1'000'000});
  obj.read("virtual_stages", p.virtual_stages, Need::kOptional, {1, 1024});
  obj.read("first_stage_layers", p.first_stage_layers, Need::kOptional, {0, 1'000'000});
  obj.read("last_stage_layers", p.last_stage_layers, Need::kOptional, {0, 1'000'000});
  if (const Json* layout = obj.child("layout", Need::kOptional)) {
    // Megatron-core's layout string, or the decoder layers of each virtual stage.
    if (layout->is_string()) {
      auto parsed = parse_pipeline_layout(layout->get<std::string>());
      if (parsed) {
        p.layout = parsed->layers;
      } else {
        obj.error("layout", parsed.status().message());
      }
    } else if (layout->is_array() && std::all_of(layout->begin(), layout->end(), [](const Json& n) {
                 return n.is_number_integer() && n.get<std::int64_t>() >= 0 &&
                        n.get<std::int64_t>() <= 1'000'000;
               })) {
      for (const Json& n : *layout)
        p.layout.push_back(n.get<int>());
    } else {
      obj.error("layout",
                "expected Megatron-core's layout string (\"Et|(tt|)*30L\") or an array of the "
                "decoder layers of each virtual stage (integers 0 to 1000000)");
    }
  }
  const Json* schedule = obj.child("schedule", Need::kOptional);
  if (schedule && schedule->is_string() && schedule->get<std::string>() == "dualpipe") {
    // DeepSeek's DualPipe, kept in its cut-in-half form (parallel_config.hpp).
    if (Status folded = fold_dualpipe(p); !folded.is_ok()) obj.error("pp", folded.message());
  } else if (schedule) {
    std::string name;
    obj.read("schedule", name, Need::kOptional);
    if (auto s = parse_enum<Schedule>(name)) {
      p.schedule = *s;
    } else {
      obj.error("schedule", "expected one of " + enum_choices<Schedule>() + ", dualpipe; got " +
                                describe_json(*schedule));
    }
  }
  // DualPipeV's V is two chunks per stage; "virtual_stages" may say so but need not.
  if (p.schedule == Schedule::kDualPipeV && !obj.has("virtual_stages")) p.virtual_stages = 2;
  obj.read_enum("recompute", p.recompute, Need::kOptional);
  std::vector<std::string> modules;
  if (obj.read("recompute_modules", modules, Need::kOptional)) {
    if (p.recompute != Recompute::kSelective) {
      obj.error("recompute_modules", "recompute modules need recompute \"selective\", got \"" +
                                         std::string(to_string(p.recompute)) + "\"");
    } else if (auto parsed = parse_recompute_modules(modules)) {
      p.recompute_modules = *parsed;
    } else {
      obj.error("recompute_modules", parsed.status().message());
    }
  }
  obj.read("zero_stage", p.zero_stage, Need::kOptional, {0, 3});
  obj.read_enum("offload", p.offload, Need::kOptional);
  if (obj.read("order", p.order, Need::kOptional)) {
    auto grid = RankGrid::create(AxisSizes{}, p.order);
    if (!grid) {
      obj.error("order",
                "expected a '-'-separated permutation of tp, cp, ep, dp, pp (innermost "
                "first), got \"" +
                    p.order + "\"");
    }
  }
  obj.read_enum("dp_sync", p.dp_sync, Need::kOptional);
  obj.read("param_servers", p.param_servers, Need::kOptional, {0, 1 << 20});
  obj.read("overlap_grad_reduce", p.overlap_grad_reduce, Need::kOptional);
  obj.read("overlap_param_gather", p.overlap_param_gather, Need::kOptional);
  obj.read("async_tp_allreduce", p.async_tp_allreduce, Need::kOptional);
  obj.finish();
  return obj.diagnostics().size() == before;
}

bool read_cluster_fields(JsonObject& obj, const Catalog& catalog, ClusterSpec& c) {
  const std::size_t before = obj.diagnostics().size();
  obj.read_name("name", c.name, Need::kOptional);
  obj.read("nodes", c.nodes, Need::kRequired, {1, limits::kMaxNodes});
  obj.read("gpus_per_node", c.gpus_per_node, Need::kRequired, {1, 1024});
  if (obj.read("gpu", c.gpu, Need::kRequired)) {
    auto gpu = catalog.gpu(c.gpu);
    if (!gpu) obj.error("gpu", gpu.status().message());
  }
  obj.read("topology", c.topology, Need::kOptional);
  obj.read_enum("offering", c.offering, Need::kOptional);
  double price = 0;
  if (obj.read("usd_per_gpu_hour", price, Need::kOptional, {0.0, 1000.0, true})) {
    c.usd_per_gpu_hour = Usd(price);
  }
  obj.finish();
  return obj.diagnostics().size() == before;
}

bool read_plan_fields(JsonObject& obj, const Catalog& catalog, Plan& plan) {
  Diagnostics& diag = obj.diagnostics();
  const std::size_t before = diag.size();
  obj.read_name("name", plan.name, Need::kOptional);
  bool parts_ok = true;
  if (const Json* model = obj.child("model", Need::kRequired)) {
    if (model->is_string()) {
      auto m = catalog.model(model->get<std::string>());
      if (m) {
        plan.model = *m;
      } else {
        obj.error("model", m.status().message());
        parts_ok = false;
      }
    } else {
      JsonObject mo(*model, obj.pointer_of("model"), diag);
      parts_ok &= mo.valid() && read_model_fields(mo, plan.model);
    }
  } else {
    parts_ok = false;
  }
  auto section = [&](std::string_view key, auto&& reader) {
    const Json* j = obj.child(key, Need::kRequired);
    if (j == nullptr) {
      parts_ok = false;
      return;
    }
    JsonObject so(*j, obj.pointer_of(key), diag);
    parts_ok &= so.valid() && reader(so);
  };
  section("cluster", [&](JsonObject& o) { return read_cluster_fields(o, catalog, plan.cluster); });
  section("training", [&](JsonObject& o) { return read_training_fields(o, plan.training); });
  section("parallel", [&](JsonObject& o) { return read_parallel_fields(o, plan.parallel); });
  obj.finish();
  if (!parts_ok || diag.size() != before) return false;

  plan.gpu = *catalog.gpu(plan.cluster.gpu);
  ParallelConfig& p = plan.parallel;
  if (p.dp == 0) {
    const std::int64_t mp = p.model_parallel_size();
    if (plan.cluster.num_gpus() % mp != 0) {
      diag.add("/parallel", "dp is not given and the cluster's " + str(plan.cluster.num_gpus()) +
                                " GPUs are not a multiple of tp x cp x pp (" + str(mp) + ")");
      return false;
    }
    p.dp = static_cast<int>(plan.cluster.num_gpus() / mp);
  }
  check_plan(plan, diag);
  return diag.size() == before;
}

Json to_json(const ModelSpec& m) {
  Json j;
  j["name"] = m.name;
  if (!m.aliases.empty()) j["aliases"] = m.aliases;
  if (!m.family.empty()) j["family"] = m.family;
  if (!m.source.empty()) j["source"] = m.source;
  j["layers"] = m.num_layers;
  j["hidden"] = m.hidden;
  j["heads"] = m.heads;
  j["kv_heads"] = m.kv_heads;
  if (m.head_dim > 0 && !m.mla && m.hidden != static_cast<std::int64_t>(m.heads) * m.head_dim) {
    j["head_dim"] = m.head_dim;
  }
  j["ffn_hidden"] = m.ffn_hidden;
  j["mlp"] = to_string(m.mlp);
  j["norm"] = to_string(m.norm);
  j["position_embedding"] = to_string(m.position_embedding);
  j["vocab"] = m.vocab;
  j["tied_embeddings"] = m.tied_embeddings;
  if (m.max_seq_len > 0) j["max_seq_len"] = m.max_seq_len;
  if (m.pretrain_seq_len > 0) j["pretrain_seq_len"] = m.pretrain_seq_len;
  j["bias"] = m.bias;
  if (m.is_moe()) {
    const MoeSpec& e = *m.moe;
    Json moe = {
        {"experts", e.num_experts}, {"top_k", e.top_k}, {"expert_ffn_hidden", e.expert_ffn_hidden}};
    if (e.capacity_factor > 0) {
      moe["capacity_factor"] = e.capacity_factor;
    } else {
      moe["capacity_factor"] = "dropless";
    }
    if (m.layer_pattern.empty()) moe["layer_freq"] = e.layer_freq;
    if (e.first_dense_layers > 0) moe["first_dense_layers"] = e.first_dense_layers;
    if (e.shared_experts > 0) {
      moe["shared_experts"] = e.shared_experts;
      moe["shared_expert_ffn_hidden"] = e.shared_expert_ffn_hidden;
      if (e.shared_expert_gate) moe["shared_expert_gate"] = true;
    }
    if (e.scoring != RouterScoring::kSoftmax) moe["scoring"] = to_string(e.scoring);
    if (e.expert_groups > 1) {
      moe["expert_groups"] = e.expert_groups;
      moe["group_top_k"] = e.group_top_k;
    }
    j["moe"] = std::move(moe);
  }
  if (m.mla) {
    j["mla"] = {{"q_lora_rank", m.mla->q_lora_rank},
                {"kv_lora_rank", m.mla->kv_lora_rank},
                {"qk_nope_head_dim", m.mla->qk_nope_head_dim},
                {"qk_rope_head_dim", m.mla->qk_rope_head_dim},
                {"v_head_dim", m.mla->v_head_dim}};
  }
  if (m.mamba && m.mamba->delta()) {
    j["gated_deltanet"] = {
        {"key_heads", m.mamba->groups},        {"key_head_dim", m.mamba->state_dim},
        {"value_heads", m.mamba->heads},       {"value_head_dim", m.mamba->head_dim},
        {"conv_kernel", m.mamba->conv_kernel}, {"chunk", m.mamba->chunk}};
  } else if (m.mamba) {
    j["mamba"] = {{"heads", m.mamba->heads},
                  {"head_dim", m.mamba->head_dim},
                  {"state_dim", m.mamba->state_dim},
                  {"groups", m.mamba->groups},
                  {"conv_kernel", m.mamba->conv_kernel},
                  {"chunk", m.mamba->chunk}};
  }
  if (!m.layer_pattern.empty()) j["layer_pattern"] = m.layer_pattern;
  if (m.sliding_window > 0) {
    j["sliding_window"] = m.sliding_window;
    if (m.full_attention_every > 0) j["full_attention_every"] = m.full_attention_every;
  }
  if (m.mtp_layers > 0) j["mtp_layers"] = m.mtp_layers;
  if (m.attention_output_gate) j["attention_output_gate"] = true;
  return j;
}

Json to_json(const GpuSpec& g) {
  Json j;
  j["name"] = g.name;
  if (!g.aliases.empty()) j["aliases"] = g.aliases;
  if (!g.vendor.empty()) j["vendor"] = g.vendor;
  if (!g.arch.empty()) j["arch"] = g.arch;
  Json peak = Json::object();
  for (const auto& [precision, name] : EnumTraits<Precision>::kNames) {
    if (g.supports(precision)) peak[std::string(name)] = to_tflops_per_s(g.peak_for(precision));
  }
  j["peak_tflops"] = peak;
  j["hbm_GiB"] = to_GiB(g.hbm);
  j["hbm_bandwidth_GBps"] = to_GBps(g.hbm_bandwidth);
  if (g.tdp_watts > 0) j["tdp_W"] = g.tdp_watts;
  j["nvlink_bandwidth_GBps"] = to_GBps(g.nvlink_bandwidth);
  j["pcie_bandwidth_GBps"] = to_GBps(g.pcie_bandwidth);
  Json prices = Json::array();
  for (const PriceEntry& p : g.prices) {
    if (p.priced_as.empty()) prices.push_back(to_json(p));  // borrowed ones follow from price_as
  }
  if (!prices.empty()) j["prices"] = prices;
  if (g.price_as) j["price_as"] = {{"gpu", g.price_as->gpu}, {"reason", g.price_as->reason}};
  j["source"] = g.source;
  if (!g.notes.empty()) j["notes"] = g.notes;
  return j;
}

Json to_json(const PriceEntry& p) {
  Json e;
  if (!p.gpu.empty()) e["gpu"] = p.gpu;
  if (!p.provider.empty()) e["provider"] = p.provider;
  if (!p.instance.empty()) e["instance"] = p.instance;
  if (p.gpus_per_instance > 0) e["gpus_per_instance"] = p.gpus_per_instance;
  e["offering"] = to_string(p.offering);
  e["usd_per_instance_hour"] =
      p.usd_per_instance_hour ? Json(p.usd_per_instance_hour->raw()) : Json(nullptr);
  e["usd_per_gpu_hour"] = p.usd_per_gpu_hour.raw();
  e["region"] = p.region.empty() ? Json(nullptr) : Json(p.region);
  e["date"] = p.date;
  e["source"] = p.source;
  if (!p.notes.empty()) e["notes"] = p.notes;
  return e;
}

Json to_json(const TrainingSpec& t) {
  Json j{{"global_batch_size", t.global_batch_size},
         {"seq_length", t.seq_length},
         {"precision", to_string(t.precision)},
         {"optimizer", to_string(t.optimizer)},
         {"seed", t.seed}};
  if (t.precision == Precision::kFp8) j["fp8_recipe"] = to_string(t.fp8_recipe);
  if (t.token_budget > 0) j["token_budget"] = t.token_budget;
  return j;
}

Json to_json(const ParallelConfig& p) {
  Json j{{"tp", p.tp},
         {"pp", p.written_pp()},
         {"dp", p.written_dp()},
         {"cp", p.cp},
         {"ep", p.ep},
         {"sequence_parallel", p.sequence_parallel},
         {"micro_batch_size", p.micro_batch_size},
         {"virtual_stages", p.virtual_stages},
         {"schedule", schedule_name(p)},
         {"recompute", to_string(p.recompute)},
         {"zero_stage", p.zero_stage},
         {"offload", to_string(p.offload)},
         {"order", p.order},
         {"dp_sync", to_string(p.dp_sync)},
         {"overlap_grad_reduce", p.overlap_grad_reduce},
         {"overlap_param_gather", p.overlap_param_gather},
         {"async_tp_allreduce", p.async_tp_allreduce}};
  if (p.dp_sync == DpSync::kParameterServer) j["param_servers"] = p.param_servers;
  if (p.etp > 0) j["etp"] = p.etp;
  if (p.first_stage_layers > 0) j["first_stage_layers"] = p.first_stage_layers;
  if (p.last_stage_layers > 0) j["last_stage_layers"] = p.last_stage_layers;
  if (!p.layout.empty()) j["layout"] = p.layout;
  if (p.moe_capacity_factor == 0) {
    j["moe_capacity_factor"] = "dropless";
  } else if (p.moe_capacity_factor > 0) {
    j["moe_capacity_factor"] = p.moe_capacity_factor;
  }
  if (p.moe_pad_to_capacity) j["moe_pad_to_capacity"] = true;
  if (p.moe_imbalance != 1.0) j["moe_imbalance"] = p.moe_imbalance;
  if (p.moe_fp8_dispatch) j["moe_fp8_dispatch"] = true;
  if (p.moe_a2a != MoeA2a::kNccl) j["moe_a2a"] = to_string(p.moe_a2a);
  if (p.moe_a2a_overlap) j["moe_a2a_overlap"] = true;
  if (p.tp_comm_overlap) j["tp_comm_overlap"] = true;
  if (p.recompute == Recompute::kSelective && p.recompute_modules != kDefaultRecomputeModules) {
    Json modules = Json::array();
    for (const auto& [module, name] : EnumTraits<RecomputeModule>::kNames) {
      if (recomputes(p, module)) modules.push_back(std::string(name));
    }
    j["recompute_modules"] = modules;
  }
  return j;
}

Json to_json(const ClusterSpec& c) {
  Json j;
  if (!c.name.empty()) j["name"] = c.name;
  j["nodes"] = c.nodes;
  j["gpus_per_node"] = c.gpus_per_node;
  j["gpu"] = c.gpu;
  if (!c.topology.empty()) j["topology"] = c.topology;
  j["offering"] = to_string(c.offering);
  if (c.usd_per_gpu_hour) j["usd_per_gpu_hour"] = c.usd_per_gpu_hour->raw();
  return j;
}

Json to_json(const Plan& plan) {
  Json j;
  if (!plan.name.empty()) j["name"] = plan.name;
  j["model"] = to_json(plan.model);
  j["cluster"] = to_json(plan.cluster);
  j["training"] = to_json(plan.training);
  j["parallel"] = to_json(plan.parallel);
  return j;
}

Json as_document(std::string_view kind, const Json& fields) {
  Json doc;
  doc["schema_version"] = kSchemaVersion;
  doc["kind"] = kind;
  for (auto it = fields.begin(); it != fields.end(); ++it)
    doc[it.key()] = it.value();
  return doc;
}

}  // namespace planner
