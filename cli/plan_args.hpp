// Command-line flags that describe a training configuration (model, GPU, training, parallel),
// shared by the commands that evaluate one: `--plan FILE` or flags in Megatron's vocabulary.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "planner/core/catalog.hpp"
#include "planner/core/cluster_spec.hpp"
#include "planner/core/gpu_spec.hpp"
#include "planner/core/host_model.hpp"
#include "planner/core/model_spec.hpp"
#include "planner/core/parallel_config.hpp"
#include "planner/core/status.hpp"
#include "planner/core/training_spec.hpp"

namespace planner::cli {

struct PlanArgs {
  std::string plan;
  std::string model = "gpt3-175b";
  std::string gpu;
  ParallelConfig parallel;
  std::int64_t seq = 0;
  std::int64_t gbs = 0;
  std::string precision = "bf16";
  std::string fp8_recipe;  // --fp8-recipe; empty: the default (delayed)
  std::string optimizer = "adam";
  std::string schedule = "1f1b";
  std::string recompute = "none";
  std::vector<std::string> recompute_modules;  // --recompute-modules; empty: core_attn
  std::string offload = "none";
  std::string moe_a2a = "nccl";
  bool distributed_optimizer = false;  // --use-distributed-optimizer: ZeRO stage 1
  int layers_per_virtual_stage = 0;    // --num-layers-per-virtual-pipeline-stage
  // --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split
  // (Megatron-core): the embedding, the LM head with the loss, count as a layer in the split of the
  // stages.
  bool embedding_in_split = false;
  bool loss_in_split = false;
  std::string layout;  // --pipeline-model-parallel-layout (Megatron-core's string)
};

struct ResolvedPlan {
  ModelSpec model;
  TrainingSpec training;
  ParallelConfig parallel;
  GpuSpec gpu;                         // empty name when no GPU was given
  std::optional<ClusterSpec> cluster;  // the plan file's cluster (--plan only)
};

// A model preset name, or a model file (a path ending in .json or an existing file).
Result<ModelSpec> resolve_model(const Catalog& catalog, const std::string& name);

// An enum flag's value; kInvalidInput naming the flag and the choices.
template <class E>
Result<E> parse_flag(const std::string& flag, const std::string& text) {
  auto v = parse_enum<E>(text);
  if (!v) {
    return Status::invalid_input(flag + ": unknown " + std::string(EnumTraits<E>::kWhat) + " \"" +
                                 text + "\" (choices: " + enum_choices<E>() + ")");
  }
  return *v;
}

// --fp8-recipe's value (empty: the default, delayed); kInvalidInput when it is given without
// --precision fp8, which it does not apply to.
Result<Fp8Recipe> parse_fp8_recipe(const std::string& text, Precision precision);

// The software stack a plan runs under and its host model: --stack NAME (default megatron-core)
// and --host-costs KEY=US,... or none (over the stack's built-in costs; host_model.hpp).
struct StackArgs {
  std::string stack = "megatron-core";
  std::string host_costs;
  std::string attention;
};
// --stack, --host-costs and --attention. With `stacks`, --stack takes a comma-separated list
// into it instead (planner sweep compares stacks); args.stack is left to the caller.
void add_stack_options(CLI::App* cmd, StackArgs& args, std::vector<std::string>* stacks = nullptr);
struct ResolvedStack {
  SoftwareStack stack = SoftwareStack::kMegatronCore;
  HostCosts host;
  AttentionImpl attention = AttentionImpl::kFlash;  // --attention, else the stack's default
};
Result<ResolvedStack> resolve_stack(const StackArgs& args);
// What a stack can run (stack_runs, stack_has_zero, overlaps_grad_reduce): the pipeline
// schedules, the ZeRO stages with and without a pipeline, whether the gradient reduction overlaps.
struct StackRuns {
  std::vector<std::string> schedules;
  std::vector<int> zero, zero_with_pipeline;
  bool overlap = true;
};
StackRuns stack_runs_of(SoftwareStack stack);
// One line of it: "pipeline schedules 1f1b; ZeRO 0, 1, 2, 3 (0, 1 with a pipeline); ...".
std::string stack_runs_text(SoftwareStack stack);
// kInvalidInput when the stack cannot run the plan's pipeline schedule or ZeRO stage.
Status check_stack_runs(SoftwareStack stack, const ParallelConfig& p);

// Adds --plan and the configuration flags (--model, --gpu, --tp, --pp, --dp, --cp, --ep, --mbs,
// --sp, --recompute, --zero, --schedule, --vpp, --offload, --seq, --gbs, --precision, --fp8-recipe,
// --optimizer, and Megatron-LM's spellings: --tensor-model-parallel-size,
// --pipeline-model-parallel-size, --context-parallel-size, --expert-model-parallel-size,
// --micro-batch-size, --global-batch-size, --seq-length, --sequence-parallel,
// --recompute-granularity, --recompute-modules, --virtual-pipeline-model-parallel-size,
// --num-layers-per-virtual-pipeline-stage, --use-distributed-optimizer); --plan excludes the
// others.
void add_plan_options(CLI::App* cmd, PlanArgs& args);

// The configuration the flags or the plan file describe. Defaults: sequence length = the model's
// maximum (2048 when unknown), global batch = dp × mbs × pp (one micro-batch per stage).
Result<ResolvedPlan> resolve_plan(const Catalog& catalog, const PlanArgs& args);

// For a plan written with DeepSeek's DualPipe (parallel_config.hpp): one line saying it runs in
// its cut-in-half form and which ranks a stage row stands for; empty otherwise.
std::string dualpipe_note(const ParallelConfig& p);

}  // namespace planner::cli
