#include "planner/sim/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "planner/sim/model_registry.hpp"
#include "planner/topo/link_kind.hpp"

namespace planner::sim {
namespace {

// splitmix64 finaliser: spreads (src, dst, channel) over the ECMP choices.
std::uint64_t flow_hash(int src, int dst, std::uint64_t channel) {
  std::uint64_t x = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) ^
                    static_cast<std::uint32_t>(dst) ^ (channel * 0x9e3779b97f4a7c15ull);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Members grouped by island, islands in order of first appearance, members in group order.
// Linear in the members (a group of a thousand islands is common at scale).
std::vector<std::vector<int>> by_island(const topo::Cluster& cluster, std::span<const int> gpus) {
  std::vector<std::vector<int>> islands;
  std::unordered_map<int, std::size_t> index;
  index.reserve(gpus.size());
  for (int g : gpus) {
    const auto [it, added] = index.emplace(cluster.island_of(g), islands.size());
    if (added) islands.emplace_back();
    islands[it->second].push_back(g);
  }
  return islands;
}

std::size_t largest(const std::vector<std::vector<int>>& islands) {
  std::size_t c = 1;
  for (const auto& i : islands)
    c = std::max(c, i.size());
  return c;
}

// Channel c's ring: island j is entered at local member a_j and left at a_{j+1} (the next
// island's entry), so every hop between islands joins GPUs of the same local index (the same
// rail, as NCCL's rings do). a_j alternates between c and c + 1; with an odd number of islands
// the last one is entered at c + 2. Over the channels every member enters and leaves its island
// once, so the islands' NICs carry one channel each.
void ring_order(const std::vector<std::vector<int>>& islands, std::size_t c,
                std::vector<int>& order) {
  const std::size_t k = islands.size();
  order.clear();
  if (k == 1) {
    order = islands.front();
    return;
  }
  std::vector<std::size_t> entry(k);
  for (std::size_t j = 0; j < k; ++j)
    entry[j] = c + j % 2;
  if (k % 2 == 1) entry[k - 1] = c + 2;
  for (std::size_t j = 0; j < k; ++j) {
    const auto& isl = islands[j];
    const std::size_t g = isl.size();
    const std::size_t a = entry[j] % g;
    std::size_t b = entry[(j + 1) % k] % g;
    if (b == a && g > 1) b = (a + g - 1) % g;  // too few members to align this hop
    order.push_back(isl[a]);
    for (std::size_t x = 1; x < g; ++x) {
      const std::size_t m = (a + x) % g;
      if (m != b) order.push_back(isl[m]);
    }
    if (b != a) order.push_back(isl[b]);
  }
}

// The order collective() tries algorithms in (the first of equal estimates wins).
constexpr Algorithm kSelectionOrder[] = {Algorithm::kRing,         Algorithm::kTree,
                                         Algorithm::kHierarchical, Algorithm::kNvls,
                                         Algorithm::kDirect,       Algorithm::kChain};

int ceil_log2(std::size_t n) {
  int d = 0;
  while ((std::size_t{1} << d) < n)
    ++d;
  return d;
}

}  // namespace

std::optional<TokenRouting> token_routing(const OpDesc& d) {
  if (d.kind != OpKind::kAllToAll || (d.flags & kTokenRouted) == 0) return std::nullopt;
  TokenRouting r;
  r.experts = static_cast<int>(d.m);
  r.top_k = static_cast<int>(d.k);
  r.groups = static_cast<int>(d.batch);
  r.group_top_k = static_cast<int>(d.aux);
  return r;
}

TokenRouting token_routing(const MoeSpec& moe) {
  return TokenRouting{moe.num_experts, moe.top_k, moe.expert_groups, moe.group_top_k};
}

namespace {

// C(m − x, t) / C(m, t): the chance that t draws without replacement from m items miss x of them.
double miss_all(std::int64_t m, std::int64_t x, std::int64_t t) {
  if (x <= 0) return 1.0;
  if (m - x < t) return 0.0;
  double p = 1.0;
  for (std::int64_t i = 0; i < t; ++i)
    p *= static_cast<double>(m - x - i) / static_cast<double>(m - i);
  return p;
}

}  // namespace

double expected_islands(const TokenRouting& r, int islands) {
  const std::int64_t e = r.experts;
  const std::int64_t k = islands;
  if (k <= 1 || e <= 0) return k >= 1 ? 1.0 : 0.0;
  const std::int64_t t = std::clamp<std::int64_t>(r.top_k, 1, e);
  const std::int64_t groups = r.groups;
  const std::int64_t picked = r.group_top_k;
  const bool limited = groups > 1 && picked >= 1 && picked < groups && e % groups == 0;
  const std::int64_t per_group = limited ? e / groups : e;
  double reached = 0;
  for (std::int64_t island = 0; island < k; ++island) {
    const std::int64_t lo = island * e / k;
    const std::int64_t hi = (island + 1) * e / k;
    if (!limited) {
      reached += 1.0 - miss_all(e, hi - lo, t);
      continue;
    }
    // ways[c][x]: subsets of c of the groups seen so far holding x of the island's experts.
    const std::int64_t held = hi - lo;
    std::vector<std::vector<double>> ways(
        static_cast<std::size_t>(picked + 1),
        std::vector<double>(static_cast<std::size_t>(held + 1), 0.0));
    ways[0][0] = 1.0;
    for (std::int64_t grp = 0; grp < groups; ++grp) {
      const std::int64_t a = std::max<std::int64_t>(
          0, std::min(hi, (grp + 1) * per_group) - std::max(lo, grp * per_group));
      for (std::int64_t c = std::min(grp + 1, picked); c >= 1; --c) {
        for (std::int64_t x = held; x >= a; --x)
          ways[static_cast<std::size_t>(c)][static_cast<std::size_t>(x)] +=
              ways[static_cast<std::size_t>(c - 1)][static_cast<std::size_t>(x - a)];
      }
    }
    const std::int64_t pool = picked * per_group;
    double total = 0, miss = 0;
    for (std::int64_t x = 0; x <= held; ++x) {
      const double w = ways[static_cast<std::size_t>(picked)][static_cast<std::size_t>(x)];
      total += w;
      miss += w * miss_all(pool, x, std::min(t, pool));
    }
    reached += total > 0 ? 1.0 - miss / total : 0.0;
  }
  return reached;
}

CollectivePlanner::CollectivePlanner(const topo::Cluster& cluster, const HardwareProfile& profile,
                                     const Fabric& fabric, std::optional<Algorithm> forced)
    : cluster_(&cluster), profile_(&profile), fabric_(&fabric), forced_(forced) {
  // Per link kind (a cluster of 131,072 GPUs has millions of links and a handful of kinds).
  for (const auto& [kind, name] : EnumTraits<topo::LinkKind>::kNames) {
    const auto k = static_cast<std::size_t>(kind);
    kind_latency_[k] = profile.link(name).latency;
    LinkClassLatency c = LinkClassLatency::kPcie;
    switch (topo::link_class(kind)) {
      case topo::LinkClass::kNvlink:
        c = LinkClassLatency::kNvlink;
        break;
      case topo::LinkClass::kNetwork:
        c = LinkClassLatency::kNetwork;
        break;
      default:
        break;
    }
    kind_class_[k] = static_cast<std::uint8_t>(c);
  }
  double best = -1;
  const auto& protocols = profile.network.protocols;
  for (std::size_t i = 0; i < protocols.size(); ++i) {
    if (protocols[i].name == "simple") {
      simple_protocol_ = static_cast<int>(i);
      break;
    }
    if (protocols[i].bandwidth_factor > best) {
      best = protocols[i].bandwidth_factor;
      simple_protocol_ = static_cast<int>(i);
    }
  }
}

void CollectivePlanner::add_path(int src, int dst, std::uint64_t channel, int count, Shape& shape) {
  if (src == dst) return;
  path_.clear();
  cluster_->append_path(src, dst, flow_hash(src, dst, channel), path_);
  if (!timed_) {
    // Background copies and images: only their link uses count (their latency is not asked).
    for (topo::LinkId l : path_)
      shape.uses.push_back({fabric_->resource_of_link[static_cast<std::size_t>(l)], count});
    return;
  }
  Time latency{0};
  std::uint8_t cls = static_cast<std::uint8_t>(LinkClassLatency::kNvlink);
  for (topo::LinkId l : path_) {
    shape.uses.push_back({fabric_->resource_of_link[static_cast<std::size_t>(l)], count});
    const topo::Link& link = cluster_->link(l);
    const auto kind = static_cast<std::size_t>(link.kind);
    latency += link.latency + kind_latency_[kind];
    cls = std::max(cls, kind_class_[kind]);
  }
  Time& slot = shape.steps[static_cast<std::size_t>(shape.group)].max_latency[cls];
  slot = std::max(slot, latency);
}

double CollectivePlanner::efficiency(Algorithm a) const {
  const AlgorithmEfficiency& e = profile_->network.algorithm_efficiency;
  switch (a) {
    case Algorithm::kRing:
    case Algorithm::kChain:
      return e.ring;
    case Algorithm::kTree:
      return e.tree;
    case Algorithm::kHierarchical:
      return e.hierarchical;
    case Algorithm::kNvls:
      return e.nvls;
    case Algorithm::kDirect:
      return e.all_to_all;
    case Algorithm::kP2p:
      return e.p2p;
    case Algorithm::kHierarchicalA2a:
      return e.all_to_all;
  }
  return 1.0;
}

bool CollectivePlanner::applicable(Algorithm a, OpKind kind, std::span<const int> gpus) const {
  const bool all_reduce = kind == OpKind::kAllReduce;
  switch (a) {
    case Algorithm::kRing:
      return all_reduce || kind == OpKind::kAllGather || kind == OpKind::kReduceScatter;
    case Algorithm::kChain:
      return kind == OpKind::kBroadcast;
    case Algorithm::kDirect:
      return kind == OpKind::kAllToAll;
    case Algorithm::kTree:
      return all_reduce && by_island(*cluster_, gpus).size() > 1;
    case Algorithm::kHierarchical: {
      if (!all_reduce) return false;
      const auto islands = by_island(*cluster_, gpus);
      if (islands.size() < 2 || islands.front().size() < 2) return false;
      return std::all_of(islands.begin(), islands.end(),
                         [&](const auto& i) { return i.size() == islands.front().size(); });
    }
    case Algorithm::kNvls:
      if (!all_reduce || efficiency(a) <= 0) return false;
      return std::all_of(gpus.begin(), gpus.end(), [&](int g) {
        return g == gpus.front() || cluster_->shares(gpus.front(), g, topo::Scope::kNvSwitch);
      });
    case Algorithm::kP2p:
      return false;
    case Algorithm::kHierarchicalA2a: {
      if (kind != OpKind::kAllToAll || !routing_) return false;
      const auto islands = by_island(*cluster_, gpus);
      return std::all_of(islands.begin(), islands.end(),
                         [&](const auto& i) { return i.size() == islands.front().size(); });
    }
  }
  return false;
}

std::vector<Algorithm> CollectivePlanner::candidates(OpKind kind, std::span<const int> gpus) const {
  if (routing_ && applicable(Algorithm::kHierarchicalA2a, kind, gpus)) {
    return {Algorithm::kHierarchicalA2a};
  }
  const bool forced = forced_ && applicable(*forced_, kind, gpus);
  std::vector<Algorithm> out;
  for (Algorithm a : kSelectionOrder) {
    if (forced ? a == *forced_ : applicable(a, kind, gpus)) out.push_back(a);
  }
  return out;
}

void CollectivePlanner::use_routing(const TokenRouting* routing) {
  if (routing == nullptr) {
    routing_.reset();
    return;
  }
  if (memo_routing_ && *memo_routing_ != *routing) {
    // The memoised hierarchical all-to-all shapes were built for another routing.
    shapes_memo_gpus_.clear();
    shapes_memo_.clear();
    memo_images_.clear();
    memo_shapes_.clear();
  }
  routing_ = *routing;
  memo_routing_ = *routing;
}

void CollectivePlanner::ring_counts(OpKind kind, int n, std::size_t channels, Shape& s) {
  const double dn = n;
  const bool ar = kind == OpKind::kAllReduce;
  s.fraction = (ar ? 2.0 * (dn - 1) / dn : (dn - 1) / dn) / static_cast<double>(channels);
  s.steps[0].count = ar ? 2 * (n - 1) : n - 1;
}

std::vector<CollectivePlanner::Shape> CollectivePlanner::shapes(Algorithm a, OpKind kind,
                                                                std::span<const int> gpus,
                                                                bool aggregated) {
  const int n = static_cast<int>(gpus.size());
  const double dn = n;
  const bool memo = aggregated && timed_;
  if (memo) {
    if (!std::ranges::equal(gpus, shapes_memo_gpus_)) {
      shapes_memo_gpus_.assign(gpus.begin(), gpus.end());
      shapes_memo_.clear();
    }
    for (const ShapesMemo& m : shapes_memo_) {
      if (m.algorithm != a) continue;
      if (m.kind == kind) return m.parts;
      if (a == Algorithm::kRing) {
        std::vector<Shape> out = m.parts;
        ring_counts(kind, n, m.channels, out[0]);
        return out;
      }
    }
  }
  std::size_t ring_channels = 0;
  std::vector<Shape> out;
  switch (a) {
    case Algorithm::kRing: {
      implements(SimModel::kRing);
      const auto islands = by_island(*cluster_, gpus);
      const std::size_t channels = islands.size() > 1 ? largest(islands) : 1;
      ring_channels = channels;
      Shape s;
      ring_counts(kind, n, channels, s);
      std::vector<int> order;
      for (std::size_t c = 0; c < channels; ++c) {
        ring_order(islands, c, order);
        for (std::size_t x = 0; x < order.size(); ++x)
          add_path(order[x], order[(x + 1) % order.size()], c, 1, s);
      }
      out.push_back(std::move(s));
      break;
    }
    case Algorithm::kChain: {
      implements(SimModel::kChainBroadcast);
      Shape s;
      s.fraction = 1.0;
      s.steps[0].count = n - 1;
      for (int x = 0; x + 1 < n; ++x)
        add_path(gpus[static_cast<std::size_t>(x)], gpus[static_cast<std::size_t>(x + 1)], 0, 1, s);
      out.push_back(std::move(s));
      break;
    }
    case Algorithm::kDirect: {
      implements(SimModel::kDirect);
      Shape s;
      s.fraction = 1.0 / dn;
      s.steps[0].count = 1;
      for (int src : gpus) {
        for (int dst : gpus)
          add_path(src, dst, 0, 1, s);
      }
      out.push_back(std::move(s));
      break;
    }
    case Algorithm::kNvls: {
      implements(SimModel::kNvls);
      Shape s;
      s.fraction = 1.0;
      s.steps[0].count = 2;
      for (int x = 0; x < n; ++x)
        add_path(gpus[static_cast<std::size_t>(x)], gpus[static_cast<std::size_t>((x + 1) % n)], 0,
                 1, s);
      out.push_back(std::move(s));
      break;
    }
    case Algorithm::kTree: {
      implements(SimModel::kTree);
      const auto islands = by_island(*cluster_, gpus);
      const std::size_t k = islands.size();
      const std::size_t channels = largest(islands);
      Shape s;
      s.fraction = 1.0 / (2.0 * static_cast<double>(channels));
      s.steps.resize(2);
      s.steps[0].count = 2 * (static_cast<int>(channels) - 1);
      s.steps[1].count = 2 * ceil_log2(k);
      for (std::size_t c = 0; c < channels; ++c) {
        std::vector<int> heads(k);
        s.group = 0;
        for (std::size_t i = 0; i < k; ++i) {
          const auto& isl = islands[i];
          heads[i] = isl[c % isl.size()];
          for (std::size_t j = 0; j + 1 < isl.size(); ++j) {
            const int a1 = isl[(c + j) % isl.size()];
            const int b1 = isl[(c + j + 1) % isl.size()];
            add_path(a1, b1, c, 2, s);
            add_path(b1, a1, c, 2, s);
          }
        }
        s.group = 1;
        for (std::size_t i = 1; i < k; ++i) {
          // Tree A: heap order over island indices; tree B: the same over the mirrored indices,
          // so the inner nodes of one tree are leaves of the other (double binary tree).
          const std::size_t pa = (i - 1) / 2;
          add_path(heads[i], heads[pa], c, 1, s);
          add_path(heads[pa], heads[i], c, 1, s);
          const std::size_t bi = k - 1 - i;
          const std::size_t bp = k - 1 - pa;
          add_path(heads[bi], heads[bp], c, 1, s);
          add_path(heads[bp], heads[bi], c, 1, s);
        }
      }
      out.push_back(std::move(s));
      break;
    }
    case Algorithm::kHierarchical: {
      implements(SimModel::kHierarchical);
      const auto islands = by_island(*cluster_, gpus);
      const std::size_t g = islands.front().size();
      const double dk = static_cast<double>(islands.size());
      const double dg = static_cast<double>(g);
      Shape intra;
      intra.fraction = (dg - 1) / dg;
      intra.steps[0].count = static_cast<int>(g) - 1;
      for (const auto& isl : islands) {
        for (std::size_t j = 0; j < g; ++j)
          add_path(isl[j], isl[(j + 1) % g], 0, 1, intra);
      }
      Shape inter;
      inter.fraction = 2.0 * (dk - 1) / dk / dg;
      inter.steps[0].count = 2 * (static_cast<int>(islands.size()) - 1);
      for (std::size_t l = 0; l < g; ++l) {
        for (std::size_t i = 0; i < islands.size(); ++i)
          add_path(islands[i][l], islands[(i + 1) % islands.size()][l], l, 1, inter);
      }
      out.push_back(intra);
      out.push_back(std::move(inter));
      out.push_back(std::move(intra));
      break;
    }
    case Algorithm::kHierarchicalA2a:
      out.push_back(hierarchical_a2a_shape(gpus));
      break;
    case Algorithm::kP2p:
      break;
  }
  if (aggregated) {
    for (Shape& s : out)
      aggregate(s.uses);
  }
  if (memo) shapes_memo_.push_back({a, kind, ring_channels, out});
  return out;
}

CollectivePlanner::Shape CollectivePlanner::hierarchical_a2a_shape(std::span<const int> gpus) {
  implements(SimModel::kHierarchicalA2a);
  const auto islands = by_island(*cluster_, gpus);
  const std::size_t k = islands.size();
  const std::size_t g = islands.front().size();
  const double top_k = static_cast<double>(std::max(1, routing_->top_k));
  // Per member pair inside an island: the tokens of the k members on the sender's rail that need
  // the receiver, once each.
  const double forward =
      expected_islands(*routing_, static_cast<int>(gpus.size())) / (static_cast<double>(g) * top_k);
  Shape s;
  s.steps[0].count = 1;
  if (k == 1) {
    s.fraction = forward;
    for (int src : gpus) {
      for (int dst : gpus)
        add_path(src, dst, 0, 1, s);
    }
    return s;
  }
  s.fraction = expected_islands(*routing_, static_cast<int>(k)) / (top_k * static_cast<double>(k));
  for (std::size_t i = 0; i < k; ++i) {
    for (std::size_t j = 0; j < k; ++j) {
      if (j == i) continue;
      for (std::size_t l = 0; l < g; ++l)
        add_path(islands[i][l], islands[j][l], 0, 1, s);
    }
  }
  // The forwarding as flows of the network flows' size.
  const int flows = std::max(1, static_cast<int>(std::lround(forward / s.fraction)));
  for (const auto& isl : islands) {
    for (int src : isl) {
      for (int dst : isl)
        add_path(src, dst, 0, flows, s);
    }
  }
  return s;
}

void CollectivePlanner::aggregate(std::vector<LinkUse>& uses) {
  if (count_.size() != fabric_->capacity.size()) count_.assign(fabric_->capacity.size(), 0);
  touched_.clear();
  for (const LinkUse& u : uses) {
    auto& c = count_[static_cast<std::size_t>(u.resource)];
    if (c == 0) touched_.push_back(u.resource);
    c += u.count;
  }
  std::sort(touched_.begin(), touched_.end());
  uses.clear();
  for (std::int32_t r : touched_) {
    auto& c = count_[static_cast<std::size_t>(r)];
    uses.push_back({r, c});
    c = 0;
  }
}

Time CollectivePlanner::phase_latency(const Shape& s, const ProtocolProfile& proto, bool first) {
  Time latency = first ? proto.base_latency : Time(0);
  for (const StepGroup& g : s.steps) {
    Time step{0};
    for (int c = 0; c < kClasses; ++c) {
      if (g.max_latency[static_cast<std::size_t>(c)] < Time(0)) continue;
      step = std::max(step, proto.step(static_cast<LinkClassLatency>(c)) +
                                g.max_latency[static_cast<std::size_t>(c)]);
    }
    latency += step * g.count;
  }
  return latency;
}

double CollectivePlanner::bottleneck_share(std::span<const LinkUse> uses) const {
  double share = std::numeric_limits<double>::infinity();
  for (const LinkUse& u : uses)
    share = std::min(share, fabric_->capacity[static_cast<std::size_t>(u.resource)] / u.count);
  return share;
}

std::vector<CollectivePlanner::Shape> CollectivePlanner::p2p_shapes(int src, int dst) {
  implements(SimModel::kP2p);
  Shape s;
  s.fraction = 1.0;
  s.steps[0].count = 1;
  add_path(src, dst, 0, 1, s);
  std::vector<Shape> out;
  out.push_back(std::move(s));
  return out;
}

CommPlan CollectivePlanner::build(Algorithm a, int protocol, OpKind kind, Bytes bytes,
                                  std::span<const int> gpus) {
  const ProtocolProfile& proto = profile_->network.protocols[static_cast<std::size_t>(protocol)];
  const double wire = static_cast<double>(bytes.raw()) / (efficiency(a) * proto.bandwidth_factor);
  CommPlan plan;
  plan.algorithm = a;
  plan.protocol = protocol;
  std::vector<Shape> parts =
      a == Algorithm::kP2p ? p2p_shapes(gpus[0], gpus[1]) : shapes(a, kind, gpus);
  double estimate = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    Shape& s = parts[i];
    CommPhase phase;
    phase.bytes = s.fraction * wire;
    phase.latency = phase_latency(s, proto, i == 0);
    estimate +=
        to_seconds(phase.latency) + (s.uses.empty() ? 0.0 : phase.bytes / bottleneck_share(s.uses));
    phase.uses = std::move(s.uses);
    plan.phases.push_back(std::move(phase));
  }
  plan.estimate = Time(std::llround(estimate * 1e12));
  return plan;
}

