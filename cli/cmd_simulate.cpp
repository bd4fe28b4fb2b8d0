// planner simulate: one training step of a plan on a cluster, timed by the discrete-event simulator
// (simulator/), with a step report, an optional Perfetto trace, and a record in the database.
// planner sim-models: the simulator's models with their assumptions and sources.
//
// A plan that does not fit in GPU memory is reported (the memory section and "does not fit: ...")
// and the command exits 1 without timing it; --ignore-memory simulates it anyway.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "app.hpp"
#include "cluster_args.hpp"
#include "db_options.hpp"
#include "output.hpp"
#include "plan_args.hpp"
#include "planner/app/profiles.hpp"
#include "planner/app/record.hpp"
#include "planner/app/simulate.hpp"
#include "planner/core/hardware_profile.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/sim/model_registry.hpp"
#include "planner/sim/profiles.hpp"
#include "planner/sim/simulate.hpp"
#include "sim_json.hpp"

namespace planner::cli {
namespace {

struct SimulateArgs {
  PlanArgs config;
  std::string topology;
  ClusterNumberArgs numbers;
  int nodes = 0;
  std::string profile;
  std::string ranks = "stage";
  bool full = false;
  std::string algorithm = "auto";
  std::string trace;
  bool ignore_memory = false;
  bool no_background = false;
  bool hashed_ecmp = false;
  bool no_ops = false;
  int top = 10;
  StackArgs stack;
  DbOptions db;
};

Result<app::PlacedPlan> resolve_setup(const CliContext& ctx, const SimulateArgs& args) {
  PLANNER_ASSIGN_OR_RETURN(ResolvedPlan config, resolve_plan(*ctx.catalog, args.config));
  Plan plan;
  plan.model = config.model;
  plan.training = config.training;
  plan.parallel = config.parallel;
  plan.gpu = config.gpu;
  plan.name = config.model.name + " " + short_label(config.parallel);
  if (has_cluster_numbers(args.numbers)) {
    if (plan.gpu.name.empty()) {
      return Status::invalid_input(
          "--node-gpus: give --gpu; the cluster in numbers does not name "
          "its GPU");
    }
    PLANNER_ASSIGN_OR_RETURN(topo::ClusterNumbers numbers, cluster_numbers(args.numbers, plan.gpu));
    return app::place_plan_on_numbers(std::move(plan), config.cluster, numbers, args.nodes);
  }
  return app::place_plan(std::move(plan), config.cluster, args.topology, args.nodes, *ctx.catalog);
}

std::string ms(Time t) {
  return fmt(to_milliseconds(t), 3);
}

std::string pct(double f) {
  return fmt(100.0 * f, 1) + "%";
}

std::string bucket_name(sim::TimeBucket b) {
  return std::string(to_string(b));
}

Json result_json(const app::PlacedPlan& setup, const sim::SimResult& r,
                 const ResolvedStack& stack) {
  Json stages = Json::array();
  for (const sim::StageReport& s : r.stages) {
    Json buckets = Json::object();
    for (std::size_t b = 0; b < sim::kNumTimeBuckets; ++b)
      buckets[bucket_name(static_cast<sim::TimeBucket>(b)) + "_s"] = to_seconds(s.buckets[b]);
    stages.push_back({{"stage", s.stage},
                      {"ranks", s.ranks},
                      {"busy_fraction", s.busy_fraction},
                      {"idle_fraction", s.idle_fraction},
                      {"peak_memory_bytes", s.peak_memory.raw()},
                      {"time", buckets}});
  }
  Json memory = Json::array();
  for (const StageMemory& m : r.memory.stages)
    memory.push_back({{"stage", m.stage}, {"total_bytes", m.total().raw()}});
  Json out = {{"schema_version", kSchemaVersion},
              {"kind", "simulation"},
              {"model", r.model},
              {"gpu", r.gpu},
              {"topology", setup.topology.name},
              {"nodes", setup.nodes},
              {"profile", r.profile},
              {"parallel", to_json(setup.plan.parallel)},
              {"training", to_json(setup.plan.training)},
              {"world_size", r.world_size},
              {"microbatches", r.microbatches},
              {"ranks", std::string(to_string(r.subset))},
              {"simulated_ranks", r.simulated_ranks},
              {"fits", r.memory.fits},
              {"peak_memory_bytes", r.memory.peak.raw()},
              {"hbm_bytes", r.memory.capacity.raw()},
              {"memory", memory}};
  if (r.out_of_memory) {
    out["out_of_memory"] = {{"stage", r.out_of_memory->stage},
                            {"needed_bytes", r.out_of_memory->needed.raw()},
                            {"capacity_bytes", r.out_of_memory->capacity.raw()}};
  }
  out["simulated"] = r.simulated;
  if (!r.simulated) return out;
  Json critical = Json::array();
  for (const sim::PathEntry& e : r.critical_path) {
    critical.push_back({{"label", e.label},
                        {"axis", bucket_name(e.bucket)},
                        {"time_s", to_seconds(e.time)},
                        {"ops", e.ops}});
  }
  Json critical_buckets = Json::object();
  for (std::size_t b = 0; b < sim::kNumTimeBuckets; ++b) {
    critical_buckets[bucket_name(static_cast<sim::TimeBucket>(b)) + "_s"] =
        to_seconds(r.critical_buckets[b]);
  }
  Json collectives = Json::array();
  for (const sim::CollectiveUse& c : r.collectives) {
    collectives.push_back({{"axis", bucket_name(c.axis)},
                           {"kind", std::string(to_string(c.kind))},
                           {"algorithm", std::string(to_string(c.algorithm))},
                           {"protocol", c.protocol},
                           {"group_size", c.group_size},
                           {"count", c.count},
                           {"bytes", c.bytes.raw()},
                           {"busy_s", to_seconds(c.busy)},
                           {"background_copies", c.copies}});
  }
  out["step_time_s"] = to_seconds(r.step_time);
  out["tokens_per_step"] = r.tokens_per_step;
  out["tokens_per_s"] = r.tokens_per_second;
  out["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  out["hardware_tflops_per_gpu"] = r.hardware_tflops_per_gpu;
  out["mfu"] = r.mfu;
  out["hfu"] = r.hfu;
  out["bubble_fraction"] = r.bubble_fraction;
  out["stack"] = std::string(to_string(stack.stack));
  out["attention"] = std::string(to_string(stack.attention));
  out["host_costs"] = describe(stack.host);
  out["host_wait_s"] = to_seconds(r.host_wait);
  out["host_bound_fraction"] = r.host_bound_fraction;
  out["schedule_bubble_fraction"] = r.schedule_bubble;
  out["compute_s"] = to_seconds(r.mean_buckets[0]);
  out["exposed_comm"] =
      exposed_comm_json([&](sim::TimeBucket b) { return to_seconds(r.exposed(b)); });
  out["stages"] = stages;
  out["critical_path"] = {{"time", critical_buckets}, {"top", critical}};
  out["collectives"] = collectives;
  out["stats"] = {{"events", r.stats.events},
                  {"ops", r.stats.ops},
                  {"transfers", r.stats.transfers},
                  {"solves", r.stats.solves},
                  {"largest_component", r.stats.largest_component},
                  {"plans", r.stats.plans}};
  return out;
}

void print_report(std::ostream& out, const app::PlacedPlan& setup, const sim::SimResult& r,
                  const ResolvedStack& stack) {
  out << r.model << " · " << r.parallel << " · " << r.world_size << " x " << r.gpu << " on "
      << setup.topology.name << " (" << setup.nodes << " nodes) · profile " << r.profile << "\n";
  const char* how = r.subset == RankSubset::kAll                   ? "every rank"
                    : r.subset == RankSubset::kDataParallelReplica ? "one data-parallel replica"
                                                                   : "one rank per stage";
  out << "simulated " << r.simulated_ranks << (r.simulated_ranks == 1 ? " rank (" : " ranks (")
      << how << ")"
      << (r.subset == RankSubset::kAll ? "" : "; the others' traffic loads the fabric") << "\n";
  out << dualpipe_note(setup.plan.parallel) << "\n";
  KeyValues kv;
  if (!r.simulated) {
    kv.add("peak memory", fmt(to_GiB(r.memory.peak), 2) + " GiB (stage " +
                              std::to_string(r.memory.peak_stage) + ") of " +
                              fmt(to_GiB(r.memory.capacity), 2) + " GiB HBM");
    kv.print(out);
    return;
  }
  kv.add("step time", fmt(to_seconds(r.step_time), 4) + " s");
  kv.add("tokens/s", fmt_int(std::llround(r.tokens_per_second)));
  kv.add("TFLOP/s per GPU", fmt(r.model_tflops_per_gpu, 1) + " model · " +
                                fmt(r.hardware_tflops_per_gpu, 1) + " hardware");
  kv.add("MFU / HFU", pct(r.mfu) + " / " + pct(r.hfu));
  kv.add("host",
         std::string(to_string(stack.stack)) +
             (overlaps_grad_reduce(stack.stack) ? ""
                                                : " (gradients reduced after the backward pass)") +
             (stack.host.enabled() ? ": the GPU waited " + pct(r.host_bound_fraction) +
                                         " of the step for the host to issue work"
                                   : ": no host model"));
  kv.add("bubble", pct(r.bubble_fraction) + " of the step idle (schedule closed form " +
                       pct(r.schedule_bubble) + ")");
  std::string exposed;
  for (sim::TimeBucket b : sim::kCommBuckets) {
    if (b == sim::TimeBucket::kOther && r.exposed(b) == Time(0)) continue;
    exposed += (exposed.empty() ? "" : " · ") + bucket_name(b) + " " + ms(r.exposed(b)) + " ms";
  }
  kv.add("exposed comm", exposed);
  kv.add("peak memory", fmt(to_GiB(r.memory.peak), 2) + " GiB (stage " +
                            std::to_string(r.memory.peak_stage) + ") of " +
                            fmt(to_GiB(r.memory.capacity), 2) + " GiB HBM" +
                            (r.memory.fits ? "" : " (does not fit; --ignore-memory)"));
  kv.print(out);

  out << "\nper stage (ms; mean of the simulated ranks of the stage)\n";
  Table stages({{"STAGE", Align::kRight},
                {"COMPUTE", Align::kRight},
                {"BUSY", Align::kRight},
                {"IDLE", Align::kRight},
                {"TP", Align::kRight},
                {"CP", Align::kRight},
                {"EP", Align::kRight},
                {"PP", Align::kRight},
                {"DP", Align::kRight},
                {"PEAK GiB", Align::kRight}});
  for (const sim::StageReport& s : r.stages) {
    auto at = [&](sim::TimeBucket b) { return ms(s.buckets[static_cast<std::size_t>(b)]); };
    stages.add_row({std::to_string(s.stage), at(sim::TimeBucket::kCompute), pct(s.busy_fraction),
                    pct(s.idle_fraction), at(sim::TimeBucket::kTp), at(sim::TimeBucket::kCp),
                    at(sim::TimeBucket::kEp), at(sim::TimeBucket::kPp), at(sim::TimeBucket::kDp),
                    fmt(to_GiB(s.peak_memory), 2)});
  }
  stages.print(out);
  out << "TP..DP: communication of that axis exposed (compute idle while it moved data).\n";

  out << "\ncritical path: ";
  bool first = true;
  for (std::size_t b = 0; b < sim::kNumTimeBuckets; ++b) {
    if (r.critical_buckets[b] == Time(0)) continue;
    out << (first ? "" : " · ") << bucket_name(static_cast<sim::TimeBucket>(b)) << " "
        << pct(to_seconds(r.critical_buckets[b]) / to_seconds(r.step_time));
    first = false;
  }
  out << "\n";
  Table path({{"OPERATION"},
              {"AXIS"},
              {"MS", Align::kRight},
              {"SHARE", Align::kRight},
              {"OPS", Align::kRight}});
  for (const sim::PathEntry& e : r.critical_path) {
    path.add_row({e.label, bucket_name(e.bucket), ms(e.time),
                  pct(to_seconds(e.time) / to_seconds(r.step_time)), std::to_string(e.ops)});
  }
  path.print(out);

  out << "\ncollectives and messages (simulated ranks' calls)\n";
  Table coll({{"AXIS"},
              {"KIND"},
              {"ALGORITHM"},
              {"PROTOCOL"},
              {"GROUP", Align::kRight},
              {"CALLS", Align::kRight},
              {"MB/CALL", Align::kRight},
              {"MS/CALL", Align::kRight},
              {"BACKGROUND", Align::kRight}});
  for (const sim::CollectiveUse& c : r.collectives) {
    if (c.count == 0) continue;
    coll.add_row({bucket_name(c.axis), std::string(to_string(c.kind)),
                  std::string(to_string(c.algorithm)), c.protocol, std::to_string(c.group_size),
                  std::to_string(c.count),
                  fmt(static_cast<double>(c.bytes.raw()) / c.count / 1e6, 2),
                  fmt(to_milliseconds(c.busy) / c.count, 3), std::to_string(c.copies)});
  }
  coll.print(out);
  out << "\nsimulation: " << fmt_int(static_cast<long long>(r.stats.events)) << " events, "
      << fmt_int(static_cast<long long>(r.stats.ops)) << " ops, "
      << fmt_int(static_cast<long long>(r.stats.transfers)) << " transfers, "
      << fmt_int(static_cast<long long>(r.stats.solves)) << " rate solves\n";
}

Status record(const SimulateArgs& args, const app::PlacedPlan& setup, const sim::SimResult& r,
              const std::string& failure) {
  PLANNER_ASSIGN_OR_RETURN(auto db, open_recording_db(args.db));
  if (!db) return Status::ok();
  const Json inputs{{"command", "simulate"},
                    {"topology", setup.topology.name},
                    {"nodes", setup.nodes},
                    {"profile", r.profile},
                    {"ranks", std::string(to_string(r.subset))},
                    {"algorithm", args.algorithm},
                    {"background", !args.no_background},
                    {"hashed_ecmp", args.hashed_ecmp},
                    {"ignore_memory", args.ignore_memory},
                    {"plan", as_document("plan", to_json(setup.plan))}};
  return app::record_simulation(*db, setup.plan, r, inputs, !args.no_ops, failure).status();
}

Status simulate_command(const CliContext& ctx, const SimulateArgs& args) {
  PLANNER_ASSIGN_OR_RETURN(app::PlacedPlan setup, resolve_setup(ctx, args));
  if (const std::string p = fp8_recipe_problem(setup.plan.gpu, setup.plan.training); !p.empty()) {
    return Status::invalid_input("--fp8-recipe: " + p);
  }
  PLANNER_ASSIGN_OR_RETURN(HardwareProfile profile,
                           app::resolve_profile(args.profile, setup.plan.gpu, args.db));
  sim::SimOptions o;
  if (args.full) {
    o.ranks = RankSubset::kAll;
  } else if (auto subset = parse_enum<RankSubset>(args.ranks)) {
    o.ranks = *subset;
  } else {
    return Status::invalid_input("--ranks: expected stage, replica or all, got \"" + args.ranks +
                                 "\"");
  }
  if (args.algorithm != "auto") {
    auto a = parse_enum<sim::Algorithm>(args.algorithm);
    if (!a || (*a != sim::Algorithm::kRing && *a != sim::Algorithm::kTree &&
               *a != sim::Algorithm::kHierarchical && *a != sim::Algorithm::kNvls)) {
      return Status::invalid_input(
          "--algorithm: expected auto, ring, tree, hierarchical or nvls, "
          "got \"" +
          args.algorithm + "\"");
    }
    o.run.algorithm = *a;
  }
  o.run.background = !args.no_background;
  o.run.balanced_fabric = !args.hashed_ecmp;
  o.run.trace = !args.trace.empty();
  o.run.keep_op_times = !args.no_ops && !args.db.disabled;
  o.run.critical_path_top = args.top;
  o.check_memory = !args.ignore_memory;
  PLANNER_ASSIGN_OR_RETURN(ResolvedStack stack, resolve_stack(args.stack));
  o.run.host = stack.host;
  o.run.attention = sim::attention_kernel(stack.attention);
  PLANNER_RETURN_IF_ERROR(check_stack_runs(stack.stack, setup.plan.parallel));
  if (!overlaps_grad_reduce(stack.stack)) {
    // The stack reduces the gradients after the backward pass, whatever the plan asks.
    setup.plan.parallel.overlap_grad_reduce = false;
    setup.plan.parallel.overlap_param_gather = false;
  }
  // A stack without the asynchronous tensor-parallel all-reduce runs it after the weight gradient,
  // whatever the plan asks (a plan may ask for that under any stack).
  if (!async_tp_allreduce(stack.stack)) setup.plan.parallel.async_tp_allreduce = false;
  // A stack that overlaps the sequence-parallel communication with its GEMMs (nemo's recipes) does
  // so wherever it can (a plan may ask for it under any stack).
  if (overlaps_tp_comm(stack.stack) && setup.plan.parallel.can_overlap_tp_comm()) {
    setup.plan.parallel.tp_comm_overlap = true;
  }

  PLANNER_ASSIGN_OR_RETURN(sim::SimResult result, app::simulate_plan(setup, profile, o));
  std::string failure;
  if (result.out_of_memory) {
    failure = "does not fit: stage " + std::to_string(result.out_of_memory->stage) + " needs " +
              fmt(to_GiB(result.out_of_memory->needed), 2) + " GiB of " +
              fmt(to_GiB(result.out_of_memory->capacity), 2) +
              " GiB HBM (planner memory shows the breakdown; --ignore-memory simulates anyway)";
  }
  if (ctx.json) {
    *ctx.out << result_json(setup, result, stack).dump(2) << '\n';
  } else {
    print_report(*ctx.out, setup, result, stack);
  }
  if (!args.trace.empty() && result.simulated) {
    PLANNER_RETURN_IF_ERROR(write_text_file_atomic(args.trace, result.trace_json));
    if (!ctx.json) *ctx.out << "trace: " << args.trace << " (open in ui.perfetto.dev)\n";
  }
  PLANNER_RETURN_IF_ERROR(record(args, setup, result, failure));
  if (!failure.empty()) return Status::runtime(failure);
  return Status::ok();
}

Status models_command(const CliContext& ctx) {
  if (ctx.json) {
    Json all = Json::array();
    for (const sim::ModelInfo& m : sim::model_registry()) {
      all.push_back({{"category", m.category},
                     {"name", m.name},
                     {"description", m.description},
                     {"assumptions", m.assumptions},
                     {"source", m.source}});
    }
    Json stacks = Json::array();
    for (const auto& [stack, name] : EnumTraits<SoftwareStack>::kNames) {
      const HostCosts host = host_costs(stack);
      const StackRuns runs = stack_runs_of(stack);
      stacks.push_back({{"name", name},
                        {"description", stack_summary(stack)},
                        {"attention", to_string(default_attention(stack))},
                        {"schedules", runs.schedules},
                        {"zero_stages", runs.zero},
                        {"zero_stages_with_pipeline", runs.zero_with_pipeline},
                        {"overlaps_grad_reduce", runs.overlap},
                        {"host_costs", describe(host)},
                        {"source", host.source}});
    }
    const HostCosts executor = executor_host_costs();
    *ctx.out << Json{{"models", all},
                     {"stacks", stacks},
                     {"executor",
                      {{"name", "planner exec, cuda backend"},
                       {"host_costs", describe(executor)},
                       {"source", executor.source}}}}
                    .dump(2)
             << '\n';
    return Status::ok();
  }
  for (const sim::ModelInfo& m : sim::model_registry()) {
    *ctx.out << m.category << "/" << m.name << "\n  " << m.description
             << "\n  assumes: " << m.assumptions << "\n  source:  " << m.source << "\n";
  }
  *ctx.out << "\nParameters come from hardware profiles (core/presets/profiles; --profile), each "
              "with its source.\n";
  *ctx.out << "\nSoftware stacks (--stack; the engine/host-issue model's costs per op of the step "
              "program, --host-costs overrides them):\n";
  for (const auto& [stack, name] : EnumTraits<SoftwareStack>::kNames) {
    const HostCosts host = host_costs(stack);
    *ctx.out << "stack/" << name << (stack == SoftwareStack::kMegatronCore ? " (default)" : "")
             << "\n  " << stack_summary(stack)
             << "\n  attention: " << to_string(default_attention(stack))
             << "\n  runs: " << stack_runs_text(stack) << "\n  host: " << describe(host)
             << "\n  source:  " << host.source << "\n";
  }
  const HostCosts executor = executor_host_costs();
  *ctx.out << "\nplanner exec's predictions (stored with each run, planner report) use its own "
              "host: the cuda backend's C++ runner\n  host: "
           << describe(executor) << "\n  source:  " << executor.source
           << "\n  the cpu backend has none (its ops run on the host that issues them)\n";
  return Status::ok();
}

}  // namespace

void register_simulate_commands(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Simulate one training step: step time, MFU, bubbles, exposed communication");
  auto a = std::make_shared<SimulateArgs>();
  add_plan_options(cmd, a->config);
  CLI::Option* topology =
      cmd->add_option("--topology", a->topology,
                      "Topology preset or file (default: the plan's, else the first preset with "
                      "the GPU)");
  add_cluster_number_options(cmd, a->numbers, topology);
  cmd->add_option("--nodes", a->nodes, "Nodes (default: the plan's, else just enough)");
  cmd->add_option("--profile", a->profile,
                  "Hardware profile: a preset name, a profile file, or a profile stored in the "
                  "database (default: the preset for the GPU)");
  cmd->add_option("--ranks", a->ranks,
                  "Ranks to simulate: stage (one per pipeline stage, default), replica (one "
                  "data-parallel replica) or all");
  cmd->add_flag("--full", a->full, "Simulate every rank (same as --ranks all)");
  cmd->add_option("--algorithm", a->algorithm,
                  "Collective algorithm: auto (NCCL-like choice, default), ring, tree, "
                  "hierarchical or nvls");
  cmd->add_option("--trace", a->trace, "Write a Chrome trace-event JSON file (Perfetto)");
  cmd->add_flag("--ignore-memory", a->ignore_memory,
                "Simulate even when the plan does not fit in GPU memory");
  cmd->add_flag("--no-background", a->no_background,
                "Do not load the fabric with the traffic of the ranks not simulated");
  cmd->add_flag("--hashed-ecmp", a->hashed_ecmp,
                "Route every flow on the topology's hashed ECMP path instead of spreading it over "
                "equal-cost links");
  cmd->add_flag("--no-ops", a->no_ops, "Do not record per-op predictions in the database");
  cmd->add_option("--top", a->top, "Critical-path entries to show (default 10)");
  add_stack_options(cmd, a->stack);
  add_db_options(cmd, a->db);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return simulate_command(ctx, *a); }; });

  CLI::App* models = app.add_subcommand(
      "sim-models", "List the simulator's models with their assumptions and sources");
  add_json_flag(models, ctx);
  models->callback([&ctx] { ctx.action = [&ctx] { return models_command(ctx); }; });
}

}  // namespace planner::cli
