#include "planner/exec/mpi_world.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "mpi_common.hpp"
#include "planner/core/process.hpp"

namespace planner::exec {
namespace {

// How a waiting rank polls (Poller in bounded_wait.hpp). Nonblocking MPI moves data only inside
// MPI calls (a large message advances one fragment pipeline per poll), so a rank that yields or
// sleeps between polls slows the transfer itself: a 64 MiB all-reduce on 2 ranks reached 20-30% of
// MPI_Allreduce's bus bandwidth with yields and sleeps after 200 polls, 77-95% busy-polling
// (bench_exec, 2-core host under load). With a core per rank a waiting rank therefore busy-polls,
// as Open MPI's blocking calls do, for about kBusyPolls polls (a fraction of a second), then
// sleeps: it waits on a straggler or a hang. With more ranks than cores on the host it yields
// between polls while fewer ranks compute than the host has cores, and otherwise yields for
// kSpinPolls polls, then sleeps, so that the rank it waits for can run. Sleeping whenever all
// ranks waited made a 4-rank ZeRO-1 step on 2 cores spend 26 ms per rank in its reduce-scatter
// (1 ms predicted); yield-polling whenever they waited made the pipeline stage of a tp2 x pp2 step
// that waits on the other take its cores (its step 22 % slower than predicted).
constexpr int kBusyPolls = 1'000'000;
// coll_libnbc_iallreduce_algorithm: 0 ignore (libnbc chooses), 1 ring, 2 binomial, 3 rabenseifner,
// 4 recursive doubling (ompi_info --param coll libnbc --level 9).
constexpr const char* kLibnbcRingAllreduce = "1";
constexpr int kSpinPolls = 200;
constexpr auto kPollSleep = std::chrono::microseconds(50);
// The host's wait bookkeeping of this process. A second copy of this code in the process (the
// cuda backend's module carries its own) uses the first copy's through use_host_wait_state().
struct HostWaitState {
  std::atomic<bool> oversubscribed{true};  // until the world knows its ranks per host
  // The count of the job's ranks on this host that wait (shared memory; nullptr until shared).
  std::atomic<int*> waiting{nullptr};
  std::atomic<int> ranks{1};
};
HostWaitState g_own_wait_state;
std::atomic<HostWaitState*> g_wait_state{&g_own_wait_state};
HostWaitState& wait_state() {
  return *g_wait_state.load(std::memory_order_acquire);
}
const unsigned g_cores = std::max(1u, std::thread::hardware_concurrency());

// Rate-limits the checks of peers' processes (/proc reads) in a polling loop: one every 100 ms.
class PeerCheck {
 public:
  bool due() {
    const auto now = Clock::now();
    if (now < next_) return false;
    next_ = now + std::chrono::milliseconds(100);
    return true;
  }

