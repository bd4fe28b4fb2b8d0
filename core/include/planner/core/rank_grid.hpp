// The rank grid: how global ranks map onto parallelism axes (after Megatron-core's RankGenerator).
//
// Sizes for the axes tp, cp, ep, dp, pp and an order string listing them innermost first (default
// "tp-cp-ep-dp-pp"): the first axis in the order varies fastest as the rank increases.
//
// Worked example: 8 ranks, order "tp-pp-dp", sizes tp=2, pp=2, dp=2 (cp = ep = 1):
//   rank = tp_index + 2 x pp_index + 4 x dp_index
//   tp groups [[0,1],[2,3],[4,5],[6,7]]
//   pp groups [[0,2],[1,3],[4,6],[5,7]]
//   dp groups [[0,4],[1,5],[2,6],[3,7]]
//   tp-pp groups [[0,1,2,3],[4,5,6,7]]
// (tests/core/rank_grid_test.cpp checks exactly this.)
//
// Groups over several axes ("dp-cp", "tp-pp") hold the ranks that share every other axis' index.
// Groups are listed by their smallest member; ranks inside a group ascend along the grid order.
//
// A ParallelConfig yields two grids, as in Megatron-core (parallel_state.initialize_model_parallel:
// decoder_rank_generator and expert_decoder_rank_generator): the dense grid (tp, cp, dp, pp; ep =
// 1) for attention, dense MLPs and shared experts, and the expert grid for routed experts, which
// regroups the tp x cp x dp ranks of each pipeline stage as etp x ep x edp (tp = etp, cp = 1, ep,
// dp = edp = tp x cp x dp / (etp x ep), pp) over the same order string. Its "tp" groups are the
// expert tensor parallel groups, "ep" the expert parallel (all-to-all) groups and "dp" the expert
// data parallel groups (gradients of expert weights). Both grids must put every rank on the same
// pipeline stage (Megatron-core asserts it; check_parallel() does for MoE models).
//
// Worked example (tests/core/rank_grid_test.cpp checks it): 16 ranks, order "tp-cp-ep-dp-pp",
// tp=2, dp=4, pp=2, and experts with ep=4, etp=1, so edp = 2·4 / (1·4) = 2.
//   dense grid:  rank = tp_index + 2 x dp_index + 8 x pp_index
//                tp groups [[0,1],[2,3],...,[14,15]]
//                dp groups [[0,2,4,6],[1,3,5,7],[8,10,12,14],[9,11,13,15]]
//   expert grid: rank = ep_index + 4 x edp_index + 8 x pp_index (etp = 1 adds no stride)
//                ep groups  [[0,1,2,3],[4,5,6,7],[8,9,10,11],[12,13,14,15]]
//                edp groups [[0,4],[1,5],[2,6],[3,7],[8,12],[9,13],[10,14],[11,15]]
//   An ep group holds tensor-parallel partners (0 and 1) and data-parallel replicas (0 and 2):
//   expert parallelism is carved out of tp x dp when etp < tp. With etp = tp = 2 and ep = 4 the
//   same ranks give etp groups [[0,1],...], ep groups [[0,2,4,6],[1,3,5,7],...] (the dense dp
//   groups) and edp groups of one rank.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/parallel_config.hpp"
#include "planner/core/status.hpp"

namespace planner {

enum class Axis { kTp = 0, kCp = 1, kEp = 2, kDp = 3, kPp = 4 };
inline constexpr int kNumAxes = 5;

std::string_view to_string(Axis axis);

struct AxisSizes {
  int tp = 1;
  int cp = 1;
  int ep = 1;
  int dp = 1;
  int pp = 1;
  int& operator[](Axis a);
  int operator[](Axis a) const;
};

class RankGrid {
 public:
  // Fails when a size is < 1, the order does not name each of tp, cp, ep, dp, pp exactly once (axes
  // of size 1 may be left out), or the world size overflows.
  static Result<RankGrid> create(const AxisSizes& sizes,
                                 std::string_view order = kDefaultRankOrder);
  static Result<RankGrid> dense(const ParallelConfig& p);
  // Fails when etp x ep does not divide tp x cp x dp.
  static Result<RankGrid> expert(const ParallelConfig& p);
  // True when every rank has the same pipeline stage in both grids.
  static bool same_stages(const RankGrid& dense, const RankGrid& expert);

  int world_size() const { return world_; }
  int size(Axis a) const { return sizes_[a]; }
  const std::string& order() const { return order_string_; }

  // Index of `rank` along `axis`.
  int coordinate(int rank, Axis axis) const;
  // The rank with the given index on every axis.
  int rank_at(const AxisSizes& coordinates) const;

  // Groups along the '-'-separated axes in `axes` ("dp", "tp-pp", "dp-cp"); every rank appears in
  // exactly one group. Fails on an unknown axis name.
  Result<std::vector<std::vector<int>>> groups(std::string_view axes) const;
  // The group of `rank` along `axes`.
  Result<std::vector<int>> group_of(int rank, std::string_view axes) const;

 private:
  AxisSizes sizes_;
  std::array<Axis, kNumAxes> order_{};  // innermost first
  std::array<int, kNumAxes> stride_{};  // indexed by Axis
  std::string order_string_;
  int world_ = 1;
};

}  // namespace planner
