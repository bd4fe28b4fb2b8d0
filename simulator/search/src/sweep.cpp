#include "planner/search/sweep.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <type_traits>
#include <utility>

#include "planner/core/diagnostics.hpp"
#include "planner/core/limits.hpp"
#include "planner/core/model_partition.hpp"
#include "planner/core/schedule.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/topo/placement.hpp"

namespace planner::search {
namespace {

// Candidate ids: scenario in the top 8 bits, work unit in the next 36, the index within the unit
// (a mixed-radix number over its inner axes) in the low 20.
constexpr int kInnerBits = 20;
constexpr int kUnitBits = 36;
constexpr std::uint64_t kInnerMask = (std::uint64_t{1} << kInnerBits) - 1;
constexpr std::uint64_t kUnitMask = (std::uint64_t{1} << kUnitBits) - 1;
constexpr int kMaxScenarios = 255;
// Progress reports: at most one per this many work units.
constexpr std::int64_t kProgressEvery = 16;

const std::string kPipelineInnerOrder = "tp-cp-ep-pp-dp";

std::uint64_t make_id(int scenario, std::int64_t unit, std::int64_t inner) {
  return (static_cast<std::uint64_t>(scenario) << (kUnitBits + kInnerBits)) |
         ((static_cast<std::uint64_t>(unit) & kUnitMask) << kInnerBits) |
         (static_cast<std::uint64_t>(inner) & kInnerMask);
}

int scenario_of_id(std::uint64_t id) {
  return static_cast<int>(id >> (kUnitBits + kInnerBits));
}

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> small, large;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

template <class T, class U>
bool allowed(const std::vector<T>& choices, const U& value) {
  return choices.empty() || std::find(choices.begin(), choices.end(), value) != choices.end();
}

PlanMetrics metrics_of(const PlanEstimate& e) {
  PlanMetrics m;
  m.step_time = e.step_time;
  m.tokens_per_second = e.tokens_per_second;
  m.mfu = e.mfu;
  m.hfu = e.hfu;
  m.bubble_fraction = e.bubble_fraction;
  m.buckets = e.buckets;
  m.peak_memory = e.memory.bytes;
  m.capacity = e.memory.capacity;
  return m;
}

PlanMetrics metrics_of(const sim::SimResult& r) {
  PlanMetrics m;
  m.step_time = r.step_time;
  m.tokens_per_second = r.tokens_per_second;
  m.mfu = r.mfu;
  m.hfu = r.hfu;
  m.bubble_fraction = r.bubble_fraction;
  m.buckets = r.mean_buckets;
  m.peak_memory = r.memory.peak;
  m.capacity = r.memory.capacity;
  return m;
}

// A schedule choice of a work unit.
struct ScheduleChoice {
  Schedule schedule = Schedule::k1F1B;
  int virtual_stages = 1;
  int first_stage_layers = 0;  // uneven stages (model_partition.hpp); 0: even
  int last_stage_layers = 0;
  bool a2a_overlap = false;      // ParallelConfig::moe_a2a_overlap
  std::vector<int> layout = {};  // chunks of unequal size (ParallelConfig::layout); empty: none
};

}  // namespace

bool ranks_before(const Candidate& a, const Candidate& b) {
  if (a.objective != b.objective) return a.objective > b.objective;
  if (a.time_s != b.time_s) return a.time_s < b.time_s;
  return a.id < b.id;
}

// ---- setup

// The structural part of a plan; the inner axes expand it.
struct SweepUnit {
  int tp = 1, cp = 1, ep = 1, pp = 1, dp = 1;
  std::int64_t mbs = 1;
  int etp = 0;           // ParallelConfig::etp (0: tp)
  double capacity = -1;  // ParallelConfig::moe_capacity_factor (< 0: the model's)
};

struct SweepSetup::Scenario {
  SweepScenario spec;
  ScenarioInfo info;
  std::shared_ptr<const topo::Cluster> cluster;
  std::shared_ptr<const HardwareProfile> profile;
  std::shared_ptr<const sim::Fabric> fabric;
  std::shared_ptr<sim::PlanMemo> plan_memo;  // plans shared by the scenario's simulations
  std::shared_ptr<Estimator> estimator;
  sim::RunOptions run;   // the request's, with the scenario's stack: host costs, attention kernel
  double imbalance = 1;  // of every MoE plan (SearchSpace::moe_imbalance)
  PricingOptions pricing;
  GpuPrice price;
  Bytes checkpoint;
  std::vector<SweepUnit> units;

  // The inner axes of a unit, in the mixed-radix order of its candidate index (first fastest).
  struct Inner {
    std::vector<ScheduleChoice> schedules;
    std::vector<bool> sp;
    std::vector<std::pair<Recompute, std::uint8_t>> recompute;  // with its modules
    std::vector<int> zero;
    std::vector<std::string> orders;
    std::vector<bool> overlap;
    std::vector<MoeA2a> a2a;
    std::int64_t size() const {
      return static_cast<std::int64_t>(schedules.size() * sp.size() * recompute.size() *
                                       zero.size() * orders.size() * overlap.size() * a2a.size());
    }
  };
  Inner inner(const SweepUnit& u, const SearchSpace& space) const;
  ParallelConfig config(const SweepUnit& u, const Inner& in, std::int64_t index) const;
};

SweepSetup::Scenario::Inner SweepSetup::Scenario::inner(const SweepUnit& u,
                                                        const SearchSpace& space) const {
  Inner in;
  const ModelSpec& m = spec.model;
  const std::int64_t micro = spec.training.global_batch_size / (u.dp * u.mbs);
  const std::vector<Schedule> all{Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved,
                                  Schedule::kZeroBubbleH1, Schedule::kDualPipeV};
  // A pp that does not divide the layers gets the balanced uneven split (the embedding and the
  // LM head counted as a layer each), per number of virtual stages; with MTP modules also the
  // split that counts them on the LM head's stage (lm_head_units), when it differs.
  const bool even = m.num_layers % u.pp == 0;
  std::vector<int> head_units{1};
  if (lm_head_units(m) != 1) head_units.push_back(lm_head_units(m));
  using Split = std::pair<int, int>;
  // The distinct splits (or layouts) `split_of` gives for the head counts.
  auto splits = [&](auto&& split_of) {
    std::vector<typename decltype(split_of(1))::value_type> out;
    for (int h : head_units) {
      const auto x = split_of(h);
      if (x && std::find(out.begin(), out.end(), *x) == out.end()) out.push_back(*x);
    }
    return out;
  };
  const auto uneven = [&](int v) {
    return splits([&](int h) { return balanced_stage_split(m.num_layers, u.pp, v, h); });
  };
  const std::vector<Split> one_chunk = even ? std::vector<Split>{} : uneven(1);
  for (Schedule s : all) {
    if (!allowed(space.schedules, s)) continue;
    if (!stack_runs(info.stack, s, u.pp)) continue;
    // One stage: every schedule runs the same passes; 1F1B stands for them.
    if (u.pp == 1 && s != Schedule::k1F1B) continue;
    if (s == Schedule::kDualPipeV) {
      // Two chunks a stage in a V, at least 2·pp micro-batches; a pp that does not divide the
      // layers takes the V's balanced uneven split (stage 0 holding both ends).
      if (u.pp < 2 || micro < 2 * u.pp) continue;
      for (const Split& split :
           splits([&](int h) { return balanced_v_split(m.num_layers, u.pp, h); })) {
        in.schedules.push_back({s, 2, split.first, split.second});
      }
      continue;
    }
    if (s != Schedule::kInterleaved) {
      if (even) {
        in.schedules.push_back({s, 1});
      } else {
        for (const Split& split : one_chunk)
          in.schedules.push_back({s, 1, split.first, split.second});
      }
      continue;
    }
    if (u.pp < 2 || micro < u.pp) continue;
    const std::size_t first_choice = in.schedules.size();
    if (even) {
      for (std::int64_t v : divisors(m.num_layers / u.pp)) {
        if (v < 2 || !allowed(space.virtual_stages, static_cast<int>(v))) continue;
        in.schedules.push_back({s, static_cast<int>(v)});
      }
    } else {
      for (std::int64_t v : divisors(m.num_layers)) {
        if (v < 2 || v > m.num_layers / u.pp) continue;
        if (!allowed(space.virtual_stages, static_cast<int>(v))) continue;
        for (const Split& split : uneven(static_cast<int>(v)))
          in.schedules.push_back({s, static_cast<int>(v), split.first, split.second});
      }
    }
    // 2 and 4 chunks a stage where no split of the stages holds them: chunks of unequal size
    // (Megatron-core's --pipeline-model-parallel-layout, as NVIDIA's DeepSeek-V3 and Qwen3-235B
    // recipes run them), the balanced layout.
    for (int v : {2, 4}) {
      if (!allowed(space.virtual_stages, v)) continue;
      if (std::any_of(in.schedules.begin() + static_cast<std::ptrdiff_t>(first_choice),
                      in.schedules.end(),
                      [&](const ScheduleChoice& c) { return c.virtual_stages == v; })) {
        continue;
      }
      for (std::vector<int>& layout :
           splits([&](int h) { return balanced_layout(m.num_layers, u.pp, v, h); }))
        in.schedules.push_back({s, v, 0, 0, false, std::move(layout)});
    }
  }
  // Megatron-core's EP all-to-all overlap: a variant of every schedule whose passes it can merge,
  // where there is an all-to-all (with one stage, two micro-batches at least to pair).
  const bool all_to_all = m.is_moe() && u.ep > 1;
  std::vector<ScheduleChoice> merged;
  for (const ScheduleChoice& sc : in.schedules) {
    const bool mergeable =
        all_to_all && merges_forward_backward(sc.schedule, u.pp) && (u.pp > 1 || micro >= 2);
    if (!all_to_all || allowed(space.moe_a2a_overlap, false)) merged.push_back(sc);
    if (mergeable && allowed(space.moe_a2a_overlap, true)) {
      merged.push_back(sc);
      merged.back().a2a_overlap = true;
    }
  }
  in.schedules = std::move(merged);
  for (bool sp : {false, true}) {
    if (sp && u.tp == 1) continue;
    if (!sp && m.is_moe() && u.tp > 1) continue;
    if (allowed(space.sequence_parallel, sp)) in.sp.push_back(sp);
  }
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (!allowed(space.recompute, r)) continue;
    if (r != Recompute::kSelective || space.recompute_modules.empty()) {
      in.recompute.emplace_back(r, kDefaultRecomputeModules);
      continue;
    }
    for (std::uint8_t modules : space.recompute_modules)
      in.recompute.emplace_back(r, modules);
  }
  const bool sharded = static_cast<std::int64_t>(u.dp) * u.cp > 1;
  for (int z = 0; z <= 3; ++z) {
    if (z > 0 && !sharded) continue;
    if (!stack_has_zero(info.stack, z, u.pp)) continue;
    if (allowed(space.zero_stages, z)) in.zero.push_back(z);
  }
  std::vector<std::string> orders = space.orders;
  if (orders.empty()) orders = {std::string(kDefaultRankOrder), kPipelineInnerOrder};
  for (const std::string& o : orders) {
    // The orders differ only in where pp and dp go: with either of size 1 the first stands for all.
    if ((u.pp == 1 || u.dp == 1) && !in.orders.empty()) break;
    in.orders.push_back(o);
  }
  for (bool ov : {true, false}) {
    if (ov && !overlaps_grad_reduce(info.stack)) continue;
    if (!ov && !sharded && !in.overlap.empty()) continue;
    if (allowed(space.overlap, ov)) in.overlap.push_back(ov);
  }
  if (!sharded && in.overlap.size() > 1) in.overlap.resize(1);
  // Without expert parallelism there is no all-to-all: NCCL's value stands for both, whatever the
  // space allows (a dense plan that names the hierarchical form is invalid).
  if (all_to_all) {
    for (MoeA2a a : {MoeA2a::kNccl, MoeA2a::kHierarchical}) {
      if (allowed(space.moe_a2a, a)) in.a2a.push_back(a);
    }
  } else {
    in.a2a.push_back(MoeA2a::kNccl);
  }
  return in;
}

