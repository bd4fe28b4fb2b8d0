#include "planner/topo/cluster.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>

#include "planner/core/limits.hpp"

#include "cluster_impl.hpp"
#include "fabric_layout.hpp"

namespace planner::topo {
namespace {

// Equal-cost routes kept per pair inside a node; more add nothing to spreading.
constexpr std::size_t kMaxAlternatives = 16;

bool forwards(DeviceKind kind) {
  return kind != DeviceKind::kGpu && kind != DeviceKind::kNic;
}

std::string str(long long v) {
  return std::to_string(v);
}

class UnionFind {
 public:
  explicit UnionFind(int n) : parent_(static_cast<std::size_t>(n)) {
    std::iota(parent_.begin(), parent_.end(), 0);
  }
  int find(int x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[static_cast<std::size_t>(x)]];
      x = parent_[x];
    }
    return x;
  }
  void join(int a, int b) { parent_[find(a)] = find(b); }

 private:
  std::vector<int> parent_;
};

// Shortest routes inside one node, where only switches and CPUs forward traffic.
class NodeRouter {
 public:
  struct Edge {
    std::int64_t cost;
    int id;
  };
  using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, Edge>;

  NodeRouter(const NodeSpec& spec, const NodeTemplate& t) : spec_(spec), t_(t) {
    in_.resize(static_cast<std::size_t>(t.num_devices));
    std::vector<std::pair<std::size_t, std::size_t>> ends;
    std::vector<Edge> props;
    for (int c = 0; c < t.num_cables; ++c) {
      for (int dir = 0; dir < 2; ++dir) {
        const int id = 2 * c + dir;
        const int a = dir == 0 ? t.cable_a[c] : t.cable_b[c];
        const int b = dir == 0 ? t.cable_b[c] : t.cable_a[c];
        ends.emplace_back(static_cast<std::size_t>(a), static_cast<std::size_t>(b));
        props.push_back({t.cost[id], id});
        in_[b].emplace_back(id, a);
      }
    }
    graph_ = Graph(boost::edges_are_unsorted_multi_pass, ends.begin(), ends.end(), props.begin(),
                   static_cast<std::size_t>(t.num_devices));
  }

  // Distances from `src` to every device.
  std::vector<std::int64_t> distances(int src) const {
    auto transit = [this, src](Graph::edge_descriptor e) {
      const auto u = static_cast<int>(boost::source(e, graph_));
      return u == src || forwards(kind(u));
    };
    boost::filtered_graph<Graph, std::function<bool(Graph::edge_descriptor)>> fg(graph_, transit);
    std::vector<std::int64_t> dist(static_cast<std::size_t>(t_.num_devices), kUnreachable);
    boost::dijkstra_shortest_paths(fg, static_cast<std::size_t>(src),
                                   boost::weight_map(boost::get(&Edge::cost, graph_))
                                       .distance_map(boost::make_iterator_property_map(
                                           dist.begin(), boost::get(boost::vertex_index, fg)))
                                       .distance_inf(kUnreachable));
    return dist;
  }

  // Every cheapest route from `src` to `dst` (up to kMaxAlternatives).
  LocalRoutes routes(int src, int dst, const std::vector<std::int64_t>& dist) const {
    LocalRoutes r;
    if (dist[dst] == kUnreachable) return r;
    r.cost = dist[dst];
    std::vector<int> suffix;
    collect(src, dst, dist, suffix, r.alternatives);
    return r;
  }

 private:
  DeviceKind kind(int device) const { return spec_.devices[device].kind; }

  void collect(int src, int v, const std::vector<std::int64_t>& dist, std::vector<int>& suffix,
               std::vector<std::vector<int>>& out) const {
    if (out.size() >= kMaxAlternatives) return;
    if (v == src) {
      out.emplace_back(suffix.rbegin(), suffix.rend());
      return;
    }
    for (const auto& [id, u] : in_[v]) {
      if (u != src && !forwards(kind(u))) continue;
      const std::int64_t du = dist[u];
      if (du == kUnreachable || du + t_.cost[id] != dist[v]) {
        continue;
      }
      suffix.push_back(id);
      collect(src, u, dist, suffix, out);
      suffix.pop_back();
    }
  }

  const NodeSpec& spec_;
  const NodeTemplate& t_;
  Graph graph_;
  std::vector<std::vector<std::pair<int, int>>> in_;  // per device: (directed link, from device)
};

