#include "planner/store/predictions.hpp"

#include <cmath>
#include <string>

#include "impl.hpp"
#include "planner/store/plans.hpp"
#include "planner/store/runs.hpp"

namespace planner::store {

namespace detail {

Status insert_metrics(Database& db, RunId run, PlanId plan, MetricSource source,
                      std::span<const Metric> metrics) {
  for (const Metric& m : metrics) {
    if (m.name.empty()) return Status::invalid_input("a metric has an empty name");
    if (!std::isfinite(m.value)) {
      return Status::invalid_input("metric \"" + m.name + "\" is not a finite number");
    }
  }
  PLANNER_RETURN_IF_ERROR(link_plan(db, run, plan));
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt, db.impl().prepare("INSERT OR REPLACE INTO metrics (run_id, plan_id, source, "
                                   "name, value, unit) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  const std::string_view source_name = to_string(source);
  for (const Metric& m : metrics) {
    stmt->bind(1, run.value);
    stmt->bind(2, plan.value);
    stmt->bind(3, source_name);
    stmt->bind(4, m.name);
    stmt->bind(5, m.value);
    stmt->bind(6, m.unit);
    PLANNER_RETURN_IF_ERROR(stmt.run());
  }
  return Status::ok();
}

}  // namespace detail

Status put_metrics(Database& db, RunId run, PlanId plan, MetricSource source,
                   std::span<const Metric> metrics) {
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, db.write());
  PLANNER_RETURN_IF_ERROR(detail::insert_metrics(db, run, plan, source, metrics));
  return tx.commit();
}

Result<std::vector<MetricRecord>> get_metrics(Database& db, RunId run, std::optional<PlanId> plan) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(auto stmt,
                           impl.prepare("SELECT plan_id, source, name, value, unit FROM metrics "
                                        "WHERE run_id = ?1 AND (?2 IS NULL OR plan_id = ?2) "
                                        "ORDER BY plan_id, source, name"));
  stmt->bind(1, run.value);
  if (plan) stmt->bind(2, plan->value);
  return detail::collect<MetricRecord>(
      stmt, [&impl](detail::Statement& row) -> Result<MetricRecord> {
        MetricRecord r;
        r.plan = PlanId{row.int64(0)};
        PLANNER_ASSIGN_OR_RETURN(
            r.source, detail::parse_column<MetricSource>(impl, row.text(1), "metrics.source"));
        r.metric = Metric{row.text(2), row.real(3), row.text(4)};
        return r;
      });
}

Status add_predicted_ops(Database& db, RunId run, PlanId plan, std::span<const OpPrediction> ops) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, db.write());
  PLANNER_RETURN_IF_ERROR(link_plan(db, run, plan));
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt, impl.prepare("INSERT INTO predicted_ops (run_id, plan_id, rank, op_id, op_kind, "
                              "micro_batch, start_ps, duration_ps, bytes) "
                              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
  for (const OpPrediction& op : ops) {
    stmt->bind(1, run.value);
    stmt->bind(2, plan.value);
    stmt->bind(3, op.rank);
    stmt->bind(4, op.op_id);
    stmt->bind(5, op.op_kind);
    stmt->bind(6, op.micro_batch);
    stmt->bind(7, op.start);
    stmt->bind(8, op.duration);
    stmt->bind(9, op.bytes);
    Status inserted = stmt.run();
    if (!inserted.is_ok()) {
      return inserted.with_context("predicted op \"" + op.op_id + "\" on rank " +
                                   std::to_string(op.rank));
    }
  }
  return tx.commit();
}

Result<std::vector<OpPrediction>> get_predicted_ops(Database& db, RunId run, PlanId plan) {
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt,
      db.impl().prepare("SELECT rank, op_id, op_kind, micro_batch, start_ps, duration_ps, bytes "
                        "FROM predicted_ops WHERE run_id = ?1 AND plan_id = ?2 "
                        "ORDER BY rank, start_ps, op_id"));
  stmt->bind(1, run.value);
  stmt->bind(2, plan.value);
  return detail::collect<OpPrediction>(stmt, [](detail::Statement& row) {
    OpPrediction op;
    op.rank = row.int32(0);
    op.op_id = row.text(1);
    op.op_kind = row.text(2);
    if (auto mb = row.opt_int64(3)) op.micro_batch = static_cast<int>(*mb);
    op.start = Time(row.int64(4));
    op.duration = Time(row.int64(5));
    op.bytes = Bytes(row.int64(6));
    return op;
  });
}

}  // namespace planner::store
