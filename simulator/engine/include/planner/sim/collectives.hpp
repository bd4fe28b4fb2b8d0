// Collective and point-to-point algorithms as flows on the topology, and NCCL-style selection.
//
// A plan is one or more phases run one after the other; a phase is one network transfer (its link
// uses and the bytes each flow moves) followed by a latency. `gpus` lists a group's GPUs in the
// group's rank order; sizes follow nccl-tests (program.hpp): S is the all-reduce / broadcast
// buffer, the all-gather output, the reduce-scatter input, what one rank sends in an all-to-all.
//
//   ring          C channels (C = the most members one island holds; 1 inside an island), each a
//                 ring over the islands in group order whose hops between islands join GPUs of the
//                 same local index (the same rail, as NCCL's rings do) and whose entry and exit
//                 GPUs differ per channel, so every member's NIC carries one channel each way. Each
//                 flow moves 2(n−1)/n·S/C (all-reduce) or (n−1)/n·S/C (all-gather, reduce-scatter)
//                 in 2(n−1) or n−1 steps (Patarasuk & Yuan 2009; NCCL rings).
//   tree          all-reduce across islands: per channel, a chain inside each island and NCCL's
//                 double binary tree over the islands (Sanders et al. 2009; NCCL 2.4); each tree
//                 carries half the data up (reduce) and down (broadcast); 2·(⌈log2 k⌉ + g − 1)
//                 steps for k islands of g members.
//   hierarchical  all-reduce across islands of equal size g: reduce-scatter inside every island,
//                 g rings across islands (one per local index) all-reducing S/g, all-gather inside
//                 every island: three phases one after the other (not pipelined, as in Horovod's
//                 hierarchical all-reduce), so it wins on latency, not on bandwidth.
//   nvls          all-reduce inside one NVSwitch domain with NVLink SHARP: every GPU sends S up to
//                 the switch and receives S back; 2 steps.
//   direct        all-to-all: every member sends S/n to every other member at once; 1 step.
//   hierarchical-a2a  all-to-all of routed MoE tokens (OpFlag kTokenRouted: the plan's moe_a2a
//                 is hierarchical, as DeepEP's and HybridEP's dispatch and combine) across k
//                 islands of g members: a token crosses the network once per island that holds
//                 one of its experts, to the member on its own rail (same local index), which
//                 forwards it over NVLink once to every member holding one of its experts; the
//                 combine is the mirror image. One step: the network flows (member l of island i
//                 to member l of every other island) each move S·u/(top_k·k), u the expected
//                 islands one token reaches (expected_islands()); the NVLink forwarding runs
//                 under them (DeepEP pipelines the two) as flows to every other member of the
//                 island moving S·r/(top_k·g), r the expected members (of all n) one token
//                 reaches, carried as round((r/g) / (u/k)) flows of the network flows' size.
//                 Inside one island only the forwarding remains: S·r/(top_k·n) per pair (NCCL's
//                 direct all-to-all sends every copy: S/n). Only for a plan that chooses it, on
//                 islands of equal size.
//   chain         broadcast: a pipelined chain from the first member, S per hop, n−1 steps.
//   p2p           a send/recv pair: the message on the route between the two GPUs, 1 step.
// A protocol (LL, LL128, Simple) scales the bytes on the wire by 1 / bandwidth_factor; an
// algorithm's profile efficiency scales them by 1 / efficiency. Latency = the protocol's base
// latency + steps × (the protocol's step latency for the class of the slowest hop + that hop's
// link latencies (topology + profile)).
// Selection (as NCCL's tuner does): every applicable (algorithm, protocol) is estimated alone on
// an idle network (Σ phases: latency + wire bytes / the bottleneck share of its own flows) and the
// fastest wins, unless an algorithm is forced and applies.
// Background copies (symmetric groups that are not simulated, simulator/symmetry.hpp) run the same
// algorithm; their link uses join the phase's uses, so the representative transfer shares links
// with them as the whole fabric would.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "planner/core/hardware_profile.hpp"
#include "planner/core/model_spec.hpp"
#include "planner/core/program.hpp"
#include "planner/sim/fabric.hpp"
#include "planner/sim/network.hpp"
#include "planner/topo/cluster.hpp"
#include "planner/topo/link_kind.hpp"

