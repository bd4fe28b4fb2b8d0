#include "planner/core/program.hpp"

#include <algorithm>
#include <charconv>
#include <deque>
#include <limits>
#include <map>
#include <unordered_map>

namespace planner {

bool is_collective(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce:
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
    case OpKind::kAllToAll:
    case OpKind::kBroadcast:
      return true;
    default:
      return false;
  }
}

bool is_p2p(OpKind kind) {
  return kind == OpKind::kSend || kind == OpKind::kRecv;
}

bool is_compute(OpKind kind) {
  return !is_collective(kind) && !is_p2p(kind) && kind != OpKind::kHostToDevice &&
         kind != OpKind::kDeviceToHost;
}

namespace {

bool is_ps_role(OpRole role) {
  return role == OpRole::kPsPush || role == OpRole::kPsPull || role == OpRole::kPsAggregate;
}

std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  if (s.empty()) return std::nullopt;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

std::string to_string(OpId id) {
  std::string s;
  if (id.layer() != OpId::kNone) s += "L" + std::to_string(id.layer()) + ".";
  if (id.microbatch() != OpId::kNone) {
    s += (is_ps_role(id.role()) ? "w" : "mb") + std::to_string(id.microbatch()) + ".";
  }
  s += to_string(id.phase());
  s += ".";
  s += to_string(id.role());
  if (id.slot() != 0) s += "." + std::to_string(id.slot());
  return s;
}

std::optional<OpId> parse_op_id(std::string_view text) {
  std::vector<std::string_view> parts;
  while (true) {
    const auto dot = text.find('.');
    parts.push_back(text.substr(0, dot));
    if (dot == std::string_view::npos) break;
    text.remove_prefix(dot + 1);
  }
  std::size_t i = 0;
  int layer = OpId::kNone;
  int mb = OpId::kNone;
  if (i < parts.size() && parts[i].starts_with("L")) {
    auto v = parse_int(parts[i].substr(1));
    if (!v || *v > OpId::kMaxLayer) return std::nullopt;
    layer = *v;
    ++i;
  }
  bool worker = false;
  if (i < parts.size() && (parts[i].starts_with("mb") || parts[i].starts_with("w"))) {
    worker = parts[i].starts_with("w");
    auto v = parse_int(parts[i].substr(worker ? 1 : 2));
    if (!v || *v > OpId::kMaxMicrobatch) return std::nullopt;
    mb = *v;
    ++i;
  }
  if (i + 2 > parts.size()) return std::nullopt;
  auto phase = parse_enum<Phase>(parts[i]);
  auto role = parse_enum<OpRole>(parts[i + 1]);
  if (!phase || !role) return std::nullopt;
  if (mb != OpId::kNone && worker != is_ps_role(*role)) return std::nullopt;
  int slot = 0;
  if (i + 3 == parts.size()) {
    auto v = parse_int(parts[i + 2]);
    if (!v || *v > OpId::kMaxSlot) return std::nullopt;
    slot = *v;
  } else if (i + 2 != parts.size()) {
    return std::nullopt;
  }
  return OpId::make(layer, mb, *phase, *role, slot);
}

std::uint32_t RankProgram::add(const Op& op, std::span<const std::uint32_t> deps) {
  const auto index = static_cast<std::uint32_t>(ops_.size());
  ops_.push_back(op);
  deps_.insert(deps_.end(), deps.begin(), deps.end());
  dep_offsets_.push_back(static_cast<std::uint32_t>(deps_.size()));
  return index;
}

bool RankProgram::reorder(std::span<const std::uint32_t> order,
                          std::span<const std::pair<std::uint32_t, std::uint32_t>> extra) {
  const std::size_t n = ops_.size();
  if (order.size() != n) return false;
  constexpr std::uint32_t kUnplaced = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> where(n, kUnplaced);
  for (std::size_t k = 0; k < n; ++k) {
    if (order[k] >= n || where[order[k]] != kUnplaced) return false;
    where[order[k]] = static_cast<std::uint32_t>(k);
  }
  for (std::size_t k = 0; k < n; ++k) {
    for (std::uint32_t d : deps(order[k])) {
      if (where[d] >= k) return false;
    }
  }
  // The extra dependencies of each op (old index), in the order given.
  std::vector<std::uint32_t> extra_offsets(n + 1, 0), extra_list(extra.size());
  for (const auto& [op, dep] : extra) {
    if (op >= n || dep >= n || where[dep] >= where[op]) return false;
    ++extra_offsets[op + 1];
  }
  for (std::size_t k = 0; k < n; ++k)
    extra_offsets[k + 1] += extra_offsets[k];
  {
    std::vector<std::uint32_t> fill(extra_offsets.begin(), extra_offsets.end() - 1);
    for (const auto& [op, dep] : extra)
      extra_list[fill[op]++] = dep;
  }
  std::vector<Op> ops;
  std::vector<std::uint32_t> offsets{0}, list;
  ops.reserve(n);
  offsets.reserve(n + 1);
  list.reserve(deps_.size() + extra.size());
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint32_t old = order[k];
    ops.push_back(ops_[old]);
    for (std::uint32_t d : deps(old))
      list.push_back(where[d]);
    for (std::uint32_t e = extra_offsets[old]; e < extra_offsets[old + 1]; ++e)
      list.push_back(where[extra_list[e]]);
    offsets.push_back(static_cast<std::uint32_t>(list.size()));
  }
  ops_ = std::move(ops);
  dep_offsets_ = std::move(offsets);
  deps_ = std::move(list);
  return true;
}

