#include "planner/core/rank_grid.hpp"

#include <algorithm>
#include <limits>

namespace planner {
namespace {

constexpr std::array<std::string_view, kNumAxes> kAxisNames{"tp", "cp", "ep", "dp", "pp"};

std::optional<Axis> parse_axis(std::string_view name) {
  for (int i = 0; i < kNumAxes; ++i) {
    if (kAxisNames[static_cast<std::size_t>(i)] == name) return static_cast<Axis>(i);
  }
  return std::nullopt;
}

std::vector<std::string_view> split_dashes(std::string_view s) {
  std::vector<std::string_view> parts;
  while (true) {
    const auto dash = s.find('-');
    parts.push_back(s.substr(0, dash));
    if (dash == std::string_view::npos) break;
    s.remove_prefix(dash + 1);
  }
  return parts;
}

}  // namespace

std::string_view to_string(Axis axis) {
  return kAxisNames[static_cast<std::size_t>(axis)];
}

int& AxisSizes::operator[](Axis a) {
  switch (a) {
    case Axis::kTp:
      return tp;
    case Axis::kCp:
      return cp;
    case Axis::kEp:
      return ep;
    case Axis::kDp:
      return dp;
    case Axis::kPp:
      return pp;
  }
  return tp;
}

int AxisSizes::operator[](Axis a) const {
  return const_cast<AxisSizes&>(*this)[a];
}

Result<RankGrid> RankGrid::create(const AxisSizes& sizes, std::string_view order) {
  RankGrid g;
  g.sizes_ = sizes;
  std::int64_t world = 1;
  for (int i = 0; i < kNumAxes; ++i) {
    const Axis a = static_cast<Axis>(i);
    if (sizes[a] < 1) {
      return Status::invalid_input("rank grid: " + std::string(to_string(a)) +
                                   " must be >= 1, got " + std::to_string(sizes[a]));
    }
    world *= sizes[a];
    if (world > std::numeric_limits<int>::max()) {
      return Status::invalid_input("rank grid: world size overflows");
    }
  }
  std::array<bool, kNumAxes> listed{};
  int n = 0;
  for (std::string_view name : split_dashes(order)) {
    auto axis = parse_axis(name);
    if (!axis) {
      return Status::invalid_input("rank grid order \"" + std::string(order) +
                                   "\": unknown axis \"" + std::string(name) +
                                   "\" (axes are tp, cp, ep, dp, pp)");
    }
    if (listed[static_cast<std::size_t>(*axis)]) {
      return Status::invalid_input("rank grid order \"" + std::string(order) + "\": axis \"" +
                                   std::string(name) + "\" appears twice");
    }
    listed[static_cast<std::size_t>(*axis)] = true;
    g.order_[static_cast<std::size_t>(n++)] = *axis;
  }
  // Axes of size 1 may be omitted from the order; they go outermost, where they change nothing.
  for (int i = 0; i < kNumAxes; ++i) {
    if (listed[static_cast<std::size_t>(i)]) continue;
    const Axis a = static_cast<Axis>(i);
    if (sizes[a] != 1) {
      return Status::invalid_input("rank grid order \"" + std::string(order) + "\" leaves out " +
                                   std::string(to_string(a)) + ", whose size is " +
                                   std::to_string(sizes[a]));
    }
    g.order_[static_cast<std::size_t>(n++)] = a;
  }
  int stride = 1;
  for (Axis a : g.order_) {
    g.stride_[static_cast<std::size_t>(a)] = stride;
    stride *= sizes[a];
  }
  g.world_ = static_cast<int>(world);
  g.order_string_ = std::string(order);
  return g;
}

Result<RankGrid> RankGrid::dense(const ParallelConfig& p) {
  AxisSizes s;
  s.tp = p.tp;
  s.cp = p.cp;
  s.ep = 1;
  s.dp = p.dp;
  s.pp = p.pp;
  return create(s, p.order);
}

Result<RankGrid> RankGrid::expert(const ParallelConfig& p) {
  const int etp = p.expert_tp();
  const std::int64_t stage = static_cast<std::int64_t>(p.tp) * p.cp * p.dp;
  const std::int64_t group = static_cast<std::int64_t>(etp) * p.ep;
  if (p.ep < 1 || etp < 1 || stage % group != 0) {
    return Status::invalid_input("rank grid: etp x ep (" + std::to_string(etp) + " x " +
                                 std::to_string(p.ep) + ") must divide tp x cp x dp (" +
                                 std::to_string(stage) + ")");
  }
  AxisSizes s;
  s.tp = etp;
  s.cp = 1;
  s.ep = p.ep;
  s.dp = static_cast<int>(stage / group);
  s.pp = p.pp;
  return create(s, p.order);
}

bool RankGrid::same_stages(const RankGrid& dense, const RankGrid& expert) {
  if (dense.world_size() != expert.world_size()) return false;
  const int pp = dense.size(Axis::kPp);
  if (expert.size(Axis::kPp) != pp) return false;
  if (pp == 1) return true;
  // Rank (r / stride) % pp's stage in each grid: the same for every rank exactly when the strides
  // are (with unequal ones, the smaller stride's rank is on stage 1 in its grid and 0 in the
  // other).
  const auto i = static_cast<std::size_t>(Axis::kPp);
  return dense.stride_[i] == expert.stride_[i];
}

int RankGrid::coordinate(int rank, Axis axis) const {
  const auto i = static_cast<std::size_t>(axis);
  return (rank / stride_[i]) % sizes_[axis];
}

int RankGrid::rank_at(const AxisSizes& coordinates) const {
  int rank = 0;
  for (int i = 0; i < kNumAxes; ++i) {
    const Axis a = static_cast<Axis>(i);
    rank += coordinates[a] * stride_[static_cast<std::size_t>(i)];
  }
  return rank;
}

Result<std::vector<int>> RankGrid::group_of(int rank, std::string_view axes) const {
  std::array<bool, kNumAxes> in_group{};
  for (std::string_view name : split_dashes(axes)) {
    auto axis = parse_axis(name);
    if (!axis) {
      return Status::invalid_input("unknown rank-grid axis \"" + std::string(name) + "\" in \"" +
                                   std::string(axes) + "\" (axes are tp, cp, ep, dp, pp)");
    }
    in_group[static_cast<std::size_t>(*axis)] = true;
  }
  // Enumerate the masked axes in grid order (innermost first), others fixed at rank's coordinates.
  int base = rank;
  std::vector<Axis> varying;
  for (Axis a : order_) {
    if (in_group[static_cast<std::size_t>(a)]) {
      base -= coordinate(rank, a) * stride_[static_cast<std::size_t>(a)];
      varying.push_back(a);
    }
  }
  std::vector<int> group{base};
  for (Axis a : varying) {
    const int n = sizes_[a];
    const int stride = stride_[static_cast<std::size_t>(a)];
    std::vector<int> next;
    next.reserve(group.size() * static_cast<std::size_t>(n));
    for (int k = 0; k < n; ++k) {
      for (int r : group)
        next.push_back(r + k * stride);
    }
    group = std::move(next);
  }
  return group;
}

Result<std::vector<std::vector<int>>> RankGrid::groups(std::string_view axes) const {
  std::vector<std::vector<int>> out;
  std::vector<bool> assigned(static_cast<std::size_t>(world_), false);
  for (int r = 0; r < world_; ++r) {
    if (assigned[static_cast<std::size_t>(r)]) continue;
    PLANNER_ASSIGN_OR_RETURN(std::vector<int> g, group_of(r, axes));
    for (int member : g)
      assigned[static_cast<std::size_t>(member)] = true;
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace planner