namespace planner::sim {

enum class Algorithm : std::uint8_t {
  kRing,
  kTree,
  kHierarchical,
  kNvls,
  kDirect,
  kChain,
  kP2p,
  kHierarchicalA2a
};

// The routing behind an all-to-all of MoE tokens sent hierarchically (program.hpp, kTokenRouted).
struct TokenRouting {
  int experts = 0;
  int top_k = 1;
  int groups = 1;       // expert groups of group-limited routing (1: none)
  int group_top_k = 1;  // the groups a token may pick its experts from
  bool operator==(const TokenRouting&) const = default;
};
// The routing an op states, or nullopt for an all-to-all without kTokenRouted.
std::optional<TokenRouting> token_routing(const OpDesc& d);
// The routing of a model's MoE layers.
TokenRouting token_routing(const MoeSpec& moe);
// The expected number of islands one token's top_k expert copies reach, with the experts spread
// evenly over `islands` equal islands in order (the EP group's members hold consecutive experts)
// and balanced routing: without group limits the top_k experts are a uniform draw from all of
// them; with them, the token draws group_top_k of the groups uniformly, then its top_k experts
// uniformly among the picked groups' experts (so a picked group may get none: DeepSeek-V3 on 8
// islands reaches 3.6 of them, where its score-based choice of groups, which ranks a group by its
// best experts, reaches nearly 4).
double expected_islands(const TokenRouting& r, int islands);

struct CommPhase {
  std::vector<LinkUse> uses;  // aggregated by resource, background copies included
  double bytes = 0;           // per flow, on the wire
  Time latency;
};

struct CommPlan {
  Algorithm algorithm = Algorithm::kRing;
  int protocol = 0;  // index into the profile's protocols
  std::vector<CommPhase> phases;
  Time estimate;   // alone on an idle network, without copies
  int copies = 0;  // background copies merged into the phases
};

// The cost of one (algorithm, protocol) as a line in the collective's size S (for the analytic tier
// of a sweep, simulator/estimate.hpp): alone = latency + S × alone_s_per_byte is the estimate
// collective() selects on (an idle network); loaded = latency + S × loaded_s_per_byte is the same
// transfer sharing its links with `images` (the symmetric groups of the other ranks) running at
// the same time, the steady state the flow-level network reaches when they overlap fully.
struct CostLine {
  Algorithm algorithm = Algorithm::kRing;
  int protocol = 0;
  Time latency;
  double alone_s_per_byte = 0;
  double loaded_s_per_byte = 0;

  // The loaded time of the line collective() would select for `bytes` (smallest alone estimate,
  // the first in selection order on ties); zero for no lines (a group of one GPU). Lines that no
  // size selects keep loaded = alone.
  static Time time(std::span<const CostLine> lines, Bytes bytes);
};

// Builds plans; keeps scratch space, so use one planner per simulation (thread).
class CollectivePlanner {
 public:
  // `fabric` maps links to the network's resources (and gives their capacities).
  CollectivePlanner(const topo::Cluster& cluster, const HardwareProfile& profile,
                    const Fabric& fabric, std::optional<Algorithm> forced);

  // A collective of `kind` moving `bytes` over `gpus`, plus background copies (other groups'
  // GPUs, same size). Groups of one GPU get a plan without phases.
  // `routing`: an all-to-all of routed tokens sent hierarchically (the only algorithm considered
  // where it applies).
  CommPlan collective(OpKind kind, Bytes bytes, std::span<const int> gpus,
                      std::span<const std::vector<int>> copies = {},
                      const TokenRouting* routing = nullptr);
  // A message from `src` to `dst` GPU, plus background copies (src, dst pairs).
  CommPlan p2p(int src, int dst, Bytes bytes, std::span<const std::pair<int, int>> copies = {});

  // Cost lines of every (algorithm, protocol) collective() would consider for `kind` over `gpus`
  // (the forced algorithm only, when it applies), loaded by `images` (other groups of the same
  // size running the same algorithm at once). Empty for a group of one GPU.
  std::vector<CostLine> cost_lines(OpKind kind, std::span<const int> gpus,
                                   std::span<const std::vector<int>> images = {},
                                   const TokenRouting* routing = nullptr);
  // The same for a message src → dst, loaded by the messages `images`.
  std::vector<CostLine> p2p_cost_lines(int src, int dst,
                                       std::span<const std::pair<int, int>> images = {});

