#include "plan_args.hpp"

#include <algorithm>
#include <filesystem>
#include <type_traits>

#include "flag_checks.hpp"
#include "planner/app/defaults.hpp"
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
  // Megatron-LM's spellings are accepted beside the short ones.
  config.push_back(
      cmd->add_option("--tp,--tensor-model-parallel-size", a.parallel.tp, "Tensor parallel size"));
  config.push_back(cmd->add_option("--pp,--pipeline-model-parallel-size", a.parallel.pp,
                                   "Pipeline parallel size"));
  config.push_back(cmd->add_option("--dp", a.parallel.dp, "Data parallel size"));
  config.push_back(
      cmd->add_option("--cp,--context-parallel-size", a.parallel.cp, "Context parallel size"));
  config.push_back(
      cmd->add_option("--ep,--expert-model-parallel-size", a.parallel.ep, "Expert parallel size"));
  config.push_back(cmd->add_option(
      "--etp,--expert-tensor-parallel-size", a.parallel.etp,
      "Expert tensor parallel size: each expert's MLP split over this many ranks (default tp)"));
  config.push_back(
      cmd->add_option("--mbs,--micro-batch-size", a.parallel.micro_batch_size, "Micro-batch size"));
  config.push_back(cmd->add_flag("--sp,--sequence-parallel", a.parallel.sequence_parallel,
                                 "Sequence parallelism"));
  config.push_back(cmd->add_option("--recompute,--recompute-granularity", a.recompute,
                                   "none, selective or full"));
  config.push_back(cmd->add_option(
      "--recompute-modules", a.recompute_modules,
      "With selective recompute, the parts of every layer run again before their backward "
      "(Megatron-core): core_attn (default), moe_act, layernorm, mla_up_proj, mlp, moe, "
      "shared_experts"));
  CLI::Option* zero = cmd->add_option("--zero", a.parallel.zero_stage, "ZeRO stage 0-3");
  config.push_back(zero);
  config.push_back(cmd->add_flag("--use-distributed-optimizer", a.distributed_optimizer,
                                 "Megatron's distributed optimizer: ZeRO stage 1")
                       ->excludes(zero));
  config.push_back(cmd->add_option(
      "--schedule", a.schedule,
      "gpipe, 1f1b, interleaved, zb-h1, dualpipev or dualpipe (DeepSeek's bidirectional DualPipe, "
      "simulated in its cut-in-half form: dualpipev on pp / 2 stages with twice the "
      "data-parallel replicas)"));
  CLI::Option* vpp =
      cmd->add_option("--vpp,--virtual-pipeline-model-parallel-size", a.parallel.virtual_stages,
                      "Virtual stages per GPU (interleaved schedule)");
  config.push_back(vpp);
  config.push_back(cmd->add_option("--num-layers-per-virtual-pipeline-stage",
                                   a.layers_per_virtual_stage,
                                   "Layers per virtual stage (Megatron's alternative to --vpp: "
                                   "virtual stages = layers / (pp x this))")
                       ->excludes(vpp));
  CLI::Option* first = cmd->add_option(
      "--first-stage-layers,--decoder-first-pipeline-num-layers", a.parallel.first_stage_layers,
      "Layers of the first pipeline stage (uneven stages; the stages without a count share the "
      "rest evenly)");
  CLI::Option* last = cmd->add_option("--last-stage-layers,--decoder-last-pipeline-num-layers",
                                      a.parallel.last_stage_layers,
                                      "Layers of the last pipeline stage (uneven stages)");
  config.push_back(first);
  config.push_back(last);
  CLI::Option* layout = cmd->add_option(
      "--pipeline-model-parallel-layout", a.layout,
      "Megatron-core's layout: the layers of every virtual stage, e.g. \"Et*3|(tt|)*29,m|L\" "
      "(E embedding, t layer, m MTP module, L loss; '|' between virtual stages, in order); "
      "sets --vpp to its stages / pp and allows chunks of unequal size");
  layout->excludes(first)->excludes(last)->excludes(vpp);
  config.push_back(layout);
  config.push_back(cmd->add_flag("--account-for-embedding-in-pipeline-split", a.embedding_in_split,
                                 "Count the embedding as a layer when splitting the stages (the "
                                 "first stage gets one layer fewer)")
                       ->excludes(first)
                       ->excludes(layout));
  config.push_back(cmd->add_flag("--account-for-loss-in-pipeline-split", a.loss_in_split,
                                 "Count the LM head and loss as a layer when splitting the "
                                 "stages (the last stage gets one layer fewer)")
                       ->excludes(last)
                       ->excludes(layout));
  config.push_back(cmd->add_option("--offload", a.offload, "none, optimizer or optimizer+params"));
  config.push_back(cmd->add_option(
      "--moe-a2a", a.moe_a2a,
      "How MoE tokens reach other ranks' experts: nccl (NCCL's all-to-all, Megatron-core's "
      "alltoall dispatcher) or hierarchical (once per node over the network, then NVLink: "
      "DeepEP, HybridEP)"));
  config.push_back(cmd->add_flag(
      "--moe-a2a-overlap,--overlap-moe-expert-parallel-comm", a.parallel.moe_a2a_overlap,
      "Run each steady-state forward pass merged with the backward pass after it, "
      "one micro-batch's MoE all-to-alls under the other's compute (Megatron-core)"));
  config.push_back(cmd->add_flag(
      "--tp-comm-overlap", a.parallel.tp_comm_overlap,
      "Overlap each sequence-parallel all-gather and reduce-scatter with its GEMM, chunk by "
      "chunk (Transformer Engine's userbuffers; Megatron-core; needs --sp)"));
  config.push_back(cmd->add_option("--seq,--seq-length", a.seq,
                                   "Sequence length (default: the model's maximum)"));
  config.push_back(cmd->add_option(
      "--gbs,--global-batch-size", a.gbs,
      "Global batch size in sequences (default dp x mbs x pp: one micro-batch per stage)"));
  config.push_back(cmd->add_option("--precision", a.precision, "fp32, tf32, bf16, fp16 or fp8"));
  config.push_back(cmd->add_option(
      "--fp8-recipe", a.fp8_recipe,
      "With --precision fp8: Transformer Engine's scaling recipe, delayed (default), current, "
      "mxfp8 or blockwise; sets what quantizing each fp8 GEMM's input costs"));
  config.push_back(cmd->add_option("--optimizer", a.optimizer, "adam, adamw or sgd"));
  for (CLI::Option* o : config)
    plan->excludes(o);
  // Numbers are checked where they are parsed: in range, named in the error.
  constexpr long long kMaxAxis = 1 << 20;  // as plan documents allow
  for (const char* axis : {"--tp", "--pp", "--dp", "--cp", "--ep", "--etp"})
    cmd->get_option(axis)->check(whole_in(1, kMaxAxis));
  cmd->get_option("--mbs")->check(whole_in(1, 1'000'000));
  cmd->get_option("--zero")->check(whole_in(0, 3));
  cmd->get_option("--vpp")->check(whole_in(1, 1024));
  cmd->get_option("--num-layers-per-virtual-pipeline-stage")->check(whole_in(1, 1'000'000));
  cmd->get_option("--first-stage-layers")->check(whole_in(1, 1'000'000));
  cmd->get_option("--last-stage-layers")->check(whole_in(1, 1'000'000));
  cmd->get_option("--seq")->check(whole_in(1, 100'000'000));
  cmd->get_option("--gbs")->check(whole_in(1, 100'000'000));
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
  if (args.distributed_optimizer) r.parallel.zero_stage = 1;
  if (args.layers_per_virtual_stage > 0) {
    const std::int64_t per_pass =
        static_cast<std::int64_t>(std::max(1, r.parallel.pp)) * args.layers_per_virtual_stage;
    if (r.model.num_layers % per_pass != 0) {
      return Status::invalid_input(
          "--num-layers-per-virtual-pipeline-stage: " + std::to_string(r.model.num_layers) +
          " layers do not split into pp (" + std::to_string(r.parallel.pp) + ") x " +
          std::to_string(args.layers_per_virtual_stage) + "-layer virtual stages");
    }
    r.parallel.virtual_stages = static_cast<int>(r.model.num_layers / per_pass);
  }
  if (args.embedding_in_split || args.loss_in_split) {
    // Megatron-core: the layers plus the counted embedding and loss split evenly over the
    // virtual stages; the first (last) stage's share includes the embedding (the loss).
    const int counted = (args.embedding_in_split ? 1 : 0) + (args.loss_in_split ? 1 : 0);
    const std::int64_t items = static_cast<std::int64_t>(r.model.num_layers) + counted;
    const std::int64_t chunks =
        static_cast<std::int64_t>(std::max(1, r.parallel.pp)) * r.parallel.virtual_stages;
    if (r.parallel.pp < 2 || items % chunks != 0) {
      return Status::invalid_input(
          std::string(args.embedding_in_split ? "--account-for-embedding-in-pipeline-split"
                                              : "--account-for-loss-in-pipeline-split") +
          ": " + std::to_string(r.model.num_layers) + " layers + " + std::to_string(counted) +
          " do not split evenly into pp x virtual stages (" + std::to_string(chunks) + ")");
    }
    if (r.parallel.virtual_stages > 1) {
      // The counted embedding and loss take their place in the first and the last virtual stage:
      // chunks of unequal size.
      r.parallel.layout.assign(static_cast<std::size_t>(chunks), static_cast<int>(items / chunks));
      if (args.embedding_in_split) r.parallel.layout.front() -= 1;
      if (args.loss_in_split) r.parallel.layout.back() -= 1;
    } else {
      const int share = static_cast<int>(items / r.parallel.pp);
      if (args.embedding_in_split) r.parallel.first_stage_layers = share - 1;
      if (args.loss_in_split) r.parallel.last_stage_layers = share - 1;
    }
  }
  if (!args.layout.empty()) {
    auto parsed = parse_pipeline_layout(args.layout);
    if (!parsed)
      return Status::invalid_input("--pipeline-model-parallel-layout: " +
                                   parsed.status().message());
    const std::int64_t entries = static_cast<std::int64_t>(parsed->layers.size());
    const int pp = std::max(1, r.parallel.pp);
    if (entries % pp != 0) {
      return Status::invalid_input("--pipeline-model-parallel-layout: " + std::to_string(entries) +
                                   " virtual stages are not a multiple of pp (" +
                                   std::to_string(pp) + ")");
    }
    if (parsed->mtp != r.model.mtp_layers) {
      return Status::invalid_input(
          "--pipeline-model-parallel-layout: " + std::to_string(parsed->mtp) +
          " MTP modules ('m'), the model has " + std::to_string(r.model.mtp_layers));
    }
    r.parallel.layout = parsed->layers;
    r.parallel.virtual_stages = static_cast<int>(entries / pp);
  }
  if (args.schedule == "dualpipe") {
    // DeepSeek's DualPipe, kept in its cut-in-half form (parallel_config.hpp).
    if (Status folded = fold_dualpipe(r.parallel); !folded.is_ok()) {
      return Status::invalid_input("--pp: " + folded.message());
    }
  } else {
    PLANNER_ASSIGN_OR_RETURN(r.parallel.schedule,
                             parse_flag<Schedule>("--schedule", args.schedule));
  }
  // DualPipeV's V is two chunks per stage; --vpp may say so but need not.
  if (r.parallel.schedule == Schedule::kDualPipeV && r.parallel.virtual_stages == 1) {
    r.parallel.virtual_stages = 2;
  }
  PLANNER_ASSIGN_OR_RETURN(r.parallel.recompute,
                           parse_flag<Recompute>("--recompute", args.recompute));
  if (!args.recompute_modules.empty()) {
    if (r.parallel.recompute != Recompute::kSelective) {
      return Status::invalid_input("--recompute-modules: needs --recompute selective, got " +
                                   args.recompute);
    }
    auto parsed = parse_recompute_modules(args.recompute_modules);
    if (!parsed) return Status::invalid_input("--recompute-modules: " + parsed.status().message());
    r.parallel.recompute_modules = *parsed;
  }
  PLANNER_ASSIGN_OR_RETURN(r.parallel.offload, parse_flag<Offload>("--offload", args.offload));
  PLANNER_ASSIGN_OR_RETURN(r.parallel.moe_a2a, parse_flag<MoeA2a>("--moe-a2a", args.moe_a2a));
  PLANNER_ASSIGN_OR_RETURN(r.training.precision,
                           parse_flag<Precision>("--precision", args.precision));
  PLANNER_ASSIGN_OR_RETURN(r.training.fp8_recipe,
                           parse_fp8_recipe(args.fp8_recipe, r.training.precision));
  PLANNER_ASSIGN_OR_RETURN(r.training.optimizer,
                           parse_flag<Optimizer>("--optimizer", args.optimizer));
  r.training.seq_length = args.seq > 0 ? args.seq : app::default_seq_length(r.model);
  r.training.global_batch_size = args.gbs > 0 ? args.gbs
                                              : static_cast<std::int64_t>(r.parallel.dp) *
                                                    r.parallel.micro_batch_size * r.parallel.pp;
  return r;
}