void RankProgram::reserve(std::size_t ops, std::size_t deps) {
  ops_.reserve(ops);
  dep_offsets_.reserve(ops + 1);
  deps_.reserve(deps);
}

std::size_t RankProgram::memory_bytes() const {
  return ops_.capacity() * sizeof(Op) +
         (dep_offsets_.capacity() + deps_.capacity()) * sizeof(std::uint32_t);
}

const RankProgram* StepProgram::find(int rank) const {
  if (rank < 0 || static_cast<std::size_t>(rank) >= rank_index_.size()) return nullptr;
  const std::int32_t i = rank_index_[static_cast<std::size_t>(rank)];
  return i < 0 ? nullptr : &ranks_[static_cast<std::size_t>(i)];
}

std::size_t StepProgram::total_ops() const {
  std::size_t n = 0;
  for (const RankProgram& r : ranks_)
    n += r.size();
  return n;
}

std::size_t StepProgram::memory_bytes() const {
  std::size_t n = descs_.capacity() * sizeof(OpDesc) + ranks_.capacity() * sizeof(RankProgram) +
                  rank_index_.capacity() * sizeof(std::int32_t);
  for (const RankProgram& r : ranks_)
    n += r.memory_bytes();
  for (const CommGroup& g : groups_)
    n += sizeof(CommGroup) + g.ranks.capacity() * sizeof(int) + g.axes.capacity();
  return n;
}

std::uint32_t StepProgram::intern(const OpDesc& desc) {
  // Descriptors are few (hundreds): lowering caches their indices, so a linear scan is enough.
  for (std::size_t i = descs_.size(); i-- > 0;) {
    if (descs_[i] == desc) return static_cast<std::uint32_t>(i);
  }
  descs_.push_back(desc);
  return static_cast<std::uint32_t>(descs_.size() - 1);
}

std::int32_t StepProgram::intern_group(std::string_view axes, std::vector<int> ranks) {
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    if (groups_[i].axes == axes && groups_[i].ranks == ranks) return static_cast<std::int32_t>(i);
  }
  groups_.push_back({std::string(axes), std::move(ranks)});
  return static_cast<std::int32_t>(groups_.size() - 1);
}

RankProgram& StepProgram::add_rank(int rank, RankKind kind, int stage) {
  if (rank_index_.size() < static_cast<std::size_t>(total_ranks())) {
    rank_index_.assign(static_cast<std::size_t>(total_ranks()), -1);
  }
  rank_index_[static_cast<std::size_t>(rank)] = static_cast<std::int32_t>(ranks_.size());
  ranks_.emplace_back(rank, kind, stage);
  return ranks_.back();
}

// ---- check_program

