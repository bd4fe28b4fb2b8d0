// Background commands for the executor's failure, checkpoint and Slurm tests: start a command,
// watch its output, find its MPI ranks among its descendants, signal one, and make sure nothing it
// started outlives the test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace planner::testing {

class Background {
 public:
  // Starts `argv` (argv[0] a path) in a process group of its own, with stdout and stderr going to
  // files in `dir` and `env` ("K=V") added to the environment.
  Background(const std::vector<std::string>& argv, const std::vector<std::string>& env,
             const std::string& dir);
  // Kills whatever is still running (the process and every descendant) and reaps it.
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  pid_t pid() const { return pid_; }
  std::string out() const;
  std::string err() const;

  // Waits until `ready(stderr text)` holds; false when the process ends or `timeout` passes first.
  bool wait_for_err(const std::function<bool(const std::string&)>& ready,
                    std::chrono::seconds timeout);
  // Waits for the process to exit; its exit code (128 + signal), or nullopt after `timeout`.
  std::optional<int> wait(std::chrono::seconds timeout);

  // Every live descendant of the process (children, grandchildren, ...).
  std::vector<pid_t> descendants() const;
  // The descendant that is MPI rank `rank` of an mpirun job (OMPI_COMM_WORLD_RANK in its
  // environment), if any.
  std::optional<pid_t> rank_pid(int rank) const;
  // SIGKILL to the process and every descendant.
  void kill_all();

 private:
  pid_t pid_ = -1;
  std::string out_path_;
  std::string err_path_;
  std::optional<int> exit_code_;
  std::vector<pid_t> seen_;  // descendants observed, checked again on destruction
};

// Live processes whose environment holds every one of `entries` ("K=V"): e.g. the ranks of a Slurm
// job, which are not descendants of the test.
std::vector<pid_t> processes_with_env(const std::vector<std::string>& entries);

// True while a process with this id exists and is not a zombie.
bool process_alive(pid_t pid);

// Polls `done` every 20 ms until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout);

}  // namespace planner::testing
