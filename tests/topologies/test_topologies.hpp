// Small topologies for tests, written as the JSON a user would write.
#pragma once

#include <numeric>
#include <string>
#include <vector>

#include "planner/topo/cluster.hpp"
#include "planner/topo/topology_catalog.hpp"
#include "planner/topo/topology_json.hpp"

namespace planner::topo::testing {

// A preset by name; fails the test when it does not load.
inline TopologySpec preset(const std::string& name) {
  auto spec = builtin_topologies().get(name);
  if (!spec) throw std::runtime_error(spec.status().message());
  return *spec;
}

// GPUs first, first + 1, ..., first + count - 1.
inline std::vector<int> range(int first, int count) {
  std::vector<int> v(static_cast<std::size_t>(count));
  std::iota(v.begin(), v.end(), first);
  return v;
}

inline Cluster build(const TopologySpec& spec, int nodes) {
  auto c = Cluster::build(spec, nodes);
  if (!c) throw std::runtime_error(c.status().message());
  return std::move(c).value();
}

// One GPU and one NIC per node on a 2-tier fat-tree with `hosts_per_leaf` NICs per leaf, 100 Gb/s
// everywhere, at `oversubscription`:1.
inline std::string fat_tree_json(int hosts_per_leaf, int oversubscription, int tiers = 2,
                                 int leaves_per_pod = 0) {
  std::string pods = tiers == 3 ? ", \"leaves_per_pod\": " + std::to_string(leaves_per_pod) : "";
  return R"({"schema_version": 1, "kind": "topology", "name": "tiny-fat-tree",
    "description": "one GPU per node", "gpu": "H100", "sources": ["test"],
    "node": {"generator": "pcie", "gpus": 1, "pcie": {"kind": "pcie5", "latency_ns": 100},
             "pcie_switches": 1, "cpus": 1, "nics": 1},
    "fabric": {"type": "fat-tree", "tiers": )" +
         std::to_string(tiers) + R"(, "hosts_per_leaf": )" + std::to_string(hosts_per_leaf) + pods +
         R"(, "oversubscription": )" + std::to_string(oversubscription) + R"(,
      "host_link": {"kind": "ethernet", "bandwidth_Gbps": 100, "latency_ns": 500},
      "switch_link": {"kind": "ethernet", "bandwidth_Gbps": 100, "latency_ns": 300}}})";
}

inline TopologySpec parse(const std::string& json) {
  auto spec = parse_topology(json, "test.json");
  if (!spec) throw std::runtime_error(spec.status().message());
  return *spec;
}

}  // namespace planner::topo::testing
