// planner memory: per-stage memory of one GPU for a model, a GPU and a parallel configuration.
#include <iostream>

#include "app.hpp"
#include "output.hpp"
#include "plan_args.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/memory.hpp"
#include "planner/core/spec_json.hpp"

namespace planner::cli {
namespace {

struct MemoryArgs {
  PlanArgs config;
  double overhead_gib = kDefaultFrameworkOverheadGiB;
  bool no_flash = false;
  bool fp32_grads = false;
};

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
  PLANNER_ASSIGN_OR_RETURN(ResolvedPlan config, resolve_plan(*ctx.catalog, args.config));
  const ModelSpec& model = config.model;
  const TrainingSpec& training = config.training;
  const ParallelConfig& parallel = config.parallel;
  const GpuSpec& gpu = config.gpu;
  MemoryOptions options;
  options.framework_overhead = gibibytes(args.overhead_gib);
  options.flash_attention = !args.no_flash;
  options.fp32_grads = args.fp32_grads;
  PLANNER_ASSIGN_OR_RETURN(MemoryReport report,
                           estimate_memory(model, training, parallel, gpu, options));
  const Bytes dense_layer = layer_activation_bytes(model, training, parallel, false, options);
  const Bytes moe_layer =
      model.is_moe() ? layer_activation_bytes(model, training, parallel, true, options) : Bytes(0);
  // Per pipeline as written: DualPipe's count from both ends (twice its cut-in-half form's).
  const std::int64_t microbatches =
      training.global_batch_size /
      (static_cast<std::int64_t>(parallel.written_dp()) * parallel.micro_batch_size);

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
                {"moe_layer_activation_bytes", moe_layer.raw()},
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
      << " micro-batches"
      << (parallel.dualpipe ? ", " + std::to_string(microbatches / 2) + " from each end" : "")
      << ") · " << to_string(training.precision) << " " << to_string(training.optimizer) << '\n';
  out << dualpipe_note(parallel);
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
  out << "ACTIV: " << fmt(to_MiB(dense_layer), 1) << " MiB per layer"
      << (model.is_moe() ? " (" + fmt(to_MiB(moe_layer), 1) + " MiB per MoE layer)" : "")
      << " and micro-batch (Korthikanti et al. 2022"
      << (options.flash_attention ? ", flash attention: no s×s softmax" : "")
      << ") × LAYERS×MB held at the schedule's peak. EXTRA: embedding mask, LM head inputs and "
         "logits, the layer being recomputed (full recompute or recompute modules).\n";
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
  add_plan_options(cmd, a->config);
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
