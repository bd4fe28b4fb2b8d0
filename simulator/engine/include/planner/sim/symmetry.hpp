// Symmetry: the traffic of the ranks a representative simulation does not simulate.
//
// Ranks that differ only in their tp, cp, ep or dp index run the same ops at the same times
// (program.hpp: ranks of one stage run identical op lists), so a simulation may time a subset of
// ranks (one per stage, or one data-parallel replica). Their collectives and messages still share
// the fabric with everybody else's. For a collective group or a send/recv pair of the simulated
// ranks, the *images* are the groups (pairs) obtained by translating every member along the grid
// axes the group does not span (not pp): e.g. the dp groups of the other tp ranks of the same
// stage, the tp groups of the other replicas, the pipeline sends of every other (tp, cp, dp)
// index. Images holding a simulated rank are simulated themselves; the others are background
// copies, dealt out round-robin to the simulated images (sorted by smallest member) so each copy
// loads the fabric exactly once. Copies confined to one island (node or NVLink domain) that holds
// no simulated GPU are dropped: they share no link with the simulated traffic.
// Groups over "ep" and "edp" (expert data parallel) translate in the expert grid, every other
// group and every pair in the dense grid.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "planner/core/parallel_config.hpp"
#include "planner/core/program.hpp"
#include "planner/core/rank_grid.hpp"
#include "planner/core/status.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::sim {

class Symmetry {
 public:
  // `gpu_of_rank` maps every rank to its GPU; `simulated` lists the simulated ranks.
  static Result<Symmetry> create(const ParallelConfig& parallel, const topo::Cluster& cluster,
                                 std::span<const int> gpu_of_rank, std::span<const int> simulated);

  // Background copies assigned to `group`: each a list of ranks in the group's order.
  std::vector<std::vector<int>> group_copies(const CommGroup& group) const;
  // Background copies assigned to the message src → dst: (src, dst) rank pairs.
  std::vector<std::pair<int, int>> p2p_copies(int src, int dst) const;

 private:
  Symmetry(RankGrid dense, RankGrid expert)
      : dense_(std::move(dense)), expert_(std::move(expert)) {}
  bool simulated(int rank) const;
  bool keep(std::span<const int> ranks) const;
  // Offsets over the free axes, translating `rank`.
  int translate(const RankGrid& grid, int rank, std::span<const Axis> axes,
                std::span<const int> offset) const;

  RankGrid dense_;
  RankGrid expert_;
  const topo::Cluster* cluster_ = nullptr;
  std::vector<int> gpu_of_rank_;
  std::vector<char> simulated_;
  std::vector<char> island_simulated_;
};

}  // namespace planner::sim
