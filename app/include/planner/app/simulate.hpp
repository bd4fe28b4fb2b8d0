// One plan on a cluster, as `planner simulate`, the desktop app's plan views and `planner exec`'s
// stored prediction simulate it: where the plan runs (its topology and node count, resolved the
// same way for every front-end) and the simulation itself.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/core/catalog.hpp"
#include "planner/core/cluster_spec.hpp"
#include "planner/core/hardware_profile.hpp"
#include "planner/core/host_model.hpp"
#include "planner/core/lowering.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/status.hpp"
#include "planner/search/sweep.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topo/cluster.hpp"
#include "planner/topo/cluster_numbers.hpp"
#include "planner/topo/topology_spec.hpp"

namespace planner::app {

// A plan with the topology it runs on and its cluster filled in (nodes, GPUs per node, GPU,
// topology name).
struct PlacedPlan {
  Plan plan;
  topo::TopologySpec topology;
  int nodes = 0;
};

// Where `plan` runs. The topology: `topology` (a preset name or file) when given, else the
// cluster's, else the first preset with the plan's GPU (kInvalidInput when there is neither a GPU
// nor a topology). The plan's GPU must match the topology's; an empty GPU takes the topology's.
// Nodes: `nodes` when > 0, else the cluster's, else just enough for the plan's ranks (parameter
// servers included). The cluster's offering and price are kept.
Result<PlacedPlan> place_plan(Plan plan, const std::optional<ClusterSpec>& cluster,
                              const std::string& topology, int nodes,
                              const Catalog& catalog = builtin_catalog());

// The same on a cluster stated in numbers (topologies/cluster_numbers.hpp) instead of a topology:
// the plan needs a GPU; nodes: `nodes` when > 0, else the cluster's, else just enough.
Result<PlacedPlan> place_plan_on_numbers(Plan plan, const std::optional<ClusterSpec>& cluster,
                                         const topo::ClusterNumbers& numbers, int nodes);

// Simulates one step of `placed` with `profile` and `options` (simulate.hpp).
Result<sim::SimResult> simulate_plan(const PlacedPlan& placed, const HardwareProfile& profile,
                                     const sim::SimOptions& options);

// The simulator's prediction for an executed run of `plan`: every rank, every op's timing kept,
// lowered with `lower` (the executor's options, so that op ids match its measurements), on the
// plan's topology (cluster.topology, else the first preset with its GPU) with `profile` (nullptr:
// the GPU's default profile) and the executor's host costs `host` (executor_host_costs() for the
// cuda backend; none for the cpu backend, whose host runs the ops itself).
Result<sim::SimResult> predict_for_exec(const Plan& plan, const LowerOptions& lower,
                                        const HardwareProfile* profile = nullptr,
                                        const HostCosts& host = {});

// One ranked plan of a sweep on its own nodes, simulated with the profile the sweep used: one rank
// per pipeline stage, every op's timing kept (the desktop app's plan views draw them).
struct RankedPlanSimulation {
  Plan plan;
  std::shared_ptr<const topo::Cluster> cluster;
  std::vector<int> gpu_of_rank;  // every rank's GPU (default placement)
  sim::SimResult sim;            // memory per stage always; timing unless out of memory
};
Result<RankedPlanSimulation> simulate_ranked_plan(const search::SweepSetup& setup,
                                                  const search::RankedPlan& ranked);

}  // namespace planner::app
