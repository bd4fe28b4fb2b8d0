#include "planner/store/runs.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "impl.hpp"
#include "planner/core/process.hpp"
#include "planner/core/version.hpp"

namespace planner::store {
namespace {

constexpr const char* kRunColumns =
    "SELECT id, kind, status, label, inputs_json, planner_version, git_commit, created_unix_ms, "
    "finished_unix_ms, failure_reason, failed_rank, "
    "(SELECT count(*) FROM run_plans WHERE run_plans.run_id = runs.id), owner_host, owner_pid, "
    "owner_start FROM runs ";

enum class Owner { kAlive, kGone, kUnknown };

// Whether the process that recorded a run still runs. Only a process on this host can be
// checked; a pid now used by a later process (another start token) is gone.
Owner owner_state(const std::string& host, std::optional<std::int64_t> pid,
                  const std::string& token) {
  if (!pid || *pid <= 0 || host.empty() || host != host_name()) return Owner::kUnknown;
  if (process_state(*pid) == ProcessState::kGone) return Owner::kGone;
  if (!token.empty() && process_start_token(*pid) != token) return Owner::kGone;
  return Owner::kAlive;
}

std::string interrupted_reason(const std::string& host, std::int64_t pid) {
  return "the process that recorded it (pid " + std::to_string(pid) + " on " + host +
         ") ended without finishing it";
}

Result<RunRecord> read_run(Database::Impl& impl, detail::Statement& row) {
  RunRecord r;
  r.id = RunId{row.int64(0)};
  PLANNER_ASSIGN_OR_RETURN(r.kind, detail::parse_column<RunKind>(impl, row.text(1), "runs.kind"));
  PLANNER_ASSIGN_OR_RETURN(r.status,
                           detail::parse_column<RunStatus>(impl, row.text(2), "runs.status"));
  r.label = row.text(3);
  r.inputs_json = row.text(4);
  r.planner_version = row.text(5);
  r.git_commit = row.text(6);
  r.created_unix_ms = row.int64(7);
  r.finished_unix_ms = row.opt_int64(8);
  r.failure_reason = row.text(9);
  if (auto rank = row.opt_int64(10)) r.failed_rank = static_cast<int>(*rank);
  r.plan_count = row.int64(11);
  r.owner_host = row.text(12);
  r.owner_pid = row.opt_int64(13);
  if (r.status == RunStatus::kRunning &&
      owner_state(r.owner_host, r.owner_pid, row.text(14)) == Owner::kGone) {
    r.status = RunStatus::kInterrupted;
    r.failure_reason = interrupted_reason(r.owner_host, *r.owner_pid);
  }
  return r;
}

Status read_hosts(Database::Impl& impl, RunRecord& run) {
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt, impl.prepare("SELECT host FROM run_hosts WHERE run_id = ?1 ORDER BY position"));
  stmt->bind(1, run.id.value);
  PLANNER_ASSIGN_OR_RETURN(
      run.hosts,
      detail::collect<std::string>(stmt, [](detail::Statement& row) { return row.text(0); }));
  return Status::ok();
}

Status end_run(Database& db, RunId run, RunStatus status, std::string_view reason,
               std::optional<int> failed_rank) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, db.write());
  PLANNER_RETURN_IF_ERROR(require_run(db, run));
  // The recorded status: a run whose process is gone (reported as interrupted) may still be ended
  // by the process that takes over, e.g. a launcher whose rank 0 died.
  PLANNER_ASSIGN_OR_RETURN(auto current, impl.prepare("SELECT status FROM runs WHERE id = ?1"));
  current->bind(1, run.value);
  PLANNER_RETURN_IF_ERROR(current.next().status());
  const std::string recorded = current->text(0);
  if (recorded != to_string(RunStatus::kRunning)) {
    return Status::invalid_input("run " + std::to_string(run.value) + " in " + impl.path +
                                 " already ended (" + recorded + ")");
  }
  PLANNER_ASSIGN_OR_RETURN(auto stmt, impl.prepare("UPDATE runs SET status = ?2, "
                                                   "finished_unix_ms = ?3, failure_reason = ?4, "
                                                   "failed_rank = ?5 WHERE id = ?1"));
  stmt->bind(1, run.value);
  stmt->bind(2, to_string(status));
  stmt->bind(3, detail::now_unix_ms());
  if (status == RunStatus::kFailed) {
    stmt->bind(4, reason);
  } else {
    stmt->bind(4, std::nullopt);
  }
  stmt->bind(5, failed_rank);
  PLANNER_RETURN_IF_ERROR(stmt.run());
  return tx.commit();
}

}  // namespace

