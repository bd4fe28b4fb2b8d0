// StoreRecorder: the ExecObserver that records an executed run in the database (rank 0).
//
//   on_start    a run of kind "exec" (status running) with the inputs, the build (the store adds
//               version and commit) and the host of every rank; the plan, stored once by content
//               and linked to the run
//   on_step     the step's per-op measurements and its summary, in one transaction, so a run that
//               fails later keeps every step it finished
//   on_finish   the run's measured metrics (step_time, tokens_per_s, loss, peak_memory, mfu) and
//               status ok
//   on_failure  status failed with the reason and the failing rank
//
// The simulator's prediction for the same plan (attach_prediction(), before on_start) is stored
// with the run in on_start's transaction, joinable with the measurements on op id:
// store::compare_run reports predicted against measured.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/exec/execute.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::exec {

class StoreRecorder final : public ExecObserver {
 public:
  // `plan_json`: the plan document (stored by content); `label`: the run's label (the plan name);
  // `inputs_json`: what was run (command line, options), valid JSON.
  StoreRecorder(store::Database& db, std::string plan_json, std::string label,
                std::string inputs_json);

  // The prediction stored with the run: step metrics and per-op predictions (source simulated).
  struct Prediction {
    std::vector<store::Metric> step_metrics;
    std::vector<store::OpPrediction> ops;
  };
  void attach_prediction(Prediction prediction);

  Status on_start(const ExecStart& start) override;
  Status on_step(const StepRecord& step, std::span<const store::OpMeasurement> ops) override;
  Status on_finish(const ExecSummary& summary) override;
  void on_failure(std::string_view reason, std::optional<int> rank) override;

  // The recorded run and plan (after on_start).
  std::optional<store::RunId> run() const { return run_; }
  std::optional<store::PlanId> plan() const { return plan_; }
  // The first error the recorder met in on_failure, if any (failures cannot return one).
  const Status& failure_status() const { return failure_status_; }

 private:
  store::Database& db_;
  std::string plan_json_;
  std::string label_;
  std::string inputs_json_;
  std::optional<store::RunId> run_;
  std::optional<store::PlanId> plan_;
  std::optional<Prediction> prediction_;
  Status failure_status_;
};

}  // namespace planner::exec
