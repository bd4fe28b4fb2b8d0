// MpiWorld: the World (backend.hpp) of an MPI job. The only way planner code outside executor/
// reaches MPI: the `planner exec` command creates one, other commands never initialise MPI.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "planner/exec/backend.hpp"

namespace planner::exec {

class MpiWorld final : public World {
 public:
  // Initialises MPI (thread level funneled) unless it already is; in that case the world adopts
  // MPI_COMM_WORLD and leaves finalisation to whoever initialised it. Fails (kRuntime) when MPI
  // cannot start.
  static Result<std::unique_ptr<MpiWorld>> init(int* argc, char*** argv);

  // A world of the ranks that pass the same `color` (>= 0), ordered as in this world; nullptr for
  // ranks passing a negative color. Collective over this world. Tests use it to run a reference
  // model on one rank (color = rank) next to the parallel run.
  Result<std::unique_ptr<MpiWorld>> split(int color);

  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;
  // Frees the world's communicators; finalises MPI when init() initialised it.
  ~MpiWorld() override;

  int rank() const override;
  int size() const override;
  int local_rank() const override;
  int local_size() const override;
  const std::string& host() const override;
  Result<std::vector<std::optional<std::string>>> gather(std::string_view mine,
                                                         Deadline deadline) override;
  Result<std::string> broadcast(std::string_view data, Deadline deadline) override;
  [[noreturn]] void abort(int exit_code) override;
  std::optional<std::string> peer_problem(int rank) const override;

  // The MPI library's version line ("Open MPI v4.1.4, ...").
  static std::string library_version();

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit MpiWorld(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// True when this process runs under an MPI launcher (mpirun / mpiexec of Open MPI or MPICH, or a
// job step of srun), judged from the environment those launchers set. A Slurm batch script itself
// is not a launched rank (it has SLURM_PROCID but no SLURM_STEP_ID).
bool launched_by_mpi();

// How many ranks the launcher says it started (OMPI_COMM_WORLD_SIZE, SLURM_STEP_NUM_TASKS,
// PMI_SIZE), and which launcher.
struct LauncherRanks {
  int ranks = 0;
  const char* launcher = "";
};
std::optional<LauncherRanks> launcher_ranks();

// kRuntime when the launcher started more (or fewer) ranks than `world` has: e.g. srun without
// --mpi=pmix starts N processes that each form a world of one.
Status check_launcher_world(const World& world);

}  // namespace planner::exec