Result<NodeTemplate> make_template(const TopologySpec& spec, bool with_fabric) {
  const NodeSpec& ns = spec.node;
  NodeTemplate t;
  t.num_devices = static_cast<int>(ns.devices.size());
  t.num_cables = static_cast<int>(ns.links.size());
  for (int i = 0; i < t.num_devices; ++i) {
    const DeviceKind k = ns.devices[i].kind;
    if (k == DeviceKind::kGpu) t.gpu_device.push_back(i);
    if (k == DeviceKind::kNic) t.nic_device.push_back(i);
  }
  const std::unordered_map<std::string_view, int> index = ns.index();
  for (const NodeLink& l : ns.links) {
    t.cable_a.push_back(index.at(l.a));
    t.cable_b.push_back(index.at(l.b));
    const std::int64_t c = route_cost(l.link);
    t.cost.push_back(c);
    t.cost.push_back(c);
  }
  const int gpus = static_cast<int>(t.gpu_device.size());
  const int nics = static_cast<int>(t.nic_device.size());

  // NVLink components among the node's GPUs.
  UnionFind uf(t.num_devices);
  for (int c = 0; c < t.num_cables; ++c) {
    if (link_class(ns.links[c].link.kind) == LinkClass::kNvlink) {
      uf.join(t.cable_a[c], t.cable_b[c]);
    }
  }
  std::vector<int> root_to_component(static_cast<std::size_t>(t.num_devices), -1);
  std::vector<int> component_size;
  for (int g = 0; g < gpus; ++g) {
    const int root = uf.find(t.gpu_device[g]);
    int& c = root_to_component[root];
    if (c < 0) {
      c = static_cast<int>(component_size.size());
      component_size.push_back(0);
    }
    ++component_size[c];
    t.nvlink_component.push_back(c);
  }
  t.largest_nvlink_component = *std::max_element(component_size.begin(), component_size.end());
  t.nvlink_components = static_cast<int>(component_size.size());

  NodeRouter router(ns, t);
  std::vector<std::vector<std::int64_t>> gpu_dist;
  for (int g = 0; g < gpus; ++g) {
    gpu_dist.push_back(router.distances(t.gpu_device[g]));
  }
  t.gpu_to_gpu.resize(static_cast<std::size_t>(gpus * gpus));
  for (int a = 0; a < gpus; ++a) {
    for (int b = 0; b < gpus; ++b) {
      if (a == b) continue;
      t.gpu_to_gpu[a * gpus + b] = router.routes(t.gpu_device[a], t.gpu_device[b], gpu_dist[a]);
    }
  }

  // Which GPUs each NIC serves: as listed, else the GPUs nearest to it.
  t.nics_of_gpu.resize(static_cast<std::size_t>(gpus));
  for (int r = 0; r < nics; ++r) {
    const NodeDevice& nic = ns.devices[t.nic_device[static_cast<std::size_t>(r)]];
    std::vector<int> served;
    if (!nic.serves.empty()) {
      for (const std::string& id : nic.serves) {
        // gpu_device is increasing: the served GPU's local index by binary search.
        const int dev = index.at(id);
        const auto it = std::lower_bound(t.gpu_device.begin(), t.gpu_device.end(), dev);
        if (it != t.gpu_device.end() && *it == dev) {
          served.push_back(static_cast<int>(it - t.gpu_device.begin()));
        }
      }
    } else {
      std::int64_t best = kUnreachable;
      for (int g = 0; g < gpus; ++g) {
        best = std::min(best, gpu_dist[g][t.nic_device[static_cast<std::size_t>(r)]]);
      }
      for (int g = 0; g < gpus; ++g) {
        if (best != kUnreachable &&
            gpu_dist[g][t.nic_device[static_cast<std::size_t>(r)]] == best) {
          served.push_back(g);
        }
      }
    }
    for (int g : served)
      t.nics_of_gpu[g].push_back(r);
  }
  t.gpu_to_nic.resize(static_cast<std::size_t>(gpus * nics));
  for (int g = 0; g < gpus; ++g) {
    for (int r : t.nics_of_gpu[g]) {
      LocalRoutes routes = router.routes(t.gpu_device[g], t.nic_device[r], gpu_dist[g]);
      if (routes.cost == kUnreachable) {
        return Status::invalid_input(
            "topology \"" + spec.name +
            "\": /node: " + ns.devices[t.nic_device[static_cast<std::size_t>(r)]].id + " serves " +
            ns.devices[t.gpu_device[static_cast<std::size_t>(g)]].id +
            " but no route joins them without passing through another GPU or NIC");
      }
      t.gpu_to_nic[g * nics + r] = std::move(routes);
    }
    if (with_fabric && t.nics_of_gpu[g].empty()) {
      return Status::invalid_input("topology \"" + spec.name + "\": /node: no NIC serves " +
                                   ns.devices[t.gpu_device[static_cast<std::size_t>(g)]].id);
    }
  }
  return t;
}

}  // namespace

