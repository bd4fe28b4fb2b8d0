// Cluster::path(): node-local routes from the node template, NVLink-domain hops, and fabric routes
// walked down per-destination-leaf distance tables with an ECMP choice at every hop.
#include <boost/graph/dijkstra_shortest_paths.hpp>

#include "cluster_impl.hpp"

namespace planner::topo {
namespace {

// Salts for the independent ECMP choices along one route.
enum class Stage : std::uint64_t {
  kIntraNode = 1,
  kSrcNic = 2,
  kSrcNicRoute = 3,
  kDstNic = 4,
  kDstNicRoute = 5,
  kFabricHop = 16,  // + hop index
};

std::uint64_t salt(Stage s, std::uint64_t offset = 0) {
  return static_cast<std::uint64_t>(s) + offset;
}

template <class T>
const T& pick(const std::vector<T>& options, std::uint64_t hash, Stage stage) {
  if (options.size() == 1) return options.front();
  return options[mix_hash(hash, salt(stage)) % options.size()];
}

}  // namespace

const Cluster::Impl::RouteTable& Cluster::Impl::table_to(int leaf) const {
  std::atomic<const RouteTable*>& published = table_of[static_cast<std::size_t>(leaf)];
  if (const RouteTable* table = published.load(std::memory_order_acquire)) return *table;
  std::lock_guard<std::mutex> lock(tables_mutex);
  auto it = tables.find(leaf);
  if (it != tables.end()) return *it->second;

  auto table = std::make_unique<RouteTable>();
  std::vector<std::int64_t>& dist = table->dist;
  dist.assign(static_cast<std::size_t>(num_switches), kUnreachable);
  boost::dijkstra_shortest_paths(
      switch_graph, static_cast<std::size_t>(leaf),
      boost::weight_map(boost::get(&SwitchEdge::cost, switch_graph))
          .distance_map(boost::make_iterator_property_map(
              dist.begin(), boost::get(boost::vertex_index, switch_graph)))
          .distance_inf(kUnreachable));
  table->offsets.assign(static_cast<std::size_t>(num_switches) + 1, 0);
  for (int at = 0; at < num_switches; ++at) {
    const auto begin = static_cast<std::size_t>(sw_offsets[static_cast<std::size_t>(at)]);
    const auto end = static_cast<std::size_t>(sw_offsets[static_cast<std::size_t>(at) + 1]);
    const std::int64_t here = dist[static_cast<std::size_t>(at)];
    for (std::size_t i = begin; i < end && at != leaf; ++i) {
      const auto& [id, to] = sw_adj[i];
      const std::int64_t there = dist[static_cast<std::size_t>(to)];
      if (there != kUnreachable && there + link_cost[static_cast<std::size_t>(id)] == here) {
        table->next.push_back(static_cast<std::int32_t>(i));
      }
    }
    table->offsets[static_cast<std::size_t>(at) + 1] =
        static_cast<std::int32_t>(table->next.size());
  }
  const RouteTable& out = *table;
  tables.emplace(leaf, std::move(table));
  published.store(&out, std::memory_order_release);
  return out;
}

void Cluster::Impl::fabric_route(int from_leaf, int to_leaf, std::uint64_t hash,
                                 std::vector<LinkId>& out) const {
  if (regular) {
    regular_route(from_leaf, to_leaf, hash, out);
  } else {
    table_route(from_leaf, to_leaf, hash, out);
  }
}

void Cluster::Impl::regular_route(int from_leaf, int to_leaf, std::uint64_t hash,
                                  std::vector<LinkId>& out) const {
  if (from_leaf == to_leaf) return;
  const auto u = static_cast<std::uint64_t>(uplinks);
  const int j = static_cast<int>(mix_hash(hash, salt(Stage::kFabricHop, 0)) % u);
  out.push_back(leaf_spine_base + 2 * (from_leaf * uplinks + j));
  const int pod_a = from_leaf / leaves_per_pod;
  const int pod_b = to_leaf / leaves_per_pod;
  if (pod_a != pod_b) {
    const int k = static_cast<int>(mix_hash(hash, salt(Stage::kFabricHop, 1)) %
                                   static_cast<std::uint64_t>(core_uplinks));
    out.push_back(spine_core_base + 2 * ((pod_a * uplinks + j) * core_uplinks + k));
    out.push_back(spine_core_base + 2 * ((pod_b * uplinks + j) * core_uplinks + k) + 1);
  }
  out.push_back(leaf_spine_base + 2 * (to_leaf * uplinks + j) + 1);
}

void Cluster::Impl::table_route(int from_leaf, int to_leaf, std::uint64_t hash,
                                std::vector<LinkId>& out) const {
  if (from_leaf == to_leaf) return;
  const RouteTable& table = table_to(to_leaf);
  int at = from_leaf;
  for (std::uint64_t hop = 0; at != to_leaf; ++hop) {
    const auto begin = static_cast<std::size_t>(table.offsets[static_cast<std::size_t>(at)]);
    const auto candidates =
        static_cast<std::uint64_t>(table.offsets[static_cast<std::size_t>(at) + 1]) - begin;
    if (candidates == 0) return;  // unreachable: build() rules this out
    const std::uint64_t choice = mix_hash(hash, salt(Stage::kFabricHop, hop)) % candidates;
    const auto& [id, to] = sw_adj[static_cast<std::size_t>(table.next[begin + choice])];
    out.push_back(id);
    at = to;
  }
}

std::vector<LinkId> Cluster::path(int src_gpu, int dst_gpu, std::uint64_t flow_hash) const {
  std::vector<LinkId> out;
  append_path(src_gpu, dst_gpu, flow_hash, out);
  return out;
}

void Cluster::append_path(int src, int dst, std::uint64_t hash, std::vector<LinkId>& out) const {
  if (src == dst) return;
  const Impl& m = *impl_;
  const NodeTemplate& t = m.node;
  const int gpn = m.gpus_per_node;
  const int na = src / gpn;
  const int nb = dst / gpn;
  const int la = src % gpn;
  const int lb = dst % gpn;
  const LinkId base_a = na * 2 * t.num_cables;
  const LinkId base_b = nb * 2 * t.num_cables;

  enum class Via { kNone, kNode, kDomain } via = Via::kNone;
  std::int64_t best = kUnreachable;
  const LocalRoutes* local = nullptr;
  if (na == nb) {
    local = &t.gpu_to_gpu[la * gpn + lb];
    if (local->cost != kUnreachable) {
      best = local->cost;
      via = Via::kNode;
    }
  }
  if (m.domain_nodes > 0 && na / m.domain_nodes == nb / m.domain_nodes &&
      2 * m.domain_cost < best) {
    via = Via::kDomain;
  }
  if (via == Via::kNode) {
    for (int id : pick(local->alternatives, hash, Stage::kIntraNode))
      out.push_back(base_a + id);
    return;
  }
  if (via == Via::kDomain) {
    out.push_back(m.domain_link_base + 2 * src);
    out.push_back(m.domain_link_base + 2 * dst + 1);
    return;
  }
  if (m.leaf_of_nic.empty()) return;  // no fabric: build() rules this out

  const int npn = m.nics_per_node;
  const int ra = pick(t.nics_of_gpu[la], hash, Stage::kSrcNic);
  const int rb = pick(t.nics_of_gpu[lb], hash, Stage::kDstNic);
  for (int id : pick(t.gpu_to_nic[la * npn + ra].alternatives, hash, Stage::kSrcNicRoute)) {
    out.push_back(base_a + id);
  }
  const int qa = na * npn + ra;
  const int qb = nb * npn + rb;
  out.push_back(m.host_link_base + 2 * qa);
  m.fabric_route(m.leaf_of_nic[qa], m.leaf_of_nic[qb], hash, out);
  out.push_back(m.host_link_base + 2 * qb + 1);
  const std::vector<int>& back =
      pick(t.gpu_to_nic[lb * npn + rb].alternatives, hash, Stage::kDstNicRoute);
  for (auto it = back.rbegin(); it != back.rend(); ++it)
    out.push_back(base_b + (*it ^ 1));
}

}  // namespace planner::topo
