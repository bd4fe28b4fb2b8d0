#include "planner/store/export.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>

#include "impl.hpp"
#include "planner/core/version.hpp"
#include "planner/store/plans.hpp"
#include "planner/store/profiles.hpp"
#include "planner/store/runs.hpp"

namespace planner::store {
namespace {

// Kind and version of the export document (its own format, independent of the database schema).
constexpr const char* kExportKind = "planner_db_export";
constexpr int kExportSchemaVersion = 1;

Json column_value(sqlite3_stmt* stmt, int col) {
  switch (sqlite3_column_type(stmt, col)) {
    case SQLITE_INTEGER:
      return sqlite3_column_int64(stmt, col);
    case SQLITE_FLOAT:
      return sqlite3_column_double(stmt, col);
    case SQLITE_TEXT:
      return std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, col)),
                         static_cast<std::size_t>(sqlite3_column_bytes(stmt, col)));
    default:
      return nullptr;
  }
}

enum class Shape { kObjects, kColumns };

// The rows of a query on one id (?1): an array of objects keyed by column name, or (for the bulky
// per-op tables) {"columns": [...], "rows": [[...], ...]}.
Result<Json> query_rows(Database& db, const std::string& sql, std::int64_t id, Shape shape) {
  PLANNER_ASSIGN_OR_RETURN(auto stmt, db.impl().prepare(sql));
  stmt->bind(1, id);
  sqlite3_stmt* raw = stmt->handle();
  const int n = sqlite3_column_count(raw);
  Json rows = Json::array();
  while (true) {
    PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
    if (!row) break;
    Json r = shape == Shape::kObjects ? Json::object() : Json::array();
    for (int c = 0; c < n; ++c) {
      if (shape == Shape::kObjects) {
        r[sqlite3_column_name(raw, c)] = column_value(raw, c);
      } else {
        r.push_back(column_value(raw, c));
      }
    }
    rows.push_back(std::move(r));
  }
  if (shape == Shape::kObjects) return rows;
  Json columns = Json::array();
  for (int c = 0; c < n; ++c)
    columns.push_back(sqlite3_column_name(raw, c));
  return Json{{"columns", std::move(columns)}, {"rows", std::move(rows)}};
}

// Stored JSON text as a document; kept as a string if it does not parse.
Json parsed(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return text;
  return j;
}

Result<Json> export_run(Database& db, RunId id) {
  PLANNER_ASSIGN_OR_RETURN(RunRecord run, get_run(db, id));
  Json j;
  j["id"] = run.id.value;
  j["kind"] = to_string(run.kind);
  j["status"] = to_string(run.status);
  j["label"] = run.label;
  j["created"] = format_utc(run.created_unix_ms);
  j["finished"] = run.finished_unix_ms ? Json(format_utc(*run.finished_unix_ms)) : Json(nullptr);
  j["planner_version"] = run.planner_version;
  j["git_commit"] = run.git_commit;
  j["hosts"] = run.hosts;
  if (run.status == RunStatus::kFailed || run.status == RunStatus::kInterrupted) {
    j["failure"] = {{"reason", run.failure_reason},
                    {"rank", run.failed_rank ? Json(*run.failed_rank) : Json(nullptr)}};
  }
  j["inputs"] = parsed(run.inputs_json);

  PLANNER_ASSIGN_OR_RETURN(std::vector<PlanRecord> plans, run_plans(db, id));
  Json plan_array = Json::array();
  for (const PlanRecord& p : plans) {
    plan_array.push_back({{"id", p.id.value},
                          {"hash", p.hash},
                          {"label", p.label},
                          {"plan", parsed(p.canonical_json)}});
  }
  j["plans"] = std::move(plan_array);

  struct Table {
    const char* key;
    const char* sql;
    Shape shape;
  };
  static constexpr Table kTables[] = {
      {"metrics",
       "SELECT plan_id, source, name, value, unit FROM metrics WHERE run_id = ?1 "
       "ORDER BY plan_id, source, name",
       Shape::kObjects},
      {"sweep_results",
       "SELECT plan_id, position, tier, objective, note FROM sweep_results WHERE run_id = ?1 "
       "ORDER BY position, plan_id",
       Shape::kObjects},
      {"measured_steps",
       "SELECT step, step_time_ps, tokens_per_s, loss, peak_memory_bytes, warmup "
       "FROM measured_steps WHERE run_id = ?1 ORDER BY step",
       Shape::kObjects},
      {"predicted_ops",
       "SELECT plan_id, rank, op_id, op_kind, micro_batch, start_ps, duration_ps, bytes "
       "FROM predicted_ops WHERE run_id = ?1 ORDER BY plan_id, rank, start_ps, op_id",
       Shape::kColumns},
      {"measured_ops",
       "SELECT rank, step, op_id, op_kind, phase, start_ps, wall_ps, bytes, algbw_GBps, "
       "busbw_GBps FROM measured_ops WHERE run_id = ?1 ORDER BY step, rank, start_ps, op_id",
       Shape::kColumns},
  };
  for (const Table& t : kTables) {
    PLANNER_ASSIGN_OR_RETURN(j[t.key], query_rows(db, t.sql, id.value, t.shape));
  }
  return j;
}

