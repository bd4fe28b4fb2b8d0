// Sweep results: every evaluated plan of a sweep run with its place in the ranking, so the GUI and
// `planner db show` can show the history of a search.
#pragma once

#include <span>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::store {

// Stores the entries (and their metrics, with source = tier) in one transaction; an entry for a
// plan already recorded in this run replaces it. Plans must have been stored (put_plan) first.
Status add_sweep_results(Database& db, RunId run, std::span<const SweepEntry> entries);

// The results of a sweep run by position (best first); `limit` 0 = all.
Result<std::vector<SweepResultRecord>> get_sweep_results(Database& db, RunId run, int limit = 0);

}  // namespace planner::store