void CollectivePlanner::add_lines(Algorithm a, const std::vector<Shape>& parts,
                                  std::vector<CostLine>& out) const {
  const int protocols = static_cast<int>(profile_->network.protocols.size());
  for (int p = 0; p < protocols; ++p) {
    if (a == Algorithm::kNvls && p != simple_protocol_) continue;
    const ProtocolProfile& proto = profile_->network.protocols[static_cast<std::size_t>(p)];
    const double per_byte = 1.0 / (efficiency(a) * proto.bandwidth_factor);
    CostLine line;
    line.algorithm = a;
    line.protocol = p;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const Shape& s = parts[i];
      line.latency += phase_latency(s, proto, i == 0);
      if (!s.uses.empty())
        line.alone_s_per_byte += s.fraction * per_byte / bottleneck_share(s.uses);
    }
    line.loaded_s_per_byte = line.alone_s_per_byte;
    out.push_back(line);
  }
}

namespace {

// The algorithms whose lines are the smallest for some size S >= 0 (the lower envelope of the
// lines, ties to the earlier line, as collective() selects).
std::vector<Algorithm> envelope_algorithms(const std::vector<CostLine>& lines) {
  std::vector<double> probes{0.0};
  for (std::size_t i = 0; i < lines.size(); ++i) {
    for (std::size_t j = i + 1; j < lines.size(); ++j) {
      const double ds = lines[i].alone_s_per_byte - lines[j].alone_s_per_byte;
      if (ds == 0) continue;
      const double x = (to_seconds(lines[j].latency) - to_seconds(lines[i].latency)) / ds;
      if (x > 0) probes.push_back(x);
    }
  }
  std::sort(probes.begin(), probes.end());
  std::vector<double> at;
  for (std::size_t k = 0; k < probes.size(); ++k) {
    at.push_back(probes[k]);
    at.push_back(k + 1 < probes.size() ? 0.5 * (probes[k] + probes[k + 1])
                                       : 2.0 * probes[k] + 1e12);
  }
  std::vector<Algorithm> out;
  for (double x : at) {
    const CostLine* best = nullptr;
    double best_t = 0;
    for (const CostLine& l : lines) {
      const double t = to_seconds(l.latency) + x * l.alone_s_per_byte;
      if (best == nullptr || t < best_t) {
        best = &l;
        best_t = t;
      }
    }
    if (best && std::find(out.begin(), out.end(), best->algorithm) == out.end()) {
      out.push_back(best->algorithm);
    }
  }
  return out;
}

}  // namespace

