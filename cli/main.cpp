// planner: the command-line front-end. It parses, calls the libraries and prints; nothing more.
#include <exception>
#include <iostream>
#include <string>

#include "app.hpp"
#include "output.hpp"
#include "planner/core/version.hpp"

namespace {

std::string version_line() {
  std::string v = std::string("planner ") + planner::build::kVersion + " (commit " +
                  planner::build::kGitCommit + ", " + planner::build::kBuildType + ", " +
                  planner::build::kCompiler + ")\n";
  v += std::string("  cuda backend: ") +
       (planner::build::kHaveCuda ? std::string("built with CUDA ") + planner::build::kCudaVersion
                                  : std::string("not built")) +
       "\n";
  v += std::string("  mpi executor: ") + (planner::build::kHaveMpi ? "built" : "not built") + "\n";
  v += std::string("  desktop app:  ") + (planner::build::kHaveGui ? "built" : "not built");
  return v;
}

void print_error(const planner::Status& status) {
  planner::cli::print_error(std::cerr, status.message());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto catalog = planner::Catalog::load_builtin();
    if (!catalog) {
      print_error(catalog.status().with_context("built-in presets"));
      return 1;
    }
    planner::cli::CliContext ctx;
    ctx.catalog = &catalog.value();
    ctx.out = &std::cout;
    ctx.err = &std::cerr;

    CLI::App app{
        "planner: plan, simulate and run 3D-parallel training of large transformers.\n"
        "Exit codes: 0 ok, 1 runtime failure, 2 bad input."};
    app.set_version_flag("--version", version_line());
    app.require_subcommand(1);
    app.fallthrough(false);
    app.footer("Run `planner COMMAND --help` for a command's options.");

    planner::cli::register_gpu_commands(app, ctx);
    planner::cli::register_price_commands(app, ctx);
    planner::cli::register_model_commands(app, ctx);
    planner::cli::register_memory_command(app, ctx);
    planner::cli::register_program_command(app, ctx);
    planner::cli::register_simulate_commands(app, ctx);
    planner::cli::register_accuracy_command(app, ctx);
    planner::cli::register_sweep_command(app, ctx);
    planner::cli::register_validate_command(app, ctx);
    planner::cli::register_topology_commands(app, ctx);
    planner::cli::register_db_commands(app, ctx);
    planner::cli::register_report_command(app, ctx);
    planner::cli::register_profile_commands(app, ctx);
#ifdef PLANNER_HAVE_EXECUTOR
    planner::cli::register_exec_command(app, ctx);
    planner::cli::register_calibrate_commands(app, ctx);
#endif

    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
      return app.exit(e);
    } catch (const CLI::ParseError& e) {
      app.exit(e);
      return 2;
    }
    if (!ctx.action) {
      std::cerr << app.help();
      return 2;
    }
    const planner::Status status = ctx.action();
    if (!status.is_ok()) {
      print_error(status);
      return status.exit_code();
    }
    return ctx.exit_code;
  } catch (const std::exception& e) {
    std::cerr << "error: internal error: " << e.what() << '\n';
    return 1;
  }
}
