#include "planner/topo/collective_flows.hpp"

#include <algorithm>
#include <string>

#include "cluster_impl.hpp"

namespace planner::topo {

Result<int> step_count(StepPattern pattern, int n) {
  if (n < 1) return Status::invalid_input("a collective group needs at least one GPU");
  switch (pattern) {
    case StepPattern::kRing:
      return 1;
    case StepPattern::kRecursiveDoubling: {
      if ((n & (n - 1)) != 0) {
        return Status::invalid_input("recursive doubling needs a power-of-two group, got " +
                                     std::to_string(n) + " GPUs");
      }
      int steps = 0;
      while ((1 << steps) < n)
        ++steps;
      return steps;
    }
    case StepPattern::kPairwise:
      return n - 1;
  }
  return 0;
}

Result<std::vector<Flow>> step_flows(const Cluster& cluster, std::span<const int> group,
                                     StepPattern pattern, int step, std::uint64_t channel) {
  const int n = static_cast<int>(group.size());
  PLANNER_ASSIGN_OR_RETURN(const int steps, step_count(pattern, n));
  if (step < 0 || step >= std::max(steps, 1)) {
    return Status::invalid_input("step " + std::to_string(step) + " is out of range: the " +
                                 std::string(to_string(pattern)) + " pattern has " +
                                 std::to_string(steps) + " step(s) for " + std::to_string(n) +
                                 " GPUs");
  }
  std::vector<char> seen(static_cast<std::size_t>(cluster.num_gpus()), 0);
  for (int g : group) {
    if (g < 0 || g >= cluster.num_gpus() || seen[g]++) {
      return Status::invalid_input("GPU " + std::to_string(g) +
                                   " is out of range or repeated in the group");
    }
  }
  std::vector<Flow> flows;
  if (n < 2) return flows;
  flows.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    int peer = 0;
    switch (pattern) {
      case StepPattern::kRing:
        peer = (i + 1) % n;
        break;
      case StepPattern::kRecursiveDoubling:
        peer = i ^ (1 << step);
        break;
      case StepPattern::kPairwise:
        peer = (i + step + 1) % n;
        break;
    }
    Flow f;
    f.src_gpu = group[i];
    f.dst_gpu = group[peer];
    const std::uint64_t pair =
        (static_cast<std::uint64_t>(static_cast<std::uint32_t>(f.src_gpu)) << 32) |
        static_cast<std::uint32_t>(f.dst_gpu);
    cluster.append_path(f.src_gpu, f.dst_gpu, mix_hash(pair, channel), f.links);
    flows.push_back(std::move(f));
  }
  return flows;
}

std::vector<std::pair<LinkId, int>> link_loads(std::span<const Flow> flows) {
  std::vector<LinkId> all;
  for (const Flow& f : flows)
    all.insert(all.end(), f.links.begin(), f.links.end());
  std::sort(all.begin(), all.end());
  std::vector<std::pair<LinkId, int>> out;
  for (LinkId id : all) {
    if (!out.empty() && out.back().first == id) {
      ++out.back().second;
    } else {
      out.emplace_back(id, 1);
    }
  }
  return out;
}

Bandwidth equal_share_rate(const Cluster& cluster, std::span<const Flow> flows) {
  const auto loads = link_loads(flows);
  if (loads.empty()) return Bandwidth::zero();
  Bandwidth rate = Bandwidth::max();
  for (const auto& [id, load] : loads)
    rate = std::min(rate, cluster.link(id).bandwidth / load);
  return rate;
}

}  // namespace planner::topo