double CollectivePlanner::loaded_share(const std::vector<const std::vector<LinkUse>*>& uses) {
  if (count_.size() != fabric_->capacity.size()) count_.assign(fabric_->capacity.size(), 0);
  touched_.clear();
  for (const std::vector<LinkUse>* list : uses) {
    for (const LinkUse& u : *list) {
      auto& c = count_[static_cast<std::size_t>(u.resource)];
      if (c == 0) touched_.push_back(u.resource);
      c += u.count;
    }
  }
  double share = std::numeric_limits<double>::infinity();
  for (std::int32_t r : touched_) {
    auto& c = count_[static_cast<std::size_t>(r)];
    share = std::min(share, fabric_->capacity[static_cast<std::size_t>(r)] / c);
    c = 0;
  }
  return share;
}

const std::vector<CollectivePlanner::ImageUses>& CollectivePlanner::image_uses(
    Algorithm a, OpKind kind, std::size_t size, std::span<const std::vector<int>> images) {
  const bool same_images =
      std::equal(images.begin(), images.end(), memo_images_.begin(), memo_images_.end(),
                 [](const std::vector<int>& x, const std::vector<int>& y) { return x == y; });
  if (!same_images) {
    memo_images_.assign(images.begin(), images.end());
    memo_shapes_.clear();
  }
  for (const auto& [algorithm, shaped] : memo_shapes_) {
    if (algorithm == a) return shaped;
  }
  std::vector<ImageUses> out;
  for (const std::vector<int>& image : images) {
    if (image.size() != size || !applicable(a, kind, image)) continue;
    ImageUses phases;
    timed_ = false;
    std::vector<Shape> parts = shapes(a, kind, image, /*aggregated=*/false);
    timed_ = true;
    for (Shape& part : parts)
      phases.push_back(std::move(part.uses));
    out.push_back(std::move(phases));
  }
  memo_shapes_.emplace_back(a, std::move(out));
  return memo_shapes_.back().second;
}

