#include "planner/app/record.hpp"

#include "planner/core/loaders.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/sim/profiles.hpp"
#include "planner/store/metrics.hpp"
#include "planner/store/plans.hpp"
#include "planner/store/predictions.hpp"
#include "planner/store/profiles.hpp"
#include "planner/store/runs.hpp"
#include "planner/store/sweeps.hpp"

namespace planner::app {
namespace {

namespace m = store::metric;
using store::make_metric;

// The exposed communication of every axis, under the store's metric names.
template <class Exposed>
void add_exposed(std::vector<store::Metric>& out, Exposed&& exposed) {
  out.push_back(make_metric(m::kExposedCommTp, to_seconds(exposed(sim::TimeBucket::kTp))));
  out.push_back(make_metric(m::kExposedCommCp, to_seconds(exposed(sim::TimeBucket::kCp))));
  out.push_back(make_metric(m::kExposedCommEp, to_seconds(exposed(sim::TimeBucket::kEp))));
  out.push_back(make_metric(m::kExposedCommPp, to_seconds(exposed(sim::TimeBucket::kPp))));
  out.push_back(make_metric(m::kExposedCommDp, to_seconds(exposed(sim::TimeBucket::kDp))));
}

Result<store::RunId> new_run(store::Database& db, store::RunKind kind, std::string label,
                             const Json& inputs, double seconds_before = 0) {
  store::NewRun run;
  run.kind = kind;
  run.label = std::move(label);
  run.inputs_json = inputs.dump();
  run.seconds_before = seconds_before;
  return store::create_run(db, run);
}

}  // namespace

std::vector<store::Metric> plan_metrics(const search::RankedPlan& r) {
  const search::PlanMetrics& pm = r.metrics();
  const search::Economics& e = r.economics;
  std::vector<store::Metric> out{make_metric(m::kStepTime, to_seconds(pm.step_time)),
                                 make_metric(m::kTokensPerSecond, pm.tokens_per_second),
                                 make_metric(m::kMfu, pm.mfu), make_metric(m::kHfu, pm.hfu),
                                 make_metric(m::kBubbleFraction, pm.bubble_fraction)};
  add_exposed(out, [&](sim::TimeBucket b) { return pm.exposed(b); });
  out.push_back(make_metric(m::kPeakMemory, static_cast<double>(pm.peak_memory.raw())));
  out.push_back(
      make_metric(m::kMemoryHeadroom, static_cast<double>((pm.capacity - pm.peak_memory).raw())));
  out.push_back(make_metric(m::kTimeToTrain, e.time_to_train_s));
  out.push_back(make_metric(m::kTotalCost, e.total_cost.raw()));
  out.push_back(make_metric(m::kCostPerHour, e.usd_per_hour.raw()));
  out.push_back(make_metric(m::kGoodput, e.goodput.useful_fraction));
  out.push_back(make_metric(m::kTokensPerUsd, r.objective));
  return out;
}

std::vector<store::Metric> simulated_step_metrics(const sim::SimResult& r) {
  std::vector<store::Metric> out{
      make_metric(m::kPeakMemory, static_cast<double>(r.memory.peak.raw())),
      make_metric(m::kMemoryHeadroom,
                  static_cast<double>((r.memory.capacity - r.memory.peak).raw()))};
  if (!r.simulated) return out;
  out.push_back(make_metric(m::kStepTime, to_seconds(r.step_time)));
  out.push_back(make_metric(m::kTokensPerSecond, r.tokens_per_second));
  out.push_back(make_metric(m::kMfu, r.mfu));
  out.push_back(make_metric(m::kHfu, r.hfu));
  out.push_back(make_metric(m::kBubbleFraction, r.bubble_fraction));
  add_exposed(out, [&](sim::TimeBucket b) { return r.exposed(b); });
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

Result<store::RunId> record_sweep(store::Database& db, const search::SweepSetup& setup,
                                  const search::SweepResult& res, const Json& inputs,
                                  double seconds) {
  const std::string label = res.scenarios.size() == 1
                                ? res.scenarios.front().name
                                : std::to_string(res.scenarios.size()) + " scenarios";
  PLANNER_ASSIGN_OR_RETURN(store::RunId id,
                           new_run(db, store::RunKind::kSweep, label, inputs, seconds));
  {
    PLANNER_ASSIGN_OR_RETURN(store::Transaction tx, db.write());
    std::vector<store::SweepEntry> entries;
    for (const search::RankedPlan& r : res.ranking) {
      const Plan plan = setup.plan_of(r.scenario, r.parallel);
      PLANNER_ASSIGN_OR_RETURN(store::PlanId pid,
                               store::put_plan(db, as_document("plan", to_json(plan)), plan.name));
      store::SweepEntry e;
      e.plan = pid;
      e.position = r.position;
      e.tier = r.simulated ? store::MetricSource::kSimulated : store::MetricSource::kAnalytic;
      e.objective = r.objective;
      e.note = r.note;
      e.metrics = plan_metrics(r);
      entries.push_back(std::move(e));
    }
    PLANNER_RETURN_IF_ERROR(store::add_sweep_results(db, id, entries));
    PLANNER_RETURN_IF_ERROR(tx.commit());
  }
  PLANNER_RETURN_IF_ERROR(store::finish_run(db, id));
  return id;
}

Result<store::RunId> record_simulation(store::Database& db, const Plan& plan,
                                       const sim::SimResult& r, const Json& inputs, bool with_ops,
                                       const std::string& failure) {
  const Json doc = as_document("plan", to_json(plan));
  PLANNER_ASSIGN_OR_RETURN(store::RunId id,
                           new_run(db, store::RunKind::kSimulate, plan.name, inputs));
  PLANNER_ASSIGN_OR_RETURN(store::PlanId plan_id, store::put_plan(db, doc, plan.name));
  PLANNER_RETURN_IF_ERROR(store::put_metrics(db, id, plan_id, store::MetricSource::kSimulated,
                                             simulated_step_metrics(r)));
  if (with_ops)
    PLANNER_RETURN_IF_ERROR(store::add_predicted_ops(db, id, plan_id, predicted_ops(r)));
  if (!failure.empty()) {
    PLANNER_RETURN_IF_ERROR(store::fail_run(db, id, failure));
  } else {
    PLANNER_RETURN_IF_ERROR(store::finish_run(db, id));
  }
  return id;
}

Result<store::RunId> record_accuracy(store::Database& db, const fit::AccuracyReport& rep,
                                     const Json& inputs) {
  const std::string label =
      inputs.is_object() && inputs.contains("file") && inputs["file"].is_string()
          ? inputs["file"].get<std::string>()
          : std::string("accuracy");
  PLANNER_ASSIGN_OR_RETURN(store::RunId id, new_run(db, store::RunKind::kAccuracy, label, inputs));
  for (const fit::RunAccuracy& r : rep.runs) {
    if (!r.modelled) continue;
    PLANNER_ASSIGN_OR_RETURN(store::PlanId plan,
                             store::put_plan(db, as_document("plan", to_json(r.plan)), r.id));
    std::vector<store::Metric> predicted{make_metric(m::kStepTime, r.step_time_s),
                                         make_metric(m::kMfu, r.mfu),
                                         {"accuracy_error", r.error_percent, "%"}};
    PLANNER_RETURN_IF_ERROR(
        store::put_metrics(db, id, plan, store::MetricSource::kSimulated, predicted));
    const std::vector<store::Metric> published{make_metric(m::kStepTime, r.published)};
    PLANNER_RETURN_IF_ERROR(
        store::put_metrics(db, id, plan, store::MetricSource::kMeasured, published));
  }
  PLANNER_RETURN_IF_ERROR(store::finish_run(db, id));
  return id;
}

Result<store::RunId> record_profile(store::Database& db, const HardwareProfile& profile,
                                    const std::vector<store::CalibrationSample>& samples,
                                    const Json& inputs) {
  // A fit can leave the ranges a profile document allows (a topology that understates a link):
  // store only what simulate, sweep and exec can read back.
  const std::string text = to_json_text(profile);
  if (auto back = sim::parse_profile(text, "the fitted profile \"" + profile.name + "\""); !back) {
    return Status::runtime(back.status().message() + "; nothing stored");
  }
  PLANNER_ASSIGN_OR_RETURN(store::RunId id,
                           new_run(db, store::RunKind::kCalibrate, profile.name, inputs));
  store::NewProfile np;
  np.name = profile.name;
  np.description = profile.description;
  np.parameters_json = text;
  np.provenance = Json(profile.provenance).dump();
  np.run = id;
  PLANNER_RETURN_IF_ERROR(
      store::put_profile(db, np, samples, store::ProfileWrite::kReplace).status());
  PLANNER_RETURN_IF_ERROR(store::finish_run(db, id));
  return id;
}

}  // namespace planner::app
