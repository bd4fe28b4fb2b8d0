#include "planner/topo/capacity.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <vector>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>

namespace planner::topo {
namespace {

enum class Role : std::uint8_t { kExcluded, kTransit, kSource, kSink };

std::int64_t capacity_of(Bandwidth b) {
  return std::llround(b.raw());
}

// A flow network over part of the cluster: devices with roles, one arc per usable link direction
// (capacity = its bandwidth in bytes/s), a super source feeding the sources and a super sink
// draining the sinks.
class FlowNetwork {
 public:
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using Graph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<
          boost::edge_capacity_t, std::int64_t,
          boost::property<boost::edge_residual_capacity_t, std::int64_t,
                          boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;

  explicit FlowNetwork(const Cluster& c) : c_(c), vertex_(c.devices().size(), -1) {
    boost::add_vertex(g_);  // super source
    boost::add_vertex(g_);  // super sink
  }

  void include(DeviceId d, Role role) {
    auto& v = vertex_[d];
    if (v < 0) {
      v = static_cast<int>(boost::add_vertex(g_));
      devices_.push_back(d);
      roles_.push_back(role);
    } else {
      roles_[v - 2] = role;
    }
  }
  bool included(DeviceId d) const { return vertex_[d] >= 0; }
  Role role(DeviceId d) const {
    const int v = vertex_[d];
    return v < 0 ? Role::kExcluded : roles_[v - 2];
  }

  // Adds every cable between included devices; `allow(link)` says whether its direction may carry
  // flow (endpoint roles are checked here: sources only send, sinks only receive).
  template <class Allow>
  void add_links(Allow&& allow) {
    for (DeviceId d : devices_) {
      for (LinkId id : c_.out_links(d)) {
        if ((id & 1) != 0) continue;  // each cable once, from its even direction
        const Link& l = c_.link(id);
        if (!included(l.dst)) continue;
        const std::int64_t fwd = usable(id) && allow(id) ? capacity_of(l.bandwidth) : 0;
        const LinkId back = Cluster::reverse(id);
        const std::int64_t bwd =
            usable(back) && allow(back) ? capacity_of(c_.link(back).bandwidth) : 0;
        if (fwd > 0) add_arc(vertex(l.src), vertex(l.dst), fwd);
        if (bwd > 0) add_arc(vertex(l.dst), vertex(l.src), bwd);
      }
    }
  }

  // Feeds each source with what its links can carry out, drains each sink likewise.
  void connect_terminals() {
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      const DeviceId d = devices_[i];
      if (roles_[i] != Role::kSource && roles_[i] != Role::kSink) continue;
      std::int64_t total = 0;
      for (LinkId id : c_.out_links(d))
        total += capacity_of(c_.link(id).bandwidth);
      if (roles_[i] == Role::kSource) {
        add_arc(kSource, vertex(d), total);
      } else {
        add_arc(vertex(d), kSink, total);
      }
    }
  }
  // An extra drain from `d` to the super sink (a NIC's uplink).
  void drain(DeviceId d, std::int64_t capacity) { add_arc(vertex(d), kSink, capacity); }

  std::int64_t max_flow() {
    if (boost::num_edges(g_) == 0) return 0;
    return boost::push_relabel_max_flow(g_, kSource, kSink);
  }

 private:
  static constexpr std::size_t kSource = 0;
  static constexpr std::size_t kSink = 1;

  std::size_t vertex(DeviceId d) const { return static_cast<std::size_t>(vertex_[d]); }
  bool usable(LinkId id) const {
    const Link& l = c_.link(id);
    return role(l.src) != Role::kSink && role(l.dst) != Role::kSource;
  }
  // An arc with a zero-capacity residual partner, the form push-relabel expects.
  void add_arc(std::size_t u, std::size_t v, std::int64_t capacity) {
    const auto e1 = boost::add_edge(u, v, g_).first;
    const auto e2 = boost::add_edge(v, u, g_).first;
    boost::put(boost::edge_capacity, g_, e1, capacity);
    boost::put(boost::edge_capacity, g_, e2, 0);
    boost::put(boost::edge_reverse, g_, e1, e2);
    boost::put(boost::edge_reverse, g_, e2, e1);
  }