std::int64_t route_cost(const LinkSpec& link) {
  return link.latency.raw() + (bytes(kRouteReferenceBytes) / link.bandwidth).raw();
}

Cluster::Cluster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Cluster::Cluster(Cluster&&) noexcept = default;
Cluster& Cluster::operator=(Cluster&&) noexcept = default;
Cluster::~Cluster() = default;

Result<Cluster> Cluster::build(const TopologySpec& spec, int nodes) {
  const std::string where = "topology \"" + spec.name + "\"";
  if (nodes < 1 || nodes > limits::kMaxNodes) {
    return Status::invalid_input(where + ": node count must be between 1 and " +
                                 str(limits::kMaxNodes) + ", got " + str(nodes));
  }
  {
    Diagnostics diag(where);
    if (check_node(spec.node, spec.nvlink_domain.has_value(), diag, "/node")) {
      check_fabric(spec, nodes, diag, "/fabric");
    }
    PLANNER_RETURN_IF_ERROR(diag.to_status());
  }
  const bool with_fabric = spec.fabric.type != FabricType::kNone;
  PLANNER_ASSIGN_OR_RETURN(NodeTemplate t, make_template(spec, with_fabric));

  auto m = std::make_unique<Impl>();
  m->spec = spec;
  m->nodes = nodes;
  m->gpus_per_node = static_cast<int>(t.gpu_device.size());
  m->nics_per_node = static_cast<int>(t.nic_device.size());
  m->domain_nodes = spec.nvlink_domain ? spec.nvlink_domain->nodes : 0;
  const int gpn = m->gpus_per_node;
  const int npn = m->nics_per_node;
  if (!spec.nvlink_domain && !with_fabric) {
    for (int a = 0; a < gpn; ++a) {
      for (int b = 0; b < gpn; ++b) {
        if (a != b && t.gpu_to_gpu[a * gpn + b].cost == kUnreachable) {
          return Status::invalid_input(
              where + ": /node: no route from " +
              spec.node.devices[t.gpu_device[static_cast<std::size_t>(a)]].id + " to " +
              spec.node.devices[t.gpu_device[static_cast<std::size_t>(b)]].id +
              " (GPUs and NICs do not forward traffic) and no fabric to go round");
        }
      }
    }
  }
  const detail::FabricLayout layout = detail::fabric_layout(spec, nodes);
  const int domains = m->domain_nodes > 0 ? detail::ceil_div(nodes, m->domain_nodes) : 0;
  const long long total_gpus = static_cast<long long>(nodes) * gpn;
  const long long total_nics = static_cast<long long>(nodes) * npn;
  const FabricSpec& f = spec.fabric;
  const long long leaf_spine_cables =
      layout.spines > 0 ? static_cast<long long>(layout.leaves) * f.uplinks_per_leaf : 0;
  const long long spine_core_cables =
      layout.cores > 0 ? static_cast<long long>(layout.spines) * f.uplinks_per_spine : 0;
  const long long total_devices = static_cast<long long>(nodes) * t.num_devices + domains +
                                  layout.leaves + layout.spines + layout.cores;
  const long long total_cables =
      static_cast<long long>(nodes) * t.num_cables + (domains > 0 ? total_gpus : 0) +
      (layout.leaves > 0 ? total_nics : 0) + leaf_spine_cables + spine_core_cables;
  if (total_devices > std::numeric_limits<std::int32_t>::max() / 2 ||
      2 * total_cables > std::numeric_limits<std::int32_t>::max() / 2) {
    return Status::invalid_input(where + ": " + str(nodes) + " nodes make a graph too large (" +
                                 str(total_devices) + " devices, " + str(total_cables) +
                                 " cables)");
  }

  std::vector<Device>& dev = m->devices;
  std::vector<Link>& lnk = m->links;
  std::vector<std::int64_t>& cost = m->link_cost;
  dev.reserve(static_cast<std::size_t>(total_devices));
  lnk.reserve(static_cast<std::size_t>(2 * total_cables));
  cost.reserve(static_cast<std::size_t>(2 * total_cables));
  auto add_cable = [&](DeviceId a, DeviceId b, const LinkSpec& s) {
    const std::int64_t c = route_cost(s);
    lnk.push_back({a, b, s.kind, s.count, s.bandwidth, s.latency});
    lnk.push_back({b, a, s.kind, s.count, s.bandwidth, s.latency});
    cost.push_back(c);
    cost.push_back(c);
  };

  // Nodes.
  std::vector<int> gpu_rank_of_device(static_cast<std::size_t>(t.num_devices), -1);
  for (int g = 0; g < gpn; ++g)
    gpu_rank_of_device[t.gpu_device[static_cast<std::size_t>(g)]] = g;
  for (int n = 0; n < nodes; ++n) {
    const DeviceId base = n * t.num_devices;
    for (int i = 0; i < t.num_devices; ++i) {
      const int rank = gpu_rank_of_device[i];
      dev.push_back({spec.node.devices[i].kind, n, i, rank < 0 ? -1 : n * gpn + rank});
    }
    for (int c = 0; c < t.num_cables; ++c) {
      add_cable(base + t.cable_a[c], base + t.cable_b[c], spec.node.links[c].link);
    }
  }
  // Rack-scale NVLink domains: one logical switch each, linked to every GPU of its nodes.
  m->domain_switch_base = static_cast<DeviceId>(dev.size());
  for (int d = 0; d < domains; ++d)
    dev.push_back({DeviceKind::kNvSwitch, -1, d, -1});
  m->domain_link_base = static_cast<LinkId>(lnk.size());
  if (domains > 0) {
    m->domain_cost = route_cost(spec.nvlink_domain->link);
    for (int g = 0; g < total_gpus; ++g) {
      const int n = g / gpn;
      add_cable(n * t.num_devices + t.gpu_device[g % gpn],
                m->domain_switch_base + n / m->domain_nodes, spec.nvlink_domain->link);
    }
  }
  // Scale-out fabric.
  m->switch_base = static_cast<DeviceId>(dev.size());
  m->num_switches = layout.leaves + layout.spines + layout.cores;
  m->table_of = std::make_unique<std::atomic<const Impl::RouteTable*>[]>(
      static_cast<std::size_t>(m->num_switches));
  for (int i = 0; i < layout.leaves; ++i)
    dev.push_back({DeviceKind::kLeaf, -1, i, -1});
  for (int i = 0; i < layout.spines; ++i)
    dev.push_back({DeviceKind::kSpine, -1, i, -1});
  for (int i = 0; i < layout.cores; ++i)
    dev.push_back({DeviceKind::kCore, -1, i, -1});
  const DeviceId leaf0 = m->switch_base;
  const DeviceId spine0 = leaf0 + layout.leaves;
  const DeviceId core0 = spine0 + layout.spines;
  m->host_link_base = static_cast<LinkId>(lnk.size());
  if (layout.leaves > 0) {
    m->leaf_of_nic.reserve(static_cast<std::size_t>(total_nics));
    for (int n = 0; n < nodes; ++n) {
      for (int r = 0; r < npn; ++r) {
        const int leaf = detail::leaf_of(f, npn, n, r);
        m->leaf_of_nic.push_back(leaf);
        add_cable(n * t.num_devices + t.nic_device[r], leaf0 + leaf, f.host_link);
      }
    }
  }
  m->leaf_spine_base = static_cast<LinkId>(lnk.size());
  if (layout.spines > 0) {
    const int per_pod = f.tiers == 3 ? f.leaves_per_pod : layout.leaves;
    m->leaves = layout.leaves;
    m->leaves_per_pod = per_pod;
    m->uplinks = f.uplinks_per_leaf;
    m->core_uplinks = layout.cores > 0 ? f.uplinks_per_spine : 0;
    m->regular = per_pod >= 1 && f.uplinks_per_leaf >= 1 &&
                 (layout.pods <= 1 || (layout.cores > 0 && f.uplinks_per_spine >= 1));
    for (int leaf = 0; leaf < layout.leaves; ++leaf) {
      const int pod = leaf / per_pod;
      for (int j = 0; j < f.uplinks_per_leaf; ++j)
        add_cable(leaf0 + leaf, spine0 + pod * f.uplinks_per_leaf + j, f.switch_link);
    }
  }
  m->spine_core_base = static_cast<LinkId>(lnk.size());
  if (layout.cores > 0) {
    for (int s = 0; s < layout.spines; ++s) {
      const int plane = s % f.uplinks_per_leaf;
      for (int k = 0; k < f.uplinks_per_spine; ++k)
        add_cable(spine0 + s, core0 + plane * f.uplinks_per_spine + k, f.switch_link);
    }
  }

  // Adjacency (CSR) over all devices.
  const std::size_t nd = dev.size();
  m->out_offsets.assign(nd + 1, 0);
  for (const Link& l : lnk)
    ++m->out_offsets[static_cast<std::size_t>(l.src) + 1];
  std::partial_sum(m->out_offsets.begin(), m->out_offsets.end(), m->out_offsets.begin());
  m->out_ids.resize(lnk.size());
  {
    std::vector<std::int32_t> fill(m->out_offsets.begin(), m->out_offsets.end() - 1);
    for (std::size_t id = 0; id < lnk.size(); ++id) {
      m->out_ids[fill[static_cast<std::size_t>(lnk[id].src)]++] = static_cast<LinkId>(id);
    }
  }
  // NICs per GPU.
  m->gpu_nic_offsets.reserve(static_cast<std::size_t>(total_gpus) + 1);
  m->gpu_nic_offsets.push_back(0);
  for (int g = 0; g < total_gpus; ++g) {
    const int n = g / gpn;
    if (with_fabric) {
      for (int r : t.nics_of_gpu[g % gpn])
        m->gpu_nics.push_back(n * t.num_devices + t.nic_device[r]);
    }
    m->gpu_nic_offsets.push_back(static_cast<std::int32_t>(m->gpu_nics.size()));
  }
  // Switch-to-switch adjacency for route walks.
  m->sw_offsets.assign(static_cast<std::size_t>(m->num_switches) + 1, 0);
  for (int s = 0; s < m->num_switches; ++s) {
    const DeviceId d = m->switch_base + s;
    for (auto i = m->out_offsets[d]; i < m->out_offsets[static_cast<std::size_t>(d) + 1]; ++i) {
      const LinkId id = m->out_ids[i];
      const DeviceId to = lnk[id].dst;
      if (to >= m->switch_base) m->sw_adj.emplace_back(id, to - m->switch_base);
    }
    m->sw_offsets[static_cast<std::size_t>(s) + 1] = static_cast<std::int32_t>(m->sw_adj.size());
  }
  {
    // Links are full duplex with equal cost both ways, so distances from a leaf are distances to
    // it.
    std::vector<std::pair<int, int>> ends;
    std::vector<SwitchEdge> props;
    ends.reserve(m->sw_adj.size());
    props.reserve(m->sw_adj.size());
    for (int s = 0; s < m->num_switches; ++s) {
      for (auto i = m->sw_offsets[s]; i < m->sw_offsets[static_cast<std::size_t>(s) + 1]; ++i) {
        const auto& [id, to] = m->sw_adj[i];
        ends.emplace_back(s, to);
        props.push_back({cost[id]});
      }
    }
    m->switch_graph = SwitchGraph(boost::edges_are_sorted, ends.begin(), ends.end(), props.begin(),
                                  static_cast<std::size_t>(m->num_switches));
  }
  m->node = std::move(t);
  return Cluster(std::move(m));
}

