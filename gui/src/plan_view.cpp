#include "plan_view.hpp"

#include <memory>

#include "planner/core/hardware_profile.hpp"

namespace planner::gui {

Result<PlanView> make_plan_view(const search::SweepSetup& setup, const search::RankedPlan& ranked) {
  const search::SweepRequest& request = setup.request();
  if (ranked.scenario < 0 ||
      static_cast<std::size_t>(ranked.scenario) >= request.scenarios.size()) {
    return Status::invalid_input("plan " + std::to_string(ranked.id) + " names no scenario");
  }
  const search::SweepScenario& scenario =
      request.scenarios[static_cast<std::size_t>(ranked.scenario)];
  PlanView view;
  view.ranked = ranked;
  view.plan = setup.plan_of(ranked.scenario, ranked.parallel);
  PLANNER_ASSIGN_OR_RETURN(topo::Cluster cluster,
                           topo::Cluster::build(scenario.topology, view.plan.cluster.nodes));
  view.cluster = std::make_shared<const topo::Cluster>(std::move(cluster));
  std::shared_ptr<const HardwareProfile> profile =
      scenario.profile ? scenario.profile
                       : std::make_shared<const HardwareProfile>(default_profile_for(scenario.gpu));
  PLANNER_ASSIGN_OR_RETURN(view.gpu_of_rank,
                           sim::default_gpu_of_rank(ranked.parallel, *view.cluster));
  sim::SimInput input;
  input.plan = view.plan;
  input.cluster = view.cluster;
  input.profile = profile;
  input.gpu_of_rank = view.gpu_of_rank;
  input.options.run.keep_op_times = true;
  PLANNER_ASSIGN_OR_RETURN(view.sim, sim::simulate(input));
  return view;
}

}  // namespace planner::gui
