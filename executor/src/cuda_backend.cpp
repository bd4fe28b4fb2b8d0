// The cuda backend: CudaDevice for tensors and kernels, NCCL for communication, MPI (through the
// World) to bootstrap NCCL.
//
// Communicators. One NCCL communicator per rank-grid group (and one over the world for sends and
// receives), created non-blocking (ncclCommInitRankConfig, blocking = 0) from an id that the
// group's member 0 generates and the World carries (comm_bootstrap.hpp), then polled to readiness
// under the deadline. Each communicator has its own CUDA stream: an operation's stream first waits
// for an event recorded on the issuing program stream (the data is ready), then runs the NCCL
// call between two timing events, so collectives overlap computation as the simulator assumes and
// every operation is timed on the device. Consumers order themselves after it with
// cudaStreamWaitEvent (Backend::stream_wait), never by blocking the host.
//
// Sends and receives. NCCL matches them by order between two ranks (no tags), and a send blocks
// inside its kernel until the peer posts the matching receive, so rings (context parallelism) and
// pipelines whose ranks send before they receive would deadlock as separate operations. A
// communicator therefore holds its sends and receives back and issues them together, in program
// order, in one ncclGroupStart/ncclGroupEnd when something depends on one of them (a wait, a
// stream wait), before its next collective, and before the host blocks (CudaDevice::Watch).
//
// Failures. Every CUDA and NCCL call is checked and becomes a Status naming the call (and NCCL's
// last error text). Host waits poll CUDA events and ncclCommGetAsyncError against the deadline;
// an asynchronous error or a timeout aborts every communicator (ncclCommAbort), which releases
// kernels blocked on a dead peer, so a failure never hangs the job.
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda_device.hpp"
#include "cuda_module.hpp"
#include "planner/exec/backend.hpp"
#include "planner/exec/bounded_wait.hpp"
#include "planner/exec/comm_bootstrap.hpp"
#include "planner/kernels/cuda/check.hpp"
#include "planner/kernels/device_info.hpp"

namespace planner::exec {
namespace {

namespace kc = kernels::cuda;

static_assert(kCommIdBytes == NCCL_UNIQUE_ID_BYTES, "CommId must hold an ncclUniqueId");

Status nccl_status(ncclResult_t r, std::string_view call, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess || r == ncclInProgress) return Status::ok();
  std::string message = std::string(call) + ": " + ncclGetErrorString(r);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') message += std::string(" (") + last + ")";
  }
  return Status::runtime(std::move(message));
}

ncclDataType_t nccl_type(DType type) {
  switch (type) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kByte:
      return ncclUint8;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kFloat16:
      return ncclFloat16;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  return op == ReduceOp::kMax ? ncclMax : ncclSum;
}

std::string group_text(const std::string& axes, const std::vector<int>& ranks) {
  std::string s = axes + " [";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += ",";
    if (i == 8 && ranks.size() > 10) {
      s += "... " + std::to_string(ranks.size()) + " ranks";
      break;
    }
    s += std::to_string(ranks[i]);
  }
  return s + "]";
}