 private:
  static constexpr int kClasses = 3;  // LinkClassLatency: nvlink, pcie, network
  // Steps sharing one latency: `count` steps, each as slow as its slowest hop.
  struct StepGroup {
    int count = 0;
    std::array<Time, kClasses> max_latency{Time(-1), Time(-1), Time(-1)};
  };
  // A phase's uses before bytes and latency.
  struct Shape {
    std::vector<LinkUse> uses;
    double fraction = 0;  // bytes per flow as a fraction of S
    std::vector<StepGroup> steps = std::vector<StepGroup>(1);
    int group = 0;  // the step group add_path() records hops into
  };
  // The fraction and step count of a ring of `n` members over `channels` channels for `kind`.
  static void ring_counts(OpKind kind, int n, std::size_t channels, Shape& s);
  static Time phase_latency(const Shape& s, const ProtocolProfile& proto, bool first);
  double bottleneck_share(std::span<const LinkUse> uses) const;
  std::vector<Shape> p2p_shapes(int src, int dst);
  // Lines of `parts` alone (loaded = alone until cost_lines() loads them).
  void add_lines(Algorithm a, const std::vector<Shape>& parts, std::vector<CostLine>& out) const;
  // Per phase, the uses (unaggregated) of `a` over one image.
  using ImageUses = std::vector<std::vector<LinkUse>>;
  // The uses of `a` over each image of `size` members it applies to. For one algorithm they do
  // not depend on the collective's kind (a ring's paths are the same for all-reduce, all-gather
  // and reduce-scatter): memoised per algorithm for the last images asked about, which
  // cost_lines() gets once per kind.
  const std::vector<ImageUses>& image_uses(Algorithm a, OpKind kind, std::size_t size,
                                           std::span<const std::vector<int>> images);
  // The bottleneck per-flow share of the union of `uses` (counts summed per resource).
  double loaded_share(const std::vector<const std::vector<LinkUse>*>& uses);
  bool applicable(Algorithm a, OpKind kind, std::span<const int> gpus) const;
  // The algorithms collective() and cost_lines() consider for `kind` over `gpus` (with routing_).
  std::vector<Algorithm> candidates(OpKind kind, std::span<const int> gpus) const;
  // Sets routing_ for one call, and drops the memos when it changes.
  void use_routing(const TokenRouting* routing);
  // The phases of `a` over `gpus`; their uses aggregated by resource (sorted, counts merged)
  // unless `aggregated` is false (callers that merge or sum the uses themselves).
  std::vector<Shape> shapes(Algorithm a, OpKind kind, std::span<const int> gpus,
                            bool aggregated = true);
  // The one phase of the hierarchical all-to-all over `gpus` (routing_ set, islands of equal size).
  Shape hierarchical_a2a_shape(std::span<const int> gpus);
  // aggregate_uses() in linear time with the scratch counts (resources are dense indices).
  void aggregate(std::vector<LinkUse>& uses);
  double efficiency(Algorithm a) const;
  CommPlan build(Algorithm a, int protocol, OpKind kind, Bytes bytes, std::span<const int> gpus);
  void add_path(int src, int dst, std::uint64_t channel, int count, Shape& shape);

  const topo::Cluster* cluster_;
  const HardwareProfile* profile_;
  const Fabric* fabric_;
  std::optional<Algorithm> forced_;
  // The profile's latency and the latency class per link kind.
  std::array<Time, EnumTraits<topo::LinkKind>::kNames.size()> kind_latency_{};
  std::array<std::uint8_t, EnumTraits<topo::LinkKind>::kNames.size()> kind_class_{};
  std::vector<topo::LinkId> path_;   // scratch for add_path()
  bool timed_ = true;                // add_path() records hop latencies (off for copies and images)
  std::vector<std::int32_t> count_;  // scratch for loaded_share() and aggregate(), by resource
  std::vector<std::int32_t> touched_;
  int simple_protocol_ = 0;
  std::optional<TokenRouting> routing_;        // of the all-to-all being planned
  std::optional<TokenRouting> memo_routing_;   // the routing the memos' shapes were built with
  std::vector<std::vector<int>> memo_images_;  // image_uses()' memo
  std::deque<std::pair<Algorithm, std::vector<ImageUses>>> memo_shapes_;  // stable references
  // shapes()' memo of its timed, aggregated shapes over the GPUs asked about last, per algorithm
  // and kind: collective() builds each algorithm once per protocol and cost_lines() a ring once
  // per kind. A ring's paths are the same for every kind it applies to; only its fraction and
  // step count differ (ring_counts()).
  struct ShapesMemo {
    Algorithm algorithm = Algorithm::kRing;
    OpKind kind = OpKind::kAllReduce;
    std::size_t channels = 0;  // a ring's
    std::vector<Shape> parts;
  };
  std::vector<int> shapes_memo_gpus_;
  std::vector<ShapesMemo> shapes_memo_;
};

// Collective and message plans shared by the simulations of a sweep on one cluster, hardware
// profile and fabric: a plan with its background copies walks thousands of routes, and a sweep's
// candidates share most of their groups. A plan is a pure function of its key (what it moves, over
// which GPUs, with which copies), so a simulation gets the same plan whether or not it was
// memoised. Thread-safe.
class PlanMemo {
 public:
  // The plan stored under `key`, or nullptr.
  std::shared_ptr<const CommPlan> find(const std::string& key) const;
  // Stores `plan` under `key` unless a plan is there already; returns the stored plan.
  std::shared_ptr<const CommPlan> insert(std::string key, CommPlan plan);

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const CommPlan>> plans_;
};

}  // namespace planner::sim

namespace planner {

template <>
struct EnumTraits<sim::Algorithm> {
  static constexpr std::string_view kWhat = "collective algorithm";
  static constexpr std::array<std::pair<sim::Algorithm, std::string_view>, 8> kNames{{
      {sim::Algorithm::kRing, "ring"},
      {sim::Algorithm::kTree, "tree"},
      {sim::Algorithm::kHierarchical, "hierarchical"},
      {sim::Algorithm::kNvls, "nvls"},
      {sim::Algorithm::kDirect, "direct"},
      {sim::Algorithm::kChain, "chain"},
      {sim::Algorithm::kP2p, "p2p"},
      {sim::Algorithm::kHierarchicalA2a, "hierarchical-a2a"},
  }};
};

}  // namespace planner
