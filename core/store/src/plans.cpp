#include "planner/store/plans.hpp"

#include <nlohmann/json.hpp>

#include "impl.hpp"
#include "planner/store/hash.hpp"
#include "planner/store/runs.hpp"

namespace planner::store {
namespace {

PlanRecord read_plan(detail::Statement& row) {
  PlanRecord p;
  p.id = PlanId{row.int64(0)};
  p.hash = row.text(1);
  p.label = row.text(2);
  p.canonical_json = row.text(3);
  p.created_unix_ms = row.int64(4);
  return p;
}

Result<PlanId> put_canonical(Database& db, const std::string& canonical, std::string_view label) {
  Database::Impl& impl = db.impl();
  const std::string hash = sha256_hex(canonical);
  // Alone, find + insert need a write transaction so that two processes storing the same plan
  // store it once. Inside a caller's transaction no savepoint is needed (the only write is one
  // statement, which SQLite undoes by itself when it fails), and a sweep storing thousands of
  // plans avoids copying pages into a statement journal for each.
  std::optional<Transaction> tx;
  if (impl.depth == 0) {
    PLANNER_ASSIGN_OR_RETURN(Transaction own, db.write());
    tx.emplace(std::move(own));
  }
  PLANNER_ASSIGN_OR_RETURN(std::optional<PlanId> existing, find_plan(db, hash));
  if (existing) {
    if (tx) PLANNER_RETURN_IF_ERROR(tx->commit());
    return *existing;
  }
  PLANNER_ASSIGN_OR_RETURN(auto insert,
                           impl.prepare("INSERT INTO plans (hash, label, canonical_json, "
                                        "created_unix_ms) VALUES (?1, ?2, ?3, ?4)"));
  insert->bind(1, hash);
  insert->bind(2, label);
  insert->bind(3, canonical);
  insert->bind(4, detail::now_unix_ms());
  PLANNER_RETURN_IF_ERROR(insert.run());
  const PlanId id{sqlite3_last_insert_rowid(impl.conn.get())};
  if (tx) PLANNER_RETURN_IF_ERROR(tx->commit());
  return id;
}

}  // namespace

std::string canonical_json(const Json& json) {
  // nlohmann::json (unlike ordered_json) keeps object keys sorted, which makes the text canonical.
  return nlohmann::json(json).dump();
}

Result<PlanId> put_plan(Database& db, const Json& plan, std::string_view label) {
  if (!plan.is_object()) {
    return Status::invalid_input("a plan must be a JSON object; got " + describe_json(plan));
  }
  return put_canonical(db, canonical_json(plan), label);
}

Result<PlanId> put_plan_text(Database& db, std::string_view plan_json, std::string_view label) {
  Json plan = Json::parse(plan_json, nullptr, /*allow_exceptions=*/false);
  if (plan.is_discarded()) return Status::invalid_input("the plan is not valid JSON");
  return put_plan(db, plan, label);
}

Result<PlanRecord> get_plan(Database& db, PlanId plan) {
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt, impl.prepare("SELECT id, hash, label, canonical_json, created_unix_ms FROM plans "
                              "WHERE id = ?1"));
  stmt->bind(1, plan.value);
  PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
  if (!row) {
    return Status::not_found("plan " + std::to_string(plan.value) + " not found in " + impl.path);
  }
  return read_plan(*stmt);
}

Status require_plan(Database& db, PlanId plan) {
  PLANNER_ASSIGN_OR_RETURN(auto stmt, db.impl().prepare("SELECT 1 FROM plans WHERE id = ?1"));
  stmt->bind(1, plan.value);
  PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
  if (row) return Status::ok();
  return Status::not_found("plan " + std::to_string(plan.value) + " not found in " +
                           db.impl().path);
}

Result<std::optional<PlanId>> find_plan(Database& db, std::string_view hash) {
  PLANNER_ASSIGN_OR_RETURN(auto stmt, db.impl().prepare("SELECT id FROM plans WHERE hash = ?1"));
  stmt->bind(1, hash);
  PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
  if (!row) return std::optional<PlanId>();
  return std::optional<PlanId>(PlanId{stmt->int64(0)});
}

Status link_plan(Database& db, RunId run, PlanId plan) {
  PLANNER_ASSIGN_OR_RETURN(auto stmt, db.impl().prepare("INSERT OR IGNORE INTO run_plans "
                                                        "(run_id, plan_id) VALUES (?1, ?2)"));
  stmt->bind(1, run.value);
  stmt->bind(2, plan.value);
  Status linked = stmt.run();
  if (linked.is_ok()) return linked;
  // The only constraint that can fail here is a foreign key: say which row is missing.
  PLANNER_RETURN_IF_ERROR(require_run(db, run));
  PLANNER_RETURN_IF_ERROR(require_plan(db, plan));
  return linked;
}

Result<std::vector<PlanRecord>> run_plans(Database& db, RunId run) {
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt,
      db.impl().prepare("SELECT p.id, p.hash, p.label, p.canonical_json, p.created_unix_ms "
                        "FROM run_plans r JOIN plans p ON p.id = r.plan_id WHERE r.run_id = ?1 "
                        "ORDER BY p.id"));
  stmt->bind(1, run.value);
  return detail::collect<PlanRecord>(stmt, read_plan);
}

}  // namespace planner::store
