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
// between polls as a Poller does. On a failure it calls work.abort() once and returns
// the failure with context "<what>"; when the deadline passes it aborts likewise and returns
// kTimeout "<what> did not complete within <timeout_s> s". Never calls abort() on success.
Status wait_bounded(AsyncWork& work, Deadline deadline, std::string_view what, double timeout_s);

// The pauses of one wait between its polls. With a core per rank on the host: none (busy polling
// keeps nonblocking MPI transfers moving) for a fraction of a second, then a sleep. With more ranks
// than cores (tests run 8 ranks on 2), nonblocking MPI still moves data only inside a poll, but a
// polling rank takes a core from the ranks that compute. So a waiting rank yields the core between
// polls while the host has a core no rank computes on (every rank of a data-parallel gradient
// reduction waits in it: polling moves the data), and otherwise yields a few times, then sleeps,
// so that the ranks it waits for can compute (a pipeline stage waiting on the other). A rank
// counts as waiting on its host from its first pause until the wait ends (the ranks of a job on a
// host share the count; without it, a rank counts every other rank as computing).
class Poller {
 public:
  Poller() = default;
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;
  ~Poller();
  // Call after a poll that found the wait unfinished.
  void pause();

 private:
  int polls_ = 0;
  bool counted_ = false;
};

// Shares the count of waiting ranks among the `local_ranks` ranks of a job on this host, at
// `counter` (an int in memory every one of them maps; nullptr: not shared). MpiWorld sets it.
void share_host_waits(void* counter, int local_ranks);

// The job's ranks on this host that wait now, as Pollers count them; -1 when it is not shared.
int host_waiting_ranks();

// Whether this process polls as a rank with a core of its own (busy polling) or as one of more
// ranks than cores (yield, then sleep). MpiWorld sets it from the ranks and cores of the host;
// the microbenchmarks set it for the ranks of a group that fits the cores while the others wait.
void set_core_per_rank(bool own_core);
bool core_per_rank();

// This copy of the library's host wait bookkeeping (opaque), and a way for another copy of it in
// the same process (the cuda backend's module carries its own, cuda_module.hpp) to keep its books
// there instead: every Poller of the process then counts in one place.
void* host_wait_state();
void use_host_wait_state(void* state);

}  // namespace planner::exec