ParallelConfig SweepSetup::Scenario::config(const SweepUnit& u, const Inner& in,
                                            std::int64_t index) const {
  ParallelConfig p;
  p.tp = u.tp;
  p.cp = u.cp;
  p.ep = u.ep;
  p.pp = u.pp;
  p.dp = u.dp;
  p.micro_batch_size = u.mbs;
  p.etp = u.etp;
  p.moe_capacity_factor = u.capacity;
  if (spec.model.is_moe()) p.moe_imbalance = imbalance;
  auto digit = [&](std::size_t radix) {
    const auto d = static_cast<std::size_t>(index % static_cast<std::int64_t>(radix));
    index /= static_cast<std::int64_t>(radix);
    return d;
  };
  const ScheduleChoice sc = in.schedules[digit(in.schedules.size())];
  p.schedule = sc.schedule;
  p.virtual_stages = sc.virtual_stages;
  p.first_stage_layers = sc.first_stage_layers;
  p.last_stage_layers = sc.last_stage_layers;
  p.layout = sc.layout;
  p.moe_a2a_overlap = sc.a2a_overlap;
  p.sequence_parallel = in.sp[digit(in.sp.size())];
  std::tie(p.recompute, p.recompute_modules) = in.recompute[digit(in.recompute.size())];
  p.zero_stage = in.zero[digit(in.zero.size())];
  p.order = in.orders[digit(in.orders.size())];
  const bool ov = in.overlap[digit(in.overlap.size())];
  p.overlap_grad_reduce = ov;
  p.overlap_param_gather = ov;
  p.async_tp_allreduce = async_tp_allreduce(info.stack);
  p.tp_comm_overlap = overlaps_tp_comm(info.stack) && p.can_overlap_tp_comm();
  p.moe_a2a = in.a2a[digit(in.a2a.size())];
  return p;
}

namespace {

// The expert tensor parallel sizes to try with `tp` (SearchSpace::etp): those that split the
// experts' FFN evenly; tp itself for a dense model.
std::vector<int> expert_tps(const ModelSpec& m, const SearchSpace& space, int tp) {
  if (!m.is_moe()) return {tp};
  std::vector<int> candidates = space.etp;
  if (candidates.empty()) candidates = tp > 1 ? std::vector<int>{tp, 1} : std::vector<int>{tp};
  std::vector<int> out;
  for (int etp : candidates) {
    if (etp < 1 || m.moe->expert_ffn_hidden % etp != 0) continue;
    if (std::find(out.begin(), out.end(), etp) == out.end()) out.push_back(etp);
  }
  return out;
}

// `ring_attention`: the scenario's attention kernel is flash-style, so cp > 1 can run.
Result<std::vector<SweepUnit>> enumerate_units(const SweepScenario& sc, const SearchSpace& space,
                                               const topo::Cluster& cluster, bool ring_attention) {
  const ModelSpec& m = sc.model;
  const TrainingSpec& t = sc.training;
  const int per_node = cluster.gpus_per_node();
  std::vector<int> tps;
  for (std::int64_t d : divisors(m.heads)) {
    const int tp = static_cast<int>(d);
    if (m.kv_heads % tp != 0 || m.ffn_hidden % tp != 0 || m.vocab % tp != 0) continue;
    if (space.tp_within_nvlink && tp > std::max(1, cluster.nvlink_domain_size())) continue;
    if (allowed(space.tp, tp)) tps.push_back(tp);
  }
  std::vector<int> cps;
  for (std::int64_t c = 1; c <= (ring_attention ? t.seq_length : 1); c *= 2) {
    if (space.cp.empty() && c > 1 && t.seq_length / c < kMinTokensPerCpRank) break;
    if (c > 1 && t.seq_length % (2 * c) != 0) continue;
    if (allowed(space.cp, static_cast<int>(c))) cps.push_back(static_cast<int>(c));
  }
  for (int c : space.cp) {
    if (std::find(cps.begin(), cps.end(), c) == cps.end() && c > 0 && t.seq_length % (2 * c) == 0)
      cps.push_back(c);
  }
  std::sort(cps.begin(), cps.end());
  std::vector<int> eps;
  if (m.is_moe()) {
    for (std::int64_t d : divisors(m.moe->num_experts)) {
      if (allowed(space.ep, static_cast<int>(d))) eps.push_back(static_cast<int>(d));
    }
  } else {
    eps.push_back(1);
  }
  std::vector<int> pps;
  for (std::int64_t d : divisors(m.num_layers)) {
    if (allowed(space.pp, static_cast<int>(d))) pps.push_back(static_cast<int>(d));
  }
  // Uneven stages: any pp the space names that does not divide the layers (Llama 3 405B's 126
  // layers on pp 16) and, with uneven_stages, the powers of two that do not, with at least
  // kMinUnevenStageLayers layers a stage.
  std::vector<int> uneven = space.pp;
  if (searches_uneven_stages(space, m.num_layers)) {
    for (int pp = 2; pp <= m.num_layers / kMinUnevenStageLayers; pp *= 2) {
      if (allowed(space.pp, pp)) uneven.push_back(pp);
    }
  }
  for (int pp : uneven) {
    if (pp < 2 || m.num_layers % pp == 0 || !balanced_stage_split(m.num_layers, pp, 1)) continue;
    if (std::find(pps.begin(), pps.end(), pp) == pps.end()) pps.push_back(pp);
  }
  std::sort(pps.begin(), pps.end());
  const std::vector<std::int64_t> batch_divisors = divisors(t.global_batch_size);
  const std::vector<double> capacities =
      m.is_moe() && !space.moe_capacity.empty() ? space.moe_capacity : std::vector<double>{-1};
  std::vector<SweepUnit> units;
  for (int tp : tps) {
    const std::vector<int> etps = expert_tps(m, space, tp);
    for (int cp : cps) {
      for (int pp : pps) {
        const std::int64_t mp = static_cast<std::int64_t>(tp) * cp * pp;
        if (mp > sc.max_gpus) continue;
        for (std::int64_t dp : batch_divisors) {
          const std::int64_t world = mp * dp;
          if (world > sc.max_gpus) break;
          if (world < sc.min_gpus || world % per_node != 0) continue;
          if (!allowed(space.dp, static_cast<int>(dp))) continue;
          for (int ep : eps) {
            for (int etp : etps) {
              // The MoE layers regroup a stage's tp x cp x dp ranks as etp x ep x expert dp.
              if ((tp * cp * dp) % (static_cast<std::int64_t>(etp) * ep) != 0) continue;
              for (double capacity : capacities) {
                for (std::int64_t mbs : divisors(t.global_batch_size / dp)) {
                  if (!allowed(space.micro_batch_sizes, mbs)) continue;
                  units.push_back(
                      {tp, cp, ep, pp, static_cast<int>(dp), mbs, etp == tp ? 0 : etp, capacity});
                }
              }
            }
          }
        }
      }
    }
  }
  if (units.size() > kUnitMask) {
    return Status::invalid_input("the search space has too many work units (" +
                                 std::to_string(units.size()) + "); fix some axes");
  }
  return units;
}

}  // namespace