std::vector<CostLine> CollectivePlanner::cost_lines(OpKind kind, std::span<const int> gpus,
                                                    std::span<const std::vector<int>> images,
                                                    const TokenRouting* routing) {
  std::vector<CostLine> out;
  if (gpus.size() < 2) return out;
  use_routing(routing);
  std::vector<std::pair<Algorithm, std::vector<Shape>>> shaped;
  for (Algorithm a : candidates(kind, gpus)) {
    shaped.emplace_back(a, shapes(a, kind, gpus));
    add_lines(a, shaped.back().second, out);
  }
  if (images.empty()) return out;
  // Loaded rates only for the algorithms the selection can pick.
  for (Algorithm a : envelope_algorithms(out)) {
    const auto it =
        std::find_if(shaped.begin(), shaped.end(), [&](const auto& x) { return x.first == a; });
    const std::vector<Shape>& parts = it->second;
    const std::vector<ImageUses>& more = image_uses(a, kind, gpus.size(), images);
    std::vector<double> share(parts.size());
    for (std::size_t i = 0; i < parts.size(); ++i) {
      std::vector<const std::vector<LinkUse>*> uses{&parts[i].uses};
      for (const auto& m : more) {
        if (m.size() == parts.size()) uses.push_back(&m[i]);
      }
      share[i] = loaded_share(uses);
    }
    for (CostLine& line : out) {
      if (line.algorithm != a) continue;
      const ProtocolProfile& proto =
          profile_->network.protocols[static_cast<std::size_t>(line.protocol)];
      const double per_byte = 1.0 / (efficiency(a) * proto.bandwidth_factor);
      line.loaded_s_per_byte = 0;
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (!parts[i].uses.empty())
          line.loaded_s_per_byte += parts[i].fraction * per_byte / share[i];
      }
    }
  }
  return out;
}