Result<Fp8Recipe> parse_fp8_recipe(const std::string& text, Precision precision) {
  if (text.empty()) return Fp8Recipe::kDelayed;
  if (precision != Precision::kFp8) {
    return Status::invalid_input("--fp8-recipe " + text + ": applies to --precision fp8, not " +
                                 std::string(to_string(precision)));
  }
  return parse_flag<Fp8Recipe>("--fp8-recipe", text);
}

void add_stack_options(CLI::App* cmd, StackArgs& args, std::vector<std::string>* stacks) {
  const std::string stack_help =
      "Software stack the plan runs under: megatron-core (default), megatron-lm, "
      "megatron-deepspeed, deepspeed, fsdp or nemo; sets the host model (the CPU time to issue "
      "each op; planner sim-models lists each stack's costs)";
  if (stacks == nullptr) {
    cmd->add_option("--stack", args.stack, stack_help);
  } else {
    cmd->add_option("--stack", *stacks,
                    stack_help +
                        "; several, comma-separated, compare stacks: every scenario is "
                        "swept under each")
        ->delimiter(',');
  }
  cmd->add_option("--host-costs", args.host_costs,
                  "Override the stack's host costs: KEY=MICROSECONDS,... (gemm, attention, "
                  "memory, router (an MoE router op), collective, p2p, micro_batch, step, "
                  "gather_member; backward is a "
                  "factor; pass_sync=1 makes the host synchronise with the GPU before every "
                  "pass, recv_sync=1 wait for every pipeline receive), or \"none\" for no host "
                  "model");
  cmd->add_option("--attention", args.attention,
                  "Attention kernel: unfused, fused-softmax, flash, flash2, flash3 or cudnn "
                  "(default: the stack's; unfused and fused-softmax keep the s x s scores in HBM)");
}

