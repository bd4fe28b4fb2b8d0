// The cpu backend: CpuDevice for tensors and kernels, Open MPI for communication. Every operation
// is a nonblocking MPI call (MPI_Iallreduce, MPI_Isend, ...) whose request is polled against a
// deadline; a ticket's completion time is when a poll first saw it complete.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "mpi_common.hpp"
#include "planner/exec/backend.hpp"
#include "planner/exec/cpu_device.hpp"
#include "planner/kernels/cpu/convert.hpp"

namespace planner::exec {
namespace {

class CpuBackend;

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

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(CpuBackend& backend, MPI_Comm comm, std::string axes, std::vector<int> ranks,
                  int rank)
      : backend_(backend),
        comm_(comm),
        axes_(std::move(axes)),
        ranks_(std::move(ranks)),
        rank_(rank),
        label_(group_text(axes_, ranks_)) {
    void* value = nullptr;
    int found = 0;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &value, &found);
    if (found && value != nullptr) tag_ub_ = *static_cast<int*>(value);
  }
  ~MpiCommunicator() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

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

 private:
  Result<int> checked_count(std::int64_t count, const char* call, std::string_view what) const;
  Status check_tag(std::uint32_t tag, std::string_view what) const;
  Status check_peer(int peer, std::string_view what) const;

  CpuBackend& backend_;
  MPI_Comm comm_;
  std::string axes_;
  std::vector<int> ranks_;
  int rank_;
  std::string label_;
  long long tag_ub_ = 32767;  // the MPI standard's guaranteed minimum
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(MpiWorld& world, std::int64_t capacity, int blas_threads, bool emulate)
      : world_(world), device_(capacity, blas_threads, emulate) {}
  ~CpuBackend() override;

  Status init();

  std::string_view name() const override { return "cpu"; }
  Device& device() override { return device_; }
  World& world() override { return world_; }
  Result<std::unique_ptr<Communicator>> create_communicator(const GroupRequest& group) override;
  Communicator& world_communicator() override { return *world_comm_; }

  Result<bool> test(Ticket ticket) override;
  Status poll() override;
  Status wait(Ticket ticket, Deadline deadline) override;
  Status stream_wait(Ticket ticket, Deadline deadline) override { return wait(ticket, deadline); }
  Status wait_all(Deadline deadline) override;
  std::pair<Event, Event> events(Ticket ticket) const override {
    const TicketState& t = tickets_[ticket.id];
    return {t.start, t.end};
  }
  Status release_tickets() override;

  // Registers a started request. `copy_to` / `temp`: an in-place reduce-scatter's result, copied
  // from the temporary block to its place in the buffer on completion.
  Result<Ticket> started(int rc, MPI_Request request, const char* call, const MpiCommunicator& comm,
                         std::string_view what, Event start, void* copy_to = nullptr,
                         void* temp = nullptr, std::int64_t bytes = 0, std::vector<int> keep = {});
  CpuDevice& cpu_device() { return device_; }
  // The MPI reduction of `op` on `type`: MPI's own, or planner's for 16-bit floats.
  MPI_Op mpi_op(ReduceOp op, DType type) const;

 private:
  struct TicketState {
    MPI_Request request = MPI_REQUEST_NULL;
    Event start;
    Event end;
    bool done = false;
    const char* call = "";
    const MpiCommunicator* comm = nullptr;
    std::string_view what;
    void* copy_to = nullptr;
    void* temp = nullptr;
    std::int64_t bytes = 0;
    std::vector<int> keep;  // arrays MPI reads until completion (all-to-all-v counts)
  };
  Status complete(TicketState& t);
  // Polls until `ticket` (all tickets when null) has completed or the deadline passes.
  Status wait_until(const TicketState* ticket, Deadline deadline);
  Status timeout(const TicketState& t) const;

  MpiWorld& world_;
  CpuDevice device_;
  std::unique_ptr<MpiCommunicator> world_comm_;
  std::vector<TicketState> tickets_;
  std::vector<std::uint32_t> active_;
  // Sum and max of bf16 and fp16 (MPI has no 16-bit floating-point types): [bf16, fp16][sum, max].
  MPI_Op half_ops_[2][2] = {{MPI_OP_NULL, MPI_OP_NULL}, {MPI_OP_NULL, MPI_OP_NULL}};
};

