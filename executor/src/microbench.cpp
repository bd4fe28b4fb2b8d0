#include "planner/exec/microbench.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <thread>

#include "planner/exec/bounded_wait.hpp"
#include "planner/exec/device_buffer.hpp"

namespace planner::exec {
namespace {

// Timed batches per measurement; the median is kept (one slow batch, a preempted core, is noise).
constexpr int kRepeats = 5;
constexpr std::int64_t kMaxIterations = 2000;
constexpr std::int64_t kF32 = 4;
// Value every input element starts at: small, so that repeated updates (Adam, accumulating GEMMs)
// stay far from overflow and denormals.
constexpr float kFill = 0.01f;
// Adam's moments in fp32 (the lowering's kAdamMomentBytes): the optimizer op reads gradient and
// moments, and writes parameter and moments, 12 bytes per parameter each way.
constexpr std::int64_t kAdamBytesEachWay = 12;
// Memory-bound kernels rotate through copies of their arrays covering at least this much memory
// per array (above the last-level cache a core sees on current servers, 32 MiB per Zen 4 CCD), at
// most kMaxColdCopies copies.
constexpr std::int64_t kColdBytes = 32 * 1024 * 1024;
constexpr std::int64_t kMaxColdCopies = 64;
// Oversubscribed compute (more ranks than cores): wall time each rank's timed batch aims at, long
// against the scheduler's time slices (a few ms) so that a batch sees many context switches, and
// the number of batches (median kept).
constexpr double kSharedTargetS = 0.04;
constexpr int kSharedRepeats = 3;
// The kernels measured oversubscribed: a transformer step's GEMM shapes, attention and
// memory-bound kernels at a micro-batch's activation size (512 tokens).
constexpr std::int64_t kSharedRows = 512;

struct GemmShape {
  std::int64_t m, n, k;
  Transpose ta, tb;
};

// Shapes of a small transformer's projections (tokens x hidden x ffn), in the three forms the
// runner calls: forward Y = X Wᵀ (NT), input gradient dX = dY W (NN), weight gradient dW = dYᵀ X
// (TN).
std::vector<GemmShape> gemm_grid(bool full, bool shared) {
  if (shared) {
    return {{512, 384, 128, Transpose::kNo, Transpose::kYes},
            {512, 128, 512, Transpose::kNo, Transpose::kNo},
            {2048, 384, 512, Transpose::kYes, Transpose::kNo}};
  }
  const std::vector<std::int64_t> ms = full ? std::vector<std::int64_t>{128, 512, 2048, 8192}
                                            : std::vector<std::int64_t>{128, 512, 2048};
  const std::vector<std::int64_t> ns = full ? std::vector<std::int64_t>{64, 256, 1024, 4096}
                                            : std::vector<std::int64_t>{128, 384, 1536};
  const std::vector<std::int64_t> ks =
      full ? std::vector<std::int64_t>{64, 256, 1024, 4096} : std::vector<std::int64_t>{128, 512};
  const Transpose forms[3][2] = {{Transpose::kNo, Transpose::kYes},
                                 {Transpose::kNo, Transpose::kNo},
                                 {Transpose::kYes, Transpose::kNo}};
  std::vector<GemmShape> out;
  std::size_t i = 0;
  for (std::int64_t m : ms) {
    for (std::int64_t n : ns) {
      for (std::int64_t k : ks) {
        const auto& f = forms[i++ % 3];
        out.push_back({m, n, k, f[0], f[1]});
      }
    }
  }
  return out;
}

Result<DeviceBuffer> filled(Device& dev, std::int64_t count, const char* what) {
  PLANNER_ASSIGN_OR_RETURN(DeviceBuffer buf, DeviceBuffer::floats(dev, count, what));
  const std::vector<float> host(static_cast<std::size_t>(count), kFill);
  PLANNER_RETURN_IF_ERROR(dev.copy_from_host(buf.data(), host.data(), count * kF32));
  return buf;
}

class Bench {
 public:
  Bench(Backend& backend, const MicrobenchOptions& options, const MeasurementSink& sink)
      : b_(backend), dev_(backend.device()), o_(options), sink_(sink) {}

