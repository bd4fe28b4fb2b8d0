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

#include "planner/app/database.hpp"
#include "planner/core/status.hpp"

namespace planner::cli {

// The database a command names: --db PATH (default planner.db here), --no-db.
using DbOptions = app::DatabaseRef;
// Opening it is the app's (the desktop app opens its history the same way).
using app::open_existing_db;
using app::open_recording_db;
using app::resolve_run;

// Adds `--db PATH` (default planner.db in the working directory) and `--no-db` (exclusive).
// `options` must outlive the parse (hold it in a shared_ptr captured by the callback).
void add_db_options(CLI::App* cmd, DbOptions& options);
// Adds only `--db PATH`, for commands that read an existing database.
void add_db_path_option(CLI::App* cmd, DbOptions& options);

}  // namespace planner::cli
