#include "planner/sim/time_accounting.hpp"

#include <algorithm>
#include <map>

namespace planner::sim {

TimeBucket bucket_of(Stream stream) {
  switch (stream) {
    case Stream::kCompute:
      return TimeBucket::kCompute;
    case Stream::kTpComm:
      return TimeBucket::kTp;
    case Stream::kCpSend:
    case Stream::kCpRecv:
      return TimeBucket::kCp;
    case Stream::kEpComm:
      return TimeBucket::kEp;
    case Stream::kPpSend:
    case Stream::kPpRecv:
      return TimeBucket::kPp;
    case Stream::kDpComm:
    case Stream::kPsSend:
    case Stream::kPsRecv:
      return TimeBucket::kDp;
    case Stream::kHostToDevice:
    case Stream::kDeviceToHost:
    case Stream::kHost:
      return TimeBucket::kOther;
  }
  return TimeBucket::kOther;
}

namespace {

std::size_t comm_slot(Stream stream) {
  const TimeBucket b = bucket_of(stream);
  return static_cast<std::size_t>(std::find(kCommBuckets.begin(), kCommBuckets.end(), b) -
                                  kCommBuckets.begin());
}

// How much of [a, b) a rank's compute stream was busy, for intervals [a, b) given in order.
class ComputeCover {
 public:
  explicit ComputeCover(const RankOpTimes& rank)
      : rank_(rank), ops_(rank.stream_ops[static_cast<std::size_t>(Stream::kCompute)]) {}

  Time overlap(Time a, Time b) {
    while (next_ < ops_.size() && rank_.end[ops_[next_]] <= a)
      ++next_;
    Time out(0);
    for (std::size_t j = next_; j < ops_.size() && rank_.start[ops_[j]] < b; ++j)
      out += std::min(rank_.end[ops_[j]], b) - std::max(rank_.start[ops_[j]], a);
    return out;
  }