// A non-blocking communicator's pending state (initialisation, finalisation, or an enqueue that
// returned ncclInProgress), polled until it settles. `on_abort` ends the communicator (and, for
// one in use, every other: CudaBackend::abort), exactly once.
class CommStateWork final : public AsyncWork {
 public:
  CommStateWork(ncclComm_t comm, std::string_view call, std::function<void()> on_abort)
      : comm_(comm), call_(call), on_abort_(std::move(on_abort)) {}
  Result<bool> done() override {
    ncclResult_t state = ncclSuccess;
    PLANNER_RETURN_IF_ERROR(
        nccl_status(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError", comm_));
    if (state == ncclInProgress) return false;
    PLANNER_RETURN_IF_ERROR(nccl_status(state, call_, comm_));
    return true;
  }
  Status health() override { return Status::ok(); }
  void abort() override { on_abort_(); }

 private:
  ncclComm_t comm_;
  std::string call_;
  std::function<void()> on_abort_;
};

class CudaBackend;

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(CudaBackend& backend, ncclComm_t comm, kc::CudaStream stream, std::string axes,
                   std::vector<int> ranks, int rank);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  const std::string& axes() const override { return axes_; }
  const std::vector<int>& ranks() const override { return ranks_; }
  int rank() const override { return rank_; }
  const std::string& label() const { return label_; }

  Result<Ticket> all_reduce(void* buf, std::int64_t count, DType type, ReduceOp op,
                            std::string_view what) override;
  Result<Ticket> all_gather(const void* send, void* recv, std::int64_t count, DType type,
                            std::string_view what) override;
  Result<Ticket> reduce_scatter(const void* send, void* recv, std::int64_t count, DType type,
                                ReduceOp op, std::string_view what) override;
  Result<Ticket> all_to_all_v(const void* send, const std::vector<std::int64_t>& send_counts,
                              void* recv, const std::vector<std::int64_t>& recv_counts, DType type,
                              std::string_view what) override;
  Result<Ticket> all_to_all(const void* send, void* recv, std::int64_t count, DType type,
                            std::string_view what) override;
  Result<Ticket> broadcast(void* buf, std::int64_t count, DType type, int root,
                           std::string_view what) override;
  Result<Ticket> send(const void* buf, std::int64_t count, DType type, int peer, std::uint32_t tag,
                      std::string_view what) override;
  Result<Ticket> recv(void* buf, std::int64_t count, DType type, int peer, std::uint32_t tag,
                      std::string_view what) override;

  // Issues the held sends and receives as one NCCL group.
  Status flush();
  bool holds_p2p() const { return !held_.empty(); }
  Status health();
  void abort();
  bool aborted() const { return aborted_; }

 private:
  struct HeldP2p {
    bool send = false;
    void* buf = nullptr;
    std::size_t count = 0;
    ncclDataType_t type = ncclUint8;
    int peer = 0;
    Event ready;
    Ticket ticket;
  };

  // Orders this communicator's stream after the current program stream; returns the event.
  Result<Event> after_current();
  // Runs `enqueue` on the communicator's stream between two timing events; a ticket for it.
  Result<Ticket> run(const char* call, std::string_view what,
                     const std::function<ncclResult_t(cudaStream_t)>& enqueue);
  Result<Ticket> hold(bool is_send, void* buf, std::int64_t count, DType type, int peer,
                      std::string_view what);
  // Waits (bounded) while the non-blocking communicator finishes enqueueing `call`.
  Status settle(ncclResult_t result, const char* call);

  CudaBackend& backend_;
  ncclComm_t comm_;
  kc::CudaStream stream_;
  std::string axes_;
  std::vector<int> ranks_;
  int rank_;
  std::string label_;
  std::vector<HeldP2p> held_;
  bool aborted_ = false;
};

class CudaBackend final : public Backend, public CudaDevice::Watch {
 public:
  CudaBackend(World& world, std::unique_ptr<CudaDevice> device, double timeout_s)
      : world_(world), device_(std::move(device)), timeout_s_(timeout_s) {
    device_->set_watch(this);
  }
  ~CudaBackend() override {
    world_comm_.reset();
    device_->set_watch(nullptr);
  }

  // Creates the world communicator (collective).
  Status init();

  std::string_view name() const override { return "cuda"; }
  Device& device() override { return *device_; }
  World& world() override { return world_; }
  Result<std::unique_ptr<Communicator>> create_communicator(const GroupRequest& group) override;
  Communicator& world_communicator() override { return *world_comm_; }

  Result<bool> test(Ticket ticket) override;
  Status poll() override;
  Status wait(Ticket ticket, Deadline deadline) override;
  Status stream_wait(Ticket ticket, Deadline deadline) override;
  Status wait_all(Deadline deadline) override;
  std::pair<Event, Event> events(Ticket ticket) const override {
    const TicketState& t = tickets_[ticket.id];
    return {t.start, t.end};
  }
  Status release_tickets() override;

  // CudaDevice::Watch
  Status before_host_wait() override;
  Status health() override;
  void abort() override;

