#include "planner/exec/store_recorder.hpp"

#include "planner/core/json_reader.hpp"
#include "planner/store/measurements.hpp"
#include "planner/store/metrics.hpp"
#include "planner/store/plans.hpp"
#include "planner/store/predictions.hpp"
#include "planner/store/runs.hpp"

namespace planner::exec {

StoreRecorder::StoreRecorder(store::Database& db, std::string plan_json, std::string label,
                             std::string inputs_json)
    : db_(db),
      plan_json_(std::move(plan_json)),
      label_(std::move(label)),
      inputs_json_(std::move(inputs_json)) {}

void StoreRecorder::attach_prediction(Prediction prediction) {
  prediction_ = std::move(prediction);
}

Status StoreRecorder::on_start(const ExecStart& start) {
  Json inputs = Json::parse(inputs_json_, nullptr, false);
  if (inputs.is_discarded() || !inputs.is_object()) {
    return Status::internal("the run's inputs are not a JSON object");
  }
  inputs["backend"] = start.backend;
  inputs["device"] = start.device;
  inputs["ranks"] = start.ranks;
  inputs["data"] = start.data;
  if (start.first_step > 0) inputs["resumed_at_step"] = start.first_step;
  store::NewRun run;
  run.kind = store::RunKind::kExec;
  run.label = label_;
  run.inputs_json = inputs.dump();
  run.hosts = start.hosts;
  PLANNER_ASSIGN_OR_RETURN(store::Transaction tx, db_.write());
  PLANNER_ASSIGN_OR_RETURN(store::RunId id, store::create_run(db_, run));
  PLANNER_ASSIGN_OR_RETURN(store::PlanId plan, store::put_plan_text(db_, plan_json_, label_));
  PLANNER_RETURN_IF_ERROR(store::link_plan(db_, id, plan));
  if (prediction_) {
    PLANNER_RETURN_IF_ERROR(store::put_metrics(db_, id, plan, store::MetricSource::kSimulated,
                                               prediction_->step_metrics));
    PLANNER_RETURN_IF_ERROR(store::add_predicted_ops(db_, id, plan, prediction_->ops));
  }
  PLANNER_RETURN_IF_ERROR(tx.commit());
  run_ = id;
  plan_ = plan;
  return Status::ok();
}

Status StoreRecorder::on_step(const StepRecord& step, std::span<const store::OpMeasurement> ops) {
  PLANNER_ASSIGN_OR_RETURN(store::Transaction tx, db_.write());
  PLANNER_RETURN_IF_ERROR(store::add_measured_ops(db_, *run_, ops));
  PLANNER_RETURN_IF_ERROR(store::add_measured_steps(
      db_, *run_, std::span<const store::StepMeasurement>(&step.step, 1)));
  return tx.commit();
}

Status StoreRecorder::on_finish(const ExecSummary& summary) {
  namespace metric = store::metric;
  using store::make_metric;
  std::vector<store::Metric> metrics = {
      make_metric(metric::kStepTime, summary.step_time_s),
      make_metric(metric::kTokensPerSecond, summary.tokens_per_s),
      make_metric(metric::kLoss, summary.final_loss),
      make_metric(metric::kPeakMemory, static_cast<double>(summary.peak_memory)),
  };
  if (summary.mfu > 0) metrics.push_back(make_metric(metric::kMfu, summary.mfu));
  PLANNER_ASSIGN_OR_RETURN(store::Transaction tx, db_.write());
  PLANNER_RETURN_IF_ERROR(
      store::put_metrics(db_, *run_, *plan_, store::MetricSource::kMeasured, metrics));
  PLANNER_RETURN_IF_ERROR(store::finish_run(db_, *run_));
  return tx.commit();
}

void StoreRecorder::on_failure(std::string_view reason, std::optional<int> rank) {
  if (!run_) return;  // failed before the run was recorded
  const Status st = store::fail_run(db_, *run_, reason, rank);
  if (!st.is_ok() && failure_status_.is_ok()) failure_status_ = st;
}

}  // namespace planner::exec
