// Plans, stored once per content.
//
// A plan is kept as canonical JSON (object keys sorted, no whitespace, numbers as nlohmann/json
// writes them) with the SHA-256 of that text as its content hash, so storing the same plan twice
// (from any key order or formatting) returns the same PlanId. A run links to the plans it used.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/json_reader.hpp"
#include "planner/core/status.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::store {

// The canonical text of a JSON document: object keys sorted, no whitespace.
std::string canonical_json(const Json& json);

// Stores a plan document unless one with the same content exists, and returns its id. `label` is a
// short human name ("llama3-8b tp2 pp2"); the first label stored is kept. The plan must be a JSON
// object (StatusCode::kInvalidInput otherwise).
Result<PlanId> put_plan(Database& db, const Json& plan, std::string_view label);
// The same from JSON text (e.g. a plan file as read).
Result<PlanId> put_plan_text(Database& db, std::string_view plan_json, std::string_view label);

// StatusCode::kNotFound when there is no such plan.
Result<PlanRecord> get_plan(Database& db, PlanId plan);
// StatusCode::kNotFound unless the plan exists.
Status require_plan(Database& db, PlanId plan);
// The plan whose canonical text hashes to `hash` (full SHA-256 hex), if stored.
Result<std::optional<PlanId>> find_plan(Database& db, std::string_view hash);

// Records that `run` used `plan` (idempotent). Storing metrics, predictions or sweep results for a
// plan links it too.
Status link_plan(Database& db, RunId run, PlanId plan);

// The plans linked to `run`, in the order they were first stored.
Result<std::vector<PlanRecord>> run_plans(Database& db, RunId run);

}  // namespace planner::store