  Status run() {
    const int ranks = b_.world().size();
    const int compute_ranks =
        o_.compute_ranks > 0 ? std::min(o_.compute_ranks, ranks) : std::min(ranks, cores_);
    const bool own_core = core_per_rank();
    if (o_.compute) {
      PLANNER_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                               first_ranks("calibration-compute", compute_ranks));
      if (comm) {
        // The computing ranks have a core each (the others wait, yielding it); they start each
        // kernel together, as the ranks of a run compute side by side.
        set_core_per_rank(compute_ranks <= cores_);
        sync_ = comm.get();
        computing_ = compute_ranks;
        const Status st = compute();
        sync_ = nullptr;
        set_core_per_rank(own_core);
        PLANNER_RETURN_IF_ERROR(st);
      }
      PLANNER_RETURN_IF_ERROR(barrier());
      if (b_.world().local_size() > cores_ && o_.oversubscribed) {
        // Every rank computes at once on fewer cores: the cost of sharing them.
        shared_ = true;
        computing_ = ranks;
        PLANNER_RETURN_IF_ERROR(compute());
        shared_ = false;
        PLANNER_RETURN_IF_ERROR(barrier());
      }
    }
    if (o_.collectives && ranks >= 2) PLANNER_RETURN_IF_ERROR(collectives());
    return barrier();
  }

  std::vector<Measurement> take() { return std::move(out_); }

 private:
  // A communicator over world ranks 0 .. n-1 (every rank calls it; the others get none).
  Result<std::unique_ptr<Communicator>> first_ranks(std::string axes, int n) {
    GroupRequest req;
    req.axes = std::move(axes);
    if (b_.world().rank() < n) {
      for (int r = 0; r < n; ++r)
        req.ranks.push_back(r);
    }
    return b_.create_communicator(req);
  }

  Deadline deadline() const { return Deadline::after(o_.timeout_s); }

  Status barrier() { return sync(b_.world_communicator(), "calibration barrier"); }

  // Seconds per call of `body` over `iterations` calls, between two device events.
  Result<double> timed(const std::function<Status()>& body, std::int64_t iterations) {
    const Event start = dev_.record();
    for (std::int64_t i = 0; i < iterations; ++i)
      PLANNER_RETURN_IF_ERROR(body());
    const Event end = dev_.record();
    PLANNER_RETURN_IF_ERROR(dev_.synchronize());
    const double s = dev_.seconds(end) - dev_.seconds(start);
    dev_.reset_events();
    PLANNER_RETURN_IF_ERROR(b_.release_tickets());
    return s / static_cast<double>(iterations);
  }

  // Copies of a kernel's arrays (`bytes` per copy) that cover kColdBytes.
  static std::int64_t cold_copies(std::int64_t bytes) {
    return std::clamp<std::int64_t>(kColdBytes / std::max<std::int64_t>(1, bytes), 1,
                                    kMaxColdCopies);
  }

  std::int64_t iterations_for(double one) const {
    if (one <= 0) return kMaxIterations;
    return std::clamp<std::int64_t>(std::llround(o_.target_s / one), 1, kMaxIterations);
  }

  // Every member of `comm` reaches this before any goes on (`what` names it in a timeout).
  Status sync(Communicator& comm, std::string_view what = "calibration sync") {
    if (!sync_buf_) {
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer buf, DeviceBuffer::floats(dev_, 1, "sync"));
      sync_buf_ = std::make_unique<DeviceBuffer>(std::move(buf));
    }
    PLANNER_ASSIGN_OR_RETURN(
        Ticket t, comm.all_reduce(sync_buf_->data(), 1, DType::kFloat32, ReduceOp::kSum, what));
    PLANNER_RETURN_IF_ERROR(b_.wait(t, deadline()));
    return b_.release_tickets();
  }

