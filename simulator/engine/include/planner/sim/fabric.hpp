// The resources the flow-level network shares: the cluster's directed links, with equal-cost
// alternatives pooled (balanced ECMP).
//
// In a switched fabric a flow between two leaves can take any of the equal-cost uplinks, spines
// and cores; which one a static hash picks is an accident that adaptive routing (InfiniBand AR),
// packet spraying and NCCL's many queue pairs per peer largely undo. The balanced model pools the
// alternatives into one resource whose capacity is their sum, so load spreads evenly:
//   * a leaf's uplinks (to the spines of its pod) are one resource, and so are the downlinks into
//     a leaf from those spines;
//   * the spine-to-core links of a pod are one resource, and so are the core-to-spine links into
//     a pod (a pod: the spines joined to the same leaves);
//   * NICs serving the same GPUs of a node (several NICs per GPU, as on AWS p5) are
//     interchangeable: their links to the same device are one resource.
// Every other link is a resource of its own. With `balanced` off, every link is its own resource
// and routes follow the topology's hashed ECMP choice.
// Capacity = link bandwidth × the profile's efficiency for its kind, summed over a pool.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/core/hardware_profile.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::sim {

struct Fabric {
  std::vector<std::int32_t> resource_of_link;  // by LinkId
  std::vector<double> capacity;                // by resource, usable bytes/s

  static Fabric build(const topo::Cluster& cluster, const HardwareProfile& profile,
                      bool balanced = true);
};

}  // namespace planner::sim
