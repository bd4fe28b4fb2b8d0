// Bounded waits on asynchronous device work, and the abort that ends them (the cuda backend's
// guarantee that a failure never hangs the job, in a form CI tests with fakes).
//
// The cuda backend waits on CUDA events (cudaEventQuery) while polling its NCCL communicators for
// asynchronous errors (ncclCommGetAsyncError); on an error, or when the deadline passes, it aborts
// the communicators (ncclCommAbort), which makes their kernels return so that nothing stays stuck
// on a dead peer, and reports which wait failed.
#pragma once

#include <string_view>

#include "planner/core/status.hpp"
#include "planner/exec/communicator.hpp"

namespace planner::exec {

// Work a bounded wait polls.
class AsyncWork {
 public:
  virtual ~AsyncWork() = default;
  // True once the work has completed; false while it runs; an error when it failed.
  virtual Result<bool> done() = 0;
  // Ok while everything the work depends on is healthy; otherwise its asynchronous error.
  virtual Status health() = 0;
  // Stops everything the work depends on, so that no one waits on it any more.
  virtual void abort() = 0;
};

// Polls `work` (done(), then health()) until it completes, fails or the deadline passes, pausing
// between polls as pause_between_polls does. On a failure it calls work.abort() once and returns
// the failure with context "<what>"; when the deadline passes it aborts likewise and returns
// kTimeout "<what> did not complete within <timeout_s> s". Never calls abort() on success.
Status wait_bounded(AsyncWork& work, Deadline deadline, std::string_view what, double timeout_s);

// The pause between two polls of a wait, `polls` being the polls so far. With a core per rank on
// the host: none (busy polling keeps nonblocking MPI transfers moving) for a fraction of a second,
// then a sleep. With more ranks than cores (tests run 8 ranks on 2): first it yields the core,
// later it sleeps, so that the rank it waits for can run.
void pause_between_polls(int polls);

// Whether this process polls as a rank with a core of its own (busy polling) or as one of more
// ranks than cores (yield, then sleep). MpiWorld sets it from the ranks and cores of the host;
// the microbenchmarks set it for the ranks of a group that fits the cores while the others wait.
void set_core_per_rank(bool own_core);
bool core_per_rank();

}  // namespace planner::exec