// MPI user reductions on 16-bit floats: each pair is widened to fp32, combined and rounded back,
// as NCCL reduces bf16 and fp16.
template <float (*kToFloat)(std::uint16_t), std::uint16_t (*kFromFloat)(float), bool kMax>
void reduce_half(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = kToFloat(a[i]);
    const float y = kToFloat(b[i]);
    b[i] = kFromFloat(kMax ? (x > y || std::isnan(x) ? x : y) : x + y);
  }
}

// ---- MpiCommunicator

Result<int> MpiCommunicator::checked_count(std::int64_t count, const char* call,
                                           std::string_view what) const {
  if (count < 0 || count > std::numeric_limits<int>::max()) {
    return Status::invalid_input(std::string(call) + " on " + label_ + " for " + std::string(what) +
                                 ": " + std::to_string(count) + " elements exceed MPI's int count");
  }
  return static_cast<int>(count);
}

Status MpiCommunicator::check_tag(std::uint32_t tag, std::string_view what) const {
  if (static_cast<long long>(tag) > tag_ub_) {
    return Status::invalid_input("message tag " + std::to_string(tag) + " for " +
                                 std::string(what) + " exceeds this MPI's MPI_TAG_UB (" +
                                 std::to_string(tag_ub_) + ")");
  }
  return Status::ok();
}

Status MpiCommunicator::check_peer(int peer, std::string_view what) const {
  if (peer < 0 || peer >= size()) {
    return Status::internal("peer " + std::to_string(peer) + " of " + std::string(what) +
                            " is not a member of " + label_);
  }
  return Status::ok();
}

Result<Ticket> MpiCommunicator::all_reduce(void* buf, std::int64_t count, DType type, ReduceOp op,
                                           std::string_view what) {
  PLANNER_ASSIGN_OR_RETURN(int n, checked_count(count, "MPI_Iallreduce", what));
  const Event start = backend_.cpu_device().record();
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc =
      MPI_Iallreduce(MPI_IN_PLACE, buf, n, mpi_type(type), backend_.mpi_op(op, type), comm_, &req);
  return backend_.started(rc, req, "MPI_Iallreduce", *this, what, start);
}

Result<Ticket> MpiCommunicator::all_gather(const void* send, void* recv, std::int64_t count,
                                           DType type, std::string_view what) {
  PLANNER_ASSIGN_OR_RETURN(int n, checked_count(count, "MPI_Iallgather", what));
  const bool in_place =
      send == static_cast<const std::byte*>(recv) + rank_ * count * dtype_bytes(type);
  const Event start = backend_.cpu_device().record();
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc =
      in_place
          ? MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, mpi_type(type), comm_, &req)
          : MPI_Iallgather(send, n, mpi_type(type), recv, n, mpi_type(type), comm_, &req);
  return backend_.started(rc, req, "MPI_Iallgather", *this, what, start);
}

Result<Ticket> MpiCommunicator::reduce_scatter(const void* send, void* recv, std::int64_t count,
                                               DType type, ReduceOp op, std::string_view what) {
  PLANNER_ASSIGN_OR_RETURN(int n, checked_count(count, "MPI_Ireduce_scatter_block", what));
  const std::int64_t bytes = count * dtype_bytes(type);
  const bool in_place = recv == static_cast<const std::byte*>(send) + rank_ * bytes;
  void* temp = nullptr;
  if (in_place) {
    // MPI's in-place reduce-scatter leaves the result at the start of the buffer, not at this
    // member's block: reduce into a temporary block and copy it in place on completion.
    PLANNER_ASSIGN_OR_RETURN(temp, backend_.device().allocate(bytes, "reduce-scatter block"));
  }
  const Event start = backend_.cpu_device().record();
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Ireduce_scatter_block(send, in_place ? temp : recv, n, mpi_type(type),
                                           backend_.mpi_op(op, type), comm_, &req);
  return backend_.started(rc, req, "MPI_Ireduce_scatter_block", *this, what, start,
                          in_place ? recv : nullptr, temp, bytes);
}