Result<Json> export_profile(Database& db, const HardwareProfile& p) {
  Json j;
  j["name"] = p.name;
  j["description"] = p.description;
  j["created"] = format_utc(p.created_unix_ms);
  j["provenance"] = p.provenance;
  j["run_id"] = p.run ? Json(p.run->value) : Json(nullptr);
  j["parameters"] = parsed(p.parameters_json);
  PLANNER_ASSIGN_OR_RETURN(
      j["samples"],
      query_rows(db,
                 "SELECT benchmark, shape, precision, bytes, group_size, iterations, time_ps, "
                 "algbw_GBps, busbw_GBps, tflops FROM calibration_samples WHERE profile_id = ?1 "
                 "ORDER BY seq",
                 p.id.value, Shape::kColumns));
  return j;
}

}  // namespace

std::string format_utc(std::int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[96];  // room for any int year, so the output is never truncated
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return text;
}

Result<RunCounts> count_rows(Database& db, RunId run) {
  PLANNER_RETURN_IF_ERROR(require_run(db, run));
  PLANNER_ASSIGN_OR_RETURN(Transaction snapshot, db.read());
  RunCounts c;
  const std::pair<std::int64_t*, const char*> kCounts[] = {
      {&c.plans, "SELECT count(*) FROM run_plans WHERE run_id = ?1"},
      {&c.metrics, "SELECT count(*) FROM metrics WHERE run_id = ?1"},
      {&c.predicted_ops, "SELECT count(*) FROM predicted_ops WHERE run_id = ?1"},
      {&c.measured_ops, "SELECT count(*) FROM measured_ops WHERE run_id = ?1"},
      {&c.measured_steps, "SELECT count(*) FROM measured_steps WHERE run_id = ?1"},
      {&c.sweep_results, "SELECT count(*) FROM sweep_results WHERE run_id = ?1"},
      {&c.profiles, "SELECT count(*) FROM hardware_profiles WHERE run_id = ?1"},
  };
  for (const auto& [field, sql] : kCounts) {
    PLANNER_ASSIGN_OR_RETURN(auto stmt, db.impl().prepare(sql));
    stmt->bind(1, run.value);
    PLANNER_ASSIGN_OR_RETURN(*field, stmt.scalar());
  }
  PLANNER_RETURN_IF_ERROR(snapshot.commit());
  return c;
}

Result<Json> export_runs(Database& db, std::span<const RunId> runs) {
  PLANNER_ASSIGN_OR_RETURN(Transaction snapshot, db.read());
  std::vector<RunId> ids(runs.begin(), runs.end());
  const bool everything = ids.empty();
  if (everything) {
    PLANNER_ASSIGN_OR_RETURN(std::vector<RunRecord> all, list_runs(db));
    for (auto it = all.rbegin(); it != all.rend(); ++it)
      ids.push_back(it->id);
  }
  Json doc;
  doc["schema_version"] = kExportSchemaVersion;
  doc["kind"] = kExportKind;
  doc["database_schema_version"] = db.schema_version();
  doc["planner_version"] = build::kVersion;
  doc["runs"] = Json::array();
  for (RunId id : ids) {
    PLANNER_ASSIGN_OR_RETURN(Json run, export_run(db, id));
    doc["runs"].push_back(std::move(run));
  }
  doc["hardware_profiles"] = Json::array();
  PLANNER_ASSIGN_OR_RETURN(std::vector<HardwareProfile> profiles, list_profiles(db));
  for (const HardwareProfile& p : profiles) {
    const bool wanted =
        everything || (p.run && std::find(ids.begin(), ids.end(), *p.run) != ids.end());
    if (!wanted) continue;
    PLANNER_ASSIGN_OR_RETURN(Json profile, export_profile(db, p));
    doc["hardware_profiles"].push_back(std::move(profile));
  }
  PLANNER_RETURN_IF_ERROR(snapshot.commit());
  return doc;
}

}  // namespace planner::store