std::size_t SweepSetup::scenario_count() const {
  return scenarios_.size();
}

const ScenarioInfo& SweepSetup::info(int scenario) const {
  return scenarios_[static_cast<std::size_t>(scenario)].info;
}

const std::shared_ptr<const HardwareProfile>& SweepSetup::profile(int scenario) const {
  return scenarios_[static_cast<std::size_t>(scenario)].profile;
}

const std::shared_ptr<const topo::Cluster>& SweepSetup::cluster(int scenario) const {
  return scenarios_[static_cast<std::size_t>(scenario)].cluster;
}

const topo::TopologySpec& SweepSetup::topology(int scenario) const {
  return scenarios_[static_cast<std::size_t>(scenario)].spec.topology;
}

const sim::RunOptions& SweepSetup::run_options(int scenario) const {
  return scenarios_[static_cast<std::size_t>(scenario)].run;
}

std::int64_t SweepSetup::work_units() const {
  std::int64_t n = 0;
  for (const Scenario& s : scenarios_)
    n += static_cast<std::int64_t>(s.units.size());
  return n;
}

std::string precision_problem(const GpuSpec& gpu, Precision precision) {
  if (gpu.supports(precision)) return {};
  std::string modes;
  for (const auto& [p, name] : EnumTraits<Precision>::kNames) {
    if (gpu.supports(p)) modes += (modes.empty() ? "" : ", ") + std::string(name);
  }
  return gpu.name + " has no " + std::string(to_string(precision)) + " mode" +
         (modes.empty() ? std::string() : " (it has " + modes + ")");
}

std::string node_count_problem(const topo::TopologySpec& topology, std::int64_t gpus) {
  const int per_node = topology.gpus_per_node();
  if (per_node < 1) return "topology " + topology.name + " has no GPUs";
  const std::int64_t nodes = (gpus + per_node - 1) / per_node;
  if (nodes <= limits::kMaxNodes) return {};
  return std::to_string(gpus) + " GPUs need " + std::to_string(nodes) + " nodes of " +
         std::to_string(per_node) + " (topology " + topology.name + "); a cluster has at most " +
         std::to_string(limits::kMaxNodes) + " nodes";
}

Result<std::shared_ptr<const SweepSetup>> SweepSetup::prepare(const SweepRequest& request) {
  if (request.scenarios.empty()) return Status::invalid_input("a sweep needs a scenario");
  if (static_cast<int>(request.scenarios.size()) > kMaxScenarios) {
    return Status::invalid_input("a sweep takes at most " + std::to_string(kMaxScenarios) +
                                 " scenarios, got " + std::to_string(request.scenarios.size()));
  }
  if (request.options.threads < 1 || request.options.top_k < 0 || request.options.keep < 0) {
    return Status::invalid_input("sweep: threads must be >= 1, top_k and keep >= 0");
  }
  std::shared_ptr<SweepSetup> setup(new SweepSetup());
  setup->request_ = request;
  for (std::size_t i = 0; i < request.scenarios.size(); ++i) {
    const SweepScenario& in = request.scenarios[i];
    Scenario sc;
    sc.spec = in;
    const std::string where = in.origin.empty() ? "scenario " + std::to_string(i + 1) : in.origin;
    if (in.max_gpus < 1) return Status::invalid_input(where + ": max GPUs must be >= 1");
    const SoftwareStack stack = in.stack.value_or(request.options.stack);
    const AttentionImpl attention = request.options.attention.value_or(default_attention(stack));
    if (!is_flash_style(attention)) {
      // Ring attention (context parallelism) runs on flash-style kernels only (sim::simulate).
      const std::vector<int>& cp = request.space.cp;
      if (std::any_of(cp.begin(), cp.end(), [](int c) { return c > 1; })) {
        return Status::invalid_input(
            where +
            ": context parallelism (cp > 1) needs a flash-style attention kernel (ring "
            "attention); the scenario's is " +
            std::string(to_string(attention)) + " (stack " + std::string(to_string(stack)) + ")");
      }
    }
    if (in.training.global_batch_size < 1 || in.training.seq_length < 1) {
      return Status::invalid_input(where + ": global batch size and sequence length must be >= 1");
    }
    const int per_node = in.topology.gpus_per_node();
    if (per_node < 1)
      return Status::invalid_input(where + ": topology " + in.topology.name + " has no GPUs");
    const int nodes = nodes_for(in.max_gpus, per_node);
    // A cluster of several rack-scale NVLink domains holds its jobs in equal blocks of nodes, one
    // per rack (Slurm's --segment): plans see racks of the block.
    const int rack = in.topology.nvlink_domain ? in.topology.nvlink_domain->nodes : 0;
    if (const int block = topo::place_in_domain_blocks(sc.spec.topology, nodes); block > 0) {
      sc.info.placement = std::to_string(nodes / block) + " racks x " + std::to_string(block) +
                          " of their " + std::to_string(rack) + " nodes";
    }
    auto cluster = topo::Cluster::build(sc.spec.topology, nodes);
    if (!cluster) return cluster.status().with_context(where);
    sc.cluster = std::make_shared<const topo::Cluster>(std::move(cluster).value());
    sc.profile = in.profile ? in.profile
                            : std::make_shared<const HardwareProfile>(default_profile_for(in.gpu));
    sc.fabric = std::make_shared<const sim::Fabric>(
        sim::Fabric::build(*sc.cluster, *sc.profile, request.options.sim.run.balanced_fabric));
    sc.plan_memo = std::make_shared<sim::PlanMemo>();
    EstimatorInput ei;
    ei.model = in.model;
    ei.training = in.training;
    ei.gpu = in.gpu;
    ei.cluster = sc.cluster;
    ei.profile = sc.profile;
    ei.fabric = sc.fabric;
    ei.memory = request.options.sim.memory;
    sc.run = request.options.sim.run;
    sc.run.host = request.options.host ? *request.options.host : host_costs(stack);
    sc.run.attention = sim::attention_kernel(attention);
    sc.imbalance = request.space.moe_imbalance;
    ei.attention = sc.run.attention;
    ei.fp32_grads = request.options.sim.lower.fp32_grads;
    ei.host = sc.run.host;
    auto est = Estimator::create(ei);
    if (!est) return est.status().with_context(where);
    sc.estimator = std::move(est).value();
    sc.pricing = in.pricing ? *in.pricing : request.pricing;
    if (in.priced_at_instance) {
      if (in.topology.instance.empty()) {
        return Status::invalid_input(where + ": topology " + in.topology.name +
                                     " names no cloud instance to price");
      }
      sc.pricing.provider = in.topology.provider;
      sc.pricing.instance = in.topology.instance;
    }
    auto price = resolve_price(in.gpu, sc.pricing);
    if (!price) return price.status().with_context(where);
    sc.price = *price;
    if (in.min_gpus > in.max_gpus) {
      return Status::invalid_input(where + ": min_gpus (" + std::to_string(in.min_gpus) +
                                   ") exceeds the cluster's " + std::to_string(in.max_gpus) +
                                   " GPUs");
    }
    sc.spec.min_gpus = in.min_gpus > 0 ? in.min_gpus : (in.max_gpus + 1) / 2;
    if (sc.spec.training.token_budget <= 0) {
      sc.spec.training.token_budget =
          kChinchillaTokensPerParam * static_cast<double>(in.model.total_params());
    }
    sc.checkpoint = checkpoint_bytes(in.model, in.training);
    PLANNER_ASSIGN_OR_RETURN(
        sc.units, enumerate_units(sc.spec, request.space, *sc.cluster, is_flash_style(attention)));
    ScenarioInfo& info = sc.info;
    info.model = in.model.name;
    info.gpu = in.gpu.name;
    info.name = !in.name.empty()
                    ? in.name
                    : in.model.name + " on " + std::to_string(in.max_gpus) + " x " + in.gpu.name;
    if (in.stack) info.name += " under " + std::string(to_string(*in.stack));
    info.topology = in.topology.name;
    info.gpus_per_node = per_node;
    info.nvlink_domain = sc.cluster->nvlink_domain_size();
    info.max_gpus = in.max_gpus;
    info.min_gpus = sc.spec.min_gpus;
    info.profile = sc.profile->name;
    info.price = sc.price;
    info.pricing = sc.pricing;
    info.token_budget = sc.spec.training.token_budget;
    info.work_units = static_cast<std::int64_t>(sc.units.size());
    info.stack = stack;
    info.attention = attention;
    info.host = sc.run.host;
    setup->scenarios_.push_back(std::move(sc));
  }
  return std::shared_ptr<const SweepSetup>(std::move(setup));
}

