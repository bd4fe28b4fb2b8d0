// Backend: one rank's device and communicators, and the processes of the job (World).
//
//   World    the ranks of a job and an out-of-band channel between them (MPI, also for a cuda
//            backend, which bootstraps NCCL over it). The executor uses it outside the step
//            program: gathering measurements and errors at rank 0, agreeing to stop. Every call is
//            bounded.
//   Backend  a Device (device.hpp) plus the Communicators (communicator.hpp) of this rank's groups,
//            and the tickets of started communication: test, wait, order against device streams,
//            time. "cpu" is host memory + OpenBLAS + Open MPI; a "cuda" backend plugs in here.
//
// Waits never hang: each takes a Deadline and fails with StatusCode::kTimeout naming the call, its
// group and what it was for ("MPI_Iallreduce on tp [2,3] for L1.mb0.fwd.tp_reduce_attn did not
// complete within 60 s").
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/exec/communicator.hpp"
#include "planner/exec/device.hpp"

namespace planner::exec {

class World {
 public:
  virtual ~World() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks of this job on this host, and this rank's index among them.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual const std::string& host() const = 0;

  // Rank 0 receives every rank's bytes (index = rank); the entry of a rank that has not reported
  // by the deadline is empty (nullopt), so rank 0 can name it. The others receive an empty vector.
  virtual Result<std::vector<std::optional<std::string>>> gather(std::string_view mine,
                                                                 Deadline deadline) = 0;
  // Every rank receives rank 0's bytes (`data` is ignored elsewhere).
  virtual Result<std::string> broadcast(std::string_view data, Deadline deadline) = 0;
  // Ends every process of the job with `exit_code` (after a failure others may be stuck in).
  [[noreturn]] virtual void abort(int exit_code) = 0;
  // Why rank `rank` will not answer, when that is known without waiting: its process is on this
  // host and gone ("rank 1's process (pid 4242) is gone") or stopped. nullopt when it runs or
  // cannot be checked (another host). gather() and broadcast() stop waiting for such a rank.
  virtual std::optional<std::string> peer_problem(int rank) const {
    (void)rank;
    return std::nullopt;
  }
};

// A group this rank takes part in, along the given axes; `ranks` empty when it is in none. Every
// rank requests the same sequence of axes names (see Backend::create_communicator).
struct GroupRequest {
  std::string axes;
  std::vector<int> ranks;  // global ranks in group order, this rank among them
};

struct BackendOptions {
  int blas_threads = 0;       // cpu: OpenBLAS threads; 0 = the host's cores / ranks on the host
  std::int64_t capacity = 0;  // device memory a rank may use (bytes); 0 = no limit
  // cpu: accept bf16 and fp16 plans by emulating 16-bit storage (CpuDevice), for testing the
  // mixed-precision path without a GPU.
  bool emulate_low_precision = false;
  // cuda: the bound of the backend's own waits (communicator set-up, synchronisation, host
  // copies), as RunnerOptions::timeout_s bounds the runner's.
  double timeout_s = 60;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  virtual Device& device() = 0;
  virtual World& world() = 0;

  // A communicator for `group`. Collective over the world: every rank calls it for the same axes in
  // the same order; ranks outside the group pass empty `ranks` and get nullptr.
  virtual Result<std::unique_ptr<Communicator>> create_communicator(const GroupRequest& group) = 0;
  // Every rank of the world (member i is global rank i): sends and receives.
  virtual Communicator& world_communicator() = 0;

  // True once `ticket` has completed (and records when). Progresses all started operations.
  virtual Result<bool> test(Ticket ticket) = 0;
  // Progresses all started operations without waiting, recording completions.
  virtual Status poll() = 0;
  // Waits for `ticket` on the host.
  virtual Status wait(Ticket ticket, Deadline deadline) = 0;
  // Orders work issued later on the device's current stream after `ticket` (a host-synchronous
  // device waits here; a GPU backend makes the stream wait on the operation's event).
  virtual Status stream_wait(Ticket ticket, Deadline deadline) = 0;
  virtual Status wait_all(Deadline deadline) = 0;
  // When the operation started and completed, as device events (read them after the device
  // synchronised and the ticket completed).
  virtual std::pair<Event, Event> events(Ticket ticket) const = 0;
  // Forgets every ticket; all must have completed. Once per step.
  virtual Status release_tickets() = 0;
};

// Names of the backends this build has ("cpu", and "cuda" when built with CUDA).
std::vector<std::string> backend_names();
// StatusCode::kInvalidInput for an unknown name (listing the known ones), kUnavailable for a
// backend this build lacks.
Status check_backend_name(std::string_view name);
// check_backend_name, then whether this machine can run the backend: kUnavailable for "cuda"
// without a usable GPU (no device or no driver), saying that the cuda backend needs one.
Status check_backend_available(std::string_view name);
Result<std::unique_ptr<Backend>> make_backend(std::string_view name, World& world,
                                              const BackendOptions& options);

}  // namespace planner::exec
