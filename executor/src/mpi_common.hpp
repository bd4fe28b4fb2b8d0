// MPI plumbing shared by the MPI world and the cpu backend (private to executor/).
#pragma once

#include <mpi.h>

#include <string>
#include <string_view>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/exec/bounded_wait.hpp"
#include "planner/exec/communicator.hpp"
#include "planner/exec/mpi_world.hpp"

namespace planner::exec {

struct MpiWorld::Impl {
  MPI_Comm base = MPI_COMM_NULL;     // the world's ranks (owned unless MPI_COMM_WORLD)
  MPI_Comm control = MPI_COMM_NULL;  // a duplicate for the out-of-band channel
  bool owns_base = false;
  bool finalize = false;  // this world initialised MPI
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string host;
  std::vector<int> local_pids;  // per rank: its pid when on this host, else 0
};

// Ok, or kRuntime "MPI_Iallreduce failed: <MPI's error string>" (context `call` names the call).
Status mpi_check(int rc, std::string_view call);

MPI_Datatype mpi_type(DType type);

// Polls `request` until it completes or the deadline passes (pausing as above). On timeout the
// request stays posted (the caller aborts). With `peer` (a rank of `world`), also fails as soon
// as that rank's process is known to be gone or stopped (World::peer_problem).
Status wait_request(MPI_Request* request, Deadline deadline, std::string_view what,
                    double timeout_s, const World* world = nullptr, int peer = -1);

// The seconds between now and the deadline, rounded, for messages.
double seconds_left(Deadline deadline);

}  // namespace planner::exec
