#include "planner/sim/simulate.hpp"

#include <algorithm>

#include "planner/core/diagnostics.hpp"
#include "planner/core/flops.hpp"
#include "planner/core/rank_grid.hpp"
#include "planner/core/schedule.hpp"
#include "planner/sim/model_registry.hpp"
#include "planner/topo/placement.hpp"

namespace planner::sim {

Result<std::vector<int>> default_gpu_of_rank(const ParallelConfig& parallel,
                                             const topo::Cluster& cluster) {
  PLANNER_ASSIGN_OR_RETURN(RankGrid grid, RankGrid::dense(parallel));
  const int servers = parallel.dp_sync == DpSync::kParameterServer ? parallel.param_servers : 0;
  if (static_cast<std::int64_t>(grid.world_size()) + servers > cluster.num_gpus()) {
    return Status::invalid_input(
        "the plan needs " + std::to_string(grid.world_size() + servers) + " GPUs (" +
        std::to_string(grid.world_size()) + " workers" +
        (servers > 0 ? " + " + std::to_string(servers) + " parameter servers" : std::string()) +
        ") but the cluster has " + std::to_string(cluster.num_gpus()));
  }
  PLANNER_ASSIGN_OR_RETURN(topo::Placement placement,
                           topo::Placement::by_order(grid, cluster, parallel.order));
  std::vector<int> gpus = placement.gpu_of_rank();
  std::vector<char> used(static_cast<std::size_t>(cluster.num_gpus()), 0);
  for (int g : gpus)
    used[static_cast<std::size_t>(g)] = 1;
  for (int g = 0;
       g < cluster.num_gpus() && static_cast<int>(gpus.size()) < grid.world_size() + servers; ++g) {
    if (!used[static_cast<std::size_t>(g)]) gpus.push_back(g);
  }
  return gpus;
}

Result<SimResult> simulate(const SimInput& input) {
  const Plan& plan = input.plan;
  const SimOptions& options = input.options;
  if (!input.cluster || !input.profile) {
    return Status::invalid_input("simulate: a cluster and a hardware profile are required");
  }
  {
    Diagnostics diag("plan");
    check_parallel(plan.model, plan.training, plan.parallel, diag);
    PLANNER_RETURN_IF_ERROR(diag.to_status());
  }
  if (plan.parallel.cp > 1 && options.run.attention != AttentionKernel::kFlash) {
    return Status::invalid_input(
        "context parallelism (cp " + std::to_string(plan.parallel.cp) +
        ") needs a flash-style attention kernel (ring attention); the plan's keeps the scores");
  }
  SimResult out;
  out.model = plan.model.name;
  out.gpu = plan.gpu.name;
  out.profile = input.profile->name;
  out.parallel = short_label(plan.parallel);
  out.world_size = plan.parallel.world_size();
  out.microbatches = static_cast<int>(plan.num_microbatches());
  out.subset = options.ranks;
  out.tokens_per_step = plan.training.tokens_per_step();

  implements(SimModel::kStepAccounting);
  PLANNER_ASSIGN_OR_RETURN(out.memory,
                           estimate_memory(plan.model, plan.training, plan.parallel, plan.gpu,
                                           memory_with(options.memory, options.run.attention)));
  if (!out.memory.fits && options.check_memory) {
    out.out_of_memory = OutOfMemory{out.memory.peak_stage, out.memory.peak, out.memory.capacity};
    return out;
  }

  std::vector<int> gpu_of_rank = input.gpu_of_rank;
  if (gpu_of_rank.empty()) {
    PLANNER_ASSIGN_OR_RETURN(gpu_of_rank, default_gpu_of_rank(plan.parallel, *input.cluster));
  }
  for (int g : gpu_of_rank) {
    if (g < 0 || g >= input.cluster->num_gpus()) {
      return Status::invalid_input("placement: GPU " + std::to_string(g) +
                                   " is not in the cluster (" +
                                   std::to_string(input.cluster->num_gpus()) + " GPUs)");
    }
  }
  LowerOptions lower_options = options.lower;
  lower_options.ranks = options.ranks == RankSubset::kAll
                            ? std::vector<int>{}
                            : representative_ranks(plan.parallel, options.ranks);
  // The lowering merges the passes of the EP all-to-all overlap and of dualpipev
  // (merge_forward_backward); the engine runs the merged program as any other.
  implements(SimModel::kMergedPasses);
  PLANNER_ASSIGN_OR_RETURN(StepProgram program,
                           lower(plan.model, plan.training, plan.parallel, lower_options));

  RunContext ctx;
  ctx.cluster = input.cluster.get();
  ctx.gpu_of_rank = gpu_of_rank;
  ctx.profile = input.profile.get();
  ctx.parallel = &plan.parallel;
  ctx.fabric = input.fabric.get();
  ctx.plan_memo = input.plan_memo.get();
  ctx.options = options.run;
  PLANNER_ASSIGN_OR_RETURN(ProgramRun run, run_program(program, ctx));

  out.simulated = true;
  out.step_time = run.makespan;
  const double seconds = to_seconds(run.makespan);
  const auto gpus = plan.parallel.world_size();
  out.model_flops = model_flops_per_step(plan.model, plan.training);
  out.hardware_flops = hardware_flops_per_step(plan.model, plan.training, plan.parallel);
  if (seconds > 0) {
    out.tokens_per_second = static_cast<double>(out.tokens_per_step) / seconds;
    out.model_tflops_per_gpu = out.model_flops.raw() / seconds / static_cast<double>(gpus) / 1e12;
    out.hardware_tflops_per_gpu =
        out.hardware_flops.raw() / seconds / static_cast<double>(gpus) / 1e12;
    FlopRate peak = plan.gpu.peak_for(plan.training.precision);
    if (peak.raw() <= 0) peak = plan.gpu.peak_for(Precision::kBf16);
    if (peak.raw() > 0) {
      out.mfu = flops_utilization(out.model_flops, seconds, gpus, peak);
      out.hfu = flops_utilization(out.hardware_flops, seconds, gpus, peak);
    }
  }
  out.schedule_bubble = bubble_fraction(plan.parallel.schedule, plan.parallel.pp, out.microbatches,
                                        plan.parallel.virtual_stages);

  std::vector<StageReport> stages(static_cast<std::size_t>(plan.parallel.pp));
  int workers = 0;
  for (const RankRun& r : run.ranks) {
    if (r.kind != RankKind::kWorker) continue;
    ++workers;
    StageReport& s = stages[static_cast<std::size_t>(r.stage)];
    ++s.ranks;
    out.host_wait += r.host_wait;
    for (std::size_t b = 0; b < kNumTimeBuckets; ++b) {
      s.buckets[b] += r.buckets[b];
      out.mean_buckets[b] += r.buckets[b];
    }
  }
  out.simulated_ranks = static_cast<int>(run.ranks.size());
  for (std::size_t b = 0; b < kNumTimeBuckets && workers > 0; ++b)
    out.mean_buckets[b] = out.mean_buckets[b] / workers;
  const auto idle = static_cast<std::size_t>(TimeBucket::kIdle);
  const auto compute = static_cast<std::size_t>(TimeBucket::kCompute);
  if (seconds > 0) out.bubble_fraction = to_seconds(out.mean_buckets[idle]) / seconds;
  if (workers > 0) out.host_wait = out.host_wait / workers;
  if (seconds > 0) out.host_bound_fraction = to_seconds(out.host_wait) / seconds;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    StageReport& s = stages[i];
    s.stage = static_cast<int>(i);
    if (s.ranks > 0) {
      for (Time& t : s.buckets)
        t = t / s.ranks;
    }
    if (seconds > 0) {
      s.busy_fraction = to_seconds(s.buckets[compute]) / seconds;
      s.idle_fraction = to_seconds(s.buckets[idle]) / seconds;
    }
    if (i < out.memory.stages.size()) s.peak_memory = out.memory.stages[i].total();
  }
  out.stages = std::move(stages);
  out.critical_buckets = run.critical_buckets;
  out.critical_path = std::move(run.critical_path);
  out.collectives = std::move(run.collectives);
  out.ranks = std::move(run.ranks);
  out.stats = run.stats;
  out.trace_json = std::move(run.trace_json);
  return out;
}

}  // namespace planner::sim