 private:
  Clock::time_point next_ = Clock::now() + std::chrono::milliseconds(100);
};

// Whether a core of the host is free of computing ranks: fewer ranks than cores not waiting
// (false while the count is not shared).
bool core_free() {
  const int waiting = host_waiting_ranks();
  return waiting >= 0 &&
         wait_state().ranks.load(std::memory_order_relaxed) - waiting < static_cast<int>(g_cores);
}

// Variables launchers set in every rank's environment: Open MPI, MPICH/Hydra (PMI), PMIx, and
// srun's job steps (SLURM_STEP_ID: a batch script has SLURM_PROCID but no step of its own).
constexpr const char* kLauncherVariables[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                              "SLURM_STEP_ID"};
// The number of ranks a launcher started, by launcher (checked in this order).
constexpr std::pair<const char*, const char*> kLauncherSizes[] = {
    {"OMPI_COMM_WORLD_SIZE", "mpirun"},
    {"SLURM_STEP_NUM_TASKS", "srun"},
    {"PMI_SIZE", "the MPI launcher"}};

}  // namespace

Status mpi_check(int rc, std::string_view call) {
  if (rc == MPI_SUCCESS) return Status::ok();
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::runtime(std::string(call) +
                         " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

MPI_Datatype mpi_type(DType type) {
  switch (type) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat64:
      return MPI_DOUBLE;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kByte:
      return MPI_BYTE;
    case DType::kBFloat16:
    case DType::kFloat16:
      return MPI_UINT16_T;  // reduced by planner's own MPI_Op (cpu_backend.cpp)
  }
  return MPI_BYTE;
}

double seconds_left(Deadline deadline) {
  return std::chrono::duration<double>(deadline.at - Clock::now()).count();
}

Status wait_request(MPI_Request* request, Deadline deadline, std::string_view what,
                    double timeout_s, const World* world, int peer) {
  Poller poller;
  PeerCheck check;
  for (;;) {
    int done = 0;
    PLANNER_RETURN_IF_ERROR(mpi_check(MPI_Test(request, &done, MPI_STATUS_IGNORE), what));
    if (done) return Status::ok();
    if (deadline.passed()) {
      return Status::timeout(std::string(what) + " did not complete within " +
                             std::to_string(static_cast<long long>(timeout_s)) + " s");
    }
    if (world != nullptr && check.due()) {
      if (auto problem = world->peer_problem(peer)) {
        return Status::timeout(std::string(what) + " cannot complete: " + *problem);
      }
    }
    poller.pause();
  }
}

Poller::~Poller() {
  if (counted_) {
    std::atomic_ref<int>(*wait_state().waiting.load(std::memory_order_acquire))
        .fetch_sub(1, std::memory_order_relaxed);
  }
}

void Poller::pause() {
  const int polls = polls_++;
  if (!wait_state().oversubscribed.load(std::memory_order_relaxed)) {
    if (polls >= kBusyPolls) std::this_thread::sleep_for(kPollSleep);
    return;
  }
  if (!counted_) {
    if (int* waiting = wait_state().waiting.load(std::memory_order_acquire)) {
      std::atomic_ref<int>(*waiting).fetch_add(1, std::memory_order_relaxed);
      counted_ = true;
    }
  }
  if (polls < kSpinPolls || core_free()) {
    sched_yield();
  } else {
    std::this_thread::sleep_for(kPollSleep);
  }
}

int host_waiting_ranks() {
  int* waiting = wait_state().waiting.load(std::memory_order_acquire);
  return waiting == nullptr ? -1 : std::atomic_ref<int>(*waiting).load(std::memory_order_relaxed);
}

void share_host_waits(void* counter, int local_ranks) {
  wait_state().ranks.store(std::max(1, local_ranks), std::memory_order_relaxed);
  wait_state().waiting.store(static_cast<int*>(counter), std::memory_order_release);
}

void set_core_per_rank(bool own_core) {
  wait_state().oversubscribed.store(!own_core, std::memory_order_relaxed);
}

bool core_per_rank() {
  return !wait_state().oversubscribed.load(std::memory_order_relaxed);
}

void* host_wait_state() {
  return &wait_state();
}

void use_host_wait_state(void* state) {
  g_wait_state.store(state != nullptr ? static_cast<HostWaitState*>(state) : &g_own_wait_state,
                     std::memory_order_release);
}

bool launched_by_mpi() {
  for (const char* v : kLauncherVariables) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

std::optional<LauncherRanks> launcher_ranks() {
  for (const auto& [var, launcher] : kLauncherSizes) {
    const char* v = std::getenv(var);
    if (v == nullptr) continue;
    const int n = std::atoi(v);
    if (n >= 1) return LauncherRanks{n, launcher};
  }
  return std::nullopt;
}

Status check_launcher_world(const World& world) {
  const std::optional<LauncherRanks> started = launcher_ranks();
  if (!started || started->ranks == world.size()) return Status::ok();
  std::string hint;
  if (std::string_view(started->launcher) == "srun") {
    hint =
        ": srun did not connect the tasks to MPI; run it with --mpi=pmix (srun --mpi=list shows "
        "the plugins this Slurm has)";
  }
  return Status::runtime(std::string(started->launcher) + " started " +
                         std::to_string(started->ranks) + " ranks, but this rank's MPI world has " +
                         std::to_string(world.size()) + hint);
}

std::string MpiWorld::library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string v(text, static_cast<std::size_t>(len));
  const auto nl = v.find_first_of("\r\n");
  if (nl != std::string::npos) v.resize(nl);
  return v;
}

namespace {

// Shares a count of waiting ranks among the job's ranks on this host, `local` (Poller): the host's
// first rank creates a shared memory object, the others map it, and it is unlinked once all have
// (it lives until the last of them exits; only a first rank that dies in between leaves it
// behind). Where it fails, ranks poll as if no core were free.
void share_waits_on_host(MPI_Comm local, int local_rank, int local_size) {
  std::array<char, 64> name{};
  if (local_rank == 0) {
    std::snprintf(name.data(), name.size(), "/planner-waits-%d-%llx", static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(Clock::now().time_since_epoch().count()));
  }
  void* mem = MAP_FAILED;
  const auto map = [&](int flags) {
    const int fd = ::shm_open(name.data(), flags, 0600);
    if (fd < 0) return;
    if ((flags & O_CREAT) == 0 || ::ftruncate(fd, sizeof(int)) == 0) {
      mem = ::mmap(nullptr, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    ::close(fd);
  };
  if (local_rank == 0) {
    map(O_CREAT | O_EXCL | O_RDWR);  // zero-filled
    if (mem == MAP_FAILED) {
      ::shm_unlink(name.data());
      name[0] = '\0';
    }
  }
  MPI_Bcast(name.data(), static_cast<int>(name.size()), MPI_CHAR, 0, local);
  if (local_rank != 0 && name[0] != '\0') map(O_RDWR);
  MPI_Barrier(local);
  if (local_rank == 0 && name[0] != '\0') ::shm_unlink(name.data());
  if (mem != MAP_FAILED) share_host_waits(mem, local_size);
}

// Fills rank, size, the host and the host-local rank of `impl` from its base communicator; for
// the first world (MpiWorld::init's, over MPI_COMM_WORLD; worlds split from it share it) also
// shares the host's count of waiting ranks.
Status describe(MpiWorld::Impl& impl, bool first_world) {
  PLANNER_RETURN_IF_ERROR(mpi_check(MPI_Comm_rank(impl.base, &impl.rank), "MPI_Comm_rank"));
  PLANNER_RETURN_IF_ERROR(mpi_check(MPI_Comm_size(impl.base, &impl.size), "MPI_Comm_size"));
  PLANNER_RETURN_IF_ERROR(
      mpi_check(MPI_Comm_set_errhandler(impl.base, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
  PLANNER_RETURN_IF_ERROR(
      mpi_check(MPI_Comm_dup(impl.base, &impl.control), "MPI_Comm_dup (control channel)"));
  MPI_Comm local = MPI_COMM_NULL;
  PLANNER_RETURN_IF_ERROR(mpi_check(
      MPI_Comm_split_type(impl.base, MPI_COMM_TYPE_SHARED, impl.rank, MPI_INFO_NULL, &local),
      "MPI_Comm_split_type (ranks on this host)"));
  MPI_Comm_rank(local, &impl.local_rank);
  MPI_Comm_size(local, &impl.local_size);
  // The pids of the ranks on this host, so that a peer that died or was stopped is told apart
  // from a slow one (peer_problem).
  {
    const int mine[2] = {impl.rank, static_cast<int>(::getpid())};
    std::vector<int> pairs(2 * static_cast<std::size_t>(impl.local_size));
    PLANNER_RETURN_IF_ERROR(mpi_check(
        MPI_Allgather(mine, 2, MPI_INT, pairs.data(), 2, MPI_INT, local), "MPI_Allgather (pids)"));
    impl.local_pids.assign(static_cast<std::size_t>(impl.size), 0);
    for (std::size_t i = 0; i + 1 < pairs.size(); i += 2) {
      if (pairs[i] >= 0 && pairs[i] < impl.size) {
        impl.local_pids[static_cast<std::size_t>(pairs[i])] = pairs[i + 1];
      }
    }
  }
  if (first_world && wait_state().waiting.load(std::memory_order_acquire) == nullptr) {
    share_waits_on_host(local, impl.local_rank, impl.local_size);  // once per process
  }
  MPI_Comm_free(&local);
  wait_state().oversubscribed.store(static_cast<unsigned>(impl.local_size) > g_cores,
                                    std::memory_order_relaxed);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  impl.host.assign(name, static_cast<std::size_t>(len));
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<MpiWorld>> MpiWorld::init(int* argc, char*** argv) {
  auto impl = std::make_unique<Impl>();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Open MPI's nonblocking all-reduce (coll/libnbc) picks binomial or recursive doubling by
    // default, which reach 65-79% of MPI_Allreduce's busbw at 64 MiB on 2 ranks; its ring reaches
    // 100% (bench_exec on a quiet 2-core host; the executor's all-reduces are gradient buckets and
    // tensor-parallel activations, bandwidth-bound). Read by MPI_Init; a user's setting wins.
    ::setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", kLibnbcRingAllreduce, 0);
    int provided = 0;
    PLANNER_RETURN_IF_ERROR(
        mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread"));
    impl->finalize = true;
  }
  impl->base = MPI_COMM_WORLD;
  PLANNER_RETURN_IF_ERROR(describe(*impl, /*first_world=*/true));
  return std::unique_ptr<MpiWorld>(new MpiWorld(std::move(impl)));
}

Result<std::unique_ptr<MpiWorld>> MpiWorld::split(int color) {
  MPI_Comm comm = MPI_COMM_NULL;
  PLANNER_RETURN_IF_ERROR(
      mpi_check(MPI_Comm_split(impl_->base, color >= 0 ? color : MPI_UNDEFINED, impl_->rank, &comm),
                "MPI_Comm_split (sub-world)"));
  if (comm == MPI_COMM_NULL) return std::unique_ptr<MpiWorld>();
  auto impl = std::make_unique<Impl>();
  impl->base = comm;
  impl->owns_base = true;
  PLANNER_RETURN_IF_ERROR(describe(*impl, /*first_world=*/false));
  return std::unique_ptr<MpiWorld>(new MpiWorld(std::move(impl)));
}

MpiWorld::MpiWorld(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MpiWorld::~MpiWorld() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // a world that outlived MPI (e.g. a static one in a test)
  if (impl_->control != MPI_COMM_NULL) MPI_Comm_free(&impl_->control);
  if (impl_->owns_base && impl_->base != MPI_COMM_NULL) MPI_Comm_free(&impl_->base);
  if (impl_->finalize) MPI_Finalize();
}

int MpiWorld::rank() const {
  return impl_->rank;
}
int MpiWorld::size() const {
  return impl_->size;
}
int MpiWorld::local_rank() const {
  return impl_->local_rank;
}
int MpiWorld::local_size() const {
  return impl_->local_size;
}
const std::string& MpiWorld::host() const {
  return impl_->host;
}

Result<std::vector<std::optional<std::string>>> MpiWorld::gather(std::string_view mine,
                                                                 Deadline deadline) {
  // Point-to-point rather than MPI_Igatherv, so that rank 0 learns which ranks did not report.
  constexpr int kSizeTag = 1;
  constexpr int kDataTag = 2;
  const double timeout = seconds_left(deadline);
  long long my_size = static_cast<long long>(mine.size());
  if (impl_->rank != 0) {
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    PLANNER_RETURN_IF_ERROR(mpi_check(
        MPI_Isend(&my_size, 1, MPI_LONG_LONG, 0, kSizeTag, impl_->control, &req[0]), "MPI_Isend"));
    PLANNER_RETURN_IF_ERROR(mpi_check(MPI_Isend(mine.data(), static_cast<int>(my_size), MPI_BYTE, 0,
                                                kDataTag, impl_->control, &req[1]),
                                      "MPI_Isend"));
    for (MPI_Request& r : req) {
      PLANNER_RETURN_IF_ERROR(wait_request(&r, deadline, "a report to rank 0", timeout, this, 0));
    }
    return std::vector<std::optional<std::string>>();
  }
  const auto n = static_cast<std::size_t>(impl_->size);
  std::vector<std::optional<std::string>> out(n);
  out[0] = std::string(mine);
  std::vector<long long> sizes(n, -1);
  std::vector<std::string> data(n);
  std::vector<MPI_Request> req(n, MPI_REQUEST_NULL);
  std::vector<int> stage(n, 0);  // 0: size pending, 1: data pending, 2: done
  for (std::size_t r = 1; r < n; ++r) {
    PLANNER_RETURN_IF_ERROR(mpi_check(MPI_Irecv(&sizes[r], 1, MPI_LONG_LONG, static_cast<int>(r),
                                                kSizeTag, impl_->control, &req[r]),
                                      "MPI_Irecv"));
  }
  std::size_t open = n - 1;
  Poller poller;
  PeerCheck check;
  while (open > 0) {
    for (std::size_t r = 1; r < n; ++r) {
      if (stage[r] == 2) continue;
      int done = 0;
      PLANNER_RETURN_IF_ERROR(mpi_check(MPI_Test(&req[r], &done, MPI_STATUS_IGNORE), "MPI_Test"));
      if (!done) continue;
      if (stage[r] == 0) {
        if (sizes[r] < 0 || sizes[r] > std::numeric_limits<int>::max()) {
          return Status::runtime("rank " + std::to_string(r) + " reported a malformed size");
        }
        data[r].resize(static_cast<std::size_t>(sizes[r]));
        PLANNER_RETURN_IF_ERROR(
            mpi_check(MPI_Irecv(data[r].data(), static_cast<int>(sizes[r]), MPI_BYTE,
                                static_cast<int>(r), kDataTag, impl_->control, &req[r]),
                      "MPI_Irecv"));
        stage[r] = 1;
      } else {
        out[r] = std::move(data[r]);
        stage[r] = 2;
        --open;
      }
    }
    if (open == 0 || deadline.passed()) break;
    // Every rank still missing is known not to answer (its process is gone or stopped): stop
    // waiting for it now rather than at the deadline.
    if (check.due()) {
      bool all_lost = true;
      for (std::size_t r = 1; r < n && all_lost; ++r) {
        all_lost = stage[r] == 2 || peer_problem(static_cast<int>(r)).has_value();
      }
      if (all_lost) break;
    }
    poller.pause();
  }
  return out;
}

Result<std::string> MpiWorld::broadcast(std::string_view data, Deadline deadline) {
  const double timeout = seconds_left(deadline);
  long long size = impl_->rank == 0 ? static_cast<long long>(data.size()) : 0;
  MPI_Request req = MPI_REQUEST_NULL;
  PLANNER_RETURN_IF_ERROR(
      mpi_check(MPI_Ibcast(&size, 1, MPI_LONG_LONG, 0, impl_->control, &req), "MPI_Ibcast (size)"));
  PLANNER_RETURN_IF_ERROR(wait_request(&req, deadline, "MPI_Ibcast from rank 0", timeout, this, 0));
  if (size > std::numeric_limits<int>::max()) {
    return Status::invalid_input("broadcast: more than 2^31 bytes");
  }
  std::string out =
      impl_->rank == 0 ? std::string(data) : std::string(static_cast<std::size_t>(size), '\0');
  PLANNER_RETURN_IF_ERROR(
      mpi_check(MPI_Ibcast(out.data(), static_cast<int>(size), MPI_BYTE, 0, impl_->control, &req),
                "MPI_Ibcast"));
  PLANNER_RETURN_IF_ERROR(wait_request(&req, deadline, "MPI_Ibcast from rank 0", timeout, this, 0));
  return out;
}

std::optional<std::string> MpiWorld::peer_problem(int rank) const {
  if (rank < 0 || rank >= impl_->size || rank == impl_->rank) return std::nullopt;
  const int pid = impl_->local_pids.empty() ? 0 : impl_->local_pids[static_cast<std::size_t>(rank)];
  if (pid <= 0) return std::nullopt;
  const std::string who =
      "rank " + std::to_string(rank) + "'s process (pid " + std::to_string(pid) + ")";
  switch (process_state(pid)) {
    case ProcessState::kGone:
      return who + " is gone";
    case ProcessState::kStopped:
      return who + " is stopped";
    case ProcessState::kRunning:
      break;
  }
  return std::nullopt;
}

void MpiWorld::abort(int exit_code) {
  MPI_Abort(impl_->base, exit_code);
  std::_Exit(exit_code);
}

}  // namespace planner::exec
