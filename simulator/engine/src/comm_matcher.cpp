#include "planner/sim/comm_matcher.hpp"

#include <algorithm>

namespace planner::sim {

namespace {

constexpr std::uint32_t kNoOp = ~std::uint32_t{0};

}  // namespace

CommMatcher::CommMatcher(const StepProgram& program, std::span<const std::int32_t> rank_index)
    : program_(program), rank_index_(rank_index) {
  group_lowered_.reserve(program.groups().size());
  for (const CommGroup& g : program.groups()) {
    int n = 0;
    for (int r : g.ranks) {
      if (r >= 0 && r < program.total_ranks() && rank_index_[static_cast<std::size_t>(r)] >= 0) ++n;
    }
    group_lowered_.push_back(n);
  }
  find_mirrors();
}

void CommMatcher::find_mirrors() {
  const auto& ranks = program_.ranks();
  auto unlowered = [&](int peer) {
    return peer < program_.total_ranks() && rank_index_[static_cast<std::size_t>(peer)] < 0;
  };
  mirror_.resize(ranks.size());
  for (std::size_t ri = 0; ri < ranks.size(); ++ri) {
    const RankProgram& r = ranks[ri];
    // (tag, mirror) of the rank's sends to unlowered peers, sorted by tag.
    std::vector<std::pair<std::uint32_t, std::int32_t>> tags;
    for (const Op& op : r.ops()) {
      if (program_.desc(op).kind == OpKind::kSend && unlowered(op.peer))
        tags.emplace_back(op.tag, 0);
    }
    std::sort(tags.begin(), tags.end());
    tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
    for (auto& [tag, mirror] : tags) {
      mirror = static_cast<std::int32_t>(mirrors_.size());
      mirrors_.emplace_back();
    }
    std::vector<std::int32_t>& of_op = mirror_[ri];
    of_op.assign(r.size(), -1);
    for (std::size_t i = 0; i < r.size() && !tags.empty(); ++i) {
      const Op& op = r.op(i);
      if (!is_p2p(program_.desc(op).kind)) continue;
      const auto m = std::lower_bound(tags.begin(), tags.end(), std::make_pair(op.tag, 0));
      if (m != tags.end() && m->first == op.tag) of_op[i] = m->second;
    }
  }
}

MatchId CommMatcher::open() {
  MatchId id = 0;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<MatchId>(matches_.size());
    matches_.emplace_back();
  }
  Match& m = matches_[id];
  m.members.clear();
  m.mirrored = false;
  return id;
}

void CommMatcher::arrive(RankOp op, std::vector<MatchId>& ready) {
  const Op& o = program_.ranks()[op.rank].op(op.op);
  if (is_collective(program_.desc(o).kind)) {
    arrive_collective(op, ready);
  } else {
    arrive_p2p(op, ready);
  }
}

void CommMatcher::arrive_collective(RankOp op, std::vector<MatchId>& ready) {
  const Op& o = program_.ranks()[op.rank].op(op.op);
  const int lowered = group_lowered_[static_cast<std::size_t>(o.group)];
  if (lowered == 1) {
    // The only lowered member: nobody to wait for.
    const MatchId id = open();
    matches_[id].members.push_back(op);
    matches_[id].trigger = op;
    ready.push_back(id);
    return;
  }
  const std::pair<std::uint64_t, std::uint64_t> key{static_cast<std::uint64_t>(o.group),
                                                    o.id.raw()};
  auto it = pending_.find(key);
  if (it == pending_.end()) it = pending_.emplace(key, open()).first;
  const MatchId id = it->second;
  Match& m = matches_[id];
  m.members.push_back(op);
  if (static_cast<int>(m.members.size()) == lowered) {
    pending_.erase(it);
    m.trigger = op;
    ready.push_back(id);
  }
}

void CommMatcher::arrive_p2p(RankOp op, std::vector<MatchId>& ready) {
  const RankProgram& r = program_.ranks()[op.rank];
  const Op& o = r.op(op.op);
  const bool send = program_.desc(o).kind == OpKind::kSend;
  const bool peer_lowered =
      o.peer < program_.total_ranks() && rank_index_[static_cast<std::size_t>(o.peer)] >= 0;
  if (!peer_lowered) {
    const std::int32_t mi = mirror_[op.rank][op.op];
    if (mi < 0) {
      arrive_alone(op, op, false, ready);
      return;
    }
    Mirror& m = mirrors_[static_cast<std::size_t>(mi)];
    if (send) {
      m.send_started = true;
      if (m.waiting_recv != kNoOp) {
        const RankOp recv{op.rank, m.waiting_recv};
        m.waiting_recv = kNoOp;
        arrive_alone(recv, op, true, ready);
      }
    } else if (!m.send_started) {
      m.waiting_recv = op.op;
      return;
    }
    arrive_alone(op, op, false, ready);
    return;
  }
  const int src = send ? r.rank() : o.peer;
  const int dst = send ? o.peer : r.rank();
  const std::pair<std::uint64_t, std::uint64_t> key{
      (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
          static_cast<std::uint32_t>(dst),
      o.tag};
  auto it = posted_.find(key);
  if (it == posted_.end()) {
    posted_.emplace(key, op);
    return;
  }
  const MatchId id = open();
  Match& m = matches_[id];
  m.members.push_back(it->second);
  m.members.push_back(op);
  m.trigger = op;
  posted_.erase(it);
  ready.push_back(id);
}

void CommMatcher::arrive_alone(RankOp op, RankOp trigger, bool mirrored,
                               std::vector<MatchId>& ready) {
  const MatchId id = open();
  Match& m = matches_[id];
  m.members.push_back(op);
  m.trigger = trigger;
  m.mirrored = mirrored;
  ready.push_back(id);
}

}  // namespace planner::sim
