#include "planner/store/measurements.hpp"

#include <string>

#include "impl.hpp"
#include "planner/store/runs.hpp"

namespace planner::store {

Status add_measured_ops(Database& db, RunId run, std::span<const OpMeasurement> ops) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, db.write());
  PLANNER_RETURN_IF_ERROR(require_run(db, run));
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt,
      impl.prepare("INSERT INTO measured_ops (run_id, rank, step, op_id, op_kind, phase, start_ps, "
                   "wall_ps, bytes, algbw_GBps, busbw_GBps) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"));
  for (const OpMeasurement& op : ops) {
    stmt->bind(1, run.value);
    stmt->bind(2, op.rank);
    stmt->bind(3, op.step);
    stmt->bind(4, op.op_id);
    stmt->bind(5, op.op_kind);
    stmt->bind(6, op.phase);
    stmt->bind(7, op.start);
    stmt->bind(8, op.wall);
    stmt->bind(9, op.bytes);
    stmt->bind(10, detail::to_GBps(op.algbw));
    stmt->bind(11, detail::to_GBps(op.busbw));
    Status inserted = stmt.run();
    if (!inserted.is_ok()) {
      return inserted.with_context("measured op \"" + op.op_id + "\" on rank " +
                                   std::to_string(op.rank) + " in step " + std::to_string(op.step));
    }
  }
  return tx.commit();
}

Status add_measured_steps(Database& db, RunId run, std::span<const StepMeasurement> steps) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, db.write());
  PLANNER_RETURN_IF_ERROR(require_run(db, run));
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt, impl.prepare("INSERT OR REPLACE INTO measured_steps (run_id, step, step_time_ps, "
                              "tokens_per_s, loss, peak_memory_bytes, warmup) "
                              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
  for (const StepMeasurement& s : steps) {
    stmt->bind(1, run.value);
    stmt->bind(2, s.step);
    stmt->bind(3, s.step_time);
    stmt->bind(4, s.tokens_per_s);
    stmt->bind(5, s.loss);
    stmt->bind(6, s.peak_memory);
    stmt->bind(7, s.warmup ? 1 : 0);
    PLANNER_RETURN_IF_ERROR(stmt.run());
  }
  return tx.commit();
}

Result<std::vector<OpMeasurement>> get_measured_ops(Database& db, RunId run) {
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt,
      db.impl().prepare("SELECT rank, step, op_id, op_kind, phase, start_ps, wall_ps, bytes, "
                        "algbw_GBps, busbw_GBps FROM measured_ops WHERE run_id = ?1 "
                        "ORDER BY step, rank, start_ps, op_id"));
  stmt->bind(1, run.value);
  return detail::collect<OpMeasurement>(stmt, [](detail::Statement& row) {
    OpMeasurement op;
    op.rank = row.int32(0);
    op.step = row.int64(1);
    op.op_id = row.text(2);
    op.op_kind = row.text(3);
    op.phase = row.text(4);
    if (auto start = row.opt_int64(5)) op.start = Time(*start);
    op.wall = Time(row.int64(6));
    op.bytes = Bytes(row.int64(7));
    op.algbw = detail::from_GBps(row.opt_real(8));
    op.busbw = detail::from_GBps(row.opt_real(9));
    return op;
  });
}

Result<std::vector<StepMeasurement>> get_measured_steps(Database& db, RunId run) {
  PLANNER_ASSIGN_OR_RETURN(auto stmt,
                           db.impl().prepare("SELECT step, step_time_ps, tokens_per_s, loss, "
                                             "peak_memory_bytes, warmup FROM measured_steps "
                                             "WHERE run_id = ?1 ORDER BY step"));
  stmt->bind(1, run.value);
  return detail::collect<StepMeasurement>(stmt, [](detail::Statement& row) {
    StepMeasurement s;
    s.step = row.int64(0);
    s.step_time = Time(row.int64(1));
    s.tokens_per_s = row.real(2);
    s.loss = row.opt_real(3);
    if (auto peak = row.opt_int64(4)) s.peak_memory = Bytes(*peak);
    s.warmup = row.int64(5) != 0;
    return s;
  });
}

}  // namespace planner::store
