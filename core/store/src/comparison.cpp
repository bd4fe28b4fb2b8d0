#include "planner/store/comparison.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "impl.hpp"
#include "planner/store/metrics.hpp"
#include "planner/store/plans.hpp"
#include "planner/store/runs.hpp"

namespace planner::store {
namespace {

// Measured ops of run ?1 averaged per (rank, op id) over the compared steps (?2 = 1 includes
// warm-up steps). A step without a summary row counts as a regular step.
constexpr const char* kMeasuredPerOp =
    "WITH measured AS ("
    "  SELECT o.rank AS rank, o.op_id AS op_id, avg(o.wall_ps) AS mean_ps, "
    "         min(o.wall_ps) AS min_ps, max(o.wall_ps) AS max_ps, count(*) AS samples "
    "  FROM measured_ops o LEFT JOIN measured_steps s ON s.run_id = o.run_id AND s.step = o.step "
    "  WHERE o.run_id = ?1 AND (?2 OR coalesce(s.warmup, 0) = 0) "
    "  GROUP BY o.rank, o.op_id) ";

std::optional<double> relative(Time predicted, Time measured) {
  if (measured.raw() == 0) return std::nullopt;
  return static_cast<double>(predicted.raw() - measured.raw()) /
         static_cast<double>(measured.raw());
}

Result<PlanId> choose_plan(Database& db, RunId prediction_run, std::optional<PlanId> given) {
  if (given) {
    PLANNER_RETURN_IF_ERROR(require_plan(db, *given));
    return *given;
  }
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt, db.impl().prepare("SELECT DISTINCT plan_id FROM predicted_ops WHERE run_id = ?1 "
                                   "UNION SELECT plan_id FROM metrics WHERE run_id = ?1 AND "
                                   "name = ?2 AND source IN ('simulated', 'analytic') ORDER BY 1"));
  stmt->bind(1, prediction_run.value);
  stmt->bind(2, metric::kStepTime.name);
  PLANNER_ASSIGN_OR_RETURN(
      std::vector<PlanId> plans,
      detail::collect<PlanId>(stmt, [](detail::Statement& row) { return PlanId{row.int64(0)}; }));
  const std::string run_name = "run " + std::to_string(prediction_run.value);
  if (plans.empty()) {
    return Status::not_found(run_name + " has no predictions (no predicted ops and no " +
                             std::string(metric::kStepTime.name) + " metric) to compare with");
  }
  if (plans.size() > 1) {
    std::string ids;
    for (PlanId p : plans)
      ids += (ids.empty() ? "" : ", ") + std::to_string(p.value);
    return Status::invalid_input(run_name + " has predictions for " + std::to_string(plans.size()) +
                                 " plans (" + ids + "); choose one");
  }
  return plans.front();
}

Result<std::optional<Time>> predicted_step_time(Database& db, RunId run, PlanId plan) {
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt, db.impl().prepare("SELECT value, unit FROM metrics WHERE run_id = ?1 AND "
                                   "plan_id = ?2 AND name = ?3 AND source IN ('simulated', "
                                   "'analytic') ORDER BY source = 'simulated' DESC LIMIT 1"));
  stmt->bind(1, run.value);
  stmt->bind(2, plan.value);
  stmt->bind(3, metric::kStepTime.name);
  PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
  if (!row) return std::optional<Time>();
  if (stmt->text(1) != metric::kStepTime.unit) {
    return Status::invalid_input("run " + std::to_string(run.value) + ": metric " +
                                 std::string(metric::kStepTime.name) + " has unit \"" +
                                 stmt->text(1) + "\"; expected \"" +
                                 std::string(metric::kStepTime.unit) + "\"");
  }
  return std::optional<Time>(seconds(stmt->real(0)));
}

}  // namespace

std::optional<double> OpKindComparison::relative_error() const {
  return relative(predicted, measured);
}

std::optional<double> StepComparison::relative_error() const {
  if (!predicted) return std::nullopt;
  return relative(*predicted, measured);
}