Plan SweepSetup::plan_of(int scenario, const ParallelConfig& parallel) const {
  const Scenario& sc = scenarios_[static_cast<std::size_t>(scenario)];
  Plan plan;
  plan.model = sc.spec.model;
  plan.gpu = sc.spec.gpu;
  plan.training = sc.spec.training;
  plan.parallel = parallel;
  const int per_node = sc.info.gpus_per_node;
  plan.cluster.gpus_per_node = per_node;
  plan.cluster.nodes = nodes_for(parallel.world_size(), per_node);
  plan.cluster.gpu = sc.spec.gpu.name;
  plan.cluster.topology = sc.spec.topology.name;
  plan.cluster.offering = sc.pricing.offering;
  if (sc.price.overridden) plan.cluster.usd_per_gpu_hour = sc.price.usd_per_gpu_hour;
  plan.name = sc.spec.model.name + " " + short_label(parallel);
  return plan;
}

// ---- evaluation of one plan

namespace {

struct Priced {
  Economics economics;
  double objective = 0;
  bool over_budget = false;
  bool over_deadline = false;
};

}  // namespace

static Priced price_plan(const SweepSetup::Scenario& sc, const SweepConstraints& constraints,
                         const FailureModel& failures, double tokens_per_second,
                         std::int64_t world) {
  Priced p;
  p.economics = economics(tokens_per_second, world, sc.info.gpus_per_node, sc.spec.gpu, sc.price,
                          sc.pricing, failures, sc.checkpoint, sc.spec.training.token_budget);
  p.objective = p.economics.tokens_per_usd;
  p.over_budget = constraints.budget_usd && p.economics.total_cost.raw() > *constraints.budget_usd;
  p.over_deadline = constraints.deadline_s && p.economics.time_to_train_s > *constraints.deadline_s;
  return p;
}

namespace {

// Accumulates a shard's candidates: the best N, the best of each scenario (so that every
// scenario, e.g. every cloud instance of a "which cloud" sweep, keeps its best plan however far
// down the ranking it is) and the Pareto frontier.
class Accumulator {
 public:
  explicit Accumulator(std::size_t keep) : keep_(keep) {}

  void add(const Candidate& c) {
    add_best(c);
    add_pareto(c);
  }
  void add_best(const Candidate& c) {
    if (keep_ == 0) return;
    const int scenario = scenario_of_id(c.id);
    auto [it, added] = scenario_best_.try_emplace(scenario, c);
    if (!added && ranks_before(c, it->second)) it->second = c;
    if (best_.size() == keep_ && !ranks_before(c, best_.front())) return;
    best_.push_back(c);
    std::push_heap(best_.begin(), best_.end(), ranks_before);
    if (best_.size() > keep_) {
      std::pop_heap(best_.begin(), best_.end(), ranks_before);
      best_.pop_back();
    }
  }
  // The frontier sorted by (time, cost, id): time ascending, cost strictly descending.
  void add_pareto(const Candidate& c) {
    auto before = [](const Candidate& a, const Candidate& b) {
      if (a.time_s != b.time_s) return a.time_s < b.time_s;
      if (a.cost_usd != b.cost_usd) return a.cost_usd < b.cost_usd;
      return a.id < b.id;
    };
    auto it = std::lower_bound(pareto_.begin(), pareto_.end(), c, before);
    // Dominated (or equalled) by an earlier point: no faster-and-cheaper plan may exist.
    if (it != pareto_.begin() && std::prev(it)->cost_usd <= c.cost_usd) return;
    // Remove the points c dominates: those after it with cost >= c's.
    auto end = it;
    while (end != pareto_.end() && end->cost_usd >= c.cost_usd)
      ++end;
    it = pareto_.erase(it, end);
    pareto_.insert(it, c);
  }

  // The best N and each scenario's best not among them, in ranking order.
  std::vector<Candidate> take_best() {
    for (const auto& [scenario, c] : scenario_best_) {
      if (std::find(best_.begin(), best_.end(), c) == best_.end()) best_.push_back(c);
    }
    std::sort(best_.begin(), best_.end(), ranks_before);
    scenario_best_.clear();
    return std::move(best_);
  }
  std::vector<Candidate> take_pareto() { return std::move(pareto_); }

 private:
  std::size_t keep_;
  std::vector<Candidate> best_;  // a heap whose front is the worst kept
  std::map<int, Candidate> scenario_best_;
  std::vector<Candidate> pareto_;
};

void add_counts(SweepCounts& a, const SweepCounts& b) {
  a.candidates += b.candidates;
  a.out_of_memory += b.out_of_memory;
  a.evaluated += b.evaluated;
  a.over_budget += b.over_budget;
  a.over_deadline += b.over_deadline;
  a.feasible += b.feasible;
  a.simulated += b.simulated;
  a.simulation_failures += b.simulation_failures;
  if (b.min_peak_bytes < a.min_peak_bytes) {
    a.min_peak_bytes = b.min_peak_bytes;
    a.hbm_bytes = b.hbm_bytes;
  }
  a.min_cost_usd = std::min(a.min_cost_usd, b.min_cost_usd);
  a.min_time_to_train_s = std::min(a.min_time_to_train_s, b.min_time_to_train_s);
}

std::size_t kept(const SweepOptions& o) {
  return static_cast<std::size_t>(std::max(o.keep, o.top_k));
}

}  // namespace

