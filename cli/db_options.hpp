// `--db PATH` and `--no-db`, added the same way to every command that records to or reads from the
// database (sweep, simulate, exec, calibrate, report, db ...).
//
// Recording commands:   DbOptions db;  add_db_options(cmd, db);
//                        PLANNER_ASSIGN_OR_RETURN(auto database, open_recording_db(db));
//                        if (database) { ... store::create_run(*database, ...) ... }
// Reading commands:      add_db_path_option(cmd, db);  open_existing_db(db)
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "planner/core/status.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::cli {

struct DbOptions {
  std::string path = store::kDefaultDatabasePath;
  bool disabled = false;  // --no-db: record nothing
};

// Adds `--db PATH` (default planner.db in the working directory) and `--no-db` (exclusive).
// `options` must outlive the parse (hold it in a shared_ptr captured by the callback).
void add_db_options(CLI::App* cmd, DbOptions& options);
// Adds only `--db PATH`, for commands that read an existing database.
void add_db_path_option(CLI::App* cmd, DbOptions& options);

// The database a recording command writes to, created when missing; std::nullopt under --no-db.
Result<std::optional<store::Database>> open_recording_db(const DbOptions& options);
// An existing database (a missing file is an error, not an empty database).
Result<store::Database> open_existing_db(const DbOptions& options);

// A RUN argument: a run id (which must exist), or "last"/"latest" for the newest run.
Result<store::RunId> resolve_run(store::Database& db, const std::string& text);

}  // namespace planner::cli