Result<std::vector<OpComparison>> compare_ops(Database& db, RunId measured_run,
                                              const ComparisonOptions& options) {
  PLANNER_RETURN_IF_ERROR(require_run(db, measured_run));
  const RunId prediction_run = options.prediction_run.value_or(measured_run);
  PLANNER_RETURN_IF_ERROR(require_run(db, prediction_run));
  PLANNER_ASSIGN_OR_RETURN(PlanId plan, choose_plan(db, prediction_run, options.plan));

  PLANNER_ASSIGN_OR_RETURN(
      auto stmt,
      db.impl().prepare(std::string(kMeasuredPerOp) +
                        "SELECT p.rank, p.op_id, p.op_kind, p.bytes, p.duration_ps, m.mean_ps, "
                        "m.min_ps, m.max_ps, m.samples FROM predicted_ops p JOIN measured m "
                        "ON m.rank = p.rank AND m.op_id = p.op_id "
                        "WHERE p.run_id = ?3 AND p.plan_id = ?4 ORDER BY p.rank, p.start_ps"));
  stmt->bind(1, measured_run.value);
  stmt->bind(2, options.include_warmup ? 1 : 0);
  stmt->bind(3, prediction_run.value);
  stmt->bind(4, plan.value);
  return detail::collect<OpComparison>(stmt, [](detail::Statement& row) {
    OpComparison c;
    c.rank = row.int32(0);
    c.op_id = row.text(1);
    c.op_kind = row.text(2);
    c.bytes = Bytes(row.int64(3));
    c.predicted = Time(row.int64(4));
    c.measured_mean = Time(std::llround(row.real(5)));
    c.measured_min = Time(row.int64(6));
    c.measured_max = Time(row.int64(7));
    c.samples = row.int64(8);
    return c;
  });
}

Result<RunComparison> compare_run(Database& db, RunId measured_run,
                                  const ComparisonOptions& options) {
  PLANNER_ASSIGN_OR_RETURN(Transaction snapshot, db.read());
  PLANNER_RETURN_IF_ERROR(require_run(db, measured_run));
  RunComparison out;
  out.measured_run = measured_run;
  out.prediction_run = options.prediction_run.value_or(measured_run);
  PLANNER_RETURN_IF_ERROR(require_run(db, out.prediction_run));
  PLANNER_ASSIGN_OR_RETURN(out.plan, choose_plan(db, out.prediction_run, options.plan));
  ComparisonOptions chosen = options;
  chosen.plan = out.plan;
  PLANNER_ASSIGN_OR_RETURN(std::vector<OpComparison> ops, compare_ops(db, measured_run, chosen));
  PLANNER_ASSIGN_OR_RETURN(out.predicted_step_time,
                           predicted_step_time(db, out.prediction_run, out.plan));

  std::map<std::string, OpKindComparison> kinds;
  for (const OpComparison& op : ops) {
    OpKindComparison& k = kinds[op.op_kind];
    k.op_kind = op.op_kind;
    ++k.ops;
    k.predicted += op.predicted;
    k.measured += op.measured_mean;
  }
  for (auto& [name, k] : kinds)
    out.by_op_kind.push_back(std::move(k));
  std::stable_sort(
      out.by_op_kind.begin(), out.by_op_kind.end(),
      [](const OpKindComparison& a, const OpKindComparison& b) { return a.measured > b.measured; });

  const auto matched = static_cast<std::int64_t>(ops.size());
  PLANNER_ASSIGN_OR_RETURN(auto predicted, db.impl().prepare("SELECT count(*) FROM predicted_ops "
                                                             "WHERE run_id = ?1 AND plan_id = ?2"));
  predicted->bind(1, out.prediction_run.value);
  predicted->bind(2, out.plan.value);
  PLANNER_ASSIGN_OR_RETURN(std::int64_t predicted_total, predicted.scalar());
  PLANNER_ASSIGN_OR_RETURN(auto measured, db.impl().prepare(std::string(kMeasuredPerOp) +
                                                            "SELECT count(*) FROM measured"));
  measured->bind(1, measured_run.value);
  measured->bind(2, options.include_warmup ? 1 : 0);
  PLANNER_ASSIGN_OR_RETURN(std::int64_t measured_total, measured.scalar());
  out.predicted_only = predicted_total - matched;
  out.measured_only = measured_total - matched;

  PLANNER_ASSIGN_OR_RETURN(
      auto steps, db.impl().prepare("SELECT step, step_time_ps, warmup FROM measured_steps "
                                    "WHERE run_id = ?1 ORDER BY step"));
  steps->bind(1, measured_run.value);
  std::vector<Time> compared;
  while (true) {
    PLANNER_ASSIGN_OR_RETURN(bool row, steps.next());
    if (!row) break;
    StepComparison s;
    s.step = steps->int64(0);
    s.measured = Time(steps->int64(1));
    s.warmup = steps->int64(2) != 0;
    s.predicted = out.predicted_step_time;
    if (!s.warmup || options.include_warmup) compared.push_back(s.measured);
    out.by_step.push_back(s);
  }
  if (!compared.empty()) {
    // The median; with an even count the mean of the two middle steps.
    std::sort(compared.begin(), compared.end());
    const std::size_t n = compared.size();
    out.measured_step_time = n % 2 == 1
                                 ? compared[n / 2]
                                 : Time((compared[n / 2 - 1].raw() + compared[n / 2].raw()) / 2);
  }
  PLANNER_RETURN_IF_ERROR(snapshot.commit());
  return out;
}

}  // namespace planner::store