  const Cluster& c_;
  Graph g_;
  std::vector<int> vertex_;  // per device, -1 when excluded
  std::vector<DeviceId> devices_;
  std::vector<Role> roles_;  // per included device, in vertex order
};

Bandwidth as_bandwidth(std::int64_t flow) {
  return Bandwidth(static_cast<double>(flow));
}

Status check_gpus(const Cluster& c, std::span<const int> gpus) {
  std::vector<char> seen(static_cast<std::size_t>(c.num_gpus()), 0);
  for (int g : gpus) {
    if (g < 0 || g >= c.num_gpus()) {
      return Status::invalid_input("GPU " + std::to_string(g) +
                                   " is out of range: the cluster has " +
                                   std::to_string(c.num_gpus()) + " GPUs");
    }
    if (seen[g]++) {
      return Status::invalid_input("GPU " + std::to_string(g) + " appears twice in the group");
    }
  }
  return Status::ok();
}

// Nodes (first, count) making up island `island`.
std::pair<int, int> island_nodes(const Cluster& c, int island) {
  const int per = c.spec().nvlink_domain ? c.spec().nvlink_domain->nodes : 1;
  const int first = island * per;
  return {first, std::min(per, c.num_nodes() - first)};
}

// Max flow from `source` to the other `members` of the island, over links of the given classes.
// Returns -1 when those links do not join the members (relaying through members, as a ring does).
std::int64_t island_flow(const Cluster& c, int island, const std::vector<int>& members, int source,
                         const std::vector<LinkClass>& classes) {
  const auto [first, count] = island_nodes(c, island);
  std::vector<char> is_member(static_cast<std::size_t>(c.num_gpus()), 0);
  for (int g : members)
    is_member[g] = 1;
  std::vector<DeviceId> devices;
  const int per_node = c.devices_per_node();
  for (int n = first; n < first + count; ++n) {
    for (DeviceId d = n * per_node; d < (n + 1) * per_node; ++d) {
      const Device& dev = c.device(d);
      if (dev.kind == DeviceKind::kNic) continue;
      if (dev.kind == DeviceKind::kGpu && !is_member[dev.gpu]) continue;
      devices.push_back(d);
    }
  }
  // The rack-scale domain switch, if any: the NVSwitch every member GPU links to outside its node.
  const DeviceId domain = c.attached(source, DeviceKind::kNvSwitch);
  if (domain != kNoDevice && c.device(domain).node < 0) devices.push_back(domain);
  auto allowed = [&](LinkId id) {
    return std::find(classes.begin(), classes.end(), link_class(c.link(id).kind)) != classes.end();
  };

  std::vector<char> in_set(c.devices().size(), 0);
  for (DeviceId d : devices)
    in_set[d] = 1;
  std::vector<char> seen(c.devices().size(), 0);
  std::deque<DeviceId> todo{c.gpu_device(source)};
  seen[todo.front()] = 1;
  while (!todo.empty()) {
    const DeviceId d = todo.front();
    todo.pop_front();
    for (LinkId id : c.out_links(d)) {
      const DeviceId to = c.link(id).dst;
      if (!in_set[to] || seen[to] || !allowed(id)) {
        continue;
      }
      seen[to] = 1;
      todo.push_back(to);
    }
  }
  for (int g : members) {
    if (!seen[c.gpu_device(g)]) return -1;
  }

  FlowNetwork net(c);
  for (DeviceId d : devices) {
    const int g = c.device(d).gpu;
    net.include(d, g < 0 ? Role::kTransit : g == source ? Role::kSource : Role::kSink);
  }
  net.add_links(allowed);
  net.connect_terminals();
  return net.max_flow();
}

// Per-member intra-island bandwidth of `members` (all on `island`), with the class used: NVLink
// when NVLink joins them, else PCIe and host links.
std::pair<Bandwidth, LinkClass> intra_island(const Cluster& c, int island,
                                             const std::vector<int>& members) {
  const std::vector<std::pair<LinkClass, std::vector<LinkClass>>> passes{
      {LinkClass::kNvlink, {LinkClass::kNvlink}},
      {LinkClass::kPcie, {LinkClass::kPcie, LinkClass::kHost}},
  };
  for (const auto& [label, classes] : passes) {
    Bandwidth best = Bandwidth::max();
    bool joined = true;
    for (int m : members) {
      const std::int64_t f = island_flow(c, island, members, m, classes);
      if (f < 0) {
        joined = false;
        break;
      }
      best = std::min(best, as_bandwidth(f));
    }
    if (joined) return {best, label};
  }
  return {Bandwidth::zero(), LinkClass::kPcie};
}

// Max flow from `members` (all on node `node`) out through the NICs serving them.
std::int64_t node_injection(const Cluster& c, int node, const std::vector<int>& members) {
  FlowNetwork net(c);
  const int per_node = c.devices_per_node();
  std::vector<char> is_member(static_cast<std::size_t>(c.num_gpus()), 0);
  for (int g : members)
    is_member[g] = 1;
  std::vector<DeviceId> nics;
  for (int g : members) {
    for (DeviceId nic : c.nics_of(g)) {
      if (std::find(nics.begin(), nics.end(), nic) == nics.end()) nics.push_back(nic);
    }
  }
  for (DeviceId d = node * per_node; d < (node + 1) * per_node; ++d) {
    const Device& dev = c.device(d);
    if (dev.kind == DeviceKind::kGpu) {
      if (is_member[dev.gpu]) net.include(d, Role::kSource);
    } else if (dev.kind != DeviceKind::kNic) {
      net.include(d, Role::kTransit);
    }
  }
  for (DeviceId nic : nics)
    net.include(nic, Role::kTransit);
  // A NIC only takes traffic in from the node, and hands it to its uplink.
  net.add_links([&](LinkId id) { return c.device(c.link(id).src).kind != DeviceKind::kNic; });
  net.connect_terminals();
  for (DeviceId nic : nics) {
    const LinkId up = c.uplink_of_nic(nic);
    if (up >= 0) net.drain(nic, capacity_of(c.link(up).bandwidth));
  }
  return net.max_flow();
}

// Max flow from GPUs `from` to GPUs `to` over the nodes holding them and the fabric.
std::int64_t cut_flow(const Cluster& c, std::span<const int> from, std::span<const int> to) {
  FlowNetwork net(c);
  // Per node: bit 0 = holds senders, bit 1 = holds receivers.
  std::vector<std::uint8_t> side(static_cast<std::size_t>(c.num_nodes()), 0);
  std::vector<std::uint8_t> gpu_role(static_cast<std::size_t>(c.num_gpus()), 0);
  for (int g : from) {
    side[c.node_of(g)] |= 1;
    gpu_role[g] = 1;
  }
  for (int g : to) {
    side[c.node_of(g)] |= 2;
    gpu_role[g] = 2;
  }
  const int per_node = c.devices_per_node();
  for (int n = 0; n < c.num_nodes(); ++n) {
    if (side[n] == 0) continue;
    for (DeviceId d = n * per_node; d < (n + 1) * per_node; ++d) {
      const Device& dev = c.device(d);
      if (dev.kind == DeviceKind::kGpu) {
        const std::uint8_t r = gpu_role[dev.gpu];
        if (r != 0) net.include(d, r == 1 ? Role::kSource : Role::kSink);
      } else {
        net.include(d, Role::kTransit);
      }
    }
  }
  for (DeviceId d = c.num_nodes() * per_node; d < static_cast<DeviceId>(c.devices().size()); ++d) {
    const Device& dev = c.device(d);
    if (dev.kind != DeviceKind::kNvSwitch) {
      net.include(d, Role::kTransit);
      continue;
    }
    // A domain switch matters when one of its GPUs takes part.
    for (LinkId id : c.out_links(d)) {
      const int g = c.device(c.link(id).dst).gpu;
      if (g >= 0 && gpu_role[g] != 0) {
        net.include(d, Role::kTransit);
        break;
      }
    }
  }
  // Traffic leaves a sending-only node through its NICs and enters a receiving-only one likewise;
  // it never hairpins through a node's NICs.
  net.add_links([&](LinkId id) {
    const Link& l = c.link(id);
    const Device& a = c.device(l.src);
    const Device& b = c.device(l.dst);
    if (a.kind == DeviceKind::kNic && b.node >= 0) {
      return side[b.node] != 1;  // NIC into the node: not for senders
    }
    if (a.kind == DeviceKind::kNic) return side[a.node] != 2;  // up
    if (b.kind == DeviceKind::kNic && a.node >= 0) {
      return side[a.node] != 2;  // node into NIC: not for receivers
    }
    if (b.kind == DeviceKind::kNic) return side[b.node] != 1;  // down
    return true;
  });
  net.connect_terminals();
  return net.max_flow();
}

}  // namespace