Result<Ticket> MpiCommunicator::all_to_all(const void* send, void* recv, std::int64_t count,
                                           DType type, std::string_view what) {
  PLANNER_ASSIGN_OR_RETURN(int n, checked_count(count, "MPI_Ialltoall", what));
  const Event start = backend_.cpu_device().record();
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Ialltoall(send, n, mpi_type(type), recv, n, mpi_type(type), comm_, &req);
  return backend_.started(rc, req, "MPI_Ialltoall", *this, what, start);
}

Result<Ticket> MpiCommunicator::all_to_all_v(const void* send,
                                             const std::vector<std::int64_t>& send_counts,
                                             void* recv,
                                             const std::vector<std::int64_t>& recv_counts,
                                             DType type, std::string_view what) {
  const auto n = static_cast<std::size_t>(size());
  if (send_counts.size() != n || recv_counts.size() != n) {
    return Status::internal("MPI_Ialltoallv for " + std::string(what) + " on " + label() +
                            ": counts for " + std::to_string(send_counts.size()) + " and " +
                            std::to_string(recv_counts.size()) + " members, the group has " +
                            std::to_string(n));
  }
  // send counts | send displacements | receive counts | receive displacements
  std::vector<int> arrays(4 * n);
  std::int64_t sent = 0, received = 0;
  for (std::size_t i = 0; i < n; ++i) {
    PLANNER_ASSIGN_OR_RETURN(arrays[i], checked_count(send_counts[i], "MPI_Ialltoallv", what));
    PLANNER_ASSIGN_OR_RETURN(arrays[2 * n + i],
                             checked_count(recv_counts[i], "MPI_Ialltoallv", what));
    PLANNER_ASSIGN_OR_RETURN(arrays[n + i], checked_count(sent, "MPI_Ialltoallv", what));
    PLANNER_ASSIGN_OR_RETURN(arrays[3 * n + i], checked_count(received, "MPI_Ialltoallv", what));
    sent += send_counts[i];
    received += recv_counts[i];
  }
  const Event start = backend_.cpu_device().record();
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc =
      MPI_Ialltoallv(send, arrays.data(), arrays.data() + n, mpi_type(type), recv,
                     arrays.data() + 2 * n, arrays.data() + 3 * n, mpi_type(type), comm_, &req);
  return backend_.started(rc, req, "MPI_Ialltoallv", *this, what, start, nullptr, nullptr, 0,
                          std::move(arrays));
}

Result<Ticket> MpiCommunicator::broadcast(void* buf, std::int64_t count, DType type, int root,
                                          std::string_view what) {
  PLANNER_ASSIGN_OR_RETURN(int n, checked_count(count, "MPI_Ibcast", what));
  PLANNER_RETURN_IF_ERROR(check_peer(root, what));
  const Event start = backend_.cpu_device().record();
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Ibcast(buf, n, mpi_type(type), root, comm_, &req);
  return backend_.started(rc, req, "MPI_Ibcast", *this, what, start);
}

Result<Ticket> MpiCommunicator::send(const void* buf, std::int64_t count, DType type, int peer,
                                     std::uint32_t tag, std::string_view what) {
  PLANNER_ASSIGN_OR_RETURN(int n, checked_count(count, "MPI_Isend", what));
  PLANNER_RETURN_IF_ERROR(check_tag(tag, what));
  PLANNER_RETURN_IF_ERROR(check_peer(peer, what));
  const Event start = backend_.cpu_device().record();
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Isend(buf, n, mpi_type(type), peer, static_cast<int>(tag), comm_, &req);
  return backend_.started(rc, req, "MPI_Isend", *this, what, start);
}