namespace {

constexpr std::size_t kMaxReported = 8;

class Problems {
 public:
  void add(std::string message) {
    ++count_;
    if (lines_.size() < kMaxReported) lines_.push_back(std::move(message));
  }
  bool empty() const { return count_ == 0; }
  Status status() const {
    if (count_ == 0) return Status::ok();
    std::string msg = "step program: " + std::to_string(count_) + " problem(s)";
    for (const std::string& l : lines_)
      msg += "\n" + l;
    if (count_ > lines_.size()) msg += "\n...";
    return Status::internal(msg);
  }

 private:
  std::size_t count_ = 0;
  std::vector<std::string> lines_;
};

std::string where(const RankProgram& r, std::size_t i) {
  return "rank " + std::to_string(r.rank()) + " op " + std::to_string(i) + " (" +
         to_string(r.op(i).id) + ")";
}

struct P2pKey {
  int src = 0;
  int dst = 0;
  std::uint32_t tag = 0;
  bool operator==(const P2pKey&) const = default;
};
struct P2pKeyHash {
  std::size_t operator()(const P2pKey& k) const {
    const std::uint64_t a = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.src)) << 32) |
                            static_cast<std::uint32_t>(k.dst);
    return std::hash<std::uint64_t>()(a * 0x9e3779b97f4a7c15ull ^ k.tag);
  }
};

void check_structure(const StepProgram& p, Problems& problems) {
  for (const RankProgram& r : p.ranks()) {
    std::vector<std::uint64_t> ids;
    ids.reserve(r.size());
    for (std::size_t i = 0; i < r.size(); ++i) {
      const Op& op = r.op(i);
      ids.push_back(op.id.raw());
      for (std::uint32_t d : r.deps(i)) {
        if (d >= i)
          problems.add(where(r, i) + ": depends on op " + std::to_string(d) +
                       ", which does not come before it");
      }
      if (op.desc >= p.descs().size()) {
        problems.add(where(r, i) + ": no descriptor " + std::to_string(op.desc));
        continue;
      }
      const OpKind kind = p.desc(op).kind;
      if (is_collective(kind)) {
        if (op.group < 0 || static_cast<std::size_t>(op.group) >= p.groups().size()) {
          problems.add(where(r, i) + ": collective without a valid group");
        } else {
          const auto& members = p.group(op.group).ranks;
          if (std::find(members.begin(), members.end(), r.rank()) == members.end()) {
            problems.add(where(r, i) + ": rank is not a member of its group " +
                         p.group(op.group).axes);
          }
        }
      }
      if (is_p2p(kind) && (op.peer < 0 || op.peer >= p.total_ranks() || op.peer == r.rank())) {
        problems.add(where(r, i) + ": send/recv with invalid peer " + std::to_string(op.peer));
      }
    }
    std::sort(ids.begin(), ids.end());
    const auto dup = std::adjacent_find(ids.begin(), ids.end());
    if (dup != ids.end()) {
      problems.add("rank " + std::to_string(r.rank()) + ": op id " +
                   to_string(OpId::from_raw(*dup)) + " appears more than once");
    }
  }
}

void check_p2p(const StepProgram& p, Problems& problems) {
  struct Entry {
    int sends = 0;
    int recvs = 0;
    Bytes send_bytes;
    Bytes recv_bytes;
    std::string where;
  };
  std::unordered_map<P2pKey, Entry, P2pKeyHash> pairs;
  for (const RankProgram& r : p.ranks()) {
    for (std::size_t i = 0; i < r.size(); ++i) {
      const Op& op = r.op(i);
      const OpDesc& d = p.desc(op);
      if (!is_p2p(d.kind) || p.find(op.peer) == nullptr) continue;
      const bool send = d.kind == OpKind::kSend;
      const P2pKey key{send ? r.rank() : op.peer, send ? op.peer : r.rank(), op.tag};
      Entry& e = pairs[key];
      if (e.where.empty()) e.where = where(r, i);
      if (send) {
        ++e.sends;
        e.send_bytes = d.comm_bytes;
      } else {
        ++e.recvs;
        e.recv_bytes = d.comm_bytes;
      }
    }
  }
  for (const auto& [key, e] : pairs) {
    if (e.sends != 1 || e.recvs != 1) {
      problems.add(e.where + ": " + std::to_string(e.sends) + " send(s) and " +
                   std::to_string(e.recvs) + " recv(s) from rank " + std::to_string(key.src) +
                   " to rank " + std::to_string(key.dst) + " with tag " + std::to_string(key.tag));
    } else if (e.send_bytes != e.recv_bytes) {
      problems.add(e.where + ": send of " + std::to_string(e.send_bytes.raw()) +
                   " bytes matched by a recv of " + std::to_string(e.recv_bytes.raw()));
    }
  }
}