std::vector<CostLine> CollectivePlanner::p2p_cost_lines(
    int src, int dst, std::span<const std::pair<int, int>> images) {
  std::vector<CostLine> out;
  if (src == dst) return out;
  const std::vector<Shape> parts = p2p_shapes(src, dst);
  add_lines(Algorithm::kP2p, parts, out);
  if (images.empty()) return out;
  Shape extra;
  timed_ = false;
  for (const auto& [a, b] : images)
    add_path(a, b, 0, 1, extra);
  timed_ = true;
  const double share = loaded_share({&parts[0].uses, &extra.uses});
  for (CostLine& line : out) {
    const ProtocolProfile& proto =
        profile_->network.protocols[static_cast<std::size_t>(line.protocol)];
    line.loaded_s_per_byte =
        parts[0].fraction / (efficiency(Algorithm::kP2p) * proto.bandwidth_factor * share);
  }
  return out;
}

Time CostLine::time(std::span<const CostLine> lines, Bytes bytes) {
  const CostLine* best = nullptr;
  double best_alone = 0;
  const double b = static_cast<double>(bytes.raw());
  for (const CostLine& l : lines) {
    const double alone = to_seconds(l.latency) + b * l.alone_s_per_byte;
    if (best == nullptr || alone < best_alone) {
      best = &l;
      best_alone = alone;
    }
  }
  if (best == nullptr) return Time(0);
  return best->latency + Time(std::llround(b * best->loaded_s_per_byte * 1e12));
}