  // The largest `value` of the members of `comm`, on every member.
  Result<double> max_over(Communicator& comm, double value) {
    PLANNER_ASSIGN_OR_RETURN(DeviceBuffer agree, DeviceBuffer::allocate(dev_, 8, "agree"));
    PLANNER_RETURN_IF_ERROR(dev_.copy_from_host(agree.data(), &value, 8));
    PLANNER_ASSIGN_OR_RETURN(
        Ticket t, comm.all_reduce(agree.data(), 1, DType::kFloat64, ReduceOp::kMax, "agree"));
    PLANNER_RETURN_IF_ERROR(b_.wait(t, deadline()));
    PLANNER_RETURN_IF_ERROR(dev_.copy_to_host(&value, agree.data(), 8));
    PLANNER_RETURN_IF_ERROR(b_.release_tickets());
    return value;
  }

  // Oversubscribed: every rank of the world runs the same batch of calls at once, from a common
  // start; a call's time is the slowest rank's batch time over its calls (the waits before and
  // after, scheduler latency of sleeping ranks, left out), the median of kSharedRepeats batches.
  Result<std::pair<double, std::int64_t>> measure_shared(const std::function<Status()>& body) {
    Communicator& world = b_.world_communicator();
    PLANNER_RETURN_IF_ERROR(sync(world));
    PLANNER_ASSIGN_OR_RETURN(double first, timed(body, 1));
    PLANNER_ASSIGN_OR_RETURN(
        double agreed,
        max_over(world, static_cast<double>(std::clamp<std::int64_t>(
                            std::llround(kSharedTargetS / first), 1, kMaxIterations))));
    const auto iterations = static_cast<std::int64_t>(agreed);
    std::vector<double> times;
    for (int r = 0; r < kSharedRepeats; ++r) {
      PLANNER_RETURN_IF_ERROR(sync(world));
      PLANNER_ASSIGN_OR_RETURN(double mine, timed(body, iterations));
      PLANNER_ASSIGN_OR_RETURN(double slowest, max_over(world, mine));
      times.push_back(slowest);
    }
    std::sort(times.begin(), times.end());
    return std::pair{times[times.size() / 2], iterations};
  }

  // Median of kRepeats timed batches, after an untimed call that also sizes the batches.
  Result<std::pair<double, std::int64_t>> measure(const std::function<Status()>& body) {
    if (shared_) return measure_shared(body);
    if (sync_ != nullptr) PLANNER_RETURN_IF_ERROR(sync(*sync_));
    PLANNER_ASSIGN_OR_RETURN(double first, timed(body, 1));
    const std::int64_t iterations = iterations_for(first);
    std::vector<double> times;
    for (int r = 0; r < kRepeats; ++r) {
      PLANNER_ASSIGN_OR_RETURN(double t, timed(body, iterations));
      times.push_back(t);
    }
    std::sort(times.begin(), times.end());
    double median = times[times.size() / 2];
    // A step waits for its slowest rank: the slowest computing rank's median counts (the
    // ranks of one host do not compute equally fast; 6 % apart in runs on the 2-core host).
    if (sync_ != nullptr) {
      PLANNER_ASSIGN_OR_RETURN(median, max_over(*sync_, median));
    }
    return std::pair{median, iterations};
  }

  void record(CalibrationPoint point, double s, std::int64_t iterations) {
    if (b_.world().rank() != 0) return;
    point.measured = Time(std::llround(s * 1e12));
    Measurement m{point, iterations};
    if (sink_) sink_(m);
    out_.push_back(std::move(m));
  }

  Status compute_one(const OpDesc& desc, bool backward, const std::function<Status()>& body) {
    PLANNER_ASSIGN_OR_RETURN(auto timing, measure(body));
    CalibrationPoint p;
    p.desc = desc;
    p.backward = backward;
    p.group_size = computing_;
    record(p, timing.first, timing.second);
    return Status::ok();
  }

