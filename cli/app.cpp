#include "app.hpp"

namespace planner::cli {

void add_json_flag(CLI::App* cmd, CliContext& ctx) {
  cmd->add_flag("--json", ctx.json, "Print machine-readable JSON instead of a table");
}

}  // namespace planner::cli