CommPlan CollectivePlanner::collective(OpKind kind, Bytes bytes, std::span<const int> gpus,
                                       std::span<const std::vector<int>> copies,
                                       const TokenRouting* routing) {
  implements(SimModel::kNcclSelection);
  if (gpus.size() < 2) return CommPlan{};
  use_routing(routing);
  std::optional<CommPlan> best;
  for (Algorithm a : candidates(kind, gpus)) {
    const int protocols = static_cast<int>(profile_->network.protocols.size());
    for (int p = 0; p < protocols; ++p) {
      if (a == Algorithm::kNvls && p != simple_protocol_) continue;
      CommPlan plan = build(a, p, kind, bytes, gpus);
      if (!best || plan.estimate < best->estimate) best = std::move(plan);
    }
  }
  if (!best) return CommPlan{};
  for (const std::vector<int>& copy : copies) {
    if (copy.size() != gpus.size() || !applicable(best->algorithm, kind, copy)) continue;
    timed_ = false;
    std::vector<Shape> parts = shapes(best->algorithm, kind, copy, /*aggregated=*/false);
    timed_ = true;
    if (parts.size() != best->phases.size()) continue;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      auto& uses = best->phases[i].uses;
      uses.insert(uses.end(), parts[i].uses.begin(), parts[i].uses.end());
    }
    ++best->copies;
  }
  if (best->copies > 0) {
    for (CommPhase& phase : best->phases)
      aggregate(phase.uses);
  }
  return std::move(*best);
}