  // The compute grid, o_.compute_sweeps times over; each kernel keeps its fastest sweep (other
  // work on a shared machine only ever slows a kernel down, and it comes in bursts longer than
  // one measurement but shorter than a sweep).
  Status compute() {
    const std::size_t begin = out_.size();
    for (int sweep = 0; sweep < std::max(1, o_.compute_sweeps); ++sweep) {
      const std::size_t from = out_.size();
      for (const GemmShape& g : gemm_grid(o_.full_compute, shared_))
        PLANNER_RETURN_IF_ERROR(gemm(g));
      PLANNER_RETURN_IF_ERROR(attention());
      PLANNER_RETURN_IF_ERROR(memory_bound());
      if (sweep == 0) continue;
      for (std::size_t i = from; i < out_.size(); ++i) {
        Measurement& kept = out_[begin + (i - from)];
        if (out_[i].point.measured < kept.point.measured) kept = out_[i];
      }
      out_.resize(from);
    }
    return Status::ok();
  }

  Status gemm(const GemmShape& g) {
    // Cold operands, as the memory-bound kernels (memory_bound()): a training step's GEMMs find
    // their activations and weights in memory, not in the cache of a repeated call.
    const std::int64_t copies = cold_copies((g.m * g.k + g.k * g.n + g.m * g.n) * kF32);
    std::int64_t call = 0;
    PLANNER_ASSIGN_OR_RETURN(DeviceBuffer a, filled(dev_, g.m * g.k * copies, "gemm A"));
    PLANNER_ASSIGN_OR_RETURN(DeviceBuffer bb, filled(dev_, g.k * g.n * copies, "gemm B"));
    PLANNER_ASSIGN_OR_RETURN(DeviceBuffer c, filled(dev_, g.m * g.n * copies, "gemm C"));
    const std::int64_t lda = g.ta == Transpose::kNo ? g.k : g.m;
    const std::int64_t ldb = g.tb == Transpose::kNo ? g.n : g.k;
    OpDesc d;
    d.kind = OpKind::kGemm;
    d.precision = Precision::kFp32;
    d.m = g.m;
    d.n = g.n;
    d.k = g.k;
    d.flops = Flops(2.0 * static_cast<double>(g.m * g.n) * static_cast<double>(g.k));
    d.bytes_read = Bytes((g.m * g.k + g.k * g.n) * kF32);
    d.bytes_written = Bytes(g.m * g.n * kF32);
    return compute_one(d, false, [&] {
      const std::int64_t at = ++call % copies;
      dev_.gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, a.f32() + at * g.m * g.k, lda,
                bb.f32() + at * g.k * g.n, ldb, 0.0f, c.f32() + at * g.m * g.n, g.n);
      return Status::ok();
    });
  }

  Status attention() {
    constexpr std::int64_t kHeads = 4;
    constexpr std::int64_t kHeadDim = 32;
    const std::vector<std::int64_t> seqs = o_.full_compute
                                               ? std::vector<std::int64_t>{64, 128, 256, 512, 1024}
                                               : std::vector<std::int64_t>{64, 128, 256};
    for (std::int64_t batch : {1, 4}) {
      for (std::int64_t seq : seqs) {
        if (shared_ && (batch != 4 || seq != 128)) continue;
        AttentionShape sh;
        sh.batch = batch;
        sh.heads = kHeads;
        sh.kv_heads = kHeads;
        sh.head_dim = kHeadDim;
        sh.q_len = seq;
        sh.kv_len = seq;
        sh.causal = true;
        sh.scale = kernels::cpu::attention_default_scale(kHeadDim);
        const std::int64_t elems = batch * seq * kHeads * kHeadDim;
        const std::int64_t rows = batch * seq * kHeads;
        // As the runner's attention ops: the forward first splits the QKV projection's packed
        // output (rows of q | k | v) into q and k, v; the backward zeroes the gradients it
        // accumulates into (runner_layer.cpp).
        PLANNER_ASSIGN_OR_RETURN(DeviceBuffer qkv, filled(dev_, 3 * elems, "attention qkv"));
        PLANNER_ASSIGN_OR_RETURN(DeviceBuffer q, filled(dev_, elems, "attention q"));
        PLANNER_ASSIGN_OR_RETURN(DeviceBuffer k, filled(dev_, elems, "attention k"));
        PLANNER_ASSIGN_OR_RETURN(DeviceBuffer v, filled(dev_, elems, "attention v"));
        PLANNER_ASSIGN_OR_RETURN(DeviceBuffer o, filled(dev_, elems, "attention o"));
        PLANNER_ASSIGN_OR_RETURN(DeviceBuffer dout, filled(dev_, elems, "attention dout"));
        PLANNER_ASSIGN_OR_RETURN(DeviceBuffer dq, filled(dev_, elems, "attention dq"));
        PLANNER_ASSIGN_OR_RETURN(DeviceBuffer dk, filled(dev_, elems, "attention dk"));
        PLANNER_ASSIGN_OR_RETURN(DeviceBuffer dv, filled(dev_, elems, "attention dv"));
        PLANNER_ASSIGN_OR_RETURN(DeviceBuffer lse, filled(dev_, rows, "attention lse"));
        PLANNER_ASSIGN_OR_RETURN(DeviceBuffer delta, filled(dev_, rows, "attention delta"));
        // As the lowering describes a causal block (Lowerer::attention).
        OpDesc d;
        d.kind = OpKind::kAttention;
        d.precision = Precision::kFp32;
        d.flags = kCausal;
        d.batch = batch * kHeads;
        d.m = seq;
        d.n = seq;
        d.k = kHeadDim;
        d.aux = kHeads;
        const double forward = 4.0 * static_cast<double>(d.batch * seq * seq * kHeadDim) * 0.5;
        const std::int64_t qb = elems * kF32;
        d.flops = Flops(forward);
        d.bytes_read = Bytes(3 * qb);
        d.bytes_written = Bytes(qb + rows * kF32);
        const std::int64_t width = kHeads * kHeadDim * kF32;  // bytes of one token's q
        const std::int64_t tokens = batch * seq;
        PLANNER_RETURN_IF_ERROR(compute_one(d, false, [&] {
          dev_.copy_2d(q.data(), width, qkv.data(), 3 * width, width, tokens);
          dev_.copy_2d(k.data(), width, qkv.f32() + kHeads * kHeadDim, 3 * width, width, tokens);
          dev_.copy_2d(v.data(), width, qkv.f32() + 2 * kHeads * kHeadDim, 3 * width, width,
                       tokens);
          dev_.attention_forward(sh, q.f32(), k.f32(), v.f32(), o.f32(), lse.f32());
          return Status::ok();
        }));
        d.flops = Flops(2.0 * forward);
        d.bytes_read = Bytes(5 * qb + rows * kF32);
        d.bytes_written = Bytes(3 * qb);
        PLANNER_RETURN_IF_ERROR(compute_one(d, true, [&] {
          dev_.attention_backward_delta(rows, kHeadDim, o.f32(), dout.f32(), delta.f32());
          dev_.zero(dq.data(), qb);
          dev_.zero(dk.data(), qb);
          dev_.zero(dv.data(), qb);
          dev_.attention_backward(sh, q.f32(), k.f32(), v.f32(), dout.f32(), lse.f32(), delta.f32(),
                                  dq.f32(), dk.f32(), dv.f32());
          return Status::ok();
        }));
      }
    }
    return Status::ok();
  }

  // Norms, GeLU, residual adds and Adam at sizes from cache-resident to DRAM-bound, described
  // with the bytes the lowering counts for them (forward and backward).
  Status memory_bound() {
    const std::vector<std::int64_t> rows_list =
        shared_           ? std::vector<std::int64_t>{kSharedRows}
        : o_.full_compute ? std::vector<std::int64_t>{64, 512, 4096, 32768}
                          : std::vector<std::int64_t>{64, 512, 4096};
    constexpr std::int64_t kDim = 256;
    for (std::int64_t rows : rows_list) {
      const std::int64_t n = rows * kDim;
      // Consecutive calls work on different copies of the large arrays, so that a kernel reads
      // its inputs from memory, as in a training step, not from the cache the previous call
      // filled (repeating one small buffer measured cache bandwidth, several times DRAM's).
      const std::int64_t copies = cold_copies(n * kF32);
      std::int64_t call = 0;
      auto at = [&](const DeviceBuffer& b) { return b.f32() + (call % copies) * n; };
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer x, filled(dev_, n * copies, "x"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer y, filled(dev_, n * copies, "y"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer dy, filled(dev_, n * copies, "dy"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer dx, filled(dev_, n * copies, "dx"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer gamma, filled(dev_, kDim, "gamma"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer beta, filled(dev_, kDim, "beta"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer dgamma, filled(dev_, kDim, "dgamma"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer dbeta, filled(dev_, kDim, "dbeta"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer mean, filled(dev_, rows, "mean"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer rstd, filled(dev_, rows, "rstd"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer p, filled(dev_, n * copies, "param"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer m1, filled(dev_, n * copies, "exp_avg"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer m2, filled(dev_, n * copies, "exp_avg_sq"));
      auto desc = [&](OpKind kind, std::int64_t read, std::int64_t written) {
        OpDesc d;
        d.kind = kind;
        d.precision = Precision::kFp32;
        d.m = rows;
        d.n = kDim;
        d.bytes_read = Bytes(read);
        d.bytes_written = Bytes(written);
        return d;
      };
      const std::int64_t t = n * kF32;
      PLANNER_RETURN_IF_ERROR(compute_one(desc(OpKind::kNorm, t, t), false, [&] {
        ++call;
        dev_.layernorm_forward(at(x), gamma.f32(), beta.f32(), rows, kDim, 1e-5f, at(y), mean.f32(),
                               rstd.f32());
        return Status::ok();
      }));
      PLANNER_RETURN_IF_ERROR(compute_one(desc(OpKind::kNorm, 2 * t, t), false, [&] {
        ++call;
        dev_.layernorm_backward(at(dy), at(x), gamma.f32(), mean.f32(), rstd.f32(), rows, kDim,
                                at(dx), dgamma.f32(), dbeta.f32());
        return Status::ok();
      }));
      PLANNER_RETURN_IF_ERROR(compute_one(desc(OpKind::kActivation, t, t), false, [&] {
        ++call;
        dev_.gelu_forward(at(x), n, at(y));
        return Status::ok();
      }));
      PLANNER_RETURN_IF_ERROR(compute_one(desc(OpKind::kActivation, 2 * t, t), false, [&] {
        ++call;
        dev_.gelu_backward(at(x), at(dy), n, at(dx));
        return Status::ok();
      }));
      PLANNER_RETURN_IF_ERROR(compute_one(desc(OpKind::kElementwise, 2 * t, t), false, [&] {
        ++call;
        dev_.add(at(x), at(dy), n, at(y));
        return Status::ok();
      }));
      OpDesc adam = desc(OpKind::kOptimizerStep, kAdamBytesEachWay * n, kAdamBytesEachWay * n);
      adam.m = 1;
      adam.n = n;
      std::int64_t step = 0;
      const AdamConfig config;
      PLANNER_RETURN_IF_ERROR(compute_one(adam, false, [&] {
        ++call;
        dev_.adam_step(config, ++step, n, 1.0f, at(dy), at(p), at(m1), at(m2), nullptr);
        return Status::ok();
      }));
    }
    return Status::ok();
  }

  std::vector<OpKind> kinds() const {
    if (!o_.kinds.empty()) return o_.kinds;
    return {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kReduceScatter,
            OpKind::kAllToAll,  OpKind::kBroadcast, OpKind::kSend};
  }

  Status collectives() {
    const int world = b_.world().size();
    std::vector<int> sizes = o_.group_sizes;
    // By default every group size whose ranks have a core each (larger groups on an
    // oversubscribed host wait on the scheduler, not on the transport).
    const int largest = b_.world().local_size() > cores_ ? std::max(2, cores_) : world;
    if (sizes.empty()) {
      for (int g = 2; g <= std::min(world, largest); ++g)
        sizes.push_back(g);
    }
    const bool own_core = core_per_rank();
    for (int g : sizes) {
      if (g < 2 || g > world) {
        return Status::invalid_input("group size " + std::to_string(g) +
                                     ": expected 2 to the world size " + std::to_string(world));
      }
      PLANNER_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                               first_ranks("calibration-" + std::to_string(g), g));
      if (comm) {
        // The members poll as ranks of a run of g ranks on this host would.
        set_core_per_rank(g <= cores_);
        Status st = Status::ok();
        for (OpKind kind : kinds()) {
          if ((kind == OpKind::kSend || kind == OpKind::kRecv) && g != 2) continue;
          for (std::int64_t bytes = o_.min_bytes; bytes <= o_.max_bytes && st.is_ok();
               bytes *= std::max(2, o_.size_factor)) {
            st = collective(*comm, kind, bytes);
          }
        }
        set_core_per_rank(own_core);
        PLANNER_RETURN_IF_ERROR(st);
      }
      PLANNER_RETURN_IF_ERROR(barrier());
    }
    return Status::ok();
  }

  // One collective of nccl-tests size `bytes` over `comm`, timed on every member; the slowest
  // member's median counts.
  Status collective(Communicator& comm, OpKind kind, std::int64_t bytes) {
    const int n = comm.size();
    // Elements per member block (all-gather, reduce-scatter, all-to-all) or per buffer.
    const bool blocked =
        kind == OpKind::kAllGather || kind == OpKind::kReduceScatter || kind == OpKind::kAllToAll;
    const std::int64_t count = std::max<std::int64_t>(1, bytes / kF32 / (blocked ? n : 1));
    const std::int64_t total = count * (blocked ? n : 1);
    PLANNER_ASSIGN_OR_RETURN(DeviceBuffer send, filled(dev_, total, "calibration send"));
    PLANNER_ASSIGN_OR_RETURN(DeviceBuffer recv, filled(dev_, total, "calibration recv"));
    const std::string what = std::string(to_string(kind)) + " of " + std::to_string(bytes) +
                             " bytes over " + std::to_string(n) + " ranks";
    const int me = comm.rank();
    std::uint32_t tag = 0;
    auto start = [&]() -> Result<Ticket> {
      switch (kind) {
        case OpKind::kAllReduce:
          return comm.all_reduce(send.data(), count, DType::kFloat32, ReduceOp::kSum, what);
        case OpKind::kAllGather:
          return comm.all_gather(send.data(), recv.data(), count, DType::kFloat32, what);
        case OpKind::kReduceScatter:
          return comm.reduce_scatter(send.data(), recv.data(), count, DType::kFloat32,
                                     ReduceOp::kSum, what);
        case OpKind::kAllToAll:
          return comm.all_to_all(send.data(), recv.data(), count, DType::kFloat32, what);
        case OpKind::kBroadcast:
          return comm.broadcast(send.data(), count, DType::kFloat32, 0, what);
        default:
          return Status::internal("not a collective: " + std::string(to_string(kind)));
      }
    };
    auto body = [&]() -> Status {
      if (kind == OpKind::kSend || kind == OpKind::kRecv) {
        // Ping-pong: member 0 sends then receives, member 1 the reverse.
        ++tag;
        for (int leg = 0; leg < 2; ++leg) {
          const bool sending = (leg == 0) == (me == 0);
          auto t = sending ? comm.send(send.data(), count, DType::kFloat32, 1 - me, tag, what)
                           : comm.recv(recv.data(), count, DType::kFloat32, 1 - me, tag, what);
          if (!t) return t.status();
          PLANNER_RETURN_IF_ERROR(b_.wait(*t, deadline()));
        }
        return Status::ok();
      }
      PLANNER_ASSIGN_OR_RETURN(Ticket t, start());
      return b_.wait(t, deadline());
    };
    // Member 0's untimed first call sizes the batches for everyone.
    PLANNER_ASSIGN_OR_RETURN(double first, timed(body, 1));
    PLANNER_ASSIGN_OR_RETURN(DeviceBuffer agree, DeviceBuffer::allocate(dev_, 8, "iterations"));
    double iterations = static_cast<double>(iterations_for(first));
    PLANNER_RETURN_IF_ERROR(dev_.copy_from_host(agree.data(), &iterations, 8));
    PLANNER_ASSIGN_OR_RETURN(Ticket bt,
                             comm.broadcast(agree.data(), 1, DType::kFloat64, 0, "iterations"));
    PLANNER_RETURN_IF_ERROR(b_.wait(bt, deadline()));
    PLANNER_RETURN_IF_ERROR(dev_.copy_to_host(&iterations, agree.data(), 8));
    PLANNER_RETURN_IF_ERROR(b_.release_tickets());
    const auto iters = static_cast<std::int64_t>(iterations);
    std::vector<double> times;
    for (int r = 0; r < kRepeats; ++r) {
      PLANNER_ASSIGN_OR_RETURN(double t, timed(body, iters));
      times.push_back(t);
    }
    std::sort(times.begin(), times.end());
    double slowest = times[times.size() / 2];
    if (kind == OpKind::kSend || kind == OpKind::kRecv) slowest /= 2;  // one way
    PLANNER_RETURN_IF_ERROR(dev_.copy_from_host(agree.data(), &slowest, 8));
    PLANNER_ASSIGN_OR_RETURN(Ticket mt, comm.all_reduce(agree.data(), 1, DType::kFloat64,
                                                        ReduceOp::kMax, "slowest member"));
    PLANNER_RETURN_IF_ERROR(b_.wait(mt, deadline()));
    PLANNER_RETURN_IF_ERROR(dev_.copy_to_host(&slowest, agree.data(), 8));
    PLANNER_RETURN_IF_ERROR(b_.release_tickets());
    CalibrationPoint p;
    p.desc.kind = kind == OpKind::kRecv ? OpKind::kSend : kind;
    p.desc.precision = Precision::kFp32;
    p.desc.stream = Stream::kDpComm;
    p.desc.comm_bytes = Bytes(total * kF32);
    p.group_size = n;
    record(p, slowest, iters);
    return Status::ok();
  }

  Backend& b_;
  Device& dev_;
  const MicrobenchOptions& o_;
  const MeasurementSink& sink_;
  const int cores_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The compute phase: the computing ranks' communicator (they start each kernel together), how
  // many compute at once, and whether they are more than the host's cores.
  Communicator* sync_ = nullptr;
  int computing_ = 1;
  bool shared_ = false;
  std::unique_ptr<DeviceBuffer> sync_buf_;
  std::vector<Measurement> out_;
};

}  // namespace

Result<std::vector<Measurement>> run_microbenchmarks(Backend& backend,
                                                     const MicrobenchOptions& options,
                                                     const MeasurementSink& sink) {
  if (options.min_bytes < 1 || options.max_bytes < options.min_bytes) {
    return Status::invalid_input("message sizes: expected 1 <= min (" +
                                 std::to_string(options.min_bytes) + ") <= max (" +
                                 std::to_string(options.max_bytes) + ")");
  }
  Bench bench(backend, options, sink);
  PLANNER_RETURN_IF_ERROR(bench.run());
  return bench.take();
}

}  // namespace planner::exec
