#include "db_options.hpp"

namespace planner::cli {

void add_db_path_option(CLI::App* cmd, DbOptions& options) {
  cmd->add_option("--db", options.path, "SQLite database file")
      ->type_name("PATH")
      ->capture_default_str();
}

void add_db_options(CLI::App* cmd, DbOptions& options) {
  CLI::Option* db = cmd->add_option("--db", options.path, "SQLite database to record the run in")
                        ->type_name("PATH")
                        ->capture_default_str();
  cmd->add_flag("--no-db", options.disabled, "Record nothing in the database")->excludes(db);
}

}  // namespace planner::cli