const TopologySpec& Cluster::spec() const {
  return impl_->spec;
}
int Cluster::num_nodes() const {
  return impl_->nodes;
}
int Cluster::gpus_per_node() const {
  return impl_->gpus_per_node;
}
int Cluster::num_gpus() const {
  return impl_->nodes * impl_->gpus_per_node;
}
int Cluster::nics_per_node() const {
  return impl_->nics_per_node;
}
int Cluster::devices_per_node() const {
  return impl_->node.num_devices;
}
std::span<const Device> Cluster::devices() const {
  return impl_->devices;
}
std::span<const Link> Cluster::links() const {
  return impl_->links;
}

std::span<const LinkId> Cluster::out_links(DeviceId id) const {
  const auto begin = static_cast<std::size_t>(impl_->out_offsets[id]);
  const auto end = static_cast<std::size_t>(impl_->out_offsets[static_cast<std::size_t>(id) + 1]);
  return std::span<const LinkId>(impl_->out_ids).subspan(begin, end - begin);
}

std::string Cluster::device_name(DeviceId id) const {
  const Device& d = device(id);
  if (d.node >= 0) {
    return "n" + str(d.node) + "." + impl_->spec.node.devices[d.local].id;
  }
  switch (d.kind) {
    case DeviceKind::kNvSwitch:
      return "nvl" + str(d.local);
    case DeviceKind::kLeaf:
      return "leaf" + str(d.local);
    case DeviceKind::kSpine:
      return "spine" + str(d.local);
    case DeviceKind::kCore:
      return "core" + str(d.local);
    default:
      return "device" + str(id);
  }
}