Result<Ticket> MpiCommunicator::recv(void* buf, std::int64_t count, DType type, int peer,
                                     std::uint32_t tag, std::string_view what) {
  PLANNER_ASSIGN_OR_RETURN(int n, checked_count(count, "MPI_Irecv", what));
  PLANNER_RETURN_IF_ERROR(check_tag(tag, what));
  PLANNER_RETURN_IF_ERROR(check_peer(peer, what));
  const Event start = backend_.cpu_device().record();
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Irecv(buf, n, mpi_type(type), peer, static_cast<int>(tag), comm_, &req);
  return backend_.started(rc, req, "MPI_Irecv", *this, what, start);
}

// ---- CpuBackend

CpuBackend::~CpuBackend() {
  // Tickets still open here belong to a failed run that is about to abort; their temporary blocks
  // are left to the process's end, as MPI may still write to them.
  world_comm_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& by_type : half_ops_) {
    for (MPI_Op& op : by_type) {
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    }
  }
}

MPI_Op CpuBackend::mpi_op(ReduceOp op, DType type) const {
  const int o = op == ReduceOp::kMax ? 1 : 0;
  if (type == DType::kBFloat16) return half_ops_[0][o];
  if (type == DType::kFloat16) return half_ops_[1][o];
  return op == ReduceOp::kMax ? MPI_MAX : MPI_SUM;
}

Status CpuBackend::init() {
  namespace cpu = kernels::cpu;
  MPI_User_function* const fns[2][2] = {
      {reduce_half<cpu::bf16_to_float, cpu::float_to_bf16, false>,
       reduce_half<cpu::bf16_to_float, cpu::float_to_bf16, true>},
      {reduce_half<cpu::fp16_to_float, cpu::float_to_fp16, false>,
       reduce_half<cpu::fp16_to_float, cpu::float_to_fp16, true>}};
  for (int t = 0; t < 2; ++t) {
    for (int o = 0; o < 2; ++o) {
      PLANNER_RETURN_IF_ERROR(mpi_check(MPI_Op_create(fns[t][o], 1, &half_ops_[t][o]),
                                        "MPI_Op_create (16-bit floats)"));
    }
  }
  MPI_Comm p2p = MPI_COMM_NULL;
  PLANNER_RETURN_IF_ERROR(
      mpi_check(MPI_Comm_dup(world_.impl().base, &p2p), "MPI_Comm_dup (point-to-point)"));
  MPI_Comm_set_errhandler(p2p, MPI_ERRORS_RETURN);
  std::vector<int> all(static_cast<std::size_t>(world_.size()));
  for (int r = 0; r < world_.size(); ++r)
    all[static_cast<std::size_t>(r)] = r;
  world_comm_ =
      std::make_unique<MpiCommunicator>(*this, p2p, "world", std::move(all), world_.rank());
  return Status::ok();
}

Result<std::unique_ptr<Communicator>> CpuBackend::create_communicator(const GroupRequest& group) {
  int color = MPI_UNDEFINED;
  int key = 0;
  if (!group.ranks.empty()) {
    const auto it = std::find(group.ranks.begin(), group.ranks.end(), world_.rank());
    if (it == group.ranks.end()) {
      return Status::internal("group " + group_text(group.axes, group.ranks) +
                              " does not contain this rank (" + std::to_string(world_.rank()) +
                              ")");
    }
    color = *std::min_element(group.ranks.begin(), group.ranks.end());
    key = static_cast<int>(it - group.ranks.begin());
  }
  MPI_Comm comm = MPI_COMM_NULL;
  PLANNER_RETURN_IF_ERROR(mpi_check(MPI_Comm_split(world_.impl().base, color, key, &comm),
                                    "MPI_Comm_split (" + group.axes + " groups)"));
  if (comm == MPI_COMM_NULL) return std::unique_ptr<Communicator>();
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int size = 0;
  MPI_Comm_size(comm, &size);
  if (size != static_cast<int>(group.ranks.size())) {
    MPI_Comm_free(&comm);
    return Status::internal("ranks disagree on the " + group.axes +
                            " groups: " + group_text(group.axes, group.ranks) + " has " +
                            std::to_string(size) + " members in MPI");
  }
  return std::unique_ptr<Communicator>(
      std::make_unique<MpiCommunicator>(*this, comm, group.axes, group.ranks, key));
}

