// The point-to-point flows one step of a collective algorithm puts on the network, with their
// routes, and how heavily they load each link.
//
// `group` lists GPUs in the collective's rank order (member i is the group's rank i).
//   ring                 every step: member i sends to member (i + 1) mod n. A ring all-reduce
//                        repeats this 2(n - 1) times, all-gather and reduce-scatter n - 1 times,
//                        so one step pattern describes them all (steps = 1).
//   recursive-doubling   step s (0 <= s < log2 n): member i exchanges with member i XOR 2^s
//                        (halving-doubling all-reduce; n must be a power of two).
//   pairwise             step s (0 <= s < n - 1): member i sends to member (i + s + 1) mod n
//                        (all-to-all as n - 1 shifted exchanges).
// Each flow's route is Cluster::path() with a hash of (src, dst, channel), so flows of different
// channels may take different equal-cost routes, as NCCL's channels do.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::topo {

enum class StepPattern { kRing, kRecursiveDoubling, kPairwise };

struct Flow {
  int src_gpu = 0;
  int dst_gpu = 0;
  std::vector<LinkId> links;
};

// Distinct steps of the pattern for n members (ring 1, recursive doubling log2 n, pairwise n - 1);
// fails for recursive doubling when n is not a power of two, and for n < 1.
Result<int> step_count(StepPattern pattern, int n);

// The flows of step `step`. Fails on an out-of-range step or GPU, or a repeated GPU.
Result<std::vector<Flow>> step_flows(const Cluster& cluster, std::span<const int> group,
                                     StepPattern pattern, int step, std::uint64_t channel = 0);

// How many of `flows` cross each directed link, for the links crossed at least once (by id).
std::vector<std::pair<LinkId, int>> link_loads(std::span<const Flow> flows);

// The rate every flow gets when each link is shared equally among the flows crossing it: the
// smallest bandwidth / load over the crossed links (zero when no flow crosses a link). A bound the
// simulator's max-min fair sharing meets with equality when one link limits every flow.
Bandwidth equal_share_rate(const Cluster& cluster, std::span<const Flow> flows);

}  // namespace planner::topo

namespace planner {

template <>
struct EnumTraits<topo::StepPattern> {
  static constexpr std::string_view kWhat = "step pattern";
  static constexpr std::array<std::pair<topo::StepPattern, std::string_view>, 3> kNames{{
      {topo::StepPattern::kRing, "ring"},
      {topo::StepPattern::kRecursiveDoubling, "recursive-doubling"},
      {topo::StepPattern::kPairwise, "pairwise"},
  }};
};

}  // namespace planner
