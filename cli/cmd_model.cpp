// planner model list | show NAME | import CONFIG.json
#include <iostream>

#include "app.hpp"
#include "output.hpp"
#include "plan_args.hpp"
#include "planner/core/hf_import.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/spec_json.hpp"

namespace planner::cli {
namespace {

std::string heads_label(const ModelSpec& m) {
  std::string s = std::to_string(m.heads);
  if (m.kv_heads != m.heads) s += "/" + std::to_string(m.kv_heads);
  return s;
}

std::string moe_label(const ModelSpec& m) {
  if (!m.is_moe()) return "-";
  return std::to_string(m.moe->num_experts) + "x top" + std::to_string(m.moe->top_k);
}

Json model_summary_json(const ModelSpec& m) {
  Json j = to_json(m);
  j["params"] = {{"total", m.total_params()},
                 {"active", m.active_params()},
                 {"mtp", m.mtp_params()},
                 {"non_embedding", m.non_embedding_params()},
                 {"embedding", m.embedding_params()},
                 {"lm_head", m.lm_head_params()}};
  return j;
}

void print_model(std::ostream& out, const ModelSpec& m) {
  KeyValues kv;
  kv.add("name", m.name);
  if (!m.family.empty()) kv.add("family", m.family);
  kv.add("parameters",
         fmt_count(static_cast<double>(m.total_params())) + " (" + fmt_int(m.total_params()) + ")");
  if (m.mtp_layers > 0) {
    kv.add("of which MTP", fmt_count(static_cast<double>(m.mtp_params())) + " (" +
                               std::to_string(m.mtp_layers) + " multi-token-prediction module" +
                               (m.mtp_layers > 1 ? "s)" : ")"));
  }
  if (m.is_moe()) {
    kv.add("active per token",
           fmt_count(static_cast<double>(m.active_params())) + " (" +
               fmt_count(static_cast<double>(m.active_params() - m.embedding_params())) +
               " without the embedding table)");
  }
  kv.add("non-embedding", fmt_count(static_cast<double>(m.non_embedding_params())));
  kv.add("layers", std::to_string(m.num_layers));
  kv.add("hidden", std::to_string(m.hidden));
  if (m.is_hybrid()) {
    const bool delta = m.mamba && m.mamba->delta();
    kv.add("layer pattern", m.layer_pattern + " (" + std::to_string(m.mamba_layers()) +
                                (delta ? " Gated DeltaNet, " : " Mamba-2, ") +
                                std::to_string(m.attention_layers()) + " attention, " +
                                std::to_string(m.moe_layers()) + " MoE)");
  }
  if (m.mla) {
    kv.add("attention", "multi-head latent, " + std::to_string(m.heads) + " heads, q latent " +
                            (m.mla->q_lora_rank > 0 ? std::to_string(m.mla->q_lora_rank) : "none") +
                            ", kv latent " + std::to_string(m.mla->kv_lora_rank) + ", qk " +
                            std::to_string(m.mla->qk_nope_head_dim) + " + rope " +
                            std::to_string(m.mla->qk_rope_head_dim) + ", v " +
                            std::to_string(m.mla->v_head_dim));
  } else {
    kv.add("heads (q/kv)", heads_label(m) + ", head_dim " + std::to_string(m.head_dim) +
                               (m.attention_output_gate ? ", sigmoid output gate" : ""));
  }
  if (m.sliding_window > 0) {
    kv.add("local attention",
           "window " + std::to_string(m.sliding_window) +
               (m.full_attention_every > 0
                    ? ", full attention every " + std::to_string(m.full_attention_every) + " layers"
                    : " in every layer"));
  }
  if (m.mamba && m.mamba->delta()) {
    kv.add("gated deltanet",
           std::to_string(m.mamba->heads) + " value heads x " + std::to_string(m.mamba->head_dim) +
               ", " + std::to_string(m.mamba->groups) + " key heads x " +
               std::to_string(m.mamba->state_dim) + ", conv " +
               std::to_string(m.mamba->conv_kernel) + ", chunk " + std::to_string(m.mamba->chunk));
  } else if (m.mamba) {
    kv.add("mamba-2",
           std::to_string(m.mamba->heads) + " heads x " + std::to_string(m.mamba->head_dim) +
               ", state " + std::to_string(m.mamba->state_dim) + ", " +
               std::to_string(m.mamba->groups) + " groups, conv " +
               std::to_string(m.mamba->conv_kernel) + ", chunk " + std::to_string(m.mamba->chunk));
  }
  kv.add("ffn_hidden", std::to_string(m.ffn_hidden) + " (" + std::string(to_string(m.mlp)) + ")");
  if (m.is_moe()) {
    const MoeSpec& e = *m.moe;
    std::string layers = m.is_hybrid() ? "as the pattern says"
                                       : "every " + std::to_string(e.layer_freq) + " layer(s)";
    if (e.first_dense_layers > 0) {
      layers += " after " + std::to_string(e.first_dense_layers) + " dense";
    }
    kv.add("experts", std::to_string(e.num_experts) + ", top-" + std::to_string(e.top_k) +
                          ", expert ffn " + std::to_string(e.expert_ffn_hidden) + ", " +
                          (e.capacity_factor > 0 ? "capacity factor " + fmt(e.capacity_factor, 2)
                                                 : std::string("dropless")) +
                          ", " + layers);
    if (e.shared_experts > 0) {
      kv.add("shared experts", std::to_string(e.shared_experts) + " x ffn " +
                                   std::to_string(e.shared_expert_ffn_hidden) +
                                   (e.shared_expert_gate ? ", sigmoid-gated" : ""));
    }
    kv.add("router",
           std::string(to_string(e.scoring)) +
               (e.expert_groups > 1 ? ", " + std::to_string(e.expert_groups) + " groups, top-" +
                                          std::to_string(e.group_top_k) + " groups"
                                    : ""));
  }
  kv.add("norm", std::string(to_string(m.norm)));
  kv.add("positions", std::string(to_string(m.position_embedding)) +
                          (m.max_seq_len > 0 ? ", max " + std::to_string(m.max_seq_len) : ""));
  kv.add("vocab", std::to_string(m.vocab) + (m.tied_embeddings ? " (tied embeddings)" : ""));
  kv.add("biases", m.bias ? "yes" : "no");
  if (!m.source.empty()) kv.add("source", m.source);
  kv.print(out);
}

Status model_list(const CliContext& ctx) {
  std::ostream& out = *ctx.out;
  if (ctx.json) {
    Json arr = Json::array();
    for (const ModelSpec& m : ctx.catalog->models())
      arr.push_back(model_summary_json(m));
    out << arr.dump(2) << '\n';
    return Status::ok();
  }
  Table t({{"NAME"},
           {"FAMILY"},
           {"PARAMS", Align::kRight},
           {"LAYERS", Align::kRight},
           {"HIDDEN", Align::kRight},
           {"HEADS", Align::kRight},
           {"FFN", Align::kRight},
           {"MLP"},
           {"NORM"},
           {"VOCAB", Align::kRight},
           {"MOE"}});
  for (const ModelSpec& m : ctx.catalog->models()) {
    t.add_row({m.name, m.family, fmt_count(static_cast<double>(m.total_params())),
               std::to_string(m.num_layers), std::to_string(m.hidden), heads_label(m),
               std::to_string(m.ffn_hidden), std::string(to_string(m.mlp)),
               std::string(to_string(m.norm)), std::to_string(m.vocab), moe_label(m)});
  }
  t.print(out);
  out << "\nHEADS is query/kv heads where they differ (GQA/MQA). `planner model show NAME` for "
         "sources.\n";
  return Status::ok();
}

Status model_show(const CliContext& ctx, const std::string& name) {
  PLANNER_ASSIGN_OR_RETURN(ModelSpec m, resolve_model(*ctx.catalog, name));
  if (ctx.json) {
    *ctx.out << as_document("model", model_summary_json(m)).dump(2) << '\n';
  } else {
    print_model(*ctx.out, m);
  }
  return Status::ok();
}

struct ImportArgs {
  std::string path;
  std::string name;
  std::string output;
};

Status model_import(const CliContext& ctx, const ImportArgs& args) {
  PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(args.path));
  PLANNER_ASSIGN_OR_RETURN(ModelSpec m, import_hf_config(text, args.path, args.name));
  const std::string doc = to_json_text(m);
  // The imported document must load back through the strict loader.
  PLANNER_RETURN_IF_ERROR(parse_model(doc, "imported " + args.path).status());
  if (!args.output.empty()) {
    PLANNER_RETURN_IF_ERROR(write_text_file_atomic(args.output, doc));
  }
  if (ctx.json) {
    *ctx.out << doc;
  } else {
    print_model(*ctx.out, m);
    if (!args.output.empty()) *ctx.out << "\nwrote " << args.output << '\n';
  }
  return Status::ok();
}

}  // namespace