Result<ResolvedStack> resolve_stack(const StackArgs& args) {
  ResolvedStack out;
  PLANNER_ASSIGN_OR_RETURN(out.stack, parse_flag<SoftwareStack>("--stack", args.stack));
  out.host = host_costs(out.stack);
  out.attention = default_attention(out.stack);
  if (!args.attention.empty()) {
    PLANNER_ASSIGN_OR_RETURN(out.attention,
                             parse_flag<AttentionImpl>("--attention", args.attention));
  }
  if (!args.host_costs.empty()) {
    auto parsed = parse_host_costs(args.host_costs, out.host);
    if (!parsed) return Status::invalid_input("--host-costs: " + parsed.status().message());
    out.host = std::move(parsed).value();
  }
  return out;
}

StackRuns stack_runs_of(SoftwareStack stack) {
  StackRuns r;
  for (const auto& [s, name] : EnumTraits<Schedule>::kNames) {
    if (stack_runs(stack, s, 2)) r.schedules.emplace_back(name);
  }
  for (int z = 0; z <= 3; ++z) {
    if (stack_has_zero(stack, z, 1)) r.zero.push_back(z);
    if (stack_has_zero(stack, z, 2)) r.zero_with_pipeline.push_back(z);
  }
  r.overlap = overlaps_grad_reduce(stack);
  return r;
}

