#include "planner/sim/program_runner.hpp"

#include <algorithm>
#include <memory>

#include "planner/sim/comm_matcher.hpp"
#include "planner/sim/comm_plans.hpp"
#include "planner/sim/compute_model.hpp"
#include "planner/sim/compute_units.hpp"
#include "planner/sim/engine.hpp"
#include "planner/sim/model_registry.hpp"
#include "planner/sim/network.hpp"
#include "planner/sim/symmetry.hpp"
#include "planner/sim/trace.hpp"

namespace planner::sim {

namespace {

enum EventKind : std::uint32_t { kComputeDone, kFixedDone, kTransferDone, kPhaseDone, kHostIssued };

// An op's progress through the runner.
enum class OpState : std::uint8_t { kPending, kHostWait, kIssued, kDone };

// What the issue loop reads of an op, side by side (8 bytes), so that trying an op touches one
// cache line instead of the op, its descriptor and two vectors.
struct OpTrack {
  std::uint32_t waiting = 0;  // dependencies not yet done
  OpState state = OpState::kPending;
  std::uint8_t stream = 0;  // its descriptor's stream
  bool unsynced = false;    // host synchronisations do not wait for it (host_model.hpp sync_skips)
};

// A simulated rank: its program's streams and dependencies, and what its ops did.
struct RankState {
  RankOpTimes times;  // the program, its ops per stream, and their timings
  std::array<std::uint32_t, kNumStreams> head{};  // per stream, the next op to issue
  std::vector<OpTrack> track;                     // per op
  std::vector<std::uint32_t> rdep_offsets;        // per op, its dependents (CSR)
  std::vector<std::uint32_t> rdeps;
  std::vector<Time> issue;  // when op times or a trace are kept
  std::vector<Time> host;   // per op, when the host issues it (empty without a host model)
  Time host_wait;           // compute-stream time spent waiting for the host
  // Host synchronisations (a ZeRO-3 gather issued tensor by tensor, a pass, a pipeline receive:
  // host_model.hpp): before op syncs[k] the host waits until every op it issued earlier has
  // finished on the GPU, but those OpTrack::unsynced marks. host_shift: what the resolved ones
  // delayed the host clock by; ops at or after the first unresolved one wait in `blocked`.
  std::vector<std::uint32_t> syncs;
  std::vector<std::uint32_t> synced_before;  // per op, the ops before it a sync waits for
  std::size_t next_sync = 0;
  std::uint32_t sync_waits = 0;  // ops the next sync still waits for
  std::vector<std::uint32_t> blocked;
  Time host_shift;
  std::size_t done = 0;
  Time finish;
};

// A collective or message moving data: its plan, phase by phase.
struct Flight {
  const CommPlan* plan = nullptr;
  std::uint32_t use = 0;
  std::uint32_t phase = 0;
  Time started;
};

// Times a step program: issues every rank's ops in stream order as their dependencies finish,
// runs compute on the ranks' compute units, matches communication and moves it on the network.
class Runner {
 public:
  Runner(const StepProgram& program, const RunContext& ctx)
      : program_(program),
        ctx_(ctx),
        keep_(ctx.options.keep_op_times || ctx.options.trace),
        track_(ctx.options.critical_path),
        compute_(*ctx.profile, ctx.options.attention),
        owned_fabric_(ctx.fabric != nullptr
                          ? Fabric{}
                          : Fabric::build(*ctx.cluster, *ctx.profile, ctx.options.balanced_fabric)),
        fabric_(ctx.fabric != nullptr ? *ctx.fabric : owned_fabric_),
        units_(engine_, kComputeDone, ctx.profile->compute) {}

  Result<ProgramRun> run();

 private:
  Status setup();
  Status index_ranks(std::vector<int>& lowered);
  void init_rank(std::uint32_t ri);
  void init_host(RankState& s);
  // Resolves the rank's next host synchronisations whose ops have all finished.
  void resolve_syncs(std::uint32_t ri);
  void try_issue(std::uint32_t ri, std::uint32_t i);
  void issue(std::uint32_t ri, std::uint32_t i);
  void issue_comm(std::uint32_t ri, std::uint32_t i);
  void complete(std::uint32_t ri, std::uint32_t i);
  void start_match(MatchId id);
  void start_phase(MatchId id);
  void finish_match(MatchId id);
  void dispatch(const Event& e);
  // The collective-use entry of `plan` (created on its first use).
  std::uint32_t use_of(CachedPlan& plan, TimeBucket axis, OpKind kind, int size);
  Time compute_time(const Op& op);
  void drain();
  Status stalled() const;
  ProgramRun results();