Result<AnalyticPartial> run_analytic(const SweepSetup& setup, SweepShard shard, ProgressSink* sink,
                                     std::stop_token stop) {
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count) {
    return Status::invalid_input("sweep shard " + std::to_string(shard.index) + " of " +
                                 std::to_string(shard.count) + " does not exist");
  }
  const SweepRequest& req = setup.request();
  // Work units of this shard, over all scenarios: (scenario, unit).
  std::vector<std::pair<int, std::int64_t>> work;
  std::int64_t global = 0;
  for (std::size_t s = 0; s < setup.scenarios().size(); ++s) {
    for (std::size_t u = 0; u < setup.scenarios()[s].units.size(); ++u, ++global) {
      if (global % shard.count == shard.index) {
        work.emplace_back(static_cast<int>(s), static_cast<std::int64_t>(u));
      }
    }
  }
  const int threads = std::max(
      1,
      std::min<int>(req.options.threads, static_cast<int>(std::max<std::size_t>(1, work.size()))));
  std::atomic<std::int64_t> next{0}, done{0}, evaluated{0}, pruned{0};
  std::mutex report_mutex, error_mutex;
  Status error;
  std::vector<Accumulator> accs(static_cast<std::size_t>(threads), Accumulator(kept(req.options)));
  std::vector<SweepCounts> counts(static_cast<std::size_t>(threads));
  auto report = [&](bool force) {
    if (sink == nullptr) return;
    std::unique_lock<std::mutex> lock(report_mutex, std::defer_lock);
    if (force) {
      lock.lock();
    } else if (!lock.try_lock()) {
      return;
    }
    SweepProgress p;
    p.phase = SweepPhase::kAnalytic;
    p.done = done.load();
    p.total = static_cast<std::int64_t>(work.size());
    p.evaluated = evaluated.load();
    p.pruned = pruned.load();
    sink->on_progress(p);
  };
  auto worker = [&](int t) {
    Accumulator& acc = accs[static_cast<std::size_t>(t)];
    SweepCounts& cnt = counts[static_cast<std::size_t>(t)];
    std::vector<std::optional<Estimator::Session>> sessions(setup.scenarios().size());
    while (true) {
      if (stop.stop_requested()) return;
      const std::int64_t w = next.fetch_add(1);
      if (w >= static_cast<std::int64_t>(work.size())) return;
      const auto [s, u] = work[static_cast<std::size_t>(w)];
      const SweepSetup::Scenario& sc = setup.scenarios()[static_cast<std::size_t>(s)];
      auto& session = sessions[static_cast<std::size_t>(s)];
      if (!session) session.emplace(sc.estimator->session());
      const SweepUnit& unit = sc.units[static_cast<std::size_t>(u)];
      const SweepSetup::Scenario::Inner inner = sc.inner(unit, req.space);
      const std::int64_t size = inner.size();
      // Validity depends on (schedule, sp) and, for MoE models, the order (the dense and the
      // expert grid must agree on every rank's stage); memory also on recompute and ZeRO; orders
      // and overlap only change time. Index digits: schedule, sp, recompute, zero, order, overlap.
      const std::int64_t ns = static_cast<std::int64_t>(inner.schedules.size());
      const std::int64_t nsp = static_cast<std::int64_t>(inner.sp.size());
      const std::int64_t nrc = static_cast<std::int64_t>(inner.recompute.size());
      const std::int64_t nz = static_cast<std::int64_t>(inner.zero.size());
      const std::int64_t no = static_cast<std::int64_t>(inner.orders.size());
      const std::int64_t memory_block = ns * nsp * nrc * nz;
      std::vector<signed char> valid(static_cast<std::size_t>(ns * nsp * no), -1);
      std::vector<std::optional<MemoryPeak>> memory(static_cast<std::size_t>(memory_block));
      std::int64_t unit_evaluated = 0, unit_pruned = 0;
      for (std::int64_t i = 0; i < size; ++i) {
        const ParallelConfig p = sc.config(unit, inner, i);
        const std::int64_t vi = i % (ns * nsp) + ns * nsp * ((i / memory_block) % no);
        auto& v = valid[static_cast<std::size_t>(vi)];
        if (v < 0) {
          Diagnostics diag;
          check_parallel(sc.spec.model, sc.spec.training, p, diag);
          v = diag.empty() ? 1 : 0;
        }
        if (v == 0) continue;
        ++cnt.candidates;
        auto& mem = memory[static_cast<std::size_t>(i % memory_block)];
        if (!mem) {
          auto peak = session->memory(p);
          if (!peak) {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (error.is_ok()) error = peak.status().with_context(short_label(p));
            return;
          }
          mem = *peak;
        }
        if (mem->bytes.raw() < cnt.min_peak_bytes) {
          cnt.min_peak_bytes = mem->bytes.raw();
          cnt.hbm_bytes = mem->capacity.raw();
        }
        if (!mem->fits) {
          ++cnt.out_of_memory;
          ++unit_pruned;
          continue;
        }
        auto est = session->estimate(p, *mem);
        if (!est) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (error.is_ok()) error = est.status().with_context(short_label(p));
          return;
        }
        ++cnt.evaluated;
        ++unit_evaluated;
        const Priced pr =
            price_plan(sc, req.constraints, req.failures, est->tokens_per_second, p.world_size());
        cnt.min_cost_usd = std::min(cnt.min_cost_usd, pr.economics.total_cost.raw());
        cnt.min_time_to_train_s = std::min(cnt.min_time_to_train_s, pr.economics.time_to_train_s);
        if (pr.over_budget) ++cnt.over_budget;
        if (pr.over_deadline) ++cnt.over_deadline;
        if (pr.over_budget || pr.over_deadline) continue;
        ++cnt.feasible;
        acc.add({make_id(s, u, i), pr.objective, pr.economics.time_to_train_s,
                 pr.economics.total_cost.raw()});
      }
      evaluated.fetch_add(unit_evaluated);
      pruned.fetch_add(unit_pruned);
      const std::int64_t d = done.fetch_add(1) + 1;
      if (d % kProgressEvery == 0) report(false);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back(worker, t);
  worker(0);
  for (std::thread& th : pool)
    th.join();
  if (!error.is_ok()) return error;
  if (stop.stop_requested()) return Status::runtime("sweep cancelled");
  report(true);
  std::vector<AnalyticPartial> parts;
  for (std::size_t t = 0; t < accs.size(); ++t) {
    AnalyticPartial part;
    part.best = accs[t].take_best();
    part.pareto = accs[t].take_pareto();
    part.counts = counts[t];
    parts.push_back(std::move(part));
  }
  return merge_partials(setup, std::move(parts));
}

AnalyticPartial merge_partials(const SweepSetup& setup, std::vector<AnalyticPartial> parts) {
  Accumulator acc(kept(setup.request().options));
  AnalyticPartial out;
  for (const AnalyticPartial& p : parts) {
    for (const Candidate& c : p.best)
      acc.add_best(c);
    for (const Candidate& c : p.pareto)
      acc.add_pareto(c);
    add_counts(out.counts, p.counts);
  }
  out.best = acc.take_best();
  out.pareto = acc.take_pareto();
  return out;
}

namespace {

Json candidate_json(const Candidate& c) {
  return Json::array({std::to_string(c.id), c.objective, c.time_s, c.cost_usd});
}

Result<Candidate> parse_candidate(const Json& j) {
  if (!j.is_array() || j.size() != 4 || !j[0].is_string() || !j[1].is_number() ||
      !j[2].is_number() || !j[3].is_number()) {
    return Status::invalid_input("sweep partial: malformed candidate " + j.dump());
  }
  Candidate c;
  c.id = std::stoull(j[0].get<std::string>());
  c.objective = j[1].get<double>();
  c.time_s = j[2].get<double>();
  c.cost_usd = j[3].get<double>();
  return c;
}

const char* const kCountNames[] = {"candidates",  "out_of_memory",      "evaluated",
                                   "over_budget", "over_deadline",      "feasible",
                                   "simulated",   "simulation_failures"};

std::array<std::int64_t*, 8> count_fields(SweepCounts& c) {
  return {&c.candidates,    &c.out_of_memory, &c.evaluated, &c.over_budget,
          &c.over_deadline, &c.feasible,      &c.simulated, &c.simulation_failures};
}

}  // namespace

Json to_json(const AnalyticPartial& partial) {
  Json best = Json::array(), pareto = Json::array(), counts = Json::object();
  for (const Candidate& c : partial.best)
    best.push_back(candidate_json(c));
  for (const Candidate& c : partial.pareto)
    pareto.push_back(candidate_json(c));
  SweepCounts copy = partial.counts;
  const auto fields = count_fields(copy);
  for (std::size_t i = 0; i < fields.size(); ++i)
    counts[kCountNames[i]] = *fields[i];
  // Extremes: absent while there is none (JSON has no infinity).
  const SweepCounts& c = partial.counts;
  if (c.min_peak_bytes != SweepCounts::kNoBytes) {
    counts["min_peak_bytes"] = c.min_peak_bytes;
    counts["hbm_bytes"] = c.hbm_bytes;
  }
  if (std::isfinite(c.min_cost_usd)) counts["min_cost_usd"] = c.min_cost_usd;
  if (std::isfinite(c.min_time_to_train_s)) counts["min_time_to_train_s"] = c.min_time_to_train_s;
  return {{"best", best}, {"pareto", pareto}, {"counts", counts}};
}

Result<AnalyticPartial> parse_partial(const Json& json) {
  if (!json.is_object() || !json.contains("best") || !json.contains("pareto") ||
      !json.contains("counts")) {
    return Status::invalid_input("sweep partial: expected best, pareto and counts");
  }
  AnalyticPartial out;
  for (const Json& j : json["best"]) {
    PLANNER_ASSIGN_OR_RETURN(Candidate c, parse_candidate(j));
    out.best.push_back(c);
  }
  for (const Json& j : json["pareto"]) {
    PLANNER_ASSIGN_OR_RETURN(Candidate c, parse_candidate(j));
    out.pareto.push_back(c);
  }
  const auto fields = count_fields(out.counts);
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const Json& v = json["counts"].value(kCountNames[i], Json());
    if (!v.is_number_integer()) {
      return Status::invalid_input(std::string("sweep partial: counts/") + kCountNames[i] +
                                   " missing");
    }
    *fields[i] = v.get<std::int64_t>();
  }
  const Json& c = json["counts"];
  if (c.contains("min_peak_bytes") && c["min_peak_bytes"].is_number_integer() &&
      c.contains("hbm_bytes") && c["hbm_bytes"].is_number_integer()) {
    out.counts.min_peak_bytes = c["min_peak_bytes"].get<std::int64_t>();
    out.counts.hbm_bytes = c["hbm_bytes"].get<std::int64_t>();
  }
  if (c.contains("min_cost_usd") && c["min_cost_usd"].is_number()) {
    out.counts.min_cost_usd = c["min_cost_usd"].get<double>();
  }
  if (c.contains("min_time_to_train_s") && c["min_time_to_train_s"].is_number()) {
    out.counts.min_time_to_train_s = c["min_time_to_train_s"].get<double>();
  }
  return out;
}

// ---- plans from ids