namespace {

// "a, b, c" of strings or numbers.
template <class T>
std::string comma_list(const std::vector<T>& v) {
  std::string out;
  for (const T& x : v) {
    if (!out.empty()) out += ", ";
    if constexpr (std::is_same_v<T, int>) {
      out += std::to_string(x);
    } else {
      out += x;
    }
  }
  return out;
}

}  // namespace

std::string stack_runs_text(SoftwareStack stack) {
  const StackRuns r = stack_runs_of(stack);
  const auto list = [](const auto& v) { return comma_list(v); };
  std::string zero = "ZeRO " + list(r.zero);
  if (r.zero_with_pipeline != r.zero)
    zero += " (" + list(r.zero_with_pipeline) + " with a pipeline)";
  return "pipeline schedules " + list(r.schedules) + "; " + zero + "; gradient reduce " +
         (r.overlap ? "overlapped with the backward pass" : "after the backward pass") +
         (overlaps_tp_comm(stack)
              ? "; sequence-parallel all-gathers and reduce-scatters overlapped with their "
                "GEMMs (tp_comm_overlap)"
              : "");
}

Status check_stack_runs(SoftwareStack stack, const ParallelConfig& p) {
  const std::string flag = "--stack " + std::string(to_string(stack)) + ": ";
  const StackRuns r = stack_runs_of(stack);
  if (!stack_runs(stack, p.schedule, p.pp)) {
    return Status::invalid_input(flag + "runs pipelines with " + comma_list(r.schedules) +
                                 " only, not " + std::string(to_string(p.schedule)));
  }
  if (!stack_has_zero(stack, p.zero_stage, p.pp)) {
    return Status::invalid_input(
        flag + "has ZeRO " + comma_list(p.pp > 1 ? r.zero_with_pipeline : r.zero) +
        (p.pp > 1 ? " with a pipeline" : "") + ", not ZeRO " + std::to_string(p.zero_stage) +
        " (planner sim-models: stack/" + std::string(to_string(stack)) + ")");
  }
  return Status::ok();
}

std::string dualpipe_note(const ParallelConfig& p) {
  if (!p.dualpipe) return "";
  const std::string last = std::to_string(p.written_pp() - 1);
  return "dualpipe: " + std::to_string(p.written_pp()) +
         " ranks a pipeline, rank r holding stages r and " + last +
         " - r; modelled in its cut-in-half form, dualpipev on " + std::to_string(p.pp) +
         " stages with each mirrored pair of ranks a data-parallel replica (stage s below is "
         "ranks s and " +
         last + " - s)\n";
}

}  // namespace planner::cli
