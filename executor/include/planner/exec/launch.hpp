// Starting the ranks of a run:
//   local  `planner exec --launch local -n N` runs mpirun itself on this host;
//   slurm  `planner exec --launch slurm --nodes N` writes an sbatch script whose one job step is
//          `srun --mpi=pmix ... planner exec PLAN --launch none ...`, and submits it.
// Under either launcher each rank runs `planner exec ... --launch none`, which joins the job's MPI
// world (mpi_world.hpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
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
// OMPI_ALLOW_RUN_AS_ROOT / OMPI_ALLOW_RUN_AS_ROOT_CONFIRM when running as root. Open MPI's
// orte_enable_recovery is on, so that mpirun does not kill the job the moment one rank dies: the
// surviving ranks notice within their timeout, rank 0 records the failure, then ends the job.
LaunchCommand local_launch_command(const LocalLaunch& launch,
                                   const std::vector<std::string>& program);

// The launcher to use: $PLANNER_MPIRUN when set, else the mpiexec CMake found at build time.
std::string default_mpirun();

// This program's own executable (/proc/self/exe), so the ranks run the same build.
Result<std::string> self_executable();

// Runs the command, waits for it and returns its exit code (128 + signal when a signal ended it).
// kRuntime when it cannot be started.
Result<int> run_command(const LaunchCommand& command);

struct CommandOutput {
  int exit_code = 0;
  std::string out;  // standard output (standard error passes through)
};
// Runs the command with `input` on its standard input and returns its exit code and output.
Result<CommandOutput> run_command_output(const LaunchCommand& command, std::string_view input = {});

// ---- Slurm

struct SlurmLaunch {
  int ranks = 1;           // the plan's world size: srun tasks
  int ranks_per_node = 1;  // tasks per node: the plan's cluster.gpus_per_node (at most `ranks`)
  int nodes = 0;           // 0: as few as hold the ranks
  std::string partition;   // empty: the cluster's default partition
  std::string time;        // sbatch --time (e.g. "00:30:00"); empty: the partition's default
  std::string job_name = "planner-exec";
  std::string output;   // sbatch --output; empty: planner-exec-%j.out in the working directory
  std::string workdir;  // sbatch --chdir (absolute)
  // srun's MPI plugin: Open MPI 4 (Debian 12) starts under srun through PMIx.
  std::string mpi = "pmix";
  std::string comment;  // a first comment line (what is run)
  // When set: the ranks (and after_step) get --outcome-file $outcome, with
  // outcome=<outcome_dir>/planner-exec-$SLURM_JOB_ID.outcome, and after the step the script ends
  // with `exec <after_step> --outcome-file "$outcome" --settle <srun's exit code>`.
  std::string outcome_dir;
  std::vector<std::string> after_step;
};

// The batch script: #SBATCH lines (job name, nodes, tasks, tasks per node, partition, time, output,
// working directory), then one job step `srun --mpi=<mpi> --kill-on-bad-exit=0 <program>` and,
// with an after_step command, that command (see SlurmLaunch); the job's exit code is the last
// command's. kInvalidInput when the ranks do not fit `nodes` x `ranks_per_node`.
Result<std::string> slurm_batch_script(const SlurmLaunch& launch,
                                       const std::vector<std::string>& program);

// `text` quoted for a POSIX shell ('...' with embedded quotes escaped); plain words unquoted.
std::string shell_quote(std::string_view text);

// The Slurm client programs (sbatch, squeue, scontrol): $PLANNER_SLURM_BIN/<name> when set, else
// the name, looked up on PATH.
std::string slurm_program(std::string_view name);

// Submits `script` with `sbatch --parsable` (the script on standard input) and returns the job id.
// kUnavailable when sbatch cannot be run, kRuntime when it refuses (with its message).
Result<std::string> submit_batch_job(const std::string& script);

// State of a job as `scontrol show job` reports it ("PENDING", "RUNNING", "COMPLETED", "FAILED",
// "CANCELLED", "TIMEOUT", ...) and its exit code once it ended; nullopt when Slurm no longer knows
// the job.
struct SlurmJobState {
  std::string state;
  std::optional<int> exit_code;  // ExitCode=code:signal (128 + signal when a signal ended it)
  bool finished() const;
};
Result<std::optional<SlurmJobState>> query_slurm_job(const std::string& job_id);

// Polls the job every `poll_s` seconds until it has finished (calling `on_state` at each change of
// state); returns its last state. kTimeout after `timeout_s` (0: no limit).
Result<SlurmJobState> wait_for_slurm_job(const std::string& job_id, double poll_s, double timeout_s,
                                         const std::function<void(const SlurmJobState&)>& on_state);

}  // namespace planner::exec
