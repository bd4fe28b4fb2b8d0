#include "planner/topo/placement.hpp"

#include <string>

namespace planner::topo {
namespace {

Status check_size(const RankGrid& grid, const Cluster& cluster) {
  if (grid.world_size() > cluster.num_gpus()) {
    return Status::invalid_input("placement: the rank grid has " +
                                 std::to_string(grid.world_size()) + " ranks but the cluster has " +
                                 std::to_string(cluster.num_gpus()) + " GPUs");
  }
  return Status::ok();
}

}  // namespace

Result<Placement> Placement::by_order(const RankGrid& grid, const Cluster& cluster,
                                      std::string_view order) {
  PLANNER_RETURN_IF_ERROR(check_size(grid, cluster));
  AxisSizes sizes;
  for (int i = 0; i < kNumAxes; ++i)
    sizes[static_cast<Axis>(i)] = grid.size(static_cast<Axis>(i));
  // A grid with the same sizes in the placement order numbers the GPUs.
  auto layout = RankGrid::create(sizes, order);
  if (!layout) return layout.status().with_context("placement order");
  Placement p;
  p.gpu_of_rank_.resize(static_cast<std::size_t>(grid.world_size()));
  for (int rank = 0; rank < grid.world_size(); ++rank) {
    AxisSizes coords;
    for (int i = 0; i < kNumAxes; ++i)
      coords[static_cast<Axis>(i)] = grid.coordinate(rank, static_cast<Axis>(i));
    p.gpu_of_rank_[rank] = layout->rank_at(coords);
  }
  return p;
}

Result<Placement> Placement::explicit_map(const RankGrid& grid, const Cluster& cluster,
                                          std::vector<int> gpu_of_rank) {
  PLANNER_RETURN_IF_ERROR(check_size(grid, cluster));
  if (static_cast<int>(gpu_of_rank.size()) != grid.world_size()) {
    return Status::invalid_input("placement: the map lists " + std::to_string(gpu_of_rank.size()) +
                                 " GPUs for " + std::to_string(grid.world_size()) + " ranks");
  }
  std::vector<int> owner(static_cast<std::size_t>(cluster.num_gpus()), -1);
  for (std::size_t rank = 0; rank < gpu_of_rank.size(); ++rank) {
    const int g = gpu_of_rank[rank];
    if (g < 0 || g >= cluster.num_gpus()) {
      return Status::invalid_input("placement: rank " + std::to_string(rank) + " maps to GPU " +
                                   std::to_string(g) + ", outside 0.." +
                                   std::to_string(cluster.num_gpus() - 1));
    }
    int& o = owner[g];
    if (o >= 0) {
      return Status::invalid_input("placement: ranks " + std::to_string(o) + " and " +
                                   std::to_string(rank) + " both map to GPU " + std::to_string(g));
    }
    o = static_cast<int>(rank);
  }
  Placement p;
  p.gpu_of_rank_ = std::move(gpu_of_rank);
  return p;
}

std::vector<int> Placement::gpus(std::span<const int> ranks) const {
  std::vector<int> out;
  out.reserve(ranks.size());
  for (int r : ranks)
    out.push_back(gpu(r));
  return out;
}

int place_in_domain_blocks(TopologySpec& topology, int nodes) {
  if (!topology.nvlink_domain) return 0;
  const int rack = topology.nvlink_domain->nodes;
  if (rack <= 1 || nodes <= rack) return 0;
  for (int block = rack; 2 * block >= rack; --block) {
    if (nodes % block != 0) continue;
    if (block == rack) return 0;
    topology.nvlink_domain->nodes = block;
    return block;
  }
  return 0;
}

}  // namespace planner::topo
