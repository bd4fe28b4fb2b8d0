// planner memory: per-stage memory of one GPU for a model, a GPU and a parallel configuration.
#include <filesystem>
#include <iostream>

#include "app.hpp"
#include "output.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/memory.hpp"
#include "planner/core/spec_json.hpp"

namespace planner::cli {
namespace {

struct MemoryArgs {
  std::string plan;
  std::string model = "gpt3-175b";
  std::string gpu;
  ParallelConfig parallel;
  std::int64_t seq = 0;
  std::int64_t gbs = 0;
  std::string precision = "bf16";
  std::string optimizer = "adam";
  std::string schedule = "1f1b";
  std::string recompute = "none";
  std::string offload = "none";
  double overhead_gib = kDefaultFrameworkOverheadGiB;
  bool no_flash = false;
  bool fp32_grads = false;
};

template <class E>
Result<E> parse_flag(const std::string& flag, const std::string& text) {
  auto v = parse_enum<E>(text);
  if (!v) {
    return Status::invalid_input(flag + ": unknown " + std::string(EnumTraits<E>::kWhat) + " \"" +
                                 text + "\" (choices: " + enum_choices<E>() + ")");
  }
  return *v;
}

Result<ModelSpec> resolve_model(const Catalog& catalog, const std::string& name) {
  if (name.ends_with(".json") || std::filesystem::exists(name)) return load_model_file(name);
  return catalog.model(name);
}

std::string gib(Bytes b) {
  return fmt(to_GiB(b), 2);
}

Json stage_json(const StageMemory& s) {
  return {{"stage", s.stage},
          {"params", s.params},
          {"embedding_params", s.embedding_params},
          {"weights_bytes", s.weights.raw()},
          {"gradients_bytes", s.gradients.raw()},
          {"optimizer_bytes", s.optimizer.raw()},
          {"activations_bytes", s.activations.raw()},
          {"layer_activations_bytes", s.layer_activations.raw()},
          {"extra_activations_bytes", s.extra_activations.raw()},
          {"layers_in_flight", s.layers_in_flight},
          {"microbatches_in_flight", s.microbatches_in_flight},
          {"comm_buffers_bytes", s.comm_buffers.raw()},
          {"overhead_bytes", s.overhead.raw()},
          {"host_bytes", s.host.raw()},
          {"total_bytes", s.total().raw()}};
}

Status memory_report(const CliContext& ctx, const MemoryArgs& args) {
  ModelSpec model;
  TrainingSpec training;
  ParallelConfig parallel;
  GpuSpec gpu;
  if (!args.plan.empty()) {
    PLANNER_ASSIGN_OR_RETURN(Plan plan, load_plan_file(args.plan, *ctx.catalog));
    model = plan.model;
    training = plan.training;
    parallel = plan.parallel;
    gpu = plan.gpu;
  } else {
    PLANNER_ASSIGN_OR_RETURN(model, resolve_model(*ctx.catalog, args.model));
    if (!args.gpu.empty()) {
      PLANNER_ASSIGN_OR_RETURN(gpu, ctx.catalog->gpu(args.gpu));
    }
    parallel = args.parallel;
    PLANNER_ASSIGN_OR_RETURN(parallel.schedule, parse_flag<Schedule>("--schedule", args.schedule));
    PLANNER_ASSIGN_OR_RETURN(parallel.recompute,
                             parse_flag<Recompute>("--recompute", args.recompute));
    PLANNER_ASSIGN_OR_RETURN(parallel.offload, parse_flag<Offload>("--offload", args.offload));
    PLANNER_ASSIGN_OR_RETURN(training.precision,
                             parse_flag<Precision>("--precision", args.precision));
    PLANNER_ASSIGN_OR_RETURN(training.optimizer,
                             parse_flag<Optimizer>("--optimizer", args.optimizer));
    training.seq_length =
        args.seq > 0 ? args.seq : (model.max_seq_len > 0 ? model.max_seq_len : 2048);
    training.global_batch_size = args.gbs > 0 ? args.gbs
                                              : static_cast<std::int64_t>(parallel.dp) *
                                                    parallel.micro_batch_size * parallel.pp;
  }
  MemoryOptions options;
  options.framework_overhead = gibibytes(args.overhead_gib);
  options.flash_attention = !args.no_flash;
  options.fp32_grads = args.fp32_grads;
  PLANNER_ASSIGN_OR_RETURN(MemoryReport report,
                           estimate_memory(model, training, parallel, gpu, options));
  const Bytes dense_layer = layer_activation_bytes(model, training, parallel, false, options);
  const std::int64_t microbatches =
      training.global_batch_size /
      (static_cast<std::int64_t>(parallel.dp) * parallel.micro_batch_size);

  std::ostream& out = *ctx.out;
  if (ctx.json) {
    Json stages = Json::array();
    for (const StageMemory& s : report.stages)
      stages.push_back(stage_json(s));
    Json doc = {{"schema_version", kSchemaVersion},
                {"kind", "memory_report"},
                {"model", model.name},
                {"gpu", gpu.name},
                {"training", to_json(training)},
                {"parallel", to_json(parallel)},
                {"microbatches", microbatches},
                {"layer_activation_bytes", dense_layer.raw()},
                {"flash_attention", options.flash_attention},
                {"capacity_bytes", report.capacity.raw()},
                {"peak_stage", report.peak_stage},
                {"peak_bytes", report.peak.raw()},
                {"fits", report.fits},
                {"stages", stages}};
    out << doc.dump(2) << '\n';
    return Status::ok();
  }
  out << model.name << " · " << short_label(parallel) << " · seq " << training.seq_length
      << " · global batch " << training.global_batch_size << " (" << microbatches
      << " micro-batches) · " << to_string(training.precision) << " "
      << to_string(training.optimizer) << '\n';
  if (!gpu.name.empty()) out << "GPU: " << gpu.name << ", " << gib(gpu.hbm) << " GiB HBM\n";
  out << '\n';
  Table t({{"STAGE", Align::kRight},
           {"PARAMS", Align::kRight},
           {"WEIGHTS", Align::kRight},
           {"GRADS", Align::kRight},
           {"OPTIM", Align::kRight},
           {"ACTIV", Align::kRight},
           {"LAYERS×MB", Align::kRight},
           {"EXTRA", Align::kRight},
           {"COMM", Align::kRight},
           {"OVERHEAD", Align::kRight},
           {"TOTAL", Align::kRight},
           {"HOST", Align::kRight}});
  for (const StageMemory& s : report.stages) {
    t.add_row({std::to_string(s.stage), fmt_count(static_cast<double>(s.params)), gib(s.weights),
               gib(s.gradients), gib(s.optimizer), gib(s.layer_activations),
               fmt(s.layers_in_flight, 0), gib(s.extra_activations), gib(s.comm_buffers),
               gib(s.overhead), gib(s.total()), gib(s.host)});
  }
  t.print(out);
  out << "\nGiB per GPU. TOTAL = WEIGHTS + GRADS + OPTIM + ACTIV + EXTRA + COMM + OVERHEAD; HOST "
         "is "
         "offloaded and not counted.\n";
  out << "ACTIV: " << fmt(to_MiB(dense_layer), 1)
      << " MiB per layer and micro-batch (Korthikanti et al. 2022"
      << (options.flash_attention ? ", flash attention: no s×s softmax" : "")
      << ") × LAYERS×MB held at the schedule's peak. EXTRA: embedding mask, LM head inputs and "
         "logits, full-recompute working layer.\n";
  out << "OVERHEAD: an assumed " << fmt(args.overhead_gib, 1)
      << " GiB for CUDA context, library workspaces and NCCL (--overhead-gib).\n\n";
  const StageMemory& peak = report.stages[static_cast<std::size_t>(report.peak_stage)];
  out << "peak: stage " << report.peak_stage << ", " << gib(peak.total()) << " GiB";
  if (report.capacity.raw() > 0) {
    out << " of " << gib(report.capacity) << " GiB: "
        << (report.fits ? "fits (" + gib(report.capacity - peak.total()) + " GiB free)"
                        : "does not fit (" + gib(peak.total() - report.capacity) + " GiB over)");
  } else {
    out << " (no --gpu: capacity not checked)";
  }
  out << '\n';
  return Status::ok();
}

}  // namespace

void register_memory_command(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "memory", "Per-stage GPU memory of a training configuration, and whether it fits");
  auto a = std::make_shared<MemoryArgs>();
  CLI::Option* plan =
      cmd->add_option("--plan", a->plan, "A plan document (model, GPU, training, parallel)");
  std::vector<CLI::Option*> config;
  config.push_back(
      cmd->add_option("--model", a->model, "Model preset or model file (default gpt3-175b)"));
  config.push_back(
      cmd->add_option("--gpu", a->gpu, "GPU preset whose HBM the peak is checked against"));
  config.push_back(cmd->add_option("--tp", a->parallel.tp, "Tensor parallel size"));
  config.push_back(cmd->add_option("--pp", a->parallel.pp, "Pipeline parallel size"));
  config.push_back(cmd->add_option("--dp", a->parallel.dp, "Data parallel size"));
  config.push_back(cmd->add_option("--cp", a->parallel.cp, "Context parallel size"));
  config.push_back(cmd->add_option("--ep", a->parallel.ep, "Expert parallel size"));
  config.push_back(cmd->add_option("--mbs", a->parallel.micro_batch_size, "Micro-batch size"));
  config.push_back(cmd->add_flag("--sp", a->parallel.sequence_parallel, "Sequence parallelism"));
  config.push_back(cmd->add_option("--recompute", a->recompute, "none, selective or full"));
  config.push_back(cmd->add_option("--zero", a->parallel.zero_stage, "ZeRO stage 0-3"));
  config.push_back(cmd->add_option("--schedule", a->schedule, "gpipe, 1f1b, interleaved or zb-h1"));
  config.push_back(cmd->add_option("--vpp", a->parallel.virtual_stages,
                                   "Virtual stages per GPU (interleaved schedule)"));
  config.push_back(cmd->add_option("--offload", a->offload, "none, optimizer or optimizer+params"));
  config.push_back(
      cmd->add_option("--seq", a->seq, "Sequence length (default: the model's maximum)"));
  config.push_back(cmd->add_option(
      "--gbs", a->gbs,
      "Global batch size in sequences (default dp x mbs x pp: one micro-batch per stage)"));
  config.push_back(cmd->add_option("--precision", a->precision, "fp32, tf32, bf16, fp16 or fp8"));
  config.push_back(cmd->add_option("--optimizer", a->optimizer, "adam, adamw or sgd"));
  for (CLI::Option* o : config)
    plan->excludes(o);
  cmd->add_option("--overhead-gib", a->overhead_gib,
                  "Framework overhead per GPU in GiB (CUDA context, workspaces, NCCL)");
  cmd->add_flag("--no-flash", a->no_flash,
                "Store the s×s attention softmax (Korthikanti's formula without flash attention)");
  cmd->add_flag("--fp32-grads", a->fp32_grads,
                "Accumulate gradients in fp32 (4 bytes per parameter)");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return memory_report(ctx, *a); }; });
}

}  // namespace planner::cli
