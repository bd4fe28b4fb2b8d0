#include "prediction.hpp"

#include <algorithm>
#include <memory>

#include "planner/core/hardware_profile.hpp"
#include "planner/store/metrics.hpp"
#include "planner/store/predictions.hpp"
#include "planner/topo/cluster.hpp"
#include "planner/topo/topology_catalog.hpp"

namespace planner::cli {

Result<topo::TopologySpec> topology_for_gpu(const GpuSpec& gpu) {
  for (const topo::TopologySpec& t : topo::builtin_topologies().all()) {
    if (gpu.matches(t.gpu)) return t;
  }
  return Status::not_found("no topology preset has " + gpu.name + " GPUs; give --topology FILE");
}

std::vector<store::Metric> simulated_step_metrics(const sim::SimResult& r) {
  namespace m = store::metric;
  auto metric = [](const store::MetricDef& def, double v) {
    return store::Metric{std::string(def.name), v, std::string(def.unit)};
  };
  std::vector<store::Metric> out{
      metric(m::kPeakMemory, static_cast<double>(r.memory.peak.raw())),
      metric(m::kMemoryHeadroom, static_cast<double>((r.memory.capacity - r.memory.peak).raw()))};
  if (!r.simulated) return out;
  out.push_back(metric(m::kStepTime, to_seconds(r.step_time)));
  out.push_back(metric(m::kTokensPerSecond, r.tokens_per_second));
  out.push_back(metric(m::kMfu, r.mfu));
  out.push_back(metric(m::kHfu, r.hfu));
  out.push_back(metric(m::kBubbleFraction, r.bubble_fraction));
  out.push_back(metric(m::kExposedCommTp, to_seconds(r.exposed(sim::TimeBucket::kTp))));
  out.push_back(metric(m::kExposedCommCp, to_seconds(r.exposed(sim::TimeBucket::kCp))));
  out.push_back(metric(m::kExposedCommEp, to_seconds(r.exposed(sim::TimeBucket::kEp))));
  out.push_back(metric(m::kExposedCommPp, to_seconds(r.exposed(sim::TimeBucket::kPp))));
  out.push_back(metric(m::kExposedCommDp, to_seconds(r.exposed(sim::TimeBucket::kDp))));
  return out;
}

std::vector<store::OpPrediction> predicted_ops(const sim::SimResult& r) {
  std::vector<store::OpPrediction> ops;
  for (const sim::RankRun& rank : r.ranks) {
    for (const sim::OpTiming& op : rank.ops) {
      store::OpPrediction p;
      p.op_id = to_string(op.id);
      p.op_kind = std::string(to_string(op.kind));
      p.rank = rank.rank;
      if (op.id.microbatch() != OpId::kNone) p.micro_batch = op.id.microbatch();
      p.start = op.issue;
      p.duration = op.end - op.issue;
      p.bytes = op.bytes;
      ops.push_back(std::move(p));
    }
  }
  return ops;
}

Result<sim::SimResult> simulate_plan_for_exec(const Plan& plan, const LowerOptions& lower,
                                              const HardwareProfile* profile) {
  topo::TopologySpec topology;
  if (!plan.cluster.topology.empty()) {
    PLANNER_ASSIGN_OR_RETURN(topology, topo::resolve_topology(plan.cluster.topology));
  } else {
    PLANNER_ASSIGN_OR_RETURN(topology, topology_for_gpu(plan.gpu));
  }
  const std::int64_t per_node = std::max(1, topology.gpus_per_node());
  const auto nodes = static_cast<int>(std::max<std::int64_t>(
      plan.cluster.nodes, (plan.parallel.world_size() + per_node - 1) / per_node));
  PLANNER_ASSIGN_OR_RETURN(topo::Cluster cluster, topo::Cluster::build(topology, nodes));
  sim::SimInput input;
  input.plan = plan;
  input.cluster = std::make_shared<const topo::Cluster>(std::move(cluster));
  const HardwareProfile* preset = builtin_profile_for(plan.gpu);
  input.profile =
      std::make_shared<const HardwareProfile>(profile != nullptr  ? *profile
                                              : preset != nullptr ? *preset
                                                                  : derive_profile(plan.gpu));
  input.options.ranks = RankSubset::kAll;
  input.options.run.keep_op_times = true;
  input.options.lower = lower;
  return sim::simulate(input);
}

Status store_prediction(store::Database& db, store::RunId run, store::PlanId plan,
                        const sim::SimResult& result) {
  PLANNER_ASSIGN_OR_RETURN(store::Transaction tx, db.write());
  PLANNER_RETURN_IF_ERROR(store::put_metrics(db, run, plan, store::MetricSource::kSimulated,
                                             simulated_step_metrics(result)));
  if (result.simulated) {
    const std::vector<store::OpPrediction> ops = predicted_ops(result);
    PLANNER_RETURN_IF_ERROR(store::add_predicted_ops(db, run, plan, ops));
  }
  return tx.commit();
}

}  // namespace planner::cli