 private:
  const RankOpTimes& rank_;
  const std::vector<std::uint32_t>& ops_;
  std::size_t next_ = 0;
};

}  // namespace

std::array<Time, kNumTimeBuckets> bucket_times(const RankOpTimes& rank, Time makespan) {
  std::array<Time, kNumTimeBuckets> out{};
  // Compute: its stream's ops are in order and disjoint (an op is issued after its stream
  // predecessor ends), as are every other stream's.
  Time busy(0);
  for (std::uint32_t i : rank.stream_ops[static_cast<std::size_t>(Stream::kCompute)])
    busy += rank.end[i] - rank.start[i];
  out[static_cast<std::size_t>(TimeBucket::kCompute)] = busy;
  // Communication: a merge of the communication streams' intervals, boundary by boundary; each
  // stretch goes to the first axis in flight, less the compute inside it.
  struct Cursor {
    const std::vector<std::uint32_t>* ops;
    std::size_t next = 0;
    bool inside = false;  // between the start and end of ops[next]
    std::size_t slot = 0;
    Time at;  // the next boundary
  };
  std::array<Cursor, kNumStreams> cursors;
  std::size_t live = 0;
  for (std::size_t s = 0; s < kNumStreams; ++s) {
    const auto& ops = rank.stream_ops[s];
    if (ops.empty() || static_cast<Stream>(s) == Stream::kCompute) continue;
    cursors[live++] = Cursor{&ops, 0, false, comm_slot(static_cast<Stream>(s)), rank.start[ops[0]]};
  }
  std::array<int, kCommBuckets.size()> in_flight{};
  ComputeCover cover(rank);
  Time since(0), exposed(0);
  while (live > 0) {
    std::size_t c = 0;
    for (std::size_t k = 1; k < live; ++k) {
      if (cursors[k].at < cursors[c].at) c = k;
    }
    Cursor& cur = cursors[c];
    if (cur.at > since) {
      const auto axis =
          std::find_if(in_flight.begin(), in_flight.end(), [](int n) { return n > 0; });
      if (axis != in_flight.end()) {
        const Time t = (cur.at - since) - cover.overlap(since, cur.at);
        out[static_cast<std::size_t>(
            kCommBuckets[static_cast<std::size_t>(axis - in_flight.begin())])] += t;
        exposed += t;
      }
      since = cur.at;
    }
    if (!cur.inside) {
      ++in_flight[cur.slot];
      cur.inside = true;
      cur.at = rank.end[(*cur.ops)[cur.next]];
    } else {
      --in_flight[cur.slot];
      cur.inside = false;
      if (++cur.next < cur.ops->size()) {
        cur.at = rank.start[(*cur.ops)[cur.next]];
      } else {
        cursors[c] = cursors[--live];
      }
    }
  }
  out[static_cast<std::size_t>(TimeBucket::kIdle)] = makespan - busy - exposed;
  return out;
}

namespace {

// The op whose end released op `i` of `rank` (see the header), or kNoOp.
PackedOp predecessor(const StepProgram& program, std::span<const RankOpTimes> ranks,
                     std::uint32_t ri, std::uint32_t i) {
  const RankOpTimes& r = ranks[ri];
  const PackedOp by = r.started_by[i];
  if (by != kNoOp && (by & kByMirror) == 0) return by;
  const auto stream = static_cast<std::size_t>(program.desc(r.program->op(i)).stream);
  const auto& ops = r.stream_ops[stream];
  const auto pos = std::lower_bound(ops.begin(), ops.end(), i);
  PackedOp pred = kNoOp;
  Time latest(-1);
  if (pos != ops.begin()) {
    pred = pack_op(ri, *(pos - 1));
    latest = r.end[*(pos - 1)];
  }
  for (std::uint32_t dep : r.program->deps(i)) {
    if (r.end[dep] > latest) {
      latest = r.end[dep];
      pred = pack_op(ri, dep);
    }
  }
  if (by != kNoOp) {
    // Started with the rank's send to its other neighbour: released when that send was, if later.
    const PackedOp send = by & ~kByMirror;
    const PackedOp before = predecessor(program, ranks, static_cast<std::uint32_t>(send >> 32),
                                        static_cast<std::uint32_t>(send));
    if (before != kNoOp && ranks[before >> 32].end[static_cast<std::uint32_t>(before)] > latest) {
      return before;
    }
  }
  return pred;
}

}  // namespace

CriticalPath critical_path(const StepProgram& program, std::span<const RankOpTimes> ranks,
                           int top) {
  CriticalPath out;
  std::size_t total_ops = 0;
  PackedOp cur = kNoOp;
  Time last(-1);
  for (std::uint32_t ri = 0; ri < ranks.size(); ++ri) {
    const RankOpTimes& r = ranks[ri];
    total_ops += r.end.size();
    for (std::uint32_t i = 0; i < r.end.size(); ++i) {
      if (r.end[i] > last) {
        last = r.end[i];
        cur = pack_op(ri, i);
      }
    }
  }
  std::map<std::uint32_t, PathEntry> by_label;
  std::size_t guard = 0;
  while (cur != kNoOp && guard++ <= total_ops) {
    const auto ri = static_cast<std::uint32_t>(cur >> 32);
    const auto i = static_cast<std::uint32_t>(cur);
    const RankOpTimes& r = ranks[ri];
    const PackedOp pred = predecessor(program, ranks, ri, i);
    const Time from =
        pred == kNoOp ? Time(0) : ranks[pred >> 32].end[static_cast<std::uint32_t>(pred)];
    const Op& op = r.program->op(i);
    const OpDesc& d = program.desc(op);
    const std::uint32_t key = (static_cast<std::uint32_t>(op.id.phase()) << 16) |
                              (static_cast<std::uint32_t>(op.id.role()) << 8) |
                              static_cast<std::uint32_t>(d.kind);
    PathEntry& entry = by_label[key];
    if (entry.ops == 0) {
      entry.label = std::string(to_string(op.id.phase())) + "." +
                    std::string(to_string(op.id.role())) + " " + std::string(to_string(d.kind));
      entry.bucket = bucket_of(d.stream);
    }
    entry.time += r.end[i] - from;
    ++entry.ops;
    out.buckets[static_cast<std::size_t>(bucket_of(d.stream))] += r.end[i] - from;
    cur = pred;
  }
  for (auto& [key, entry] : by_label)
    out.top.push_back(std::move(entry));
  std::stable_sort(out.top.begin(), out.top.end(),
                   [](const PathEntry& a, const PathEntry& b) { return a.time > b.time; });
  if (out.top.size() > static_cast<std::size_t>(top)) {
    out.top.resize(static_cast<std::size_t>(std::max(0, top)));
  }
  return out;
}

}  // namespace planner::sim