Result<Bandwidth> cut_bandwidth(const Cluster& cluster, std::span<const int> from,
                                std::span<const int> to) {
  std::vector<int> all(from.begin(), from.end());
  all.insert(all.end(), to.begin(), to.end());
  PLANNER_RETURN_IF_ERROR(check_gpus(cluster, all));
  return as_bandwidth(cut_flow(cluster, from, to));
}

Bandwidth bisection_bandwidth(const Cluster& cluster) {
  const int n = cluster.num_gpus();
  if (n < 2) return Bandwidth::zero();
  std::vector<int> from(static_cast<std::size_t>(n / 2));
  std::vector<int> to(static_cast<std::size_t>(n - n / 2));
  for (int i = 0; i < n; ++i) {
    if (i < n / 2) {
      from[i] = i;
    } else {
      to[i - n / 2] = i;
    }
  }
  return as_bandwidth(cut_flow(cluster, from, to));
}

Result<Bandwidth> injection_bandwidth(const Cluster& cluster, std::span<const int> gpus) {
  PLANNER_RETURN_IF_ERROR(check_gpus(cluster, gpus));
  if (cluster.nics_per_node() == 0 || cluster.spec().fabric.type == FabricType::kNone ||
      gpus.empty()) {
    return Bandwidth::zero();
  }
  std::map<int, std::vector<int>> by_node;
  for (int g : gpus)
    by_node[cluster.node_of(g)].push_back(g);
  // Nodes are identical: the same local ranks give the same flow.
  std::map<std::vector<int>, Bandwidth> cache;
  Bandwidth best = Bandwidth::max();
  for (auto& [node, members] : by_node) {
    std::sort(members.begin(), members.end());
    std::vector<int> key;
    for (int g : members)
      key.push_back(cluster.local_rank(g));
    auto it = cache.find(key);
    if (it == cache.end()) {
      const std::int64_t f = node_injection(cluster, node, members);
      it = cache.emplace(key, as_bandwidth(f) / static_cast<std::int64_t>(members.size())).first;
    }
    best = std::min(best, it->second);
  }
  return best;
}

