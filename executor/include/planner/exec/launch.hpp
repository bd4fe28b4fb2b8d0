// Starting the ranks of a run: `planner exec --launch local -n N` runs mpirun itself on this host.
// (Slurm launch builds on the same LaunchCommand.)
#pragma once

#include <string>
#include <vector>

#include "planner/core/status.hpp"

namespace planner::exec {

struct LaunchCommand {
  std::vector<std::string> argv;  // argv[0] is the program (a path, or a name looked up on PATH)
  std::vector<std::string> env;   // "NAME=value" added to the environment
};

struct LocalLaunch {
  int ranks = 1;
  int cores = 1;         // cores of this host (std::thread::hardware_concurrency)
  bool as_root = false;  // the caller runs as root (Open MPI refuses that unless told)
  std::string mpirun;    // the launcher; empty: default_mpirun()
};

// The mpirun command that runs `program` (argv) on `launch.ranks` ranks of this host: with
// --oversubscribe and --bind-to none when there are more ranks than cores, and Open MPI's
// OMPI_ALLOW_RUN_AS_ROOT / OMPI_ALLOW_RUN_AS_ROOT_CONFIRM when running as root.
LaunchCommand local_launch_command(const LocalLaunch& launch,
                                   const std::vector<std::string>& program);

// The launcher to use: $PLANNER_MPIRUN when set, else the mpiexec CMake found at build time.
std::string default_mpirun();

// This program's own executable (/proc/self/exe), so the ranks run the same build.
Result<std::string> self_executable();

// Runs the command, waits for it and returns its exit code (128 + signal when a signal ended it).
// kRuntime when it cannot be started.
Result<int> run_command(const LaunchCommand& command);

}  // namespace planner::exec
