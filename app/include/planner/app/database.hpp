// The database a front-end records to or reads from, named by its path (the CLI's --db and --no-db,
// the desktop app's History tab), opened the same way by both.
#pragma once

#include <optional>
#include <string>

#include "planner/core/status.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::app {

struct DatabaseRef {
  std::string path = store::kDefaultDatabasePath;
  bool disabled = false;  // record nothing (--no-db)
};

// The database a recording action writes to, created when missing; std::nullopt when disabled.
Result<std::optional<store::Database>> open_recording_db(const DatabaseRef& ref);
// An existing database (a missing file is an error, not an empty database).
Result<store::Database> open_existing_db(const DatabaseRef& ref);

// A RUN argument: a run id (which must exist), or "last"/"latest" for the newest run.
Result<store::RunId> resolve_run(store::Database& db, const std::string& text);

}  // namespace planner::app
