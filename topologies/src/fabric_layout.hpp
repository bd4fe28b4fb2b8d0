// How many switches of each tier a fabric has for a node count, and where each NIC plugs in.
// Internal to planner::topo: check_fabric() and Cluster::build() share it.
#pragma once

#include "planner/topo/topology_spec.hpp"

namespace planner::topo::detail {

// Upper tiers exist only where they carry traffic: no spines above a single leaf, no cores above a
// single pod.
struct FabricLayout {
  int nics_per_node = 0;
  int leaves = 0;
  int pods = 0;  // 3 tiers: pods with leaves; otherwise 1 when there are leaves
  int spines = 0;
  int cores = 0;
};

FabricLayout fabric_layout(const TopologySpec& spec, int nodes);

// The leaf that NIC `nic` (0-based within its node) of `node` plugs into.
int leaf_of(const FabricSpec& fabric, int nics_per_node, int node, int nic);

// Ceiling division for positive ints.
constexpr int ceil_div(long long a, long long b) {
  return static_cast<int>((a + b - 1) / b);
}

}  // namespace planner::topo::detail