  const StepProgram& program_;
  const RunContext& ctx_;
  const bool keep_;   // per-op issue times (for op timings or a trace)
  const bool track_;  // what the critical path needs
  Engine engine_;
  ComputeModel compute_;
  Fabric owned_fabric_;
  const Fabric& fabric_;
  std::optional<Network> network_;  // over the plans' resources, made once they are built
  ComputeUnits units_;
  std::optional<Symmetry> symmetry_;
  std::unique_ptr<CommPlans> plans_;
  std::unique_ptr<CommMatcher> matcher_;
  std::vector<RankState> ranks_;
  std::vector<std::int32_t> rank_index_;  // global rank -> index in ranks_, or -1
  // Ops to try, first in first out: ready_[ready_head_..] are pending (a vector, emptied when
  // drained, rather than a deque's chunks allocated and freed as it moves).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ready_;
  std::size_t ready_head_ = 0;
  std::vector<MatchId> starting_;     // scratch: the matches an arrival started
  std::vector<Time> duration_cache_;  // per (desc, backward); -1 when not computed
  std::vector<Flight> flights_;       // by match id
  std::vector<CollectiveUse> uses_;
};

Status Runner::index_ranks(std::vector<int>& lowered) {
  const auto& ranks = program_.ranks();
  rank_index_.assign(static_cast<std::size_t>(program_.total_ranks()), -1);
  for (std::size_t ri = 0; ri < ranks.size(); ++ri) {
    const int rank = ranks[ri].rank();
    if (rank < 0 || static_cast<std::size_t>(rank) >= ctx_.gpu_of_rank.size()) {
      return Status::invalid_input("rank " + std::to_string(rank) + " has no GPU in the placement");
    }
    rank_index_[static_cast<std::size_t>(rank)] = static_cast<std::int32_t>(ri);
    lowered.push_back(rank);
  }
  for (const CommGroup& g : program_.groups()) {
    for (int r : g.ranks) {
      if (r >= 0 && static_cast<std::size_t>(r) >= ctx_.gpu_of_rank.size()) {
        return Status::invalid_input("rank " + std::to_string(r) + " of group " + g.axes +
                                     " has no GPU in the placement");
      }
    }
  }
  return Status::ok();
}

Status Runner::setup() {
  std::vector<int> lowered;
  PLANNER_RETURN_IF_ERROR(index_ranks(lowered));
  for (const OpDesc& d : program_.descs()) {
    if (d.kind == OpKind::kGemm) PLANNER_RETURN_IF_ERROR(compute_.check_precision(d.precision));
  }
  if (ctx_.parallel != nullptr && ctx_.options.background) {
    PLANNER_ASSIGN_OR_RETURN(
        Symmetry s, Symmetry::create(*ctx_.parallel, *ctx_.cluster, ctx_.gpu_of_rank, lowered));
    symmetry_ = std::move(s);
  }
  duration_cache_.assign(program_.descs().size() * 2, Time(-1));
  matcher_ = std::make_unique<CommMatcher>(program_, rank_index_);
  ranks_.resize(program_.ranks().size());
  for (std::uint32_t ri = 0; ri < ranks_.size(); ++ri) {
    init_rank(ri);
    if (!ranks_[ri].syncs.empty() && ranks_[ri].sync_waits == 0) resolve_syncs(ri);
  }
  CommPlanContext plan_ctx;
  plan_ctx.cluster = ctx_.cluster;
  plan_ctx.profile = ctx_.profile;
  plan_ctx.fabric = &fabric_;
  plan_ctx.gpu_of_rank = ctx_.gpu_of_rank;
  plan_ctx.algorithm = ctx_.options.algorithm;
  plan_ctx.symmetry = symmetry_ ? &*symmetry_ : nullptr;
  plan_ctx.memo = ctx_.plan_memo;
  plans_ = std::make_unique<CommPlans>(program_, plan_ctx);
  plans_->build();
  network_.emplace(plans_->capacity(), engine_, kTransferDone);
  return Status::ok();
}

void Runner::init_rank(std::uint32_t ri) {
  const RankProgram& r = program_.ranks()[ri];
  RankState& s = ranks_[ri];
  s.times.program = &r;
  const int gpu = ctx_.gpu_of_rank[static_cast<std::size_t>(r.rank())];
  units_.add(ctx_.cluster->node_of(gpu));
  const std::size_t n = r.size();
  s.track.resize(n);
  if (keep_) s.issue.assign(n, Time(0));
  s.times.start.assign(n, Time(0));
  s.times.end.assign(n, Time(0));
  if (track_) s.times.started_by.assign(n, kNoOp);
  std::vector<std::uint32_t> counts(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const OpDesc& desc = program_.desc(r.op(i));
    s.times.stream_ops[static_cast<std::size_t>(desc.stream)].push_back(
        static_cast<std::uint32_t>(i));
    OpTrack& t = s.track[i];
    t.waiting = static_cast<std::uint32_t>(r.deps(i).size());
    t.stream = static_cast<std::uint8_t>(desc.stream);
    t.unsynced = sync_skips(ctx_.options.host, desc, r.op(i).id.role());
    for (std::uint32_t d : r.deps(i))
      ++counts[d + 1];
  }
  if (ctx_.options.host.enabled()) init_host(s);
  for (std::size_t i = 0; i < n; ++i)
    counts[i + 1] += counts[i];
  s.rdep_offsets = counts;
  s.rdeps.resize(r.num_deps());
  for (std::size_t i = 0; i < n; ++i) {
    for (std::uint32_t d : r.deps(i))
      s.rdeps[counts[d]++] = static_cast<std::uint32_t>(i);
  }
}

void Runner::init_host(RankState& s) {
  implements(SimModel::kHostIssue);
  const HostCosts& c = ctx_.options.host;
  const RankProgram& r = *s.times.program;
  s.host.resize(r.size());
  Time h(0);
  int last_micro_batch = OpId::kNone;
  bool stepped = false;
  // The pass the previous compute op belonged to (micro-batch, forward or backward), for
  // sync_per_pass.
  std::pair<int, bool> pass{OpId::kNone, false};
  // The host synchronises before op k (once, whatever asks for it).
  auto sync_before = [&s](std::size_t k) {
    const auto at = static_cast<std::uint32_t>(k);
    if (s.syncs.empty() || s.syncs.back() != at) s.syncs.push_back(at);
  };
  for (std::size_t i = 0; i < r.size(); ++i) {
    const OpId id = r.op(i).id;
    if (c.sync_per_pass && id.microbatch() != OpId::kNone &&
        is_compute(program_.desc(r.op(i)).kind) && id.phase() != Phase::kOptimizer) {
      const std::pair<int, bool> p{id.microbatch(), id.phase() != Phase::kForward};
      if (p != pass) {
        pass = p;
        if (i > 0) sync_before(i);
      }
    }
    if (id.phase() == Phase::kForward && id.microbatch() != OpId::kNone &&
        id.microbatch() != last_micro_batch) {
      last_micro_batch = id.microbatch();
      h += c.per_micro_batch;
    }
    if (id.phase() == Phase::kOptimizer && !stepped) {
      stepped = true;
      h += c.per_step;
    }
    const Op& op = r.op(i);
    const OpDesc& d = program_.desc(op);
    // The group's size matters only to a gather issued tensor by tensor (host_cost).
    std::int64_t members = 1;
    if (is_collective(d.kind) && gathers_tensor_by_tensor(c, d)) {
      if (op.group >= 0) members = static_cast<std::int64_t>(program_.group(op.group).ranks.size());
      if (id.role() == OpRole::kDpParamGather) sync_before(i);
    }
    const bool backward =
        id.phase() == Phase::kBackwardInput || id.phase() == Phase::kBackwardWeight;
    h += host_cost(c, d, id.phase(), members, compute_.extra_host_kernels(d, backward));
    s.host[i] = h;
    // The host waits for a pipeline receive, and for dropless MoE's token counts, before issuing
    // what follows them.
    const bool waits =
        (d.kind == OpKind::kRecv && !s.track[i].unsynced) || id.role() == OpRole::kMoeTokenCounts;
    if (waits && i + 1 < r.size()) sync_before(i + 1);
  }
  if (s.syncs.empty()) return;
  s.synced_before.assign(r.size() + 1, 0);
  for (std::size_t i = 0; i < r.size(); ++i) {
    s.synced_before[i + 1] = s.synced_before[i] + (s.track[i].unsynced ? 0 : 1);
  }
  s.sync_waits = s.synced_before[s.syncs[0]];
}

void Runner::resolve_syncs(std::uint32_t ri) {
  RankState& s = ranks_[ri];
  const Time now = engine_.now();
  while (s.next_sync < s.syncs.size() && s.sync_waits == 0) {
    const std::uint32_t k = s.syncs[s.next_sync];
    // The host reaches the sync after the op before it, then waits for the GPU.
    const Time arrives = (k > 0 ? s.host[k - 1] : Time(0)) + s.host_shift;
    if (now > arrives) s.host_shift += now - arrives;
    // The GPU, drained, waits while the host issues op k (a gather; a compute op's wait is
    // counted when it is issued, in try_issue).
    if (s.track[k].stream != static_cast<std::uint8_t>(Stream::kCompute)) {
      s.host_wait += s.host[k] + s.host_shift - std::max(now, arrives);
    }
    ++s.next_sync;
    if (s.next_sync < s.syncs.size()) {
      // Nothing at or after k has been issued yet: the next sync waits for all of [k, next).
      s.sync_waits = s.synced_before[s.syncs[s.next_sync]] - s.synced_before[k];
    }
  }
  for (std::uint32_t i : s.blocked)
    ready_.emplace_back(ri, i);
  s.blocked.clear();
}

Time Runner::compute_time(const Op& op) {
  const OpDesc& d = program_.desc(op);
  const bool backward =
      op.id.phase() == Phase::kBackwardInput || op.id.phase() == Phase::kBackwardWeight;
  Time& t = duration_cache_[op.desc * 2 + (backward ? 1 : 0)];
  if (t < Time(0)) t = compute_.op_time(d, backward);
  return t;
}

void Runner::try_issue(std::uint32_t ri, std::uint32_t i) {
  implements(SimModel::kStreams);
  RankState& s = ranks_[ri];
  OpTrack& t = s.track[i];
  if (t.state != OpState::kPending || t.waiting != 0) return;
  const auto stream = static_cast<std::size_t>(t.stream);
  const auto& ops = s.times.stream_ops[stream];
  if (s.head[stream] >= ops.size() || ops[s.head[stream]] != i) return;
  if (s.next_sync < s.syncs.size() && i >= s.syncs[s.next_sync]) {
    s.blocked.push_back(i);  // the host has not got past the sync before it
    return;
  }
  const Time now = engine_.now();
  if (!s.host.empty() && s.host[i] + s.host_shift > now) {
    // Ready on the GPU, not yet issued by the host.
    const Time at = s.host[i] + s.host_shift;
    t.state = OpState::kHostWait;
    if (stream == static_cast<std::size_t>(Stream::kCompute)) s.host_wait += at - now;
    engine_.schedule(at, kHostIssued, ri, i);
    return;
  }
  issue(ri, i);
}

void Runner::issue(std::uint32_t ri, std::uint32_t i) {
  RankState& s = ranks_[ri];
  const Op& op = s.times.program->op(i);
  const OpDesc& d = program_.desc(op);
  const Time now = engine_.now();
  s.track[i].state = OpState::kIssued;
  if (keep_) s.issue[i] = now;
  if (is_collective(d.kind) || is_p2p(d.kind)) {
    issue_comm(ri, i);
  } else if (d.stream == Stream::kCompute) {
    s.times.start[i] = now;
    units_.start(ri, compute_time(op), i);
  } else {
    // Host work and host<->device copies: a fixed time on their own stream.
    s.times.start[i] = now;
    engine_.schedule(now + compute_time(op), kFixedDone, ri, i);
  }
}

void Runner::issue_comm(std::uint32_t ri, std::uint32_t i) {
  const Op& op = ranks_[ri].times.program->op(i);
  const OpDesc& d = program_.desc(op);
  if (is_collective(d.kind)) {
    // A collective's use counts from the first arrival of its first instance.
    use_of(*plans_->plan(ri, i), bucket_of(d.stream), d.kind,
           static_cast<int>(program_.group(op.group).ranks.size()));
  }
  starting_.clear();
  matcher_->arrive(RankOp{ri, i}, starting_);
  if (flights_.size() < matcher_->capacity()) flights_.resize(matcher_->capacity());
  for (const MatchId id : starting_)
    start_match(id);
}

void Runner::complete(std::uint32_t ri, std::uint32_t i) {
  RankState& s = ranks_[ri];
  const Time now = engine_.now();
  OpTrack& t = s.track[i];
  t.state = OpState::kDone;
  s.times.end[i] = now;
  ++s.done;
  s.finish = std::max(s.finish, now);
  if (s.next_sync < s.syncs.size() && i < s.syncs[s.next_sync] && !t.unsynced &&
      --s.sync_waits == 0) {
    resolve_syncs(ri);
  }
  const auto stream = static_cast<std::size_t>(t.stream);
  const auto& ops = s.times.stream_ops[stream];
  if (++s.head[stream] < ops.size()) ready_.emplace_back(ri, ops[s.head[stream]]);
  for (std::uint32_t k = s.rdep_offsets[i]; k < s.rdep_offsets[i + 1]; ++k) {
    const std::uint32_t j = s.rdeps[k];
    if (--s.track[j].waiting == 0) ready_.emplace_back(ri, j);
  }
}

std::uint32_t Runner::use_of(CachedPlan& cached, TimeBucket axis, OpKind kind, int size) {
  if (cached.use != CachedPlan::kNoUse) return cached.use;
  const CommPlan& plan = cached.plan;
  const std::string protocol =
      plan.phases.empty()
          ? std::string()
          : ctx_.profile->network.protocols[static_cast<std::size_t>(plan.protocol)].name;
  for (std::size_t u = 0; u < uses_.size(); ++u) {
    const CollectiveUse& c = uses_[u];
    if (c.axis == axis && c.kind == kind && c.algorithm == plan.algorithm &&
        c.protocol == protocol && c.group_size == size && c.copies == plan.copies) {
      cached.use = static_cast<std::uint32_t>(u);
      return cached.use;
    }
  }
  CollectiveUse c;
  c.axis = axis;
  c.kind = kind;
  c.algorithm = plan.algorithm;
  c.protocol = protocol;
  c.group_size = size;
  c.copies = plan.copies;
  uses_.push_back(c);
  cached.use = static_cast<std::uint32_t>(uses_.size() - 1);
  return cached.use;
}

void Runner::start_match(MatchId id) {
  const Match& m = matcher_->match(id);
  const Time now = engine_.now();
  // A collective runs its first member's plan, a message its own.
  const RankOp first = m.members.front(), last = m.members.back();
  const Op& op = ranks_[last.rank].times.program->op(last.op);
  const OpDesc& d = program_.desc(op);
  const bool collective = is_collective(d.kind);
  CachedPlan& cached =
      collective ? *plans_->plan(first.rank, first.op) : *plans_->plan(last.rank, last.op);
  Flight& f = flights_[id];
  f.plan = &cached.plan;
  f.use = collective ? cached.use : use_of(cached, bucket_of(d.stream), OpKind::kSend, 2);
  f.phase = 0;
  f.started = now;
  for (const RankOp& member : m.members) {
    RankOpTimes& t = ranks_[member.rank].times;
    if (track_ && !(member == m.trigger)) {
      t.started_by[member.op] =
          pack_op(m.trigger.rank, m.trigger.op) | (m.mirrored ? kByMirror : PackedOp{0});
    }
    t.start[member.op] = now;
    units_.comm_started(member.rank);
  }
  CollectiveUse& use = uses_[f.use];
  ++use.count;
  use.bytes += d.comm_bytes;
  start_phase(id);
}

void Runner::start_phase(MatchId id) {
  Flight& f = flights_[id];
  if (f.phase >= f.plan->phases.size()) {
    finish_match(id);
    return;
  }
  const CommPhase& phase = f.plan->phases[f.phase];
  network_->start(phase.uses, phase.bytes, id);
}

void Runner::finish_match(MatchId id) {
  const Flight& f = flights_[id];
  uses_[f.use].busy += engine_.now() - f.started;
  for (const RankOp& member : matcher_->match(id).members) {
    units_.comm_stopped(member.rank);
    complete(member.rank, member.op);
  }
  matcher_->release(id);
}

void Runner::drain() {
  while (ready_head_ < ready_.size()) {
    const auto [ri, i] = ready_[ready_head_++];
    try_issue(ri, i);
  }
  ready_.clear();
  ready_head_ = 0;
}

void Runner::dispatch(const Event& e) {
  switch (e.kind) {
    case kComputeDone:
      complete(e.a, units_.finish(e.a));
      break;
    case kFixedDone:
      complete(e.a, static_cast<std::uint32_t>(e.b));
      break;
    case kTransferDone: {
      const auto id = static_cast<MatchId>(network_->finish(e.a));
      const Flight& f = flights_[id];
      engine_.schedule(engine_.now() + f.plan->phases[f.phase].latency, kPhaseDone, id);
      break;
    }
    case kPhaseDone:
      ++flights_[e.a].phase;
      start_phase(e.a);
      break;
    case kHostIssued:
      issue(e.a, static_cast<std::uint32_t>(e.b));
      break;
    default:
      break;
  }
}

Status Runner::stalled() const {
  std::size_t left = 0, total = 0;
  std::string heads;
  int shown = 0;
  for (const RankState& s : ranks_) {
    const RankProgram& r = *s.times.program;
    total += r.size();
    left += r.size() - s.done;
    for (std::size_t k = 0; k < kNumStreams && shown < 6; ++k) {
      if (s.head[k] >= s.times.stream_ops[k].size()) continue;
      const std::uint32_t i = s.times.stream_ops[k][s.head[k]];
      heads += "\n  rank " + std::to_string(r.rank()) + " op " + std::to_string(i) + " (" +
               to_string(r.op(i).id) + ") " +
               (s.track[i].state == OpState::kIssued ? "waits for its peers"
                                                     : "waits for its dependencies");
      ++shown;
    }
  }
  return Status::internal("simulation stalled: " + std::to_string(left) + " of " +
                          std::to_string(total) + " ops never ran; blocked heads:" + heads);
}

Result<ProgramRun> Runner::run() {
  PLANNER_RETURN_IF_ERROR(setup());
  for (std::uint32_t ri = 0; ri < ranks_.size(); ++ri) {
    for (const auto& ops : ranks_[ri].times.stream_ops) {
      if (!ops.empty()) ready_.emplace_back(ri, ops.front());
    }
  }
  drain();
  Event e;
  while (engine_.next(e)) {
    dispatch(e);
    drain();
  }
  for (const RankState& s : ranks_) {
    if (s.done != s.times.program->size()) return stalled();
  }
  return results();
}

ProgramRun Runner::results() {
  ProgramRun out;
  for (const RankState& s : ranks_)
    out.makespan = std::max(out.makespan, s.finish);
  std::vector<RankOpTimes> times;
  times.reserve(ranks_.size());
  for (RankState& s : ranks_) {
    const RankProgram& p = *s.times.program;
    RankRun r;
    r.rank = p.rank();
    r.stage = p.stage();
    r.kind = p.kind();
    r.finish = s.finish;
    r.host_wait = s.host_wait;
    r.buckets = bucket_times(s.times, out.makespan);
    if (keep_) {
      r.ops.reserve(p.size());
      for (std::size_t i = 0; i < p.size(); ++i) {
        const Op& op = p.op(i);
        const OpDesc& d = program_.desc(op);
        const Bytes bytes = is_compute(d.kind) ? d.bytes_read + d.bytes_written : d.comm_bytes;
        r.ops.push_back(
            {op.id, d.kind, d.stream, s.issue[i], s.times.start[i], s.times.end[i], bytes});
      }
    }
    out.ranks.push_back(std::move(r));
    times.push_back(std::move(s.times));
  }
  if (track_) {
    CriticalPath path = critical_path(program_, times, ctx_.options.critical_path_top);
    out.critical_buckets = path.buckets;
    out.critical_path = std::move(path.top);
  }
  out.collectives = uses_;
  const NetworkStats& ns = network_->stats();
  out.stats.events = engine_.processed();
  for (const RankOpTimes& t : times)
    out.stats.ops += t.end.size();
  out.stats.transfers = ns.transfers;
  out.stats.solves = ns.solves;
  out.stats.solve_links = ns.solve_links;
  out.stats.largest_component = ns.largest_component;
  out.stats.peak_queue = engine_.peak_queue();
  out.stats.plans = plans_->size();
  if (ctx_.options.trace) out.trace_json = chrome_trace(out.ranks);
  if (!ctx_.options.keep_op_times) {
    for (RankRun& r : out.ranks)
      r.ops = {};
  }
  return out;
}

}  // namespace

Result<ProgramRun> run_program(const StepProgram& program, const RunContext& context) {
  if (context.cluster == nullptr || context.profile == nullptr) {
    return Status::invalid_input("run_program: a cluster and a hardware profile are required");
  }
  Runner runner(program, context);
  return runner.run();
}

}  // namespace planner::sim