DeviceId Cluster::gpu_device(int gpu) const {
  const int n = gpu / impl_->gpus_per_node;
  return n * impl_->node.num_devices + impl_->node.gpu_device[gpu % impl_->gpus_per_node];
}

int Cluster::nvlink_domain_of(int gpu) const {
  if (impl_->domain_nodes > 0) return node_of(gpu) / impl_->domain_nodes;
  return node_of(gpu) * impl_->node.nvlink_components +
         impl_->node.nvlink_component[local_rank(gpu)];
}

int Cluster::nvlink_domain_size() const {
  if (impl_->domain_nodes > 0)
    return std::min(impl_->domain_nodes, impl_->nodes) * impl_->gpus_per_node;
  return impl_->node.largest_nvlink_component;
}

int Cluster::island_of(int gpu) const {
  return impl_->domain_nodes > 0 ? node_of(gpu) / impl_->domain_nodes : node_of(gpu);
}

int Cluster::num_islands() const {
  return impl_->domain_nodes > 0 ? detail::ceil_div(impl_->nodes, impl_->domain_nodes)
                                 : impl_->nodes;
}

std::span<const DeviceId> Cluster::nics_of(int gpu) const {
  const auto begin = static_cast<std::size_t>(impl_->gpu_nic_offsets[gpu]);
  const auto end =
      static_cast<std::size_t>(impl_->gpu_nic_offsets[static_cast<std::size_t>(gpu) + 1]);
  return std::span<const DeviceId>(impl_->gpu_nics).subspan(begin, end - begin);
}

