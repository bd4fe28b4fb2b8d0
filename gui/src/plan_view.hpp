// What the app shows about one ranked plan: its plan document, the cluster it runs on, where each
// rank sits, and one simulated step (`planner simulate` of the same plan: one rank per pipeline
// stage, op timings kept for the timeline). Qt-free.
#pragma once

#include <memory>
#include <vector>

#include "planner/core/plan.hpp"
#include "planner/core/status.hpp"
#include "planner/search/sweep.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::gui {

struct PlanView {
  search::RankedPlan ranked;
  Plan plan;
  std::shared_ptr<const topo::Cluster> cluster;
  std::vector<int> gpu_of_rank;  // every rank's GPU (default placement)
  sim::SimResult sim;            // memory per stage always; timing unless out of memory
};

// Simulates `ranked` in its scenario of `setup`'s request.
Result<PlanView> make_plan_view(const search::SweepSetup& setup, const search::RankedPlan& ranked);

}  // namespace planner::gui