void register_model_commands(CLI::App& app, CliContext& ctx) {
  CLI::App* model = app.add_subcommand("model", "Model presets and Hugging Face import");
  model->require_subcommand(1);

  CLI::App* list = model->add_subcommand("list", "List the built-in models");
  add_json_flag(list, ctx);
  list->callback([&ctx] { ctx.action = [&ctx] { return model_list(ctx); }; });

  CLI::App* show = model->add_subcommand("show", "Show one model with its parameter counts");
  auto name = std::make_shared<std::string>();
  show->add_option("NAME", *name,
                   "Model name or alias (e.g. llama3-70b, gpt3-175b), or a model file (planner "
                   "model import writes one)")
      ->required();
  add_json_flag(show, ctx);
  show->callback([&ctx, name] { ctx.action = [&ctx, name] { return model_show(ctx, *name); }; });

  CLI::App* import = model->add_subcommand(
      "import", "Convert a Hugging Face config.json into a planner model document");
  auto args = std::make_shared<ImportArgs>();
  import->add_option("CONFIG", args->path, "Path to a Hugging Face config.json")->required();
  import->add_option("--name", args->name, "Model name (default: from the config)");
  import->add_option("-o,--output", args->output, "Write the model document to this file");
  add_json_flag(import, ctx);
  import->callback([&ctx, args] { ctx.action = [&ctx, args] { return model_import(ctx, *args);
};
}  // namespace planner::cli
);
}

}  // namespace planner::cli
