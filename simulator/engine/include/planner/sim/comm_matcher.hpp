// Matching of the communication ops of a step program's simulated ranks into transfers
// (program.hpp semantics):
//   * a collective starts when every simulated member of its group has issued it (the members
//     that were not lowered are taken to be symmetric and ready);
//   * a send and its receive start together once both are posted (matched by src, dst and tag);
//   * a message whose peer was not lowered starts at once, except a receive when the rank itself
//     sends a message with the same tag to an unlowered peer (a context-parallel ring): the
//     symmetric peer sends to this rank when this rank sends to its other neighbour, so the
//     receive starts with that send (a mirror of the rank's own send).
// A match is the set of ops that start together, with the op whose arrival started it (the last
// to arrive; for a receive started by its mirror, the rank's own send).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "planner/core/program.hpp"

namespace planner::sim {

// An op of a simulated rank: the rank's index in the program, the op's index in its rank.
struct RankOp {
  std::uint32_t rank = 0;
  std::uint32_t op = 0;
  bool operator==(const RankOp&) const = default;
};

using MatchId = std::uint32_t;

struct Match {
  std::vector<RankOp> members;  // in order of arrival
  RankOp trigger;               // whose arrival started it
  // The trigger is not a member: a receive started by the rank's own send to its other,
  // unlowered, neighbour (the peer's send, which mirrors it, was not simulated).
  bool mirrored = false;
};

class CommMatcher {
 public:
  // `rank_index` maps every rank of the program to its index in program.ranks(), or -1 when the
  // rank was not lowered.
  CommMatcher(const StepProgram& program, std::span<const std::int32_t> rank_index);

  // Op `op` of the rank at `rank` (a collective, a send or a receive) was issued. Appends the
  // matches that start now to `ready`, in the order they start.
  void arrive(RankOp op, std::vector<MatchId>& ready);

  const Match& match(MatchId id) const { return matches_[id]; }
  // The match's transfer finished: its id may be reused.
  void release(MatchId id) { free_.push_back(id); }
  // The largest id handed out, plus one.
  std::size_t capacity() const { return matches_.size(); }

 private:
  struct PairHash {
    std::size_t operator()(const std::pair<std::uint64_t, std::uint64_t>& k) const {
      return std::hash<std::uint64_t>()(k.first * 0x9e3779b97f4a7c15ull ^ k.second);
    }
  };
  // Per (rank, tag) of a send to an unlowered peer: whether it started, and a receive of the same
  // tag (from the other unlowered neighbour) waiting for it.
  struct Mirror {
    bool send_started = false;
    std::uint32_t waiting_recv = ~std::uint32_t{0};
  };

  void arrive_collective(RankOp op, std::vector<MatchId>& ready);
  void arrive_p2p(RankOp op, std::vector<MatchId>& ready);
  // A send or receive whose peer was not lowered (started by `trigger`).
  void arrive_alone(RankOp op, RankOp trigger, bool mirrored, std::vector<MatchId>& ready);
  MatchId open();
  // The mirrors of every rank's ops (-1: none), from the sends to unlowered peers.
  void find_mirrors();

  const StepProgram& program_;
  std::span<const std::int32_t> rank_index_;
  std::vector<int> group_lowered_;                 // lowered members per group
  std::vector<std::vector<std::int32_t>> mirror_;  // per rank index, per op
  std::vector<Mirror> mirrors_;
  std::vector<Match> matches_;
  std::vector<MatchId> free_;
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>, MatchId, PairHash> pending_;
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>, RankOp, PairHash> posted_;
};

}  // namespace planner::sim
