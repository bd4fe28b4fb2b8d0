#include "planner/sim/program_runner.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "planner/sim/compute_model.hpp"
#include "planner/sim/engine.hpp"
#include "planner/sim/network.hpp"
#include "planner/sim/symmetry.hpp"
#include "planner/sim/trace.hpp"

namespace planner::sim {

TimeBucket bucket_of(Stream stream) {
  switch (stream) {
    case Stream::kCompute:
      return TimeBucket::kCompute;
    case Stream::kTpComm:
      return TimeBucket::kTp;
    case Stream::kCpSend:
    case Stream::kCpRecv:
      return TimeBucket::kCp;
    case Stream::kEpComm:
      return TimeBucket::kEp;
    case Stream::kPpSend:
    case Stream::kPpRecv:
      return TimeBucket::kPp;
    case Stream::kDpComm:
    case Stream::kPsSend:
    case Stream::kPsRecv:
      return TimeBucket::kDp;
    case Stream::kHostToDevice:
    case Stream::kDeviceToHost:
    case Stream::kHost:
      return TimeBucket::kOther;
  }
  return TimeBucket::kOther;
}

namespace {

enum EventKind : std::uint32_t { kComputeDone, kFixedDone, kTransferDone, kPhaseDone };

constexpr std::uint32_t kNone = ~std::uint32_t{0};
constexpr std::uint64_t kNoPred = ~std::uint64_t{0};

std::uint64_t pack(std::uint32_t rank_index, std::uint32_t op) {
  return (static_cast<std::uint64_t>(rank_index) << 32) | op;
}

std::size_t comm_slot(TimeBucket b) {
  return static_cast<std::size_t>(std::find(kCommBuckets.begin(), kCommBuckets.end(), b) -
                                  kCommBuckets.begin());
}

void put_int(std::string& key, std::int64_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// A PlanMemo key: what a plan moves and over which GPUs (the caller appends the copies).
std::string plan_key(char what, OpKind kind, Bytes bytes, std::span<const int> gpus,
                     std::optional<Algorithm> forced) {
  std::string key(1, what);
  put_int(key, static_cast<std::int64_t>(kind));
  put_int(key, bytes.raw());
  put_int(key, forced ? static_cast<std::int64_t>(*forced) : -1);
  put_int(key, static_cast<std::int64_t>(gpus.size()));
  for (int g : gpus)
    put_int(key, g);
  return key;
}

struct CachedPlan {
  CommPlan plan;
  std::uint32_t use = kNone;  // index into the collective uses, from the first instance on
};

struct RankState {
  const RankProgram* prog = nullptr;
  int gpu = 0;
  std::array<std::vector<std::uint32_t>, kNumStreams> stream_ops;
  std::array<std::uint32_t, kNumStreams> head{};
  std::vector<std::uint32_t> waiting;
  std::vector<std::uint32_t> rdep_offsets;
  std::vector<std::uint32_t> rdeps;
  std::vector<std::uint8_t> state;   // 0 pending, 1 issued, 2 done
  std::vector<CachedPlan*> plan;     // per op: its collective's or message's plan, else null
  std::vector<std::int32_t> mirror;  // per op: its mirror (a message to an unsimulated peer), or -1
  std::vector<Time> issue, start, end;
  std::vector<std::uint64_t> pred;
  std::size_t done = 0;
  // The compute unit.
  std::uint32_t computing = kNone;
  double work_left = 0;  // picoseconds at full speed
  Time work_since;
  double work_rate = 1;
  EventId compute_event = kNoEvent;
  int host = -1;    // node whose cores the rank shares (profile host_cores > 0), else -1
  int sm_comm = 0;  // collectives and messages moving data on this rank
  // Time accounting.
  std::array<int, kCommBuckets.size()> inflight{};
  Time since;
  std::array<Time, kNumTimeBuckets> buckets{};
  Time finish;
};

struct Instance {
  const CommPlan* plan = nullptr;
  std::uint32_t use = 0;
  std::uint32_t phase = 0;
  TimeBucket axis = TimeBucket::kTp;
  Time started;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> members;  // (rank index, op)
};

struct PairHash {
  std::size_t operator()(const std::pair<std::uint64_t, std::uint64_t>& k) const {
    return std::hash<std::uint64_t>()(k.first * 0x9e3779b97f4a7c15ull ^ k.second);
  }
};

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
        network_(fabric_.capacity, engine_, kTransferDone),
        planner_(*ctx.cluster, *ctx.profile, fabric_, ctx.options.algorithm) {}

  Result<ProgramRun> run();

 private:
  Status setup();
  void try_issue(std::uint32_t ri, std::uint32_t i);
  void issue(std::uint32_t ri, std::uint32_t i);
  void complete(std::uint32_t ri, std::uint32_t i);
  void account(RankState& s) { account(s, engine_.now()); }
  static void account(RankState& s, Time now);
  void set_sm_comm(RankState& s, int delta);
  void schedule_compute(std::uint32_t ri);
  // Reschedules the computing ranks of `host` after the number computing there changed.
  void reshare_host(int host);
  void arrive_collective(std::uint32_t ri, std::uint32_t i);
  void arrive_p2p(std::uint32_t ri, std::uint32_t i);
  // A send or receive whose peer was not simulated: it moves data at once.
  void arrive_p2p_alone(std::uint32_t ri, std::uint32_t i);
  void start_instance(std::uint32_t id);
  void start_phase(std::uint32_t id);
  void finish_instance(std::uint32_t id);
  std::uint32_t new_instance(TimeBucket axis);
  CachedPlan& collective_plan(const Op& op);
  CachedPlan& p2p_plan(int src, int dst, const OpDesc& d);
  // The plan of every collective and message of the program, built before the run so that
  // compress_plans() sees every resource use the network will get.
  void build_plans();
  // Keeps one resource of every class of resources crossed by exactly the same phases with the
  // same counts (the smallest capacity, lowest index on ties) in the phases' uses: the others
  // carry the same transfers at the same counts, so their constraint is never tighter and the
  // bottleneck they would tie on freezes the same transfers. The max-min rates are unchanged;
  // the network walks fewer resources (a pipeline send's background copies cross every copy's
  // GPU, PCIe and NIC links, which nothing else but the same phases crosses).
  void compress_plans();
  std::uint32_t usage(TimeBucket axis, OpKind kind, const CommPlan& plan, int size);
  Time compute_time(const Op& op);
  void drain();
  Status stalled() const;
  ProgramRun results();

  const StepProgram& program_;
  const RunContext& ctx_;
  const bool keep_;   // per-op issue and start times (for op timings or a trace)
  const bool track_;  // per-op predecessors (for the critical path)
  Engine engine_;
  ComputeModel compute_;
  Fabric owned_fabric_;
  const Fabric& fabric_;
  Network network_;
  CollectivePlanner planner_;
  std::optional<Symmetry> symmetry_;
  std::vector<RankState> ranks_;
  std::vector<int> host_computing_;       // ranks computing per node (profile host_cores > 0)
  std::vector<std::int32_t> rank_index_;  // global rank -> index in ranks_, or -1
  std::vector<int> group_simulated_;      // simulated members per group
  std::deque<std::pair<std::uint32_t, std::uint32_t>> ready_;
  std::vector<Time> duration_cache_;  // per (desc, backward); -1 when not computed
  std::vector<Instance> instances_;
  std::vector<std::uint32_t> free_instances_;
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>, std::uint32_t, PairHash> pending_;
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>,
                     std::pair<std::uint32_t, std::uint32_t>, PairHash>
      posted_;
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>, std::unique_ptr<CachedPlan>, PairHash>
      plans_;
  std::vector<CollectiveUse> uses_;
  // Per (rank index, tag) of a send to an unsimulated peer: whether it started, and a receive of
  // the same tag (from the other unsimulated neighbour) waiting for it.
  struct Mirror {
    bool send_started = false;
    std::uint32_t waiting_recv = kNone;
  };
  std::vector<Mirror> mirrors_;
};

Status Runner::setup() {
  const auto& ranks = program_.ranks();
  rank_index_.assign(static_cast<std::size_t>(program_.total_ranks()), -1);
  std::vector<int> simulated;
  for (std::size_t ri = 0; ri < ranks.size(); ++ri) {
    const int rank = ranks[ri].rank();
    if (rank < 0 || static_cast<std::size_t>(rank) >= ctx_.gpu_of_rank.size()) {
      return Status::invalid_input("rank " + std::to_string(rank) + " has no GPU in the placement");
    }
    rank_index_[static_cast<std::size_t>(rank)] = static_cast<std::int32_t>(ri);
    simulated.push_back(rank);
  }
  for (std::size_t g = 0; g < program_.groups().size(); ++g) {
    int n = 0;
    for (int r : program_.groups()[g].ranks) {
      if (r >= 0 && static_cast<std::size_t>(r) >= ctx_.gpu_of_rank.size()) {
        return Status::invalid_input("rank " + std::to_string(r) + " of group " +
                                     program_.groups()[g].axes + " has no GPU in the placement");
      }
      if (r < program_.total_ranks() && rank_index_[static_cast<std::size_t>(r)] >= 0) ++n;
    }
    group_simulated_.push_back(n);
  }
  for (const OpDesc& d : program_.descs()) {
    if (d.kind == OpKind::kGemm) PLANNER_RETURN_IF_ERROR(compute_.check_precision(d.precision));
  }
  if (ctx_.parallel != nullptr && ctx_.options.background) {
    PLANNER_ASSIGN_OR_RETURN(
        Symmetry s, Symmetry::create(*ctx_.parallel, *ctx_.cluster, ctx_.gpu_of_rank, simulated));
    symmetry_ = std::move(s);
  }
  duration_cache_.assign(program_.descs().size() * 2, Time(-1));
  // Mirrors: one per (rank, tag) of a send to an unsimulated peer, found by every message of
  // that rank and tag with an unsimulated peer.
  // Per rank: (tag, mirror) sorted by tag.
  std::vector<std::vector<std::pair<std::uint32_t, std::int32_t>>> mirror_of(ranks.size());
  for (std::size_t ri = 0; ri < ranks.size(); ++ri) {
    auto& tags = mirror_of[ri];
    for (const Op& op : ranks[ri].ops()) {
      if (program_.desc(op).kind == OpKind::kSend && op.peer < program_.total_ranks() &&
          rank_index_[static_cast<std::size_t>(op.peer)] < 0) {
        tags.emplace_back(op.tag, 0);
      }
    }
    std::sort(tags.begin(), tags.end());
    tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
    for (auto& [tag, mirror] : tags) {
      mirror = static_cast<std::int32_t>(mirrors_.size());
      mirrors_.emplace_back();
    }
  }

  ranks_.resize(ranks.size());
  for (std::size_t ri = 0; ri < ranks.size(); ++ri) {
    const RankProgram& r = ranks[ri];
    RankState& s = ranks_[ri];
    s.prog = &r;
    s.gpu = ctx_.gpu_of_rank[static_cast<std::size_t>(r.rank())];
    if (ctx_.profile->compute.host_cores > 0) {
      s.host = ctx_.cluster->node_of(s.gpu);
      if (static_cast<std::size_t>(s.host) >= host_computing_.size()) {
        host_computing_.resize(static_cast<std::size_t>(s.host) + 1, 0);
      }
    }
    const std::size_t n = r.size();
    s.mirror.assign(n, -1);
    const auto& tags = mirror_of[ri];
    for (std::size_t i = 0; i < n && !tags.empty(); ++i) {
      const Op& op = r.op(i);
      if (!is_p2p(program_.desc(op).kind)) continue;
      const auto m = std::lower_bound(tags.begin(), tags.end(), std::make_pair(op.tag, 0));
      if (m != tags.end() && m->first == op.tag) s.mirror[i] = m->second;
    }
    s.waiting.resize(n);
    s.state.assign(n, 0);
    if (keep_) {
      s.issue.assign(n, Time(0));
      s.start.assign(n, Time(0));
    }
    s.end.assign(n, Time(0));
    if (track_) s.pred.assign(n, kNoPred);
    std::vector<std::uint32_t> counts(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) {
      s.stream_ops[static_cast<std::size_t>(program_.desc(r.op(i)).stream)].push_back(
          static_cast<std::uint32_t>(i));
      s.waiting[i] = static_cast<std::uint32_t>(r.deps(i).size());
      for (std::uint32_t d : r.deps(i))
        ++counts[d + 1];
    }
    for (std::size_t i = 0; i < n; ++i)
      counts[i + 1] += counts[i];
    s.rdep_offsets = counts;
    s.rdeps.resize(r.num_deps());
    for (std::size_t i = 0; i < n; ++i) {
      for (std::uint32_t d : r.deps(i))
        s.rdeps[counts[d]++] = static_cast<std::uint32_t>(i);
    }
  }
  return Status::ok();
}

void Runner::account(RankState& s, Time now) {
  if (now == s.since) return;
  TimeBucket b = TimeBucket::kIdle;
  if (s.computing != kNone) {
    b = TimeBucket::kCompute;
  } else {
    for (std::size_t k = 0; k < kCommBuckets.size(); ++k) {
      if (s.inflight[k] > 0) {
        b = kCommBuckets[k];
        break;
      }
    }
  }
  s.buckets[static_cast<std::size_t>(b)] += now - s.since;
  s.since = now;
}

void Runner::schedule_compute(std::uint32_t ri) {
  RankState& s = ranks_[ri];
  const Time now = engine_.now();
  s.work_left =
      std::max(0.0, s.work_left - s.work_rate * static_cast<double>((now - s.work_since).raw()));
  s.work_since = now;
  s.work_rate = s.sm_comm > 0 ? 1.0 - ctx_.profile->compute.comm_slowdown : 1.0;
  if (s.host >= 0) {
    // Processor sharing: the ranks computing on a host split its cores evenly, less what
    // switching between them costs (the profile's oversubscribed efficiency).
    const ComputeProfile& c = ctx_.profile->compute;
    const int computing = host_computing_[static_cast<std::size_t>(s.host)];
    if (computing > c.host_cores) {
      s.work_rate *= static_cast<double>(c.host_cores) / computing * c.oversubscribed_efficiency;
    }
  }
  engine_.cancel(s.compute_event);
  s.compute_event =
      engine_.schedule(now + Time(std::llround(s.work_left / s.work_rate)), kComputeDone, ri);
}

void Runner::reshare_host(int host) {
  for (std::uint32_t ri = 0; ri < ranks_.size(); ++ri) {
    if (ranks_[ri].host == host && ranks_[ri].computing != kNone) schedule_compute(ri);
  }
}

void Runner::set_sm_comm(RankState& s, int delta) {
  const bool before = s.sm_comm > 0;
  s.sm_comm += delta;
  if (before != (s.sm_comm > 0) && s.computing != kNone) {
    schedule_compute(static_cast<std::uint32_t>(&s - ranks_.data()));
  }
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
  RankState& s = ranks_[ri];
  if (s.state[i] != 0 || s.waiting[i] != 0) return;
  const auto stream = static_cast<std::size_t>(program_.desc(s.prog->op(i)).stream);
  const auto& ops = s.stream_ops[stream];
  if (s.head[stream] >= ops.size() || ops[s.head[stream]] != i) return;
  issue(ri, i);
}

void Runner::issue(std::uint32_t ri, std::uint32_t i) {
  RankState& s = ranks_[ri];
  const Op& op = s.prog->op(i);
  const OpDesc& d = program_.desc(op);
  const Time now = engine_.now();
  s.state[i] = 1;
  if (keep_) s.issue[i] = now;
  if (track_) {
    // The op whose end released this one: the later of the stream predecessor and the deps.
    const auto stream = static_cast<std::size_t>(d.stream);
    std::uint64_t pred = kNoPred;
    Time latest(-1);
    if (s.head[stream] > 0) {
      const std::uint32_t prev = s.stream_ops[stream][s.head[stream] - 1];
      pred = pack(ri, prev);
      latest = s.end[prev];
    }
    for (std::uint32_t dep : s.prog->deps(i)) {
      if (s.end[dep] > latest) {
        latest = s.end[dep];
        pred = pack(ri, dep);
      }
    }
    s.pred[i] = pred;
  }

  if (is_collective(d.kind)) {
    arrive_collective(ri, i);
  } else if (is_p2p(d.kind)) {
    arrive_p2p(ri, i);
  } else if (d.stream == Stream::kCompute) {
    account(s);
    s.computing = i;
    if (keep_) s.start[i] = now;
    s.work_left = static_cast<double>(compute_time(op).raw());
    s.work_since = now;
    s.work_rate = 1.0;
    s.compute_event = kNoEvent;
    if (s.host >= 0) {
      ++host_computing_[static_cast<std::size_t>(s.host)];
      reshare_host(s.host);
    } else {
      schedule_compute(ri);
    }
  } else {
    account(s);
    if (keep_) s.start[i] = now;
    ++s.inflight[comm_slot(bucket_of(d.stream))];
    engine_.schedule(now + compute_time(op), kFixedDone, ri, i);
  }
}

void Runner::complete(std::uint32_t ri, std::uint32_t i) {
  RankState& s = ranks_[ri];
  const Time now = engine_.now();
  s.state[i] = 2;
  s.end[i] = now;
  ++s.done;
  s.finish = std::max(s.finish, now);
  const auto stream = static_cast<std::size_t>(program_.desc(s.prog->op(i)).stream);
  const auto& ops = s.stream_ops[stream];
  if (++s.head[stream] < ops.size()) ready_.emplace_back(ri, ops[s.head[stream]]);
  for (std::uint32_t k = s.rdep_offsets[i]; k < s.rdep_offsets[i + 1]; ++k) {
    const std::uint32_t j = s.rdeps[k];
    if (--s.waiting[j] == 0) ready_.emplace_back(ri, j);
  }
}

std::uint32_t Runner::new_instance(TimeBucket axis) {
  std::uint32_t id = 0;
  if (!free_instances_.empty()) {
    id = free_instances_.back();
    free_instances_.pop_back();
  } else {
    id = static_cast<std::uint32_t>(instances_.size());
    instances_.emplace_back();
  }
  Instance& inst = instances_[id];
  inst.plan = nullptr;
  inst.phase = 0;
  inst.axis = axis;
  inst.members.clear();
  return id;
}

std::uint32_t Runner::usage(TimeBucket axis, OpKind kind, const CommPlan& plan, int size) {
  const std::string protocol =
      plan.phases.empty()
          ? std::string()
          : ctx_.profile->network.protocols[static_cast<std::size_t>(plan.protocol)].name;
  for (std::size_t u = 0; u < uses_.size(); ++u) {
    const CollectiveUse& c = uses_[u];
    if (c.axis == axis && c.kind == kind && c.algorithm == plan.algorithm &&
        c.protocol == protocol && c.group_size == size && c.copies == plan.copies) {
      return static_cast<std::uint32_t>(u);
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
  return static_cast<std::uint32_t>(uses_.size() - 1);
}

CachedPlan& Runner::collective_plan(const Op& op) {
  const std::pair<std::uint64_t, std::uint64_t> key{static_cast<std::uint64_t>(op.group), op.desc};
  auto& slot = plans_[key];
  if (slot) return *slot;
  const CommGroup& group = program_.group(op.group);
  const OpDesc& d = program_.desc(op);
  std::vector<int> gpus;
  for (int r : group.ranks)
    gpus.push_back(ctx_.gpu_of_rank[static_cast<std::size_t>(r)]);
  std::vector<std::vector<int>> copies;
  if (symmetry_) {
    copies = symmetry_->group_copies(group);
    for (auto& c : copies) {
      for (int& r : c)
        r = ctx_.gpu_of_rank[static_cast<std::size_t>(r)];
    }
  }
  slot = std::make_unique<CachedPlan>();
  std::string memo_key;
  if (ctx_.plan_memo != nullptr) {
    memo_key = plan_key('c', d.kind, d.comm_bytes, gpus, ctx_.options.algorithm);
    for (const auto& c : copies) {
      put_int(memo_key, -1);
      for (int g : c)
        put_int(memo_key, g);
    }
    if (const auto memo = ctx_.plan_memo->find(memo_key)) {
      slot->plan = *memo;
      return *slot;
    }
  }
  slot->plan = planner_.collective(d.kind, d.comm_bytes, gpus, copies);
  if (ctx_.plan_memo != nullptr) ctx_.plan_memo->insert(std::move(memo_key), slot->plan);
  return *slot;
}

CachedPlan& Runner::p2p_plan(int src, int dst, const OpDesc& d) {
  const std::pair<std::uint64_t, std::uint64_t> key{
      (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
          static_cast<std::uint32_t>(dst) | (std::uint64_t{1} << 63),
      static_cast<std::uint64_t>(d.comm_bytes.raw())};
  auto& slot = plans_[key];
  if (slot) return *slot;
  std::vector<std::pair<int, int>> copies;
  if (symmetry_) {
    copies = symmetry_->p2p_copies(src, dst);
    for (auto& [a, b] : copies) {
      a = ctx_.gpu_of_rank[static_cast<std::size_t>(a)];
      b = ctx_.gpu_of_rank[static_cast<std::size_t>(b)];
    }
  }
  slot = std::make_unique<CachedPlan>();
  const int pair[] = {ctx_.gpu_of_rank[static_cast<std::size_t>(src)],
                      ctx_.gpu_of_rank[static_cast<std::size_t>(dst)]};
  std::string memo_key;
  if (ctx_.plan_memo != nullptr) {
    memo_key = plan_key('p', OpKind::kSend, d.comm_bytes, pair, ctx_.options.algorithm);
    for (const auto& [a, b] : copies) {
      put_int(memo_key, a);
      put_int(memo_key, b);
    }
    if (const auto memo = ctx_.plan_memo->find(memo_key)) {
      slot->plan = *memo;
      return *slot;
    }
  }
  slot->plan = planner_.p2p(pair[0], pair[1], d.comm_bytes, copies);
  if (ctx_.plan_memo != nullptr) ctx_.plan_memo->insert(std::move(memo_key), slot->plan);
  return *slot;
}

void Runner::build_plans() {
  // The last plan per group: a rank's ops of one group mostly repeat one desc; and the last few
  // messages' plans (a rank sends and receives with a few peers).
  std::vector<std::pair<std::uint32_t, CachedPlan*>> last(program_.groups().size(), {0, nullptr});
  using P2pKey = std::tuple<int, int, std::int64_t>;
  std::array<std::pair<P2pKey, CachedPlan*>, 4> recent{};
  std::size_t next_recent = 0;
  for (RankState& s : ranks_) {
    s.plan.assign(s.prog->size(), nullptr);
    for (std::size_t i = 0; i < s.prog->size(); ++i) {
      const Op& op = s.prog->op(i);
      const OpDesc& d = program_.desc(op);
      if (is_collective(d.kind)) {
        auto& [desc, plan] = last[static_cast<std::size_t>(op.group)];
        if (plan == nullptr || desc != op.desc) {
          desc = op.desc;
          plan = &collective_plan(op);
        }
        s.plan[i] = plan;
      } else if (is_p2p(d.kind) && op.peer >= 0 &&
                 static_cast<std::size_t>(op.peer) < ctx_.gpu_of_rank.size()) {
        // The plan arrive_p2p() and arrive_p2p_alone() use: the message src -> dst.
        const bool send = d.kind == OpKind::kSend;
        const int src = send ? s.prog->rank() : op.peer;
        const int dst = send ? op.peer : s.prog->rank();
        const P2pKey key{src, dst, d.comm_bytes.raw()};
        auto hit = std::find_if(recent.begin(), recent.end(),
                                [&](const auto& r) { return r.second && r.first == key; });
        if (hit == recent.end()) {
          hit = recent.begin() + static_cast<std::ptrdiff_t>(next_recent++ % recent.size());
          *hit = {key, &p2p_plan(src, dst, d)};
        }
        s.plan[i] = hit->second;
      }
    }
  }
}

void Runner::compress_plans() {
  std::vector<std::vector<LinkUse>*> phases;
  for (auto& [key, plan] : plans_) {
    for (CommPhase& phase : plan->plan.phases)
      phases.push_back(&phase.uses);
  }
  // Per resource, the (phase, count) pairs crossing it, in phase order (CSR).
  const std::size_t resources = fabric_.capacity.size();
  std::vector<std::uint32_t> offset(resources + 1, 0);
  for (const auto* uses : phases) {
    for (const LinkUse& u : *uses)
      ++offset[static_cast<std::size_t>(u.resource) + 1];
  }
  for (std::size_t r = 0; r < resources; ++r)
    offset[r + 1] += offset[r];
  std::vector<std::pair<std::uint32_t, std::int32_t>> crossing(offset.back());
  std::vector<std::uint32_t> fill(offset.begin(), offset.end() - 1);
  for (std::uint32_t p = 0; p < phases.size(); ++p) {
    for (const LinkUse& u : *phases[p])
      crossing[fill[static_cast<std::size_t>(u.resource)]++] = {p, u.count};
  }
  auto entries = [&](std::int32_t r) {
    const auto* first = crossing.data() + offset[static_cast<std::size_t>(r)];
    return std::span<const std::pair<std::uint32_t, std::int32_t>>(
        first, crossing.data() + offset[static_cast<std::size_t>(r) + 1]);
  };
  struct Keyed {
    std::uint64_t hash;
    std::int32_t resource;
  };
  std::vector<Keyed> keyed;
  for (std::size_t r = 0; r < resources; ++r) {
    if (offset[r + 1] == offset[r]) continue;
    std::uint64_t h = 0x9e3779b97f4a7c15ull;
    for (const auto& [p, c] : entries(static_cast<std::int32_t>(r))) {
      h ^= (static_cast<std::uint64_t>(p) << 32 | static_cast<std::uint32_t>(c)) +
           0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    }
    keyed.push_back({h, static_cast<std::int32_t>(r)});
  }
  // Equal lists side by side; within a class the representative first.
  std::sort(keyed.begin(), keyed.end(), [&](const Keyed& a, const Keyed& b) {
    if (a.hash != b.hash) return a.hash < b.hash;
    const auto ea = entries(a.resource), eb = entries(b.resource);
    if (!std::equal(ea.begin(), ea.end(), eb.begin(), eb.end())) {
      return std::lexicographical_compare(ea.begin(), ea.end(), eb.begin(), eb.end());
    }
    const double ca = fabric_.capacity[static_cast<std::size_t>(a.resource)];
    const double cb = fabric_.capacity[static_cast<std::size_t>(b.resource)];
    return ca != cb ? ca < cb : a.resource < b.resource;
  });
  std::vector<char> keep(resources, 0);
  bool dropped = false;
  for (std::size_t i = 0; i < keyed.size(); ++i) {
    const bool same_class =
        i > 0 && keyed[i].hash == keyed[i - 1].hash &&
        std::ranges::equal(entries(keyed[i].resource), entries(keyed[i - 1].resource));
    keep[static_cast<std::size_t>(keyed[i].resource)] = same_class ? 0 : 1;
    dropped = dropped || same_class;
  }
  if (!dropped) return;
  for (auto* uses : phases) {
    std::erase_if(*uses,
                  [&](const LinkUse& u) { return !keep[static_cast<std::size_t>(u.resource)]; });
  }
}

void Runner::arrive_collective(std::uint32_t ri, std::uint32_t i) {
  const Op& op = ranks_[ri].prog->op(i);
  const int simulated = group_simulated_[static_cast<std::size_t>(op.group)];
  auto open_instance = [&] {
    const OpDesc& d = program_.desc(op);
    const std::uint32_t id = new_instance(bucket_of(d.stream));
    CachedPlan& plan = *ranks_[ri].plan[i];
    if (plan.use == kNone) {
      plan.use = usage(bucket_of(d.stream), d.kind, plan.plan,
                       static_cast<int>(program_.group(op.group).ranks.size()));
    }
    instances_[id].plan = &plan.plan;
    instances_[id].use = plan.use;
    return id;
  };
  if (simulated == 1) {
    // The only simulated member: nobody to wait for.
    const std::uint32_t id = open_instance();
    instances_[id].members.emplace_back(ri, i);
    start_instance(id);
    return;
  }
  const std::pair<std::uint64_t, std::uint64_t> key{static_cast<std::uint64_t>(op.group),
                                                    op.id.raw()};
  auto it = pending_.find(key);
  if (it == pending_.end()) it = pending_.emplace(key, open_instance()).first;
  const std::uint32_t id = it->second;
  instances_[id].members.emplace_back(ri, i);
  if (static_cast<int>(instances_[id].members.size()) == simulated) {
    pending_.erase(it);
    start_instance(id);
  }
}

void Runner::arrive_p2p(std::uint32_t ri, std::uint32_t i) {
  RankState& s = ranks_[ri];
  const Op& op = s.prog->op(i);
  const OpDesc& d = program_.desc(op);
  const bool send = d.kind == OpKind::kSend;
  const int src = send ? s.prog->rank() : op.peer;
  const int dst = send ? op.peer : s.prog->rank();
  const bool peer_simulated =
      op.peer < program_.total_ranks() && rank_index_[static_cast<std::size_t>(op.peer)] >= 0;
  if (!peer_simulated) {
    // The peer is symmetric to this rank: its send to us happens when our own send with the same
    // tag (to our other neighbour) happens. A receive waits for that send when the rank has one.
    if (s.mirror[i] >= 0) {
      Mirror& m = mirrors_[static_cast<std::size_t>(s.mirror[i])];
      if (send) {
        m.send_started = true;
        if (m.waiting_recv != kNone) {
          const std::uint32_t recv = m.waiting_recv;
          m.waiting_recv = kNone;
          arrive_p2p_alone(ri, recv);
        }
      } else if (!m.send_started) {
        m.waiting_recv = i;
        return;
      }
    }
    arrive_p2p_alone(ri, i);
    return;
  }
  const std::pair<std::uint64_t, std::uint64_t> key{
      (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
          static_cast<std::uint32_t>(dst),
      op.tag};
  auto it = posted_.find(key);
  if (it == posted_.end()) {
    posted_.emplace(key, std::make_pair(ri, i));
    return;
  }
  const std::uint32_t id = new_instance(bucket_of(d.stream));
  instances_[id].members.push_back(it->second);
  instances_[id].members.emplace_back(ri, i);
  posted_.erase(it);
  CachedPlan& plan = *s.plan[i];
  if (plan.use == kNone) plan.use = usage(bucket_of(d.stream), OpKind::kSend, plan.plan, 2);
  instances_[id].plan = &plan.plan;
  instances_[id].use = plan.use;
  start_instance(id);
}

void Runner::arrive_p2p_alone(std::uint32_t ri, std::uint32_t i) {
  const RankState& s = ranks_[ri];
  const Op& op = s.prog->op(i);
  const OpDesc& d = program_.desc(op);
  const std::uint32_t id = new_instance(bucket_of(d.stream));
  instances_[id].members.emplace_back(ri, i);
  CachedPlan& plan = *s.plan[i];
  if (plan.use == kNone) plan.use = usage(bucket_of(d.stream), OpKind::kSend, plan.plan, 2);
  instances_[id].plan = &plan.plan;
  instances_[id].use = plan.use;
  start_instance(id);
}

void Runner::start_instance(std::uint32_t id) {
  Instance& inst = instances_[id];
  const Time now = engine_.now();
  inst.started = now;
  const auto [lri, li] = inst.members.back();
  const std::size_t slot = comm_slot(inst.axis);
  for (const auto& [ri, i] : inst.members) {
    RankState& s = ranks_[ri];
    if (track_ && (ri != lri || i != li)) s.pred[i] = pack(lri, li);
    if (keep_) s.start[i] = now;
    account(s);
    ++s.inflight[slot];
    set_sm_comm(s, +1);
  }
  CollectiveUse& use = uses_[inst.use];
  ++use.count;
  use.bytes += program_.desc(ranks_[lri].prog->op(li)).comm_bytes;
  start_phase(id);
}

void Runner::start_phase(std::uint32_t id) {
  Instance& inst = instances_[id];
  if (inst.phase >= inst.plan->phases.size()) {
    finish_instance(id);
    return;
  }
  const CommPhase& phase = inst.plan->phases[inst.phase];
  network_.start(phase.uses, phase.bytes, id);
}

void Runner::finish_instance(std::uint32_t id) {
  Instance& inst = instances_[id];
  uses_[inst.use].busy += engine_.now() - inst.started;
  const std::size_t slot = comm_slot(inst.axis);
  for (const auto& [ri, i] : inst.members) {
    RankState& s = ranks_[ri];
    account(s);
    --s.inflight[slot];
    set_sm_comm(s, -1);
    complete(ri, i);
  }
  free_instances_.push_back(id);
}

void Runner::drain() {
  while (!ready_.empty()) {
    const auto [ri, i] = ready_.front();
    ready_.pop_front();
    try_issue(ri, i);
  }
}

Status Runner::stalled() const {
  std::size_t left = 0, total = 0;
  std::string heads;
  int shown = 0;
  for (const RankState& s : ranks_) {
    total += s.prog->size();
    left += s.prog->size() - s.done;
    for (std::size_t k = 0; k < kNumStreams && shown < 6; ++k) {
      if (s.head[k] >= s.stream_ops[k].size()) continue;
      const std::uint32_t i = s.stream_ops[k][s.head[k]];
      heads += "\n  rank " + std::to_string(s.prog->rank()) + " op " + std::to_string(i) + " (" +
               to_string(s.prog->op(i).id) + ") " +
               (s.state[i] == 1 ? "waits for its peers" : "waits for its dependencies");
      ++shown;
    }
  }
  return Status::internal("simulation stalled: " + std::to_string(left) + " of " +
                          std::to_string(total) + " ops never ran; blocked heads:" + heads);
}

Result<ProgramRun> Runner::run() {
  PLANNER_RETURN_IF_ERROR(setup());
  build_plans();
  compress_plans();
  for (std::uint32_t ri = 0; ri < ranks_.size(); ++ri) {
    for (const auto& ops : ranks_[ri].stream_ops) {
      if (!ops.empty()) ready_.emplace_back(ri, ops.front());
    }
  }
  drain();
  Event e;
  while (engine_.next(e)) {
    switch (e.kind) {
      case kComputeDone: {
        RankState& s = ranks_[e.a];
        const std::uint32_t i = s.computing;
        account(s);
        s.computing = kNone;
        s.compute_event = kNoEvent;
        if (s.host >= 0) {
          --host_computing_[static_cast<std::size_t>(s.host)];
          reshare_host(s.host);
        }
        complete(e.a, i);
        break;
      }
      case kFixedDone: {
        RankState& s = ranks_[e.a];
        const auto i = static_cast<std::uint32_t>(e.b);
        account(s);
        --s.inflight[comm_slot(bucket_of(program_.desc(s.prog->op(i)).stream))];
        complete(e.a, i);
        break;
      }
      case kTransferDone: {
        const auto id = static_cast<std::uint32_t>(network_.finish(e.a));
        const Time latency = instances_[id].plan->phases[instances_[id].phase].latency;
        engine_.schedule(engine_.now() + latency, kPhaseDone, id);
        break;
      }
      case kPhaseDone:
        ++instances_[e.a].phase;
        start_phase(e.a);
        break;
      default:
        break;
    }
    drain();
  }
  for (const RankState& s : ranks_) {
    if (s.done != s.prog->size()) return stalled();
  }
  return results();
}

ProgramRun Runner::results() {
  ProgramRun out;
  for (const RankState& s : ranks_)
    out.makespan = std::max(out.makespan, s.finish);
  const bool keep = keep_;
  for (RankState& s : ranks_) {
    account(s, out.makespan);
    RankRun r;
    r.rank = s.prog->rank();
    r.stage = s.prog->stage();
    r.kind = s.prog->kind();
    r.finish = s.finish;
    r.buckets = s.buckets;
    if (keep) {
      r.ops.reserve(s.prog->size());
      for (std::size_t i = 0; i < s.prog->size(); ++i) {
        const Op& op = s.prog->op(i);
        const OpDesc& d = program_.desc(op);
        const Bytes bytes = is_compute(d.kind) ? d.bytes_read + d.bytes_written : d.comm_bytes;
        r.ops.push_back({op.id, d.kind, d.stream, s.issue[i], s.start[i], s.end[i], bytes});
      }
    }
    out.ranks.push_back(std::move(r));
  }

  // Critical path, walked back from the last op to finish.
  std::size_t total_ops = 0;
  for (const RankState& s : ranks_)
    total_ops += s.prog->size();
  std::uint64_t cur = kNoPred;
  Time last(-1);
  for (std::uint32_t ri = 0; ri < ranks_.size() && track_; ++ri) {
    const RankState& s = ranks_[ri];
    for (std::uint32_t i = 0; i < s.prog->size(); ++i) {
      if (s.end[i] > last) {
        last = s.end[i];
        cur = pack(ri, i);
      }
    }
  }
  std::map<std::uint32_t, PathEntry> by_label;
  std::size_t guard = 0;
  while (cur != kNoPred && guard++ <= total_ops) {
    const auto ri = static_cast<std::uint32_t>(cur >> 32);
    const auto i = static_cast<std::uint32_t>(cur);
    const RankState& s = ranks_[ri];
    const std::uint64_t pred = s.pred[i];
    const Time from =
        pred == kNoPred ? Time(0) : ranks_[pred >> 32].end[static_cast<std::uint32_t>(pred)];
    const Op& op = s.prog->op(i);
    const OpDesc& d = program_.desc(op);
    const std::uint32_t key = (static_cast<std::uint32_t>(op.id.phase()) << 16) |
                              (static_cast<std::uint32_t>(op.id.role()) << 8) |
                              static_cast<std::uint32_t>(d.kind);
    PathEntry& entry = by_label[key];
    if (entry.ops == 0) {
      entry.label = std::string(to_string(op.id.phase())) + "." +
                    std::string(to_string(op.id.role())) + " " + std::string(to_string(d.kind));
      entry.bucket = bucket_of(d.stream);
    }
    entry.time += s.end[i] - from;
    ++entry.ops;
    out.critical_buckets[static_cast<std::size_t>(bucket_of(d.stream))] += s.end[i] - from;
    cur = pred;
  }
  for (auto& [key, entry] : by_label)
    out.critical_path.push_back(std::move(entry));
  std::stable_sort(out.critical_path.begin(), out.critical_path.end(),
                   [](const PathEntry& a, const PathEntry& b) { return a.time > b.time; });
  if (out.critical_path.size() > static_cast<std::size_t>(ctx_.options.critical_path_top)) {
    out.critical_path.resize(static_cast<std::size_t>(std::max(0, ctx_.options.critical_path_top)));
  }
  out.collectives = uses_;

  const NetworkStats& ns = network_.stats();
  out.stats.events = engine_.processed();
  out.stats.ops = total_ops;
  out.stats.transfers = ns.transfers;
  out.stats.solves = ns.solves;
  out.stats.solve_links = ns.solve_links;
  out.stats.largest_component = ns.largest_component;
  out.stats.peak_queue = engine_.peak_queue();
  out.stats.plans = plans_.size();
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