Result<Ticket> CpuBackend::started(int rc, MPI_Request request, const char* call,
                                   const MpiCommunicator& comm, std::string_view what, Event start,
                                   void* copy_to, void* temp, std::int64_t bytes,
                                   std::vector<int> keep) {
  if (rc != MPI_SUCCESS) {
    if (temp != nullptr) device_.deallocate(temp, bytes);
    return mpi_check(rc, std::string(call) + " on " + comm.label() + " for " + std::string(what));
  }
  TicketState t;
  t.request = request;
  t.start = start;
  t.call = call;
  t.comm = &comm;
  t.what = what;
  t.copy_to = copy_to;
  t.temp = temp;
  t.bytes = bytes;
  t.keep = std::move(keep);  // a moved vector keeps its heap block, which MPI points into
  tickets_.push_back(std::move(t));
  const auto id = static_cast<std::uint32_t>(tickets_.size() - 1);
  active_.push_back(id);
  return Ticket{id};
}

Status CpuBackend::complete(TicketState& t) {
  t.done = true;
  t.end = device_.record();
  if (t.temp != nullptr) {
    device_.copy(t.copy_to, t.temp, t.bytes);
    device_.deallocate(t.temp, t.bytes);
    t.temp = nullptr;
  }
  return Status::ok();
}

Status CpuBackend::timeout(const TicketState& t) const {
  const double waited = device_.now() - device_.seconds(t.start);
  return Status::timeout(std::string(t.call) + " on " + t.comm->label() + " for " +
                         std::string(t.what) + " (rank " + std::to_string(world_.rank()) +
                         ") did not complete within " +
                         std::to_string(static_cast<long long>(waited + 0.5)) + " s");
}

Status CpuBackend::poll() {
  for (std::size_t i = 0; i < active_.size();) {
    TicketState& t = tickets_[active_[i]];
    int done = 0;
    const int rc = MPI_Test(&t.request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      return mpi_check(
          rc, std::string(t.call) + " on " + t.comm->label() + " for " + std::string(t.what));
    }
    if (done) {
      PLANNER_RETURN_IF_ERROR(complete(t));
      active_[i] = active_.back();
      active_.pop_back();
    } else {
      ++i;
    }
  }
  return Status::ok();
}

Result<bool> CpuBackend::test(Ticket ticket) {
  PLANNER_RETURN_IF_ERROR(poll());
  return tickets_[ticket.id].done;
}

Status CpuBackend::wait_until(const TicketState* ticket, Deadline deadline) {
  Poller poller;
  for (;;) {
    PLANNER_RETURN_IF_ERROR(poll());
    if (ticket != nullptr ? ticket->done : active_.empty()) return Status::ok();
    if (deadline.passed()) return timeout(ticket != nullptr ? *ticket : tickets_[active_.front()]);
    poller.pause();
  }
}

Status CpuBackend::wait(Ticket ticket, Deadline deadline) {
  return wait_until(&tickets_[ticket.id], deadline);
}

Status CpuBackend::wait_all(Deadline deadline) {
  return wait_until(nullptr, deadline);
}

Status CpuBackend::release_tickets() {
  if (!active_.empty()) {
    const TicketState& t = tickets_[active_.front()];
    return Status::internal(std::to_string(active_.size()) +
                            " communication operations still running at the end of the step, "
                            "the first " +
                            std::string(t.call) + " for " + std::string(t.what));
  }
  tickets_.clear();
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Backend>> make_cpu_backend(World& world, const BackendOptions& options) {
  auto* mpi = dynamic_cast<MpiWorld*>(&world);
  if (mpi == nullptr) return Status::internal("the cpu backend needs an MPI world");
  int threads = options.blas_threads;
  if (threads <= 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::max(1, cores / std::max(1, world.local_size()));
  }
  auto backend =
      std::make_unique<CpuBackend>(*mpi, options.capacity, threads, options.emulate_low_precision);
  PLANNER_RETURN_IF_ERROR(backend->init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace planner::exec