void check_collectives(const StepProgram& p, Problems& problems) {
  // Per group: the sequence of collectives of its first lowered member, compared to the others.
  std::vector<std::vector<std::pair<const RankProgram*, std::vector<std::uint32_t>>>> per_group(
      p.groups().size());
  for (const RankProgram& r : p.ranks()) {
    std::map<std::int32_t, std::vector<std::uint32_t>> mine;
    for (std::size_t i = 0; i < r.size(); ++i) {
      const Op& op = r.op(i);
      if (op.group >= 0 && is_collective(p.desc(op).kind)) {
        mine[op.group].push_back(static_cast<std::uint32_t>(i));
      }
    }
    for (auto& [g, seq] : mine)
      per_group[static_cast<std::size_t>(g)].emplace_back(&r, std::move(seq));
  }
  for (std::size_t g = 0; g < per_group.size(); ++g) {
    const auto& members = per_group[g];
    if (members.empty()) continue;
    const auto& [r0, s0] = members.front();
    for (std::size_t j = 1; j < members.size(); ++j) {
      const auto& [r1, s1] = members[j];
      const std::size_t n = std::min(s0.size(), s1.size());
      std::size_t k = 0;
      for (; k < n; ++k) {
        const Op& a = r0->op(s0[k]);
        const Op& b = r1->op(s1[k]);
        if (a.id != b.id || p.desc(a).kind != p.desc(b).kind ||
            p.desc(a).comm_bytes != p.desc(b).comm_bytes) {
          break;
        }
      }
      if (k < n || s0.size() != s1.size()) {
        const std::string what =
            k < n ? where(*r0, s0[k]) + " vs " + where(*r1, s1[k])
                  : std::to_string(s0.size()) + " vs " + std::to_string(s1.size()) + " ops";
        problems.add("group " + std::to_string(g) + " (" + p.groups()[g].axes + "): ranks " +
                     std::to_string(r0->rank()) + " and " + std::to_string(r1->rank()) +
                     " issue different collectives at position " + std::to_string(k) + ": " + what);
      }
    }
  }
}