CommPlan CollectivePlanner::p2p(int src, int dst, Bytes bytes,
                                std::span<const std::pair<int, int>> copies) {
  const int pair[] = {src, dst};
  std::optional<CommPlan> best;
  const int protocols = static_cast<int>(profile_->network.protocols.size());
  for (int p = 0; p < protocols; ++p) {
    CommPlan plan = build(Algorithm::kP2p, p, OpKind::kSend, bytes, pair);
    if (!best || plan.estimate < best->estimate) best = std::move(plan);
  }
  if (copies.empty()) return std::move(*best);
  Shape extra;
  timed_ = false;
  for (const auto& [a, b] : copies)
    add_path(a, b, 0, 1, extra);
  timed_ = true;
  auto& uses = best->phases.front().uses;
  uses.insert(uses.end(), extra.uses.begin(), extra.uses.end());
  aggregate(uses);
  best->copies = static_cast<int>(copies.size());
  return std::move(*best);
}

std::shared_ptr<const CommPlan> PlanMemo::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = plans_.find(key);
  return it == plans_.end() ? nullptr : it->second;
}

std::shared_ptr<const CommPlan> PlanMemo::insert(std::string key, CommPlan plan) {
  auto stored = std::make_shared<const CommPlan>(std::move(plan));
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.emplace(std::move(key), std::move(stored)).first->second;
}

}  // namespace planner::sim
