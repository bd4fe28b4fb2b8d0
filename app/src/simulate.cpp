#include "planner/app/simulate.hpp"

#include <algorithm>
#include <memory>

#include "planner/topo/cluster.hpp"
#include "planner/topo/placement.hpp"
#include "planner/topo/topology_catalog.hpp"

namespace planner::app {

Result<PlacedPlan> place_plan(Plan plan, const std::optional<ClusterSpec>& cluster,
                              const std::string& topology, int nodes, const Catalog& catalog) {
  PlacedPlan out;
  std::string name = topology;
  if (name.empty() && cluster) name = cluster->topology;
  if (!name.empty()) {
    PLANNER_ASSIGN_OR_RETURN(out.topology, topo::resolve_topology(name));
  } else {
    if (plan.gpu.name.empty()) {
      return Status::invalid_input(
          "give --gpu or --topology (a topology preset or file): the simulator needs a cluster");
    }
    PLANNER_ASSIGN_OR_RETURN(out.topology, topo::topology_for_gpu(plan.gpu));
  }
  PLANNER_ASSIGN_OR_RETURN(GpuSpec topo_gpu, catalog.gpu(out.topology.gpu));
  if (plan.gpu.name.empty()) {
    plan.gpu = topo_gpu;
  } else if (plan.gpu.name != topo_gpu.name) {
    return Status::invalid_input("--gpu " + plan.gpu.name + " disagrees with topology " +
                                 out.topology.name + ", which has " + topo_gpu.name + " GPUs");
  }
  const int per_node = out.topology.gpus_per_node();
  const std::int64_t needed =
      plan.parallel.world_size() +
      (plan.parallel.dp_sync == DpSync::kParameterServer ? plan.parallel.param_servers : 0);
  out.nodes = nodes > 0 ? nodes : cluster ? cluster->nodes : nodes_for(needed, per_node);
  plan.cluster.nodes = out.nodes;
  plan.cluster.gpus_per_node = per_node;
  plan.cluster.gpu = plan.gpu.name;
  plan.cluster.topology = out.topology.name;
  if (cluster) {
    plan.cluster.offering = cluster->offering;
    plan.cluster.usd_per_gpu_hour = cluster->usd_per_gpu_hour;
  }
  out.plan = std::move(plan);
  return out;
}

Result<PlacedPlan> place_plan_on_numbers(Plan plan, const std::optional<ClusterSpec>& cluster,
                                         const topo::ClusterNumbers& numbers, int nodes) {
  if (plan.gpu.name.empty()) {
    return Status::invalid_input("give --gpu: the cluster in numbers does not name its GPU");
  }
  const std::int64_t needed =
      plan.parallel.world_size() +
      (plan.parallel.dp_sync == DpSync::kParameterServer ? plan.parallel.param_servers : 0);
  PlacedPlan out;
  out.nodes = nodes > 0 ? nodes
              : cluster ? cluster->nodes
                        : nodes_for(needed, numbers.gpus_per_node);
  PLANNER_ASSIGN_OR_RETURN(out.topology, topo::topology_from_numbers(numbers, plan.gpu, out.nodes));
  plan.cluster.nodes = out.nodes;
  plan.cluster.gpus_per_node = numbers.gpus_per_node;
  plan.cluster.gpu = plan.gpu.name;
  plan.cluster.topology.clear();  // not a preset: the numbers are in the topology's description
  if (cluster) {
    plan.cluster.offering = cluster->offering;
    plan.cluster.usd_per_gpu_hour = cluster->usd_per_gpu_hour;
  }
  out.plan = std::move(plan);
  return out;
}

Result<sim::SimResult> simulate_plan(const PlacedPlan& placed, const HardwareProfile& profile,
                                     const sim::SimOptions& options) {
  // Jobs on several rack-scale NVLink domains sit in equal blocks of nodes, one per rack.
  topo::TopologySpec topology = placed.topology;
  topo::place_in_domain_blocks(topology, placed.nodes);
  PLANNER_ASSIGN_OR_RETURN(topo::Cluster cluster, topo::Cluster::build(topology, placed.nodes));
  sim::SimInput input;
  input.plan = placed.plan;
  input.cluster = std::make_shared<const topo::Cluster>(std::move(cluster));
  input.profile = std::make_shared<const HardwareProfile>(profile);
  input.options = options;
  return sim::simulate(input);
}

Result<sim::SimResult> predict_for_exec(const Plan& plan, const LowerOptions& lower,
                                        const HardwareProfile* profile, const HostCosts& host) {
  topo::TopologySpec topology;
  if (!plan.cluster.topology.empty()) {
    PLANNER_ASSIGN_OR_RETURN(topology, topo::resolve_topology(plan.cluster.topology));
  } else {
    PLANNER_ASSIGN_OR_RETURN(topology, topo::topology_for_gpu(plan.gpu));
  }
  PlacedPlan placed;
  placed.plan = plan;
  placed.nodes =
      std::max(plan.cluster.nodes, nodes_for(plan.parallel.world_size(), topology.gpus_per_node()));
  placed.topology = std::move(topology);
  sim::SimOptions options;
  options.ranks = RankSubset::kAll;
  options.run.keep_op_times = true;
  options.run.host = host;
  options.lower = lower;
  return simulate_plan(placed, profile != nullptr ? *profile : default_profile_for(plan.gpu),
                       options);
}

Result<RankedPlanSimulation> simulate_ranked_plan(const search::SweepSetup& setup,
                                                  const search::RankedPlan& ranked) {
  const search::SweepRequest& request = setup.request();
  if (ranked.scenario < 0 ||
      static_cast<std::size_t>(ranked.scenario) >= request.scenarios.size()) {
    return Status::invalid_input("plan " + std::to_string(ranked.id) + " names no scenario");
  }
  RankedPlanSimulation out;
  out.plan = setup.plan_of(ranked.scenario, ranked.parallel);
  PLANNER_ASSIGN_OR_RETURN(
      topo::Cluster cluster,
      topo::Cluster::build(setup.topology(ranked.scenario), out.plan.cluster.nodes));
  out.cluster = std::make_shared<const topo::Cluster>(std::move(cluster));
  PLANNER_ASSIGN_OR_RETURN(out.gpu_of_rank,
                           sim::default_gpu_of_rank(ranked.parallel, *out.cluster));
  sim::SimInput input;
  input.plan = out.plan;
  input.cluster = out.cluster;
  input.profile = setup.profile(ranked.scenario);
  input.gpu_of_rank = out.gpu_of_rank;
  input.options.run.host = setup.run_options(ranked.scenario).host;
  input.options.run.attention = setup.run_options(ranked.scenario).attention;
  input.options.run.keep_op_times = true;
  PLANNER_ASSIGN_OR_RETURN(out.sim, sim::simulate(input));
  return out;
}

}  // namespace planner::app