Result<GroupBandwidth> group_bandwidth(const Cluster& cluster, std::span<const int> gpus) {
  PLANNER_RETURN_IF_ERROR(check_gpus(cluster, gpus));
  GroupBandwidth out;
  std::map<int, std::vector<int>> by_island;
  for (int g : gpus)
    by_island[cluster.island_of(g)].push_back(g);
  out.islands = static_cast<int>(by_island.size());
  Bandwidth bottleneck = Bandwidth::max();

  // Islands are identical: the same island-relative members give the same figure.
  std::map<std::vector<int>, std::pair<Bandwidth, LinkClass>> cache;
  bool any_intra = false;
  Bandwidth intra = Bandwidth::max();
  for (auto& [island, members] : by_island) {
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end());
    const int first_gpu = island_nodes(cluster, island).first * cluster.gpus_per_node();
    std::vector<int> key;
    for (int g : members)
      key.push_back(g - first_gpu);
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(key, intra_island(cluster, island, members)).first;
    if (!any_intra || it->second.first < intra) out.intra_class = it->second.second;
    intra = std::min(intra, it->second.first);
    any_intra = true;
  }
  if (any_intra) {
    out.intra = intra;
    bottleneck = std::min(bottleneck, intra);
  }
  if (out.islands >= 2) {
    PLANNER_ASSIGN_OR_RETURN(out.injection, injection_bandwidth(cluster, gpus));
    std::vector<int> from;
    std::vector<int> to;
    int index = 0;
    for (const auto& [island, members] : by_island) {
      auto& side = index++ < out.islands / 2 ? from : to;
      side.insert(side.end(), members.begin(), members.end());
    }
    const auto smaller = static_cast<std::int64_t>(std::min(from.size(), to.size()));
    out.fabric = as_bandwidth(cut_flow(cluster, from, to)) / smaller;
    bottleneck = std::min({bottleneck, out.injection, out.fabric});
  }
  out.bottleneck = bottleneck == Bandwidth::max() ? Bandwidth::zero() : bottleneck;
  return out;
}

}  // namespace planner::topo
