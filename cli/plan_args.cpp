#include "plan_args.hpp"

#include <filesystem>

#include "planner/core/loaders.hpp"

namespace planner::cli {

Result<ModelSpec> resolve_model(const Catalog& catalog, const std::string& name) {
  if (name.ends_with(".json") || std::filesystem::exists(name)) return load_model_file(name);
  return catalog.model(name);
}

void add_plan_options(CLI::App* cmd, PlanArgs& a) {
  CLI::Option* plan =
      cmd->add_option("--plan", a.plan, "A plan document (model, GPU, training, parallel)");
  std::vector<CLI::Option*> config;
  config.push_back(
      cmd->add_option("--model", a.model, "Model preset or model file (default gpt3-175b)"));
  config.push_back(cmd->add_option("--gpu", a.gpu, "GPU preset"));
  config.push_back(cmd->add_option("--tp", a.parallel.tp, "Tensor parallel size"));
  config.push_back(cmd->add_option("--pp", a.parallel.pp, "Pipeline parallel size"));
  config.push_back(cmd->add_option("--dp", a.parallel.dp, "Data parallel size"));
  config.push_back(cmd->add_option("--cp", a.parallel.cp, "Context parallel size"));
  config.push_back(cmd->add_option("--ep", a.parallel.ep, "Expert parallel size"));
  config.push_back(cmd->add_option("--mbs", a.parallel.micro_batch_size, "Micro-batch size"));
  config.push_back(cmd->add_flag("--sp", a.parallel.sequence_parallel, "Sequence parallelism"));
  config.push_back(cmd->add_option("--recompute", a.recompute, "none, selective or full"));
  config.push_back(cmd->add_option("--zero", a.parallel.zero_stage, "ZeRO stage 0-3"));
  config.push_back(cmd->add_option("--schedule", a.schedule, "gpipe, 1f1b, interleaved or zb-h1"));
  config.push_back(cmd->add_option("--vpp", a.parallel.virtual_stages,
                                   "Virtual stages per GPU (interleaved schedule)"));
  config.push_back(cmd->add_option("--offload", a.offload, "none, optimizer or optimizer+params"));
  config.push_back(
      cmd->add_option("--seq", a.seq, "Sequence length (default: the model's maximum)"));
  config.push_back(cmd->add_option(
      "--gbs", a.gbs,
      "Global batch size in sequences (default dp x mbs x pp: one micro-batch per stage)"));
  config.push_back(cmd->add_option("--precision", a.precision, "fp32, tf32, bf16, fp16 or fp8"));
  config.push_back(cmd->add_option("--optimizer", a.optimizer, "adam, adamw or sgd"));
  for (CLI::Option* o : config)
    plan->excludes(o);
}

Result<ResolvedPlan> resolve_plan(const Catalog& catalog, const PlanArgs& args) {
  ResolvedPlan r;
  if (!args.plan.empty()) {
    PLANNER_ASSIGN_OR_RETURN(Plan plan, load_plan_file(args.plan, catalog));
    r.model = plan.model;
    r.training = plan.training;
    r.parallel = plan.parallel;
    r.gpu = plan.gpu;
    r.cluster = plan.cluster;
    return r;
  }
  PLANNER_ASSIGN_OR_RETURN(r.model, resolve_model(catalog, args.model));
  if (!args.gpu.empty()) {
    PLANNER_ASSIGN_OR_RETURN(r.gpu, catalog.gpu(args.gpu));
  }
  r.parallel = args.parallel;
  PLANNER_ASSIGN_OR_RETURN(r.parallel.schedule, parse_flag<Schedule>("--schedule", args.schedule));
  PLANNER_ASSIGN_OR_RETURN(r.parallel.recompute,
                           parse_flag<Recompute>("--recompute", args.recompute));
  PLANNER_ASSIGN_OR_RETURN(r.parallel.offload, parse_flag<Offload>("--offload", args.offload));
  PLANNER_ASSIGN_OR_RETURN(r.training.precision,
                           parse_flag<Precision>("--precision", args.precision));
  PLANNER_ASSIGN_OR_RETURN(r.training.optimizer,
                           parse_flag<Optimizer>("--optimizer", args.optimizer));
  r.training.seq_length =
      args.seq > 0 ? args.seq : (r.model.max_seq_len > 0 ? r.model.max_seq_len : 2048);
  r.training.global_batch_size = args.gbs > 0 ? args.gbs
                                              : static_cast<std::int64_t>(r.parallel.dp) *
                                                    r.parallel.micro_batch_size * r.parallel.pp;
  return r;
}

}  // namespace planner::cli