Result<RunId> create_run(Database& db, const NewRun& run) {
  PLANNER_RETURN_IF_ERROR(detail::check_json(run.inputs_json, "the run's inputs"));
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, db.write());
  PLANNER_ASSIGN_OR_RETURN(
      auto insert,
      impl.prepare("INSERT INTO runs (kind, status, label, inputs_json, planner_version, "
                   "git_commit, created_unix_ms, owner_host, owner_pid, owner_start) "
                   "VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
  const std::string this_host = host_name();
  const std::int64_t pid = ::getpid();
  const std::string token = process_start_token(pid);
  insert->bind(1, to_string(run.kind));
  insert->bind(2, run.label);
  insert->bind(3, run.inputs_json);
  insert->bind(4, build::kVersion);
  insert->bind(5, build::kGitCommit);
  // At most a year back: a wild figure must not put the run before the database existed.
  const double before_ms =
      std::isfinite(run.seconds_before) ? std::clamp(run.seconds_before, 0.0, 3.2e7) * 1e3 : 0.0;
  insert->bind(6, detail::now_unix_ms() - static_cast<std::int64_t>(std::llround(before_ms)));
  insert->bind(7, this_host);
  insert->bind(8, pid);
  insert->bind(9, token);
  PLANNER_RETURN_IF_ERROR(insert.run());
  const RunId id{sqlite3_last_insert_rowid(impl.conn.get())};

  const std::vector<std::string> hosts = run.hosts.empty() ? std::vector{this_host} : run.hosts;
  PLANNER_ASSIGN_OR_RETURN(
      auto host,
      impl.prepare("INSERT INTO run_hosts (run_id, position, host) VALUES (?1, ?2, ?3)"));
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    host->bind(1, id.value);
    host->bind(2, static_cast<std::int64_t>(i));
    host->bind(3, hosts[i]);
    PLANNER_RETURN_IF_ERROR(host.run());
  }
  PLANNER_RETURN_IF_ERROR(tx.commit());
  return id;
}

Status finish_run(Database& db, RunId run) {
  return end_run(db, run, RunStatus::kOk, {}, std::nullopt);
}

Status fail_run(Database& db, RunId run, std::string_view reason, std::optional<int> failed_rank) {
  return end_run(db, run, RunStatus::kFailed, reason, failed_rank);
}

Result<RunRecord> get_run(Database& db, RunId run) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(auto stmt, impl.prepare(std::string(kRunColumns) + "WHERE id = ?1"));
  stmt->bind(1, run.value);
  PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
  if (!row) {
    return Status::not_found("run " + std::to_string(run.value) + " not found in " + impl.path);
  }
  PLANNER_ASSIGN_OR_RETURN(RunRecord record, read_run(impl, *stmt));
  PLANNER_RETURN_IF_ERROR(read_hosts(impl, record));
  return record;
}

Result<std::vector<RunRecord>> list_runs(Database& db, const RunFilter& filter) {
  Database::Impl& impl = db.impl();
  // Runs recorded as running may turn out interrupted (and the other way round for a filter on
  // interrupted runs): those filters are applied after reading, and the limit with them.
  const bool by_owner = filter.status && (*filter.status == RunStatus::kRunning ||
                                          *filter.status == RunStatus::kInterrupted);
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt, impl.prepare(std::string(kRunColumns) +
                              "WHERE (?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR status = ?2 OR "
                              "(?2 = 'interrupted' AND status = 'running')) "
                              "ORDER BY id DESC LIMIT ?3"));
  if (filter.kind) stmt->bind(1, to_string(*filter.kind));
  if (filter.status) stmt->bind(2, to_string(*filter.status));
  stmt->bind(3, filter.limit > 0 && !by_owner ? std::int64_t{filter.limit} : std::int64_t{-1});
  PLANNER_ASSIGN_OR_RETURN(std::vector<RunRecord> runs,
                           detail::collect<RunRecord>(stmt, [&impl](detail::Statement& row) {
                             return read_run(impl, row);
                           }));
  if (by_owner) {
    std::erase_if(runs, [&](const RunRecord& r) { return r.status != *filter.status; });
    if (filter.limit > 0 && runs.size() > static_cast<std::size_t>(filter.limit)) {
      runs.resize(static_cast<std::size_t>(filter.limit));
    }
  }
  for (RunRecord& r : runs) {
    PLANNER_RETURN_IF_ERROR(read_hosts(impl, r));
  }
  return runs;
}

Result<std::vector<RunId>> mark_interrupted_runs(Database& db) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, db.write());
  std::vector<RunId> gone;
  {
    PLANNER_ASSIGN_OR_RETURN(
        auto running,
        impl.prepare("SELECT id, owner_host, owner_pid, owner_start FROM runs WHERE status = "
                     "'running' AND owner_pid IS NOT NULL ORDER BY id"));
    while (true) {
      PLANNER_ASSIGN_OR_RETURN(bool row, running.next());
      if (!row) break;
      if (owner_state(running->text(1), running->opt_int64(2), running->text(3)) == Owner::kGone) {
        gone.push_back(RunId{running->int64(0)});
      }
    }
  }
  PLANNER_ASSIGN_OR_RETURN(
      auto mark, impl.prepare("UPDATE runs SET status = 'interrupted', failure_reason = ?2 "
                              "WHERE id = ?1 AND status = 'running'"));
  for (RunId id : gone) {
    PLANNER_ASSIGN_OR_RETURN(RunRecord run, get_run(db, id));
    mark->bind(1, id.value);
    mark->bind(2, run.failure_reason);
    PLANNER_RETURN_IF_ERROR(mark.run());
  }
  PLANNER_RETURN_IF_ERROR(tx.commit());
  return gone;
}

Result<RunId> latest_run(Database& db) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(auto stmt, impl.prepare("SELECT max(id) FROM runs"));
  PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
  if (!row || stmt->is_null(0)) return Status::not_found(impl.path + ": no runs recorded yet");
  return RunId{stmt->int64(0)};
}

Status require_run(Database& db, RunId run) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(auto stmt, impl.prepare("SELECT 1 FROM runs WHERE id = ?1"));
  stmt->bind(1, run.value);
  PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
  if (row) return Status::ok();
  return Status::not_found("run " + std::to_string(run.value) + " not found in " + impl.path);
}

}  // namespace planner::store
