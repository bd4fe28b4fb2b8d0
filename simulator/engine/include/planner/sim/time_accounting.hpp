// Where the time of a simulated step went: passes over the finished op timings of a run.
//
// Time buckets, per rank (exact: the buckets add up to the step time): at every instant the rank
// is computing (an op of its compute stream runs), else exposing communication of one axis (tp,
// cp, ep, pp, dp, or "other" for host work and host↔device copies; when several are in flight the
// first in that order is charged), else idle (pipeline bubbles and waiting for peers). An op
// occupies its stream from its start to its end: a compute op from its issue, a communication op
// from the moment its peers had arrived (waiting for them is idle time).
//
// The critical path is walked back from the last op to finish: each op's predecessor is the op
// whose end released it (the later of its stream predecessor and its dependencies, ties to the
// stream predecessor, then to the first dependency; for a collective or message that started on
// another member's arrival, that member, which ends with it; for a receive from an unsimulated
// peer that started with the rank's own send to its other neighbour, the mirror of the peer's
// send, the later of its own release and that send's), and each op on the path is charged the
// time from its predecessor's end to its own end. A receive waiting for its peer thus charges the
// wait to what held the peer back (the compute before the send), not to the receive.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "planner/core/program.hpp"
#include "planner/core/units.hpp"

namespace planner::sim {

// Where a rank's time goes; see the header.
enum class TimeBucket : std::uint8_t { kCompute, kTp, kCp, kEp, kPp, kDp, kOther, kIdle };
inline constexpr std::size_t kNumTimeBuckets = 8;
// The communication axes, in the order exposure is charged.
inline constexpr std::array<TimeBucket, 6> kCommBuckets{TimeBucket::kTp, TimeBucket::kCp,
                                                        TimeBucket::kEp, TimeBucket::kPp,
                                                        TimeBucket::kDp, TimeBucket::kOther};
// The bucket communication on `stream` is charged to (kCompute for the compute stream).
TimeBucket bucket_of(Stream stream);

// An op of a run, packed as (rank index << 32 | op index); kNoOp for none.
using PackedOp = std::uint64_t;
inline constexpr PackedOp kNoOp = ~PackedOp{0};
inline constexpr PackedOp pack_op(std::uint32_t rank_index, std::uint32_t op) {
  return (static_cast<PackedOp>(rank_index) << 32) | op;
}
// Set in started_by on a receive started by its rank's mirrored send (the op named).
inline constexpr PackedOp kByMirror = PackedOp{1} << 63;

// What a run recorded of one rank's ops (indexed by op, program order).
struct RankOpTimes {
  const RankProgram* program = nullptr;
  std::array<std::vector<std::uint32_t>, kNumStreams> stream_ops;  // the ops of each stream
  std::vector<Time> start;
  std::vector<Time> end;
  // For the critical path (empty when not tracked): the member whose arrival started the op's
  // collective or message when that was another op; for a receive started by the rank's mirrored
  // send, that send | kByMirror; else kNoOp.
  std::vector<PackedOp> started_by;
};

// The rank's buckets over [0, makespan].
std::array<Time, kNumTimeBuckets> bucket_times(const RankOpTimes& rank, Time makespan);

// Critical-path time charged to one kind of op ("bwd.mlp_up gemm"), or a bucket total.
struct PathEntry {
  std::string label;
  TimeBucket bucket = TimeBucket::kCompute;
  Time time;
  int ops = 0;
};

struct CriticalPath {
  std::array<Time, kNumTimeBuckets> buckets{};  // add up to the last op's end
  std::vector<PathEntry> top;                   // by time, at most `top` entries
};

// Walks the critical path of a run's ranks (their started_by recorded).
CriticalPath critical_path(const StepProgram& program, std::span<const RankOpTimes> ranks, int top);

}  // namespace planner::sim

namespace planner {

template <>
struct EnumTraits<sim::TimeBucket> {
  static constexpr std::string_view kWhat = "time bucket";
  static constexpr std::array<std::pair<sim::TimeBucket, std::string_view>, 8> kNames{{
      {sim::TimeBucket::kCompute, "compute"},
      {sim::TimeBucket::kTp, "tp"},
      {sim::TimeBucket::kCp, "cp"},
      {sim::TimeBucket::kEp, "ep"},
      {sim::TimeBucket::kPp, "pp"},
      {sim::TimeBucket::kDp, "dp"},
      {sim::TimeBucket::kOther, "other"},
      {sim::TimeBucket::kIdle, "idle"},
  }};
};

}  // namespace planner
