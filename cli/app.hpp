// Shared plumbing for the planner CLI's subcommands.
//
// main() builds a CLI::App, every register_*_commands() adds its subcommands, and the chosen
// subcommand's callback stores its work in CliContext::action. main() runs the action after parsing
// and turns its Status into a message and an exit code (0 ok, 1 runtime failure, 2 bad input).
#pragma once

#include <functional>
#include <iosfwd>

#include <CLI/CLI.hpp>

#include "planner/core/catalog.hpp"
#include "planner/core/status.hpp"

namespace planner::cli {

struct CliContext {
  const Catalog* catalog = nullptr;
  bool json = false;
  std::function<Status()> action;
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  int exit_code = 0;  // returned by main() when the action succeeds (e.g. sweep --check: 3)
};

// Adds `--json` to a subcommand.
void add_json_flag(CLI::App* cmd, CliContext& ctx);

void register_accuracy_command(CLI::App& app, CliContext& ctx);
void register_calibrate_commands(CLI::App& app, CliContext& ctx);  // with the executor only
void register_db_commands(CLI::App& app, CliContext& ctx);
void register_exec_command(CLI::App& app, CliContext& ctx);  // with the executor only
void register_gpu_commands(CLI::App& app, CliContext& ctx);
void register_memory_command(CLI::App& app, CliContext& ctx);
void register_model_commands(CLI::App& app, CliContext& ctx);
void register_price_commands(CLI::App& app, CliContext& ctx);
void register_profile_commands(CLI::App& app, CliContext& ctx);
void register_program_command(CLI::App& app, CliContext& ctx);
void register_report_command(CLI::App& app, CliContext& ctx);
void register_simulate_commands(CLI::App& app, CliContext& ctx);
void register_sweep_command(CLI::App& app, CliContext& ctx);
void register_validate_command(CLI::App& app, CliContext& ctx);
void register_topology_commands(CLI::App& app, CliContext& ctx);

}  // namespace planner::cli