namespace {

struct Decoded {
  int scenario = 0;
  ParallelConfig parallel;
};

Result<Decoded> decode(const SweepSetup& setup, std::uint64_t id) {
  Decoded d;
  d.scenario = static_cast<int>(id >> (kUnitBits + kInnerBits));
  const auto unit = static_cast<std::size_t>((id >> kInnerBits) & kUnitMask);
  const auto inner = static_cast<std::int64_t>(id & kInnerMask);
  if (d.scenario >= static_cast<int>(setup.scenarios().size())) {
    return Status::invalid_input("sweep: candidate " + std::to_string(id) + " has no scenario");
  }
  const SweepSetup::Scenario& sc = setup.scenarios()[static_cast<std::size_t>(d.scenario)];
  if (unit >= sc.units.size()) {
    return Status::invalid_input("sweep: candidate " + std::to_string(id) + " has no work unit");
  }
  const auto in = sc.inner(sc.units[unit], setup.request().space);
  if (inner >= in.size()) {
    return Status::invalid_input("sweep: candidate " + std::to_string(id) + " is out of range");
  }
  d.parallel = sc.config(sc.units[unit], in, inner);
  return d;
}

// A ranked plan from its estimate (and simulation, when given).
Result<RankedPlan> build_plan(const SweepSetup& setup, int scenario, std::uint64_t id,
                              const ParallelConfig& parallel,
                              const std::optional<PlanMetrics>& simulated) {
  const SweepSetup::Scenario& sc = setup.scenarios()[static_cast<std::size_t>(scenario)];
  const SweepRequest& req = setup.request();
  auto session = sc.estimator->session();
  PLANNER_ASSIGN_OR_RETURN(MemoryPeak mem, session.memory(parallel));
  RankedPlan r;
  r.scenario = scenario;
  r.id = id;
  r.parallel = parallel;
  if (mem.fits) {
    PLANNER_ASSIGN_OR_RETURN(PlanEstimate est, session.estimate(parallel, mem));
    r.estimate = metrics_of(est);
  } else {
    r.estimate.peak_memory = mem.bytes;
    r.estimate.capacity = mem.capacity;
  }
  r.simulated = simulated;
  r.tier = simulated ? Tier::kSimulated : Tier::kEstimate;
  const Priced pr = price_plan(sc, req.constraints, req.failures, r.metrics().tokens_per_second,
                               parallel.world_size());
  r.economics = pr.economics;
  r.objective = pr.objective;
  return r;
}

Candidate candidate_of(const RankedPlan& r) {
  return {r.id, r.objective, r.economics.time_to_train_s, r.economics.total_cost.raw()};
}

// `why`, when given, says why a plan that ran was not simulated (the simulator's memory model
// found it too large where the estimate's found it fits).
Result<std::optional<PlanMetrics>> simulate_one(const SweepSetup& setup, int scenario,
                                                const ParallelConfig& parallel,
                                                std::string* why = nullptr) {
  auto r = setup.simulate(scenario, parallel);
  if (!r) return r.status();
  if (!r->simulated) {
    if (why != nullptr && r->out_of_memory) {
      const sim::OutOfMemory& oom = *r->out_of_memory;
      char buf[128];
      std::snprintf(buf, sizeof buf, "does not fit when simulated: stage %d needs %.2f of %.2f GiB",
                    oom.stage, to_GiB(oom.needed), to_GiB(oom.capacity));
      *why = buf;
    }
    return std::optional<PlanMetrics>();
  }
  return std::optional<PlanMetrics>(metrics_of(*r));
}

}  // namespace

std::vector<Candidate> simulation_candidates(const SweepSetup& setup,
                                             const AnalyticPartial& merged) {
  const auto k = std::min<std::size_t>(static_cast<std::size_t>(setup.request().options.top_k),
                                       merged.best.size());
  std::vector<Candidate> out(merged.best.begin(),
                             merged.best.begin() + static_cast<std::ptrdiff_t>(k));
  if (k == 0) return out;
  // And the best of each scenario not among them (merged.best is in ranking order).
  std::set<int> scenarios;
  for (const Candidate& c : out)
    scenarios.insert(scenario_of_id(c.id));
  for (std::size_t i = k; i < merged.best.size(); ++i) {
    if (scenarios.insert(scenario_of_id(merged.best[i].id)).second) out.push_back(merged.best[i]);
  }
  return out;
}

