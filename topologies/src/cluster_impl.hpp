// Cluster's internals, shared by cluster.cpp (building) and routing.cpp (paths).
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <boost/graph/compressed_sparse_row_graph.hpp>

#include "planner/topo/cluster.hpp"

namespace planner::topo {

inline constexpr std::int64_t kUnreachable = std::numeric_limits<std::int64_t>::max();

// Equal-cost routes between two devices of one node, as local directed link ids (2k, 2k + 1 for
// cable k of the node spec).
struct LocalRoutes {
  std::int64_t cost = kUnreachable;
  std::vector<std::vector<int>> alternatives;
};

// What every node shares: its devices and cables, and the routes inside it.
struct NodeTemplate {
  int num_devices = 0;
  int num_cables = 0;
  std::vector<int> gpu_device;  // local rank -> device index
  std::vector<int> nic_device;  // NIC ordinal -> device index
  std::vector<int> cable_a;     // per cable: device indices of its ends
  std::vector<int> cable_b;
  std::vector<std::int64_t> cost;             // per local directed link
  std::vector<LocalRoutes> gpu_to_gpu;        // [src * gpus + dst]
  std::vector<std::vector<int>> nics_of_gpu;  // local rank -> NIC ordinals serving it
  std::vector<LocalRoutes> gpu_to_nic;        // [gpu * nics + nic]
  std::vector<int> nvlink_component;          // local rank -> NVLink component among local GPUs
  int nvlink_components = 1;
  int largest_nvlink_component = 1;
};

// The fabric switches as a Boost CSR graph weighted by route cost (vertex = switch ordinal).
struct SwitchEdge {
  std::int64_t cost;
};
using SwitchGraph =
    boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, SwitchEdge>;

struct Cluster::Impl {
  TopologySpec spec;
  int nodes = 0;
  int gpus_per_node = 0;
  int nics_per_node = 0;
  int domain_nodes = 0;  // rack-scale NVLink domain size in nodes; 0 without one
  NodeTemplate node;

  std::vector<Device> devices;
  std::vector<Link> links;
  std::vector<std::int32_t> out_offsets;  // CSR over devices
  std::vector<LinkId> out_ids;
  std::vector<std::int32_t> gpu_nic_offsets;  // CSR over GPUs
  std::vector<DeviceId> gpu_nics;

  DeviceId domain_switch_base = 0;
  DeviceId switch_base = 0;  // first fabric switch (leaves, then spines, then cores)
  int num_switches = 0;
  LinkId domain_link_base = 0;            // + 2 * gpu: GPU -> domain switch
  LinkId host_link_base = 0;              // + 2 * (node * nics + nic): NIC -> leaf
  std::int64_t domain_cost = 0;           // route cost of one GPU <-> domain switch link
  std::vector<std::int32_t> leaf_of_nic;  // per global NIC ordinal

  // Directed links between fabric switches, for route walks: per switch, (link, neighbour switch).
  std::vector<std::int32_t> sw_offsets;
  std::vector<std::pair<LinkId, std::int32_t>> sw_adj;
  std::vector<std::int64_t> link_cost;  // per directed link (route cost)
  SwitchGraph switch_graph;

  // Per destination leaf: every switch's cost to reach it and its on-route links (the indices
  // into sw_adj of the links whose far end is that much closer, in sw_adj order), lazily built
  // under the mutex; `table_of` (per switch) publishes a built table so that route walks on many
  // threads read it without locking.
  struct RouteTable {
    std::vector<std::int64_t> dist;
    std::vector<std::int32_t> offsets;  // CSR over switches into `next`
    std::vector<std::int32_t> next;
  };
  mutable std::mutex tables_mutex;
  mutable std::unordered_map<int, std::unique_ptr<const RouteTable>> tables;
  mutable std::unique_ptr<std::atomic<const RouteTable*>[]> table_of;

  const RouteTable& table_to(int leaf) const;

  // The generated fabrics are regular: every leaf of a pod is cabled once to each of the pod's
  // `uplinks` spines (spine j of pod p is switch leaves + p * uplinks + j), and spine j of every
  // pod to each of the `core_uplinks` cores of plane j. Their shortest routes are known without a
  // search: leaf A -> spine (pod A, j) -> leaf B inside a pod; leaf A -> spine (pod A, j) ->
  // core (j, k) -> spine (pod B, j) -> leaf B across pods, every j and k equal in cost. The route
  // tables list exactly these candidates in the same order (a leaf's uplinks by j, a spine's core
  // uplinks by k, one way down), so regular_route() picks the links table_route() would for the
  // same hash, without a table per destination leaf (tests check both agree). `regular` is false
  // when the layout leaves a pair unreachable; table_route() then walks the search's tables.
  bool regular = false;
  int leaves = 0;
  int leaves_per_pod = 0;
  int uplinks = 0;             // spines per pod; a leaf's uplinks
  int core_uplinks = 0;        // a spine's uplinks to the cores of its plane
  LinkId leaf_spine_base = 0;  // + 2 * (leaf * uplinks + j): leaf -> spine j of its pod
  LinkId spine_core_base = 0;  // + 2 * (spine * core_uplinks + k): spine -> core k of its plane

  void fabric_route(int from_leaf, int to_leaf, std::uint64_t hash, std::vector<LinkId>& out) const;
  void table_route(int from_leaf, int to_leaf, std::uint64_t hash, std::vector<LinkId>& out) const;
  void regular_route(int from_leaf, int to_leaf, std::uint64_t hash,
                     std::vector<LinkId>& out) const;
};

// Test access to a cluster's internals.
struct ClusterInternals {
  using Impl = Cluster::Impl;
  static const Cluster::Impl& of(const Cluster& c) { return *c.impl_; }
};

// Route cost of a link: latency plus the time to move kRouteReferenceBytes, in picoseconds.
std::int64_t route_cost(const LinkSpec& link);

// splitmix64 of `hash` salted by `salt`: independent choices at each stage of a route.
inline std::uint64_t mix_hash(std::uint64_t hash, std::uint64_t salt) {
  std::uint64_t z = hash ^ (salt * 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace planner::topo