DeviceId Cluster::attached(int gpu, DeviceKind kind) const {
  for (LinkId id : out_links(gpu_device(gpu))) {
    const DeviceId to = link(id).dst;
    if (device(to).kind == kind) return to;
  }
  return kNoDevice;
}

bool Cluster::shares(int a, int b, Scope scope) const {
  switch (scope) {
    case Scope::kNode:
      return node_of(a) == node_of(b);
    case Scope::kNvlinkDomain:
      return nvlink_domain_of(a) == nvlink_domain_of(b);
    case Scope::kNvSwitch:
    case Scope::kPcieSwitch: {
      const DeviceKind kind =
          scope == Scope::kNvSwitch ? DeviceKind::kNvSwitch : DeviceKind::kPcieSwitch;
      for (LinkId ia : out_links(gpu_device(a))) {
        if (device(link(ia).dst).kind != kind) continue;
        for (LinkId ib : out_links(gpu_device(b))) {
          if (link(ib).dst == link(ia).dst) return true;
        }
      }
      return false;
    }
    case Scope::kNic: {
      for (DeviceId x : nics_of(a)) {
        for (DeviceId y : nics_of(b)) {
          if (x == y) return true;
        }
      }
      return false;
    }
  }
  return false;
}

LinkId Cluster::uplink_of_nic(DeviceId nic) const {
  const Device& d = device(nic);
  if (d.kind != DeviceKind::kNic || impl_->leaf_of_nic.empty()) return -1;
  int ordinal = 0;
  const auto& nics = impl_->node.nic_device;
  ordinal = static_cast<int>(std::find(nics.begin(), nics.end(), d.local) - nics.begin());
  return impl_->host_link_base + 2 * (d.node * impl_->nics_per_node + ordinal);
}

Time Cluster::path_latency(std::span<const LinkId> path) const {
  Time t = Time::zero();
  for (LinkId id : path)
    t += link(id).latency;
  return t;
}

Bandwidth Cluster::path_bandwidth(std::span<const LinkId> path) const {
  if (path.empty()) return Bandwidth::zero();
  Bandwidth b = link(path.front()).bandwidth;
  for (LinkId id : path)
    b = std::min(b, link(id).bandwidth);
  return b;
}

}  // namespace planner::topo
