// Placement: which GPU each rank of a rank grid runs on.
//
// GPUs are numbered node-major (Cluster: gpu = node * gpus_per_node + local rank), so filling GPUs
// in order fills node 0 first. place() fills GPUs along a placement order of the axes, innermost
// first, which may differ from the grid's own rank order:
//   gpu(rank) = sum over axes a of coordinate(rank, a) * stride(a), strides from the order.
// The default order "tp-cp-ep-dp-pp" keeps a tp group on consecutive GPUs (one node when tp divides
// the GPUs per node), then cp, ep and dp, with pipeline stages outermost.
// Example: tp=2, dp=2, pp=2 on two 4-GPU nodes: tp groups {0,1} {2,3} {4,5} {6,7} by GPU, pp
// stage 0 on node 0 and stage 1 on node 1.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "planner/core/parallel_config.hpp"
#include "planner/core/rank_grid.hpp"
#include "planner/core/status.hpp"
#include "planner/topo/cluster.hpp"
#include "planner/topo/topology_spec.hpp"

namespace planner::topo {

class Placement {
 public:
  // Fills GPUs along `order` (axes innermost first, as in RankGrid). Fails when the grid needs
  // more GPUs than the cluster has or the order is malformed.
  static Result<Placement> by_order(const RankGrid& grid, const Cluster& cluster,
                                    std::string_view order = kDefaultRankOrder);
  // An explicit map: gpu_of_rank[rank] for every rank; GPUs must be in range and distinct.
  static Result<Placement> explicit_map(const RankGrid& grid, const Cluster& cluster,
                                        std::vector<int> gpu_of_rank);

  int gpu(int rank) const { return gpu_of_rank_[rank]; }
  const std::vector<int>& gpu_of_rank() const { return gpu_of_rank_; }
  // The GPUs of a group of ranks, in the group's order.
  std::vector<int> gpus(std::span<const int> ranks) const;

 private:
  std::vector<int> gpu_of_rank_;
};

// A job larger than one rack-scale NVLink domain (GB200 NVL72: 18 trays of 4 GPUs) is placed in
// equal blocks of whole nodes, one block per domain: the largest block of at most the domain's
// nodes (and at least half of them) that divides the job's nodes, so that the power-of-two
// groups of a parallel layout do not straddle racks (Slurm's topology/block plugin with
// --segment; NVIDIA's DeepSeek-V3 GB200 guide, reference data moe_runs.json: "every 32 GPUs (8
// nodes) in one NVL72 rack"). The topology's NVLink domain shrinks to the block; its scale-out
// fabric is unchanged. Returns the block in nodes, or 0 where the topology is left as it is (no
// domain beyond a node, a job within one domain, or no such block: 37 nodes fill racks of 18 in
// order).
int place_in_domain_blocks(TopologySpec& topology, int nodes);

}  // namespace planner::topo
