#include "planner/store/sweeps.hpp"

#include <cmath>
#include <string>

#include "impl.hpp"
#include "planner/store/plans.hpp"

namespace planner::store {

Status add_sweep_results(Database& db, RunId run, std::span<const SweepEntry> entries) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, db.write());
  for (const SweepEntry& e : entries) {
    if (!std::isfinite(e.objective)) {
      return Status::invalid_input("the objective of sweep entry " + std::to_string(e.position) +
                                   " is not a finite number");
    }
    // Storing the metrics links the plan to the run (and checks that both exist): it goes first.
    PLANNER_RETURN_IF_ERROR(detail::insert_metrics(db, run, e.plan, e.tier, e.metrics));
    PLANNER_ASSIGN_OR_RETURN(
        auto stmt, impl.prepare("INSERT OR REPLACE INTO sweep_results (run_id, plan_id, position, "
                                "tier, objective, note) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
    stmt->bind(1, run.value);
    stmt->bind(2, e.plan.value);
    stmt->bind(3, e.position);
    stmt->bind(4, to_string(e.tier));
    stmt->bind(5, e.objective);
    stmt->bind(6, e.note);
    PLANNER_RETURN_IF_ERROR(stmt.run());
  }
  return tx.commit();
}

Result<std::vector<SweepResultRecord>> get_sweep_results(Database& db, RunId run, int limit) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt, impl.prepare("SELECT s.plan_id, p.label, s.position, s.tier, s.objective, s.note "
                              "FROM sweep_results s JOIN plans p ON p.id = s.plan_id "
                              "WHERE s.run_id = ?1 ORDER BY s.position, s.plan_id LIMIT ?2"));
  stmt->bind(1, run.value);
  stmt->bind(2, limit > 0 ? std::int64_t{limit} : std::int64_t{-1});
  return detail::collect<SweepResultRecord>(
      stmt, [&impl](detail::Statement& row) -> Result<SweepResultRecord> {
        SweepResultRecord r;
        r.plan = PlanId{row.int64(0)};
        r.plan_label = row.text(1);
        r.position = row.int32(2);
        PLANNER_ASSIGN_OR_RETURN(
            r.tier, detail::parse_column<MetricSource>(impl, row.text(3), "sweep_results.tier"));
        r.objective = row.real(4);
        r.note = row.text(5);
        return r;
      });
}

}  // namespace planner::store
