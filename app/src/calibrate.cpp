#include "planner/app/calibrate.hpp"

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "planner/core/loaders.hpp"
#include "planner/fit/calibration.hpp"
#include "planner/store/measurements.hpp"
#include "planner/store/plans.hpp"
#include "planner/store/runs.hpp"

namespace planner::app {

Result<std::vector<CalibrationPoint>> run_points(store::Database& db, store::RunId run,
                                                 const Catalog& catalog,
                                                 const ExecLowering& lowering) {
  PLANNER_ASSIGN_OR_RETURN(store::RunRecord record, store::get_run(db, run));
  if (record.kind != store::RunKind::kExec) {
    return Status::invalid_input("run " + std::to_string(run.value) + " is a " +
                                 std::string(to_string(record.kind)) +
                                 " run; --from-runs takes executed runs (planner exec)");
  }
  PLANNER_ASSIGN_OR_RETURN(std::vector<store::PlanRecord> plans, store::run_plans(db, run));
  if (plans.size() != 1) {
    return Status::invalid_input("run " + std::to_string(run.value) + " has " +
                                 std::to_string(plans.size()) + " plans; expected one");
  }
  const std::string source = "plan of run " + std::to_string(run.value);
  PLANNER_ASSIGN_OR_RETURN(Plan plan, parse_plan(plans.front().canonical_json, source, catalog));
  const Json inputs = Json::parse(record.inputs_json, nullptr, false);
  PLANNER_ASSIGN_OR_RETURN(StepProgram program, lower(plan, lowering(plan, inputs)));
  PLANNER_ASSIGN_OR_RETURN(std::vector<store::StepMeasurement> steps,
                           store::get_measured_steps(db, run));
  std::map<std::int64_t, bool> warmup;
  for (const store::StepMeasurement& s : steps)
    warmup[s.step] = s.warmup;
  PLANNER_ASSIGN_OR_RETURN(std::vector<store::OpMeasurement> ops, store::get_measured_ops(db, run));
  std::map<std::pair<int, std::string>, std::pair<double, int>> sum;
  for (const store::OpMeasurement& m : ops) {
    if (warmup[m.step]) continue;
    auto& acc = sum[{m.rank, m.op_id}];
    acc.first += to_seconds(m.wall);
    acc.second += 1;
  }
  std::vector<fit::MeasuredOp> measured;
  for (const auto& [key, acc] : sum) {
    measured.push_back({key.first, key.second, Time(std::llround(acc.first / acc.second * 1e12))});
  }
  return fit::join_measured_ops(program, measured);
}

}  // namespace planner::app