  CudaDevice& cuda() { return *device_; }
  double timeout_s() const { return timeout_s_; }
  void add(NcclCommunicator* comm) { comms_.push_back(comm); }
  void remove(NcclCommunicator* comm) { std::erase(comms_, comm); }
  // A started operation (events known) or a held one (events set when it is issued).
  Ticket started(const NcclCommunicator& comm, const char* call, std::string_view what, Event start,
                 Event end);
  Ticket held(const NcclCommunicator& comm, const char* call, std::string_view what);
  void issued(Ticket ticket, Event start, Event end);
  Status check_usable() const;

 private:
  struct TicketState {
    Event start;
    Event end;
    bool done = false;
    bool held = false;
    const NcclCommunicator* comm = nullptr;
    const char* call = "";
    std::string_view what;
  };
  Result<std::unique_ptr<NcclCommunicator>> create(const GroupRequest& group,
                                                   const Status& device_failure);
  // Completes `t` when its end event has been reached (false while not).
  Result<bool> query(TicketState& t);
  Status flush_all();
  std::string describe(const TicketState& t) const;

  World& world_;
  std::unique_ptr<CudaDevice> device_;
  double timeout_s_;
  std::unique_ptr<NcclCommunicator> world_comm_;
  std::vector<NcclCommunicator*> comms_;
  std::vector<TicketState> tickets_;
  std::vector<std::uint32_t> active_;
  bool aborted_ = false;
};

// ---- NcclCommunicator

NcclCommunicator::NcclCommunicator(CudaBackend& backend, ncclComm_t comm, kc::CudaStream stream,
                                   std::string axes, std::vector<int> ranks, int rank)
    : backend_(backend),
      comm_(comm),
      stream_(std::move(stream)),
      axes_(std::move(axes)),
      ranks_(std::move(ranks)),
      rank_(rank),
      label_(group_text(axes_, ranks_)) {
  backend_.add(this);
  backend_.cuda().add_stream(stream_.get());
}

NcclCommunicator::~NcclCommunicator() {
  backend_.remove(this);
  backend_.cuda().remove_stream(stream_.get());
  if (aborted_) return;
  // Finalise (flushes issued operations) under the deadline, then destroy; abort if that fails.
  const ncclResult_t r = ncclCommFinalize(comm_);
  CommStateWork work(comm_, "ncclCommFinalize", [this] { abort(); });
  if (r == ncclSuccess || r == ncclInProgress) {
    if (wait_bounded(work, Deadline::after(backend_.timeout_s()), "ncclCommFinalize on " + label_,
                     backend_.timeout_s())
            .is_ok()) {
      (void)ncclCommDestroy(comm_);
    }
  } else {
    abort();
  }
}

Status NcclCommunicator::health() {
  if (aborted_) return Status::ok();
  ncclResult_t state = ncclSuccess;
  PLANNER_RETURN_IF_ERROR(
      nccl_status(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError", comm_));
  if (state == ncclInProgress) return Status::ok();
  return nccl_status(state, "NCCL on " + label_ + " (asynchronous error)", comm_);
}

void NcclCommunicator::abort() {
  if (aborted_) return;
  aborted_ = true;
  (void)ncclCommAbort(comm_);
}

Status NcclCommunicator::settle(ncclResult_t result, const char* call) {
  PLANNER_RETURN_IF_ERROR(nccl_status(result, std::string(call) + " on " + label_, comm_));
  if (result != ncclInProgress) return Status::ok();
  CommStateWork work(comm_, call, [this] { backend_.abort(); });
  return wait_bounded(work, Deadline::after(backend_.timeout_s()),
                      std::string(call) + " on " + label_, backend_.timeout_s());
}

Result<Event> NcclCommunicator::after_current() {
  CudaDevice& dev = backend_.cuda();
  cudaStream_t src = dev.current();
  PLANNER_RETURN_IF_ERROR(dev.status());
  const Event ready = dev.record_on(src);
  PLANNER_RETURN_IF_ERROR(dev.status());
  return ready;
}

Result<Ticket> NcclCommunicator::run(const char* call, std::string_view what,
                                     const std::function<ncclResult_t(cudaStream_t)>& enqueue) {
  PLANNER_RETURN_IF_ERROR(backend_.check_usable());
  PLANNER_RETURN_IF_ERROR(flush());  // this communicator's earlier sends and receives go first
  CudaDevice& dev = backend_.cuda();
  PLANNER_ASSIGN_OR_RETURN(const Event ready, after_current());
  PLANNER_RETURN_IF_ERROR(kc::cuda_status(cudaStreamWaitEvent(stream_.get(), dev.event(ready), 0),
                                          "cudaStreamWaitEvent"));
  const Event start = dev.record_on(stream_.get());
  PLANNER_RETURN_IF_ERROR(settle(enqueue(stream_.get()), call));
  const Event end = dev.record_on(stream_.get());
  dev.note_work(stream_.get());
  PLANNER_RETURN_IF_ERROR(dev.status());
  return backend_.started(*this, call, what, start, end);
}

Result<Ticket> NcclCommunicator::all_reduce(void* buf, std::int64_t count, DType type, ReduceOp op,
                                            std::string_view what) {
  return run("ncclAllReduce", what, [&](cudaStream_t s) {
    return ncclAllReduce(buf, buf, static_cast<std::size_t>(count), nccl_type(type), nccl_op(op),
                         comm_, s);
  });
}

Result<Ticket> NcclCommunicator::all_gather(const void* send, void* recv, std::int64_t count,
                                            DType type, std::string_view what) {
  // NCCL is in place when send == recv + rank x count, the convention of communicator.hpp.
  return run("ncclAllGather", what, [&](cudaStream_t s) {
    return ncclAllGather(send, recv, static_cast<std::size_t>(count), nccl_type(type), comm_, s);
  });
}

Result<Ticket> NcclCommunicator::reduce_scatter(const void* send, void* recv, std::int64_t count,
                                                DType type, ReduceOp op, std::string_view what) {
  return run("ncclReduceScatter", what, [&](cudaStream_t s) {
    return ncclReduceScatter(send, recv, static_cast<std::size_t>(count), nccl_type(type),
                             nccl_op(op), comm_, s);
  });
}

Result<Ticket> NcclCommunicator::all_to_all(const void* send, void* recv, std::int64_t count,
                                            DType type, std::string_view what) {
  // NCCL has no all-to-all: a group of one send and one receive per member.
  const std::size_t bytes = static_cast<std::size_t>(count * dtype_bytes(type));
  return run("ncclSend/ncclRecv (all-to-all)", what, [&](cudaStream_t s) {
    ncclResult_t r = ncclGroupStart();
    for (int j = 0; j < size() && (r == ncclSuccess || r == ncclInProgress); ++j) {
      r = ncclSend(static_cast<const std::byte*>(send) + j * bytes, static_cast<std::size_t>(count),
                   nccl_type(type), j, comm_, s);
      if (r == ncclSuccess || r == ncclInProgress) {
        r = ncclRecv(static_cast<std::byte*>(recv) + j * bytes, static_cast<std::size_t>(count),
                     nccl_type(type), j, comm_, s);
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    return r == ncclSuccess || r == ncclInProgress ? end : r;
  });
}

Result<Ticket> NcclCommunicator::all_to_all_v(const void* send,
                                              const std::vector<std::int64_t>& send_counts,
                                              void* recv,
                                              const std::vector<std::int64_t>& recv_counts,
                                              DType type, std::string_view what) {
  const auto n = static_cast<std::size_t>(size());
  if (send_counts.size() != n || recv_counts.size() != n) {
    return Status::internal("all-to-all-v for " + std::string(what) + " on " + label_ +
                            ": counts for " + std::to_string(send_counts.size()) + " and " +
                            std::to_string(recv_counts.size()) + " members, the group has " +
                            std::to_string(n));
  }
  const std::int64_t element = dtype_bytes(type);
  return run("ncclSend/ncclRecv (all-to-all-v)", what, [&](cudaStream_t s) {
    ncclResult_t r = ncclGroupStart();
    std::int64_t sent = 0, received = 0;
    for (std::size_t j = 0; j < n && (r == ncclSuccess || r == ncclInProgress); ++j) {
      const int peer = static_cast<int>(j);
      if (send_counts[j] > 0) {
        r = ncclSend(static_cast<const std::byte*>(send) + sent * element,
                     static_cast<std::size_t>(send_counts[j]), nccl_type(type), peer, comm_, s);
      }
      if (recv_counts[j] > 0 && (r == ncclSuccess || r == ncclInProgress)) {
        r = ncclRecv(static_cast<std::byte*>(recv) + received * element,
                     static_cast<std::size_t>(recv_counts[j]), nccl_type(type), peer, comm_, s);
      }
      sent += send_counts[j];
      received += recv_counts[j];
    }
    const ncclResult_t end = ncclGroupEnd();
    return r == ncclSuccess || r == ncclInProgress ? end : r;
  });
}

Result<Ticket> NcclCommunicator::broadcast(void* buf, std::int64_t count, DType type, int root,
                                           std::string_view what) {
  if (root < 0 || root >= size()) {
    return Status::internal("broadcast root " + std::to_string(root) + " of " + std::string(what) +
                            " is not a member of " + label_);
  }
  return run("ncclBroadcast", what, [&](cudaStream_t s) {
    return ncclBroadcast(buf, buf, static_cast<std::size_t>(count), nccl_type(type), root, comm_,
                         s);
  });
}

Result<Ticket> NcclCommunicator::hold(bool is_send, void* buf, std::int64_t count, DType type,
                                      int peer, std::string_view what) {
  PLANNER_RETURN_IF_ERROR(backend_.check_usable());
  if (peer < 0 || peer >= size()) {
    return Status::internal("peer " + std::to_string(peer) + " of " + std::string(what) +
                            " is not a member of " + label_);
  }
  HeldP2p h;
  h.send = is_send;
  h.buf = buf;
  h.count = static_cast<std::size_t>(count);
  h.type = nccl_type(type);
  h.peer = peer;
  PLANNER_ASSIGN_OR_RETURN(h.ready, after_current());
  h.ticket = backend_.held(*this, is_send ? "ncclSend" : "ncclRecv", what);
  held_.push_back(h);
  return h.ticket;
}

Result<Ticket> NcclCommunicator::send(const void* buf, std::int64_t count, DType type, int peer,
                                      std::uint32_t, std::string_view what) {
  // Matched by order, not by tag: the step program issues each pair's messages in the same order
  // on both sides (see the header).
  return hold(true, const_cast<void*>(buf), count, type, peer, what);
}

Result<Ticket> NcclCommunicator::recv(void* buf, std::int64_t count, DType type, int peer,
                                      std::uint32_t, std::string_view what) {
  return hold(false, buf, count, type, peer, what);
}

Status NcclCommunicator::flush() {
  if (held_.empty()) return Status::ok();
  std::vector<HeldP2p> ops;
  ops.swap(held_);
  CudaDevice& dev = backend_.cuda();
  for (const HeldP2p& h : ops) {
    PLANNER_RETURN_IF_ERROR(kc::cuda_status(
        cudaStreamWaitEvent(stream_.get(), dev.event(h.ready), 0), "cudaStreamWaitEvent"));
  }
  const Event start = dev.record_on(stream_.get());
  ncclResult_t r = ncclGroupStart();
  for (const HeldP2p& h : ops) {
    if (r != ncclSuccess && r != ncclInProgress) break;
    r = h.send ? ncclSend(h.buf, h.count, h.type, h.peer, comm_, stream_.get())
               : ncclRecv(h.buf, h.count, h.type, h.peer, comm_, stream_.get());
  }
  const ncclResult_t end_result = ncclGroupEnd();
  PLANNER_RETURN_IF_ERROR(
      settle(r == ncclSuccess || r == ncclInProgress ? end_result : r, "ncclSend/ncclRecv group"));
  const Event end = dev.record_on(stream_.get());
  dev.note_work(stream_.get());
  PLANNER_RETURN_IF_ERROR(dev.status());
  for (const HeldP2p& h : ops)
    backend_.issued(h.ticket, start, end);
  return Status::ok();
}

// ---- CudaBackend

Result<std::unique_ptr<NcclCommunicator>> CudaBackend::create(const GroupRequest& group,
                                                              const Status& device_failure) {
  const Deadline deadline = Deadline::after(timeout_s_);
  auto generate = []() -> Result<CommId> {
    ncclUniqueId id;
    PLANNER_RETURN_IF_ERROR(nccl_status(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    CommId out{};
    std::memcpy(out.data(), id.internal, kCommIdBytes);
    return out;
  };
  PLANNER_ASSIGN_OR_RETURN(std::optional<CommId> id,
                           exchange_comm_id(world_, group, generate, deadline, device_failure));
  if (!id) return std::unique_ptr<NcclCommunicator>();
  const auto it = std::find(group.ranks.begin(), group.ranks.end(), world_.rank());
  const int rank = static_cast<int>(it - group.ranks.begin());
  const std::string label = group_text(group.axes, group.ranks);
  ncclUniqueId unique;
  std::memcpy(unique.internal, id->data(), kCommIdBytes);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // initialisation and enqueues return at once; we poll under the deadline
  ncclComm_t comm = nullptr;
  const ncclResult_t r =
      ncclCommInitRankConfig(&comm, static_cast<int>(group.ranks.size()), unique, rank, &config);
  PLANNER_RETURN_IF_ERROR(nccl_status(r, "ncclCommInitRankConfig on " + label, comm));
  CommStateWork work(comm, "ncclCommInitRankConfig on " + label,
                     [comm] { (void)ncclCommAbort(comm); });
  PLANNER_RETURN_IF_ERROR(
      wait_bounded(work, deadline, "ncclCommInitRankConfig on " + label, timeout_s_));
  Result<kc::CudaStream> stream = kc::CudaStream::create();
  if (!stream.is_ok()) {
    (void)ncclCommAbort(comm);
    return stream.status();
  }
  return std::make_unique<NcclCommunicator>(*this, comm, std::move(stream).value(), group.axes,
                                            group.ranks, rank);
}

GroupRequest world_group(const World& world) {
  GroupRequest all;
  all.axes = "world";
  for (int r = 0; r < world.size(); ++r)
    all.ranks.push_back(r);
  return all;
}

Status CudaBackend::init() {
  PLANNER_ASSIGN_OR_RETURN(world_comm_, create(world_group(world_), Status::ok()));
  return Status::ok();
}

Result<std::unique_ptr<Communicator>> CudaBackend::create_communicator(const GroupRequest& group) {
  PLANNER_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> comm, create(group, Status::ok()));
  return std::unique_ptr<Communicator>(std::move(comm));
}

Status CudaBackend::check_usable() const {
  if (aborted_) {
    return Status::runtime("the NCCL communicators were aborted after an earlier failure");
  }
  return device_->status();
}

Ticket CudaBackend::started(const NcclCommunicator& comm, const char* call, std::string_view what,
                            Event start, Event end) {
  TicketState t;
  t.start = start;
  t.end = end;
  t.comm = &comm;
  t.call = call;
  t.what = what;
  tickets_.push_back(t);
  const auto id = static_cast<std::uint32_t>(tickets_.size() - 1);
  active_.push_back(id);
  return Ticket{id};
}

Ticket CudaBackend::held(const NcclCommunicator& comm, const char* call, std::string_view what) {
  const Ticket t = started(comm, call, what, Event{}, Event{});
  tickets_[t.id].held = true;
  return t;
}

void CudaBackend::issued(Ticket ticket, Event start, Event end) {
  TicketState& t = tickets_[ticket.id];
  t.start = start;
  t.end = end;
  t.held = false;
}

std::string CudaBackend::describe(const TicketState& t) const {
  return std::string(t.call) + " on " + t.comm->label() + " for " + std::string(t.what) +
         " (rank " + std::to_string(world_.rank()) + ")";
}

Result<bool> CudaBackend::query(TicketState& t) {
  if (t.done) return true;
  if (t.held) return false;
  const cudaError_t e = cudaEventQuery(device_->event(t.end));
  if (e == cudaErrorNotReady) return false;
  if (e != cudaSuccess) {
    abort();
    return kc::cuda_status(e, "cudaEventQuery").with_context(describe(t));
  }
  t.done = true;
  return true;
}

Status CudaBackend::poll() {
  PLANNER_RETURN_IF_ERROR(health());
  for (std::size_t i = 0; i < active_.size();) {
    PLANNER_ASSIGN_OR_RETURN(const bool done, query(tickets_[active_[i]]));
    if (done) {
      active_[i] = active_.back();
      active_.pop_back();
    } else {
      ++i;
    }
  }
  return Status::ok();
}

Result<bool> CudaBackend::test(Ticket ticket) {
  PLANNER_RETURN_IF_ERROR(poll());
  return tickets_[ticket.id].done;
}

Status CudaBackend::flush_all() {
  for (NcclCommunicator* c : comms_) {
    if (c->holds_p2p()) PLANNER_RETURN_IF_ERROR(c->flush());
  }
  return Status::ok();
}

Status CudaBackend::wait(Ticket ticket, Deadline deadline) {
  PLANNER_RETURN_IF_ERROR(flush_all());
  TicketState& t = tickets_[ticket.id];
  if (t.done) return Status::ok();
  class TicketWork final : public AsyncWork {
   public:
    TicketWork(CudaBackend& b, TicketState& t) : b_(b), t_(t) {}
    Result<bool> done() override { return b_.query(t_); }
    Status health() override { return b_.health(); }
    void abort() override { b_.abort(); }

   private:
    CudaBackend& b_;
    TicketState& t_;
  } work(*this, t);
  return wait_bounded(work, deadline, describe(t), timeout_s_);
}

Status CudaBackend::stream_wait(Ticket ticket, Deadline) {
  PLANNER_RETURN_IF_ERROR(flush_all());
  const TicketState& t = tickets_[ticket.id];
  if (t.done) return Status::ok();
  cudaStream_t s = device_->current();
  PLANNER_RETURN_IF_ERROR(device_->status());
  return kc::cuda_status(cudaStreamWaitEvent(s, device_->event(t.end), 0), "cudaStreamWaitEvent")
      .with_context(describe(t));
}

Status CudaBackend::wait_all(Deadline deadline) {
  PLANNER_RETURN_IF_ERROR(flush_all());
  const std::vector<std::uint32_t> open = active_;
  for (std::uint32_t id : open)
    PLANNER_RETURN_IF_ERROR(wait(Ticket{id}, deadline));
  return poll();
}

Status CudaBackend::release_tickets() {
  PLANNER_RETURN_IF_ERROR(poll());
  if (!active_.empty()) {
    return Status::internal(std::to_string(active_.size()) +
                            " communication operations still running at the end of the step, "
                            "the first " +
                            describe(tickets_[active_.front()]));
  }
  tickets_.clear();
  return Status::ok();
}

Status CudaBackend::before_host_wait() {
  return flush_all();
}

Status CudaBackend::health() {
  for (NcclCommunicator* c : comms_) {
    const Status st = c->health();
    if (!st.is_ok()) {
      abort();
      return st;
    }
  }
  return Status::ok();
}

void CudaBackend::abort() {
  aborted_ = true;
  for (NcclCommunicator* c : comms_)
    c->abort();
}

}  // namespace

Result<std::unique_ptr<Backend>> make_cuda_backend(World& world, const BackendOptions& options) {
  // A rank that cannot use its GPU still joins the world communicator's set-up round, carrying
  // its failure, so that every rank fails with the reason instead of waiting for it.
  const kernels::CudaInventory inventory = kernels::cuda_inventory();
  Status failure = cuda_needs_gpu(inventory);
  const int local = world.local_rank();
  if (failure.is_ok() && local >= static_cast<int>(inventory.devices.size())) {
    failure = Status::unavailable("rank " + std::to_string(world.rank()) + " is local rank " +
                                  std::to_string(local) + " on " + world.host() + ", which has " +
                                  std::to_string(inventory.devices.size()) +
                                  " GPU(s): the cuda backend runs one rank per GPU");
  }
  std::unique_ptr<CudaDevice> device;
  if (failure.is_ok()) {
    Result<std::unique_ptr<CudaDevice>> created =
        CudaDevice::create(local, options.capacity, options.timeout_s);
    if (created.is_ok()) {
      device = std::move(created).value();
    } else {
      failure = created.status();
    }
  }
  if (!failure.is_ok()) {
    auto none = []() -> Result<CommId> { return Status::internal("no id from a failed rank"); };
    return exchange_comm_id(world, world_group(world), none, Deadline::after(options.timeout_s),
                            failure)
        .status();
  }
  auto backend = std::make_unique<CudaBackend>(world, std::move(device), options.timeout_s);
  PLANNER_RETURN_IF_ERROR(backend->init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace planner::exec