// Runs a complete program with the execution semantics of program.hpp, ignoring durations: it
// finishes exactly when no set of ranks waits on each other forever. Completing an op never
// prevents another from completing, so any order of completions reaches the same end state.
void check_deadlock(const StepProgram& p, Problems& problems) {
  const std::size_t nranks = p.ranks().size();
  struct RankState {
    std::array<std::vector<std::uint32_t>, kNumStreams> stream_ops;
    std::array<std::size_t, kNumStreams> head{};
    std::vector<std::uint32_t> waiting;  // deps not yet finished, per op
    std::vector<std::uint8_t> state;     // 0 pending, 1 started (waiting for peers), 2 done
    std::vector<std::uint32_t> rdep_offsets;
    std::vector<std::uint32_t> rdeps;
  };
  std::vector<RankState> st(nranks);
  std::size_t total = 0;
  for (std::size_t ri = 0; ri < nranks; ++ri) {
    const RankProgram& r = p.ranks()[ri];
    RankState& s = st[ri];
    s.waiting.resize(r.size());
    s.state.assign(r.size(), 0);
    std::vector<std::uint32_t> counts(r.size() + 1, 0);
    for (std::size_t i = 0; i < r.size(); ++i) {
      s.stream_ops[static_cast<std::size_t>(p.desc(r.op(i)).stream)].push_back(
          static_cast<std::uint32_t>(i));
      s.waiting[i] = static_cast<std::uint32_t>(r.deps(i).size());
      for (std::uint32_t d : r.deps(i))
        ++counts[d + 1];
    }
    for (std::size_t i = 0; i < r.size(); ++i)
      counts[i + 1] += counts[i];
    s.rdep_offsets = counts;
    s.rdeps.resize(r.num_deps());
    for (std::size_t i = 0; i < r.size(); ++i) {
      for (std::uint32_t d : r.deps(i))
        s.rdeps[counts[d]++] = static_cast<std::uint32_t>(i);
    }
    total += r.size();
  }

  std::deque<std::pair<std::uint32_t, std::uint32_t>> work;  // (rank index, op index)
  for (std::size_t ri = 0; ri < nranks; ++ri) {
    for (const auto& ops : st[ri].stream_ops) {
      if (!ops.empty()) work.emplace_back(static_cast<std::uint32_t>(ri), ops.front());
    }
  }
  std::unordered_map<P2pKey, std::pair<std::uint32_t, std::uint32_t>, P2pKeyHash> posted;
  std::map<std::pair<std::int32_t, std::uint64_t>,
           std::vector<std::pair<std::uint32_t, std::uint32_t>>>
      arrived;
  std::size_t done = 0;

  auto finish = [&](std::uint32_t ri, std::uint32_t i) {
    RankState& s = st[ri];
    s.state[i] = 2;
    ++done;
    const auto stream = static_cast<std::size_t>(p.desc(p.ranks()[ri].op(i)).stream);
    auto& ops = s.stream_ops[stream];
    if (++s.head[stream] < ops.size()) work.emplace_back(ri, ops[s.head[stream]]);
    for (std::uint32_t k = s.rdep_offsets[i]; k < s.rdep_offsets[i + 1]; ++k) {
      const std::uint32_t j = s.rdeps[k];
      if (--s.waiting[j] == 0) work.emplace_back(ri, j);
    }
  };

  while (!work.empty()) {
    const auto [ri, i] = work.front();
    work.pop_front();
    RankState& s = st[ri];
    const RankProgram& r = p.ranks()[ri];
    const Op& op = r.op(i);
    const OpDesc& d = p.desc(op);
    const auto stream = static_cast<std::size_t>(d.stream);
    if (s.state[i] != 0 || s.waiting[i] != 0 || s.head[stream] >= s.stream_ops[stream].size() ||
        s.stream_ops[stream][s.head[stream]] != i) {
      continue;
    }
    s.state[i] = 1;
    if (is_collective(d.kind)) {
      auto& members = arrived[{op.group, op.id.raw()}];
      members.emplace_back(ri, i);
      if (members.size() == p.group(op.group).ranks.size()) {
        for (const auto& [rj, j] : members)
          finish(rj, j);
      }
    } else if (is_p2p(d.kind)) {
      const bool send = d.kind == OpKind::kSend;
      const P2pKey key{send ? r.rank() : op.peer, send ? op.peer : r.rank(), op.tag};
      auto it = posted.find(key);
      if (it == posted.end()) {
        posted.emplace(key, std::make_pair(ri, i));
      } else {
        const auto [rj, j] = it->second;
        posted.erase(it);
        finish(rj, j);
        finish(ri, i);
      }
    } else {
      finish(ri, i);
    }
  }
  if (done == total) return;
  std::string stuck;
  int shown = 0;
  for (std::size_t ri = 0; ri < nranks && shown < 6; ++ri) {
    const RankState& s = st[ri];
    for (std::size_t k = 0; k < kNumStreams && shown < 6; ++k) {
      if (s.head[k] >= s.stream_ops[k].size()) continue;
      const std::uint32_t i = s.stream_ops[k][s.head[k]];
      stuck += "\n  " + where(p.ranks()[ri], i) +
               (s.state[i] == 1 ? " waits for its peers" : " waits for its dependencies");
      ++shown;
    }
  }
  problems.add("deadlock: " + std::to_string(total - done) + " of " + std::to_string(total) +
               " ops never run; blocked heads:" + stuck);
}

}  // namespace

Status check_program(const StepProgram& program) {
  Problems problems;
  check_structure(program, problems);
  if (!problems.empty()) return problems.status();
  check_p2p(program, problems);
  check_collectives(program, problems);
  if (problems.empty() && program.complete()) check_deadlock(program, problems);
  return problems.status();
}

}  // namespace planner