Result<std::vector<RankedPlan>> simulate_candidates(const SweepSetup& setup,
                                                    const std::vector<Candidate>& candidates,
                                                    ProgressSink* sink, std::stop_token stop) {
  std::vector<RankedPlan> out(candidates.size());
  std::vector<Status> errors(candidates.size());
  std::atomic<std::int64_t> next{0}, done{0};
  std::mutex report_mutex;
  const int threads = std::max(
      1, std::min<int>(setup.request().options.threads, static_cast<int>(candidates.size())));
  auto worker = [&] {
    while (!stop.stop_requested()) {
      const std::int64_t i = next.fetch_add(1);
      if (i >= static_cast<std::int64_t>(candidates.size())) return;
      const auto idx = static_cast<std::size_t>(i);
      auto d = decode(setup, candidates[idx].id);
      if (!d) {
        errors[idx] = d.status();
        continue;
      }
      std::string why;
      auto sim = simulate_one(setup, d->scenario, d->parallel, &why);
      auto r = build_plan(setup, d->scenario, candidates[idx].id, d->parallel,
                          sim ? *sim : std::optional<PlanMetrics>());
      if (!r) {
        errors[idx] = r.status();
        continue;
      }
      if (!sim) {
        const std::string error = sim.status().message();
        r->note = "simulation failed: " + error.substr(0, error.find('\n'));
      } else if (!*sim) {
        r->note = why;
      }
      out[idx] = std::move(r).value();
      const std::int64_t n = done.fetch_add(1) + 1;
      if (sink != nullptr) {
        std::lock_guard<std::mutex> lock(report_mutex);
        SweepProgress p;
        p.phase = SweepPhase::kSimulate;
        p.done = n;
        p.total = static_cast<std::int64_t>(candidates.size());
        sink->on_progress(p);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread& th : pool)
    th.join();
  if (stop.stop_requested()) return Status::runtime("sweep cancelled");
  for (const Status& e : errors) {
    if (!e.is_ok()) return e;
  }
  return out;
}

Json to_json(const std::vector<RankedPlan>& simulated) {
  Json out = Json::array();
  for (const RankedPlan& r : simulated) {
    Json j = {{"id", std::to_string(r.id)}};
    if (r.simulated) {
      const PlanMetrics& m = *r.simulated;
      Json buckets = Json::array();
      for (Time t : m.buckets)
        buckets.push_back(t.raw());
      j["metrics"] = {{"step_ps", m.step_time.raw()},
                      {"tokens_per_s", m.tokens_per_second},
                      {"mfu", m.mfu},
                      {"hfu", m.hfu},
                      {"bubble", m.bubble_fraction},
                      {"buckets_ps", buckets},
                      {"peak_bytes", m.peak_memory.raw()},
                      {"capacity_bytes", m.capacity.raw()}};
    } else if (!r.note.empty()) {
      j["failure"] = r.note;  // why it was not simulated
    }
    out.push_back(j);
  }
  return out;
}

Result<std::vector<RankedPlan>> parse_simulated(const SweepSetup& setup, const Json& json) {
  if (!json.is_array()) return Status::invalid_input("sweep simulations: expected an array");
  std::vector<RankedPlan> out;
  for (const Json& j : json) {
    if (!j.is_object() || !j.contains("id") || !j["id"].is_string()) {
      return Status::invalid_input("sweep simulations: an entry without an id");
    }
    const std::uint64_t id = std::stoull(j["id"].get<std::string>());
    PLANNER_ASSIGN_OR_RETURN(Decoded d, decode(setup, id));
    std::optional<PlanMetrics> sim;
    if (j.contains("metrics")) {
      const Json& m = j["metrics"];
      try {
        PlanMetrics pm;
        pm.step_time = Time(m.at("step_ps").get<std::int64_t>());
        pm.tokens_per_second = m.at("tokens_per_s").get<double>();
        pm.mfu = m.at("mfu").get<double>();
        pm.hfu = m.at("hfu").get<double>();
        pm.bubble_fraction = m.at("bubble").get<double>();
        const Json& b = m.at("buckets_ps");
        for (std::size_t k = 0; k < sim::kNumTimeBuckets && k < b.size(); ++k)
          pm.buckets[k] = Time(b[k].get<std::int64_t>());
        pm.peak_memory = Bytes(m.at("peak_bytes").get<std::int64_t>());
        pm.capacity = Bytes(m.at("capacity_bytes").get<std::int64_t>());
        sim = pm;
      } catch (const Json::exception& e) {
        return Status::invalid_input(std::string("sweep simulations: malformed metrics: ") +
                                     e.what());
      }
    }
    PLANNER_ASSIGN_OR_RETURN(RankedPlan r, build_plan(setup, d.scenario, id, d.parallel, sim));
    if (!sim && j.contains("failure") && j["failure"].is_string()) {
      r.note = j["failure"].get<std::string>();
    }
    out.push_back(std::move(r));
  }
  return out;
}

// ---- the result

namespace {

std::string pct(double f) {
  const double v = 100.0 * f;
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 10 ? "%.0f%%" : "%.1f%%", v);
  return buf;
}

struct Share {
  std::string name;
  double value = 0;
};

// Fractions of the step time (and the goodput loss) that keep a plan from its peak.
std::vector<Share> losses(const RankedPlan& r) {
  const PlanMetrics& m = r.metrics();
  const double step = to_seconds(m.step_time);
  std::vector<Share> out;
  if (step <= 0) return out;
  out.push_back({"bubble", m.bubble_fraction});
  for (sim::TimeBucket b : sim::kCommBuckets) {
    out.push_back({std::string(to_string(b)) + " comm", to_seconds(m.exposed(b)) / step});
  }
  if (m.mfu > 0 && m.hfu > m.mfu) out.push_back({"recompute", 1.0 - m.mfu / m.hfu});
  out.push_back({"failures", 1.0 - r.economics.goodput.useful_fraction});
  return out;
}

std::string note_of(const RankedPlan& r, const RankedPlan* best) {
  const PlanMetrics& m = r.metrics();
  std::string note;
  for (const Share& s : losses(r)) {
    if (s.value < 0.005) continue;
    note += (note.empty() ? "" : " · ") + s.name + " " + pct(s.value);
  }
  const double headroom = to_GiB(m.capacity - m.peak_memory);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f GiB free", headroom);
  note += (note.empty() ? "" : " · ") + std::string(buf);
  if (best == nullptr || best == &r || best->objective <= 0) return note;
  const double behind = 1.0 - r.objective / best->objective;
  if (behind <= 0) return note;
  // The loss that grew most against the best plan.
  const std::vector<Share> mine = losses(r), theirs = losses(*best);
  std::string why;
  double worst = 0;
  for (std::size_t i = 0; i < mine.size() && i < theirs.size(); ++i) {
    const double d = mine[i].value - theirs[i].value;
    if (d > worst) {
      worst = d;
      why = "more " + mine[i].name + " (+" + pct(d) + " of the step)";
    }
  }
  if (r.economics.usd_per_hour.raw() / std::max<std::int64_t>(1, r.economics.billed_gpus) >
      1.0001 * best->economics.usd_per_hour.raw() /
          std::max<std::int64_t>(1, best->economics.billed_gpus)) {
    why = "dearer GPUs";
  }
  if (why.empty())
    why = "less compute efficiency (MFU " + pct(m.mfu) + " vs " + pct(best->metrics().mfu) + ")";
  return pct(behind) + " fewer tokens/$ than #1: " + why + "; " + note;
}

// At most max_points of `points`, evenly spread over them (the first and the last kept).
template <typename T>
std::vector<T> thin_evenly(std::vector<T> points, std::size_t max_points) {
  if (points.size() <= max_points) return points;
  std::vector<T> thin;
  for (std::size_t i = 0; i < max_points; ++i) {
    thin.push_back(std::move(points[i * (points.size() - 1) / (max_points - 1)]));
  }
  return thin;
}

// The plans no other plan of `plans` beats on both time to train and total cost, fastest first:
// the analytic tier's frontier (Accumulator::add_pareto) over the numbers each plan shows.
std::vector<RankedPlan> non_dominated(std::vector<RankedPlan> plans) {
  Accumulator front(0);
  for (const RankedPlan& p : plans)
    front.add_pareto(candidate_of(p));
  std::vector<RankedPlan> out;
  for (const Candidate& c : front.take_pareto()) {
    auto it =
        std::find_if(plans.begin(), plans.end(), [&](const RankedPlan& p) { return p.id == c.id; });
    out.push_back(std::move(*it));
  }
  return out;
}

}  // namespace

Result<SweepResult> finish(const SweepSetup& setup, const AnalyticPartial& merged,
                           std::vector<RankedPlan> simulated) {
  const SweepRequest& req = setup.request();
  SweepResult out;
  for (const SweepSetup::Scenario& sc : setup.scenarios())
    out.scenarios.push_back(sc.info);
  out.counts = merged.counts;
  out.failures = req.failures;
  std::vector<std::uint64_t> sim_ids;
  std::vector<RankedPlan> ok;
  double sum_abs = 0, sum_signed = 0;
  for (RankedPlan& r : simulated) {
    sim_ids.push_back(r.id);
    if (!r.simulated) {
      if (out.counts.simulation_failures++ == 0) {
        out.simulation_failure = short_label(r.parallel) + ": " + r.note;
      }
      continue;
    }
    ++out.counts.simulated;
    const double sim_s = to_seconds(r.simulated->step_time);
    if (sim_s > 0) {
      const double err = 100.0 * (to_seconds(r.estimate.step_time) - sim_s) / sim_s;
      sum_abs += std::abs(err);
      sum_signed += err;
      out.error.max_abs_pct = std::max(out.error.max_abs_pct, std::abs(err));
      ++out.error.plans;
    }
    ok.push_back(std::move(r));
  }
  if (out.error.plans > 0) {
    out.error.mean_abs_pct = sum_abs / out.error.plans;
    out.error.mean_signed_pct = sum_signed / out.error.plans;
  }
  std::sort(ok.begin(), ok.end(), [](const RankedPlan& a, const RankedPlan& b) {
    return ranks_before(candidate_of(a), candidate_of(b));
  });
  out.ranking = std::move(ok);
  const std::size_t keep = static_cast<std::size_t>(std::max(req.options.keep, req.options.top_k));
  // Up to `keep` plans, and the best of each scenario beyond them.
  std::set<int> ranked_scenarios;
  for (const RankedPlan& r : out.ranking)
    ranked_scenarios.insert(r.scenario);
  for (const Candidate& c : merged.best) {
    if (std::find(sim_ids.begin(), sim_ids.end(), c.id) != sim_ids.end()) continue;
    const bool first_of_scenario = ranked_scenarios.insert(scenario_of_id(c.id)).second;
    if (out.ranking.size() >= keep && !first_of_scenario) continue;
    PLANNER_ASSIGN_OR_RETURN(Decoded d, decode(setup, c.id));
    PLANNER_ASSIGN_OR_RETURN(RankedPlan r, build_plan(setup, d.scenario, c.id, d.parallel, {}));
    out.ranking.push_back(std::move(r));
  }
  for (std::size_t i = 0; i < out.ranking.size(); ++i)
    out.ranking[i].position = static_cast<int>(i + 1);
  const RankedPlan* best = out.ranking.empty() ? nullptr : &out.ranking.front();
  for (RankedPlan& r : out.ranking)
    r.note = note_of(r, best);

  // Pareto frontier by estimate, thinned evenly to pareto_max points (both ends kept).
  const auto max_points = static_cast<std::size_t>(std::max(2, req.options.pareto_max));
  const std::vector<Candidate> front = thin_evenly(merged.pareto, max_points);
  std::vector<RankedPlan> points;
  for (const Candidate& c : front) {
    const RankedPlan* ranked = nullptr;
    for (const RankedPlan& r : out.ranking) {
      if (r.id == c.id) ranked = &r;
    }
    if (ranked != nullptr) {
      points.push_back(*ranked);
      continue;
    }
    PLANNER_ASSIGN_OR_RETURN(Decoded d, decode(setup, c.id));
    PLANNER_ASSIGN_OR_RETURN(RankedPlan r, build_plan(setup, d.scenario, c.id, d.parallel, {}));
    r.note = note_of(r, best);
    points.push_back(std::move(r));
  }
  // The frontier's members carry their simulation where they had one, and a simulated plan off
  // the estimate's frontier may beat them once simulated (or an estimated one beat a member that
  // simulated slower): the frontier shown is taken again over its members and the ranking, each
  // plan by the numbers shown for it, so that no ranked plan is both faster and cheaper than a
  // point of the frontier.
  for (const RankedPlan& r : out.ranking) {
    const bool listed = std::any_of(points.begin(), points.end(),
                                    [&](const RankedPlan& p) { return p.id == r.id; });
    if (!listed) points.push_back(r);
  }
  out.pareto = thin_evenly(non_dominated(std::move(points)), max_points);
  return out;
}

Result<SweepOutcome> run_sweep(const SweepRequest& request, ProgressSink* sink,
                               std::stop_token stop) {
  if (sink != nullptr) sink->on_progress({});
  PLANNER_ASSIGN_OR_RETURN(std::shared_ptr<const SweepSetup> setup, SweepSetup::prepare(request));
  PLANNER_ASSIGN_OR_RETURN(AnalyticPartial merged, run_analytic(*setup, {}, sink, stop));
  PLANNER_ASSIGN_OR_RETURN(
      std::vector<RankedPlan> simulated,
      simulate_candidates(*setup, simulation_candidates(*setup, merged), sink, stop));
  PLANNER_ASSIGN_OR_RETURN(SweepResult result, finish(*setup, merged, std::move(simulated)));
  if (sink != nullptr) {
    SweepProgress p;
    p.phase = SweepPhase::kDone;
    p.evaluated = result.counts.evaluated;
    p.pruned = result.counts.out_of_memory;
    sink->on_progress(p);
  }
  return SweepOutcome{std::move(setup), std::move(result)};
}

Result<sim::SimResult> SweepSetup::simulate(int scenario, const ParallelConfig& parallel) const {
  if (scenario < 0 || scenario >= static_cast<int>(scenarios_.size())) {
    return Status::invalid_input("sweep: no scenario " + std::to_string(scenario));
  }
  const Scenario& sc = scenarios_[static_cast<std::size_t>(scenario)];
  sim::SimInput in;
  in.plan = plan_of(scenario, parallel);
  in.cluster = sc.cluster;
  in.profile = sc.profile;
  in.fabric = sc.fabric;
  in.plan_memo = sc.plan_memo;
  in.options = request_.options.sim;
  in.options.run = sc.run;
  in.options.run.keep_op_times = false;
  in.options.run.trace = false;
  in.options.run.critical_path = false;  // the ranking reads step time and buckets only
  return sim::simulate(in);
}

Result<RankedPlan> SweepSetup::evaluate(int scenario, const ParallelConfig& parallel) const {
  if (scenario < 0 || scenario >= static_cast<int>(scenarios_.size())) {
    return Status::invalid_input("sweep: no scenario " + std::to_string(scenario));
  }
  const Scenario& sc = scenarios_[static_cast<std::size_t>(scenario)];
  Diagnostics diag("plan");
  check_parallel(sc.spec.model, sc.spec.training, parallel, diag);
  PLANNER_RETURN_IF_ERROR(diag.to_status());
  auto session = sc.estimator->session();
  PLANNER_ASSIGN_OR_RETURN(MemoryPeak mem, session.memory(parallel));
  RankedPlan r;
  r.scenario = scenario;
  r.id = std::numeric_limits<std::uint64_t>::max();
  r.parallel = parallel;
  r.estimate.peak_memory = mem.bytes;
  r.estimate.capacity = mem.capacity;
  if (!mem.fits) {
    r.note = "does not fit: " + std::to_string(to_GiB(mem.bytes)) + " GiB on stage " +
             std::to_string(mem.stage);
    return r;
  }
  if (parallel.dp_sync == DpSync::kAllReduce && parallel.offload == Offload::kNone) {
    PLANNER_ASSIGN_OR_RETURN(PlanEstimate est, session.estimate(parallel, mem));
    r.estimate = metrics_of(est);
  }
  PLANNER_ASSIGN_OR_RETURN(std::optional<PlanMetrics> sim, simulate_one(*this, scenario, parallel));
  r.simulated = sim;
  r.tier = sim ? Tier::kSimulated : Tier::kEstimate;
  const Priced pr = price_plan(sc, request_.constraints, request_.failures,
                               r.metrics().tokens_per_second, parallel.world_size());
  r.economics = pr.economics;
  r.objective = pr.objective;
  return r;
}

namespace {

// Valid plans of a setup (those check_parallel() accepts), counted up to `limit`, and the first
// rejection met on the way ("tp4 pp2 ...: <why>").
struct Validity {
  std::int64_t valid = 0;
  std::string rejection;
};

Validity count_valid(const SweepSetup& setup, std::int64_t limit) {
  Validity out;
  for (const SweepSetup::Scenario& sc : setup.scenarios()) {
    for (const SweepUnit& unit : sc.units) {
      const SweepSetup::Scenario::Inner inner = sc.inner(unit, setup.request().space);
      for (std::int64_t i = 0; i < inner.size(); ++i) {
        const ParallelConfig p = sc.config(unit, inner, i);
        Diagnostics diag;
        check_parallel(sc.spec.model, sc.spec.training, p, diag);
        if (diag.empty()) {
          if (++out.valid >= limit) return out;
        } else if (out.rejection.empty()) {
          out.rejection = short_label(p) + ": " + diag.items().front().message;
        }
      }
    }
  }
  return out;
}

std::string with_commas(double v) {
  const auto n = static_cast<long long>(std::llround(v));
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

template <class T>
std::string list_text(const std::vector<T>& values) {
  std::string out;
  for (const T& v : values) {
    if (!out.empty()) out += ",";
    if constexpr (std::is_same_v<T, bool>) {
      out += v ? "on" : "off";
    } else if constexpr (std::is_same_v<T, double>) {  // capacity factors
      out += capacity_factor_text(v);
    } else if constexpr (std::is_same_v<T, std::uint8_t>) {  // recompute module sets
      out += "[" + recompute_modules_text(v) + "]";
    } else if constexpr (std::is_arithmetic_v<T>) {
      out += std::to_string(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      out += v;
    } else {
      out += std::string(to_string(v));
    }
  }
  return out;
}

}  // namespace

std::string explain_empty(const SweepSetup& setup, const SweepResult& result) {
  if (!result.ranking.empty()) return {};
  const SweepCounts& c = result.counts;
  const SweepRequest& req = setup.request();
  if (c.candidates == 0) {
    // Which fixed dimension of the search space leaves no valid plan: relax each in turn.
    struct Fixed {
      std::string text;
      std::function<void(SearchSpace&)> clear;
    };
    const SearchSpace& sp = req.space;
    std::vector<Fixed> fixed_dims;
    auto add = [&](const char* name, const auto& values, auto clear) {
      if (!values.empty())
        fixed_dims.push_back({std::string(name) + " " + list_text(values), clear});
    };
    add("tp", sp.tp, [](SearchSpace& s) { s.tp.clear(); });
    add("pp", sp.pp, [](SearchSpace& s) { s.pp.clear(); });
    add("dp", sp.dp, [](SearchSpace& s) { s.dp.clear(); });
    add("cp", sp.cp, [](SearchSpace& s) { s.cp.clear(); });
    add("ep", sp.ep, [](SearchSpace& s) { s.ep.clear(); });
    add("micro_batch_size", sp.micro_batch_sizes,
        [](SearchSpace& s) { s.micro_batch_sizes.clear(); });
    add("virtual_stages", sp.virtual_stages, [](SearchSpace& s) { s.virtual_stages.clear(); });
    add("schedule", sp.schedules, [](SearchSpace& s) { s.schedules.clear(); });
    add("recompute", sp.recompute, [](SearchSpace& s) { s.recompute.clear(); });
    add("recompute_modules", sp.recompute_modules,
        [](SearchSpace& s) { s.recompute_modules.clear(); });
    add("zero_stage", sp.zero_stages, [](SearchSpace& s) { s.zero_stages.clear(); });
    add("sequence_parallel", sp.sequence_parallel,
        [](SearchSpace& s) { s.sequence_parallel.clear(); });
    add("order", sp.orders, [](SearchSpace& s) { s.orders.clear(); });
    add("moe_a2a", sp.moe_a2a, [](SearchSpace& s) { s.moe_a2a.clear(); });
    add("moe_a2a_overlap", sp.moe_a2a_overlap, [](SearchSpace& s) { s.moe_a2a_overlap.clear(); });
    add("etp", sp.etp, [](SearchSpace& s) { s.etp.clear(); });
    add("moe_capacity_factor", sp.moe_capacity, [](SearchSpace& s) { s.moe_capacity.clear(); });
    std::string culprits;
    for (const Fixed& f : fixed_dims) {
      SweepRequest relaxed = req;
      f.clear(relaxed.space);
      auto other = SweepSetup::prepare(relaxed);
      if (other && count_valid(**other, 1).valid > 0) {
        culprits += (culprits.empty() ? "" : "; ") + f.text;
      }
    }
    if (!culprits.empty()) {
      return "no valid plan: the search space's fixed " + culprits +
             " leaves none (without it there are valid plans)";
    }
    const Validity v = count_valid(setup, 1);
    std::string gpus;
    for (const ScenarioInfo& s : result.scenarios) {
      gpus += (gpus.empty() ? "" : ", ") + std::to_string(s.min_gpus) + "-" +
              std::to_string(s.max_gpus) + " GPUs in nodes of " + std::to_string(s.gpus_per_node);
    }
    if (!v.rejection.empty()) {
      return "no valid plan on " + gpus + ": every combination is rejected, e.g. " + v.rejection;
    }
    return "no valid plan: no combination of tp, cp, ep, pp and dp uses " + gpus +
           " with the global batch of " +
           std::to_string(
               req.scenarios.empty() ? 0 : req.scenarios.front().training.global_batch_size) +
           " sequences";
  }
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (c.out_of_memory == c.candidates) {
    return "none of the " + with_commas(static_cast<double>(c.candidates)) +
           " valid plans fits in memory: the smallest needs " +
           fixed(static_cast<double>(c.min_peak_bytes) / gib, 1) + " GiB per GPU of the " +
           fixed(static_cast<double>(c.hbm_bytes) / gib, 1) +
           " GiB of HBM (more GPUs, ZeRO, recompute or offload lower it)";
  }
  if (c.feasible == 0) {
    std::string why = "none of the " + with_commas(static_cast<double>(c.evaluated)) +
                      " plans that fit in memory meets the constraints:";
    if (req.constraints.budget_usd && c.over_budget > 0) {
      why += " the cheapest costs $" + with_commas(c.min_cost_usd) + " against the budget of $" +
             with_commas(*req.constraints.budget_usd) + ";";
    }
    if (req.constraints.deadline_s && c.over_deadline > 0) {
      why += " the fastest takes " + fixed(c.min_time_to_train_s / 86400, 1) +
             " days against the deadline of " + fixed(*req.constraints.deadline_s / 86400, 1) +
             " days;";
    }
    why.pop_back();
    return why;
  }
  if (c.simulation_failures > 0) {
    return "the simulations of the " + std::to_string(c.simulation_failures) + " best plans failed";
  }
  return "no plan was ranked";
}

double regret_pct(const RankedPlan& best, const RankedPlan& plan) {
  if (best.objective <= 0) return 0;
  return std::max(0.0, 100.0 * (1.0 - plan.objective / best.objective));
}

}  // namespace planner::search
