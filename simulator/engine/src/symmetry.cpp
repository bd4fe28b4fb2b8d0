#include "planner/sim/symmetry.hpp"

#include <algorithm>
#include <string_view>

#include "planner/sim/model_registry.hpp"

namespace planner::sim {
namespace {

constexpr Axis kTranslatable[] = {Axis::kTp, Axis::kCp, Axis::kEp, Axis::kDp};

struct GroupAxes {
  bool expert = false;
  std::vector<Axis> spanned;
};

// The grid and the axes a group spans, from CommGroup::axes (lowering.cpp's names).
GroupAxes parse_axes(std::string_view axes) {
  GroupAxes g;
  if (axes == "ep") return {true, {Axis::kEp}};
  if (axes == "edp") return {true, {Axis::kDp}};
  if (axes == "embedding") return {false, {Axis::kPp}};
  while (!axes.empty()) {
    const auto dash = axes.find('-');
    const std::string_view name = axes.substr(0, dash);
    for (int a = 0; a < kNumAxes; ++a) {
      if (to_string(static_cast<Axis>(a)) == name) g.spanned.push_back(static_cast<Axis>(a));
    }
    if (dash == std::string_view::npos) break;
    axes.remove_prefix(dash + 1);
  }
  return g;
}

// Calls f(offsets) for every combination of offsets along `axes` (mixed radix, first axis
// fastest), the all-zero combination first.
template <class F>
void for_each_offset(const RankGrid& grid, std::span<const Axis> axes, F&& f) {
  std::vector<int> offset(axes.size(), 0);
  while (true) {
    f(std::span<const int>(offset));
    std::size_t i = 0;
    for (; i < axes.size(); ++i) {
      if (++offset[i] < grid.size(axes[i])) break;
      offset[i] = 0;
    }
    if (i == axes.size()) return;
  }
}

template <class T, class Key>
std::vector<T> deal(std::vector<T> sim, std::vector<T> copies, const T& self, Key key) {
  auto by_key = [&](const T& a, const T& b) { return key(a) < key(b); };
  std::sort(sim.begin(), sim.end(), by_key);
  std::sort(copies.begin(), copies.end(), by_key);
  const auto pos = static_cast<std::size_t>(
      std::find_if(sim.begin(), sim.end(), [&](const T& x) { return key(x) == key(self); }) -
      sim.begin());
  std::vector<T> mine;
  if (sim.empty() || pos >= sim.size()) return mine;
  for (std::size_t i = pos; i < copies.size(); i += sim.size())
    mine.push_back(std::move(copies[i]));
  return mine;
}

}  // namespace

Result<Symmetry> Symmetry::create(const ParallelConfig& parallel, const topo::Cluster& cluster,
                                  std::span<const int> gpu_of_rank,
                                  std::span<const int> simulated) {
  PLANNER_ASSIGN_OR_RETURN(RankGrid dense, RankGrid::dense(parallel));
  PLANNER_ASSIGN_OR_RETURN(RankGrid expert, RankGrid::expert(parallel));
  Symmetry s(std::move(dense), std::move(expert));
  s.cluster_ = &cluster;
  s.gpu_of_rank_.assign(gpu_of_rank.begin(), gpu_of_rank.end());
  s.simulated_.assign(gpu_of_rank.size(), 0);
  s.island_simulated_.assign(static_cast<std::size_t>(cluster.num_islands()), 0);
  for (int r : simulated) {
    if (r < 0 || static_cast<std::size_t>(r) >= gpu_of_rank.size()) {
      return Status::internal("simulated rank " + std::to_string(r) + " has no GPU");
    }
    s.simulated_[static_cast<std::size_t>(r)] = 1;
    s.island_simulated_[static_cast<std::size_t>(
        cluster.island_of(gpu_of_rank[static_cast<std::size_t>(r)]))] = 1;
  }
  return s;
}

bool Symmetry::simulated(int rank) const {
  return rank >= 0 && static_cast<std::size_t>(rank) < simulated_.size() &&
         simulated_[static_cast<std::size_t>(rank)] != 0;
}

bool Symmetry::keep(std::span<const int> ranks) const {
  const int first = cluster_->island_of(gpu_of_rank_[static_cast<std::size_t>(ranks.front())]);
  for (int r : ranks) {
    const int island = cluster_->island_of(gpu_of_rank_[static_cast<std::size_t>(r)]);
    if (island != first || island_simulated_[static_cast<std::size_t>(island)]) return true;
  }
  return false;
}

int Symmetry::translate(const RankGrid& grid, int rank, std::span<const Axis> axes,
                        std::span<const int> offset) const {
  AxisSizes c;
  for (int a = 0; a < kNumAxes; ++a)
    c[static_cast<Axis>(a)] = grid.coordinate(rank, static_cast<Axis>(a));
  for (std::size_t i = 0; i < axes.size(); ++i)
    c[axes[i]] = (c[axes[i]] + offset[i]) % grid.size(axes[i]);
  return grid.rank_at(c);
}

std::vector<std::vector<int>> Symmetry::group_copies(const CommGroup& group) const {
  implements(SimModel::kSymmetricBackground);
  const GroupAxes g = parse_axes(group.axes);
  const RankGrid& grid = g.expert ? expert_ : dense_;
  for (int r : group.ranks) {
    if (r >= grid.world_size()) return {};
  }
  std::vector<Axis> free;
  for (Axis a : kTranslatable) {
    if (grid.size(a) > 1 && std::find(g.spanned.begin(), g.spanned.end(), a) == g.spanned.end()) {
      free.push_back(a);
    }
  }
  std::vector<std::vector<int>> sim, copies;
  std::vector<int> image;
  for_each_offset(grid, free, [&](std::span<const int> offset) {
    image.clear();
    bool any = false;
    for (int r : group.ranks) {
      image.push_back(translate(grid, r, free, offset));
      any = any || simulated(image.back());
    }
    if (any) {
      sim.push_back(image);
    } else if (keep(image)) {
      copies.push_back(image);
    }
  });
  const auto key = [](const std::vector<int>& v) { return *std::min_element(v.begin(), v.end()); };
  return deal(std::move(sim), std::move(copies), group.ranks, key);
}

std::vector<std::pair<int, int>> Symmetry::p2p_copies(int src, int dst) const {
  implements(SimModel::kSymmetricBackground);
  if (src >= dense_.world_size() || dst >= dense_.world_size()) return {};
  std::vector<Axis> free;
  for (Axis a : kTranslatable) {
    if (dense_.size(a) > 1) free.push_back(a);
  }
  std::vector<std::pair<int, int>> sim, copies;
  for_each_offset(dense_, free, [&](std::span<const int> offset) {
    const std::pair<int, int> image{translate(dense_, src, free, offset),
                                    translate(dense_, dst, free, offset)};
    if (simulated(image.first) || simulated(image.second)) {
      sim.push_back(image);
    } else {
      const int pair[] = {image.first, image.second};
      if (keep(pair)) copies.push_back(image);
    }
  });
  const auto key = [](const std::pair<int, int>& p) { return p; };
  return deal(std::move(sim), std::move(copies), std::pair<int, int>{src, dst}, key);
}

}  // namespace planner::sim
