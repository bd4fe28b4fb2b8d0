#include "plan_view.hpp"

#include "planner/app/simulate.hpp"

namespace planner::gui {

Result<PlanView> make_plan_view(const search::SweepSetup& setup, const search::RankedPlan& ranked) {
  PLANNER_ASSIGN_OR_RETURN(app::RankedPlanSimulation s, app::simulate_ranked_plan(setup, ranked));
  return PlanView{ranked, std::move(s.plan), std::move(s.cluster), std::move(s.gpu_of_rank),
                  std::move(s.sim)};
}

}  // namespace planner::gui
