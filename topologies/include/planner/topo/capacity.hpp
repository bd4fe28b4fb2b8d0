// Capacity queries on a cluster graph, computed as maximum flows (Boost.Graph push-relabel) over
// the directed links, per direction. As in routing, GPUs and NICs never forward traffic: a GPU
// only sends (when it is a source) or receives (when it is a sink), and flows leave or enter a node
// only through its NICs.
#pragma once

#include <span>

#include "planner/core/status.hpp"
#include "planner/core/units.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::topo {

// How fast the members of a group can move data, per member and per direction.
//   islands      how many islands (Cluster::island_of: node, or rack-scale NVLink domain) the
//                group spans.
//   intra        the smallest, over members sharing an island with others, of the max flow from the
//                member to the other members of its island. It uses NVLink when NVLink (with
//                NVSwitches) reaches every other member, else PCIe and CPU links only, as NCCL
//                picks one transport (intra_class says which). Zero when no island holds two
//                members or no such route exists.
//   injection    the smallest, over nodes, of the max flow from the node's members out through
//                the NICs serving them, divided by the members on that node: the per-GPU share of
//                the NICs when every member sends off-node at once. Zero within one island.
//   fabric       the max flow from the members on the first half of the group's islands to the
//                members on the rest, divided by the smaller side's member count: what the
//                scale-out fabric (oversubscription included) leaves each member. Zero within one
//                island.
//   bottleneck   the smallest figure that applies (intra when some island holds two members;
//                injection and fabric when the group spans islands). Zero for a single GPU.
// Example: an 8-GPU group in one DGX H100 has intra = 450 GB/s (NVLink4, per direction); a 16-GPU
// group over two DGX H100 nodes has injection = fabric = 50 GB/s (one 400 Gb/s NIC per GPU).
struct GroupBandwidth {
  int islands = 0;
  Bandwidth intra;
  LinkClass intra_class = LinkClass::kNvlink;
  Bandwidth injection;
  Bandwidth fabric;
  Bandwidth bottleneck;
};

// Fails when a GPU index is out of range or repeated.
Result<GroupBandwidth> group_bandwidth(const Cluster& cluster, std::span<const int> gpus);

// The per-GPU share of the NICs when all of `gpus` send off-node at once: the smallest, over the
// nodes holding them, of (max flow from those GPUs through the NICs serving them) / (their count).
// Zero without a fabric.
Result<Bandwidth> injection_bandwidth(const Cluster& cluster, std::span<const int> gpus);

// Bisection bandwidth: the max flow from the first half of the GPUs (by index, so by node) to the
// second half, per direction. Zero for fewer than two GPUs.
Bandwidth bisection_bandwidth(const Cluster& cluster);

// The max flow, per direction, from GPUs `from` to GPUs `to` (disjoint) over the whole graph.
Result<Bandwidth> cut_bandwidth(const Cluster& cluster, std::span<const int> from,
                                std::span<const int> to);

}  // namespace planner::topo
