#include "planner/exec/comm_bootstrap.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>

namespace planner::exec {
namespace {

// Offers and tables are byte strings within one build on one kind of machine (native layout, as
// execute.cpp's control messages): offer = int32 count, count x int32 ranks, int32 has_id, id,
// then the failure text (may be empty); table = entries of (int32 leader, id).
template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <class T>
bool get(std::string_view data, std::size_t& at, T& v) {
  if (at + sizeof(T) > data.size()) return false;
  std::memcpy(&v, data.data() + at, sizeof(T));
  at += sizeof(T);
  return true;
}

struct Offer {
  std::vector<int> ranks;
  bool has_id = false;
  CommId id{};
  std::string failure;
};

bool decode(std::string_view data, Offer& out) {
  std::size_t at = 0;
  std::int32_t count = 0;
  if (!get(data, at, count) || count < 0) return false;
  out.ranks.resize(static_cast<std::size_t>(count));
  for (int& r : out.ranks) {
    std::int32_t v = 0;
    if (!get(data, at, v)) return false;
    r = v;
  }
  std::int32_t has = 0;
  if (!get(data, at, has)) return false;
  out.has_id = has != 0;
  if (out.has_id && !get(data, at, out.id)) return false;
  out.failure = std::string(data.substr(at));
  return true;
}

std::string group_text(std::string_view axes, const std::vector<int>& ranks) {
  std::string s = std::string(axes) + " group [";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    s += (i > 0 ? "," : "") + std::to_string(ranks[i]);
  return s + "]";
}

// Rank 0's verdict as broadcast: int32 ok, int32 status code, then the table or the message.
std::string verdict(const Result<std::string>& table) {
  std::string out;
  put<std::int32_t>(out, table.is_ok() ? 1 : 0);
  put<std::int32_t>(
      out, static_cast<std::int32_t>(table.is_ok() ? StatusCode::kOk : table.status().code()));
  out += table.is_ok() ? *table : table.status().message();
  return out;
}

}  // namespace

std::string encode_offer(const CommIdOffer& offer) {
  std::string out;
  put<std::int32_t>(out, static_cast<std::int32_t>(offer.ranks.size()));
  for (int r : offer.ranks)
    put<std::int32_t>(out, r);
  put<std::int32_t>(out, offer.id ? 1 : 0);
  if (offer.id) put(out, *offer.id);
  return out + offer.failure;
}

Result<std::string> build_id_table(const std::vector<std::optional<std::string>>& offers,
                                   std::string_view axes) {
  std::string missing;
  for (std::size_t r = 0; r < offers.size(); ++r) {
    if (!offers[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!missing.empty()) {
    return Status::timeout("setting up the " + std::string(axes) +
                           " communicators: no offer from rank(s) " + missing);
  }
  std::vector<Offer> decoded(offers.size());
  for (std::size_t r = 0; r < offers.size(); ++r) {
    if (!decode(*offers[r], decoded[r])) {
      return Status::internal("setting up the " + std::string(axes) +
                              " communicators: malformed offer from rank " + std::to_string(r));
    }
  }
  for (std::size_t r = 0; r < decoded.size(); ++r) {
    if (!decoded[r].failure.empty())
      return Status::runtime("rank " + std::to_string(r) + ": " + decoded[r].failure);
  }
  const auto n = static_cast<int>(offers.size());
  std::map<int, CommId> ids;  // by leader
  for (int r = 0; r < n; ++r) {
    const Offer& o = decoded[static_cast<std::size_t>(r)];
    if (o.ranks.empty()) {
      if (o.has_id) {
        return Status::internal("rank " + std::to_string(r) + " offers a " + std::string(axes) +
                                " id but is in no " + std::string(axes) + " group");
      }
      continue;
    }
    const std::string group = group_text(axes, o.ranks);
    if (std::find(o.ranks.begin(), o.ranks.end(), r) == o.ranks.end()) {
      return Status::internal("rank " + std::to_string(r) + " asks for " + group +
                              ", which does not contain it");
    }
    for (int m : o.ranks) {
      if (m < 0 || m >= n) {
        return Status::internal(group + " names rank " + std::to_string(m) + " of a job of " +
                                std::to_string(n));
      }
      if (decoded[static_cast<std::size_t>(m)].ranks != o.ranks) {
        return Status::internal("ranks disagree on the " + std::string(axes) + " groups: rank " +
                                std::to_string(r) + " asks for " + group + ", its member rank " +
                                std::to_string(m) + " for " +
                                group_text(axes, decoded[static_cast<std::size_t>(m)].ranks));
      }
    }
    const bool leader = o.ranks.front() == r;
    if (leader != o.has_id) {
      return Status::internal("rank " + std::to_string(r) +
                              (leader ? " leads " : " does not lead ") + group +
                              (leader ? " but offers no id" : " but offers an id"));
    }
    if (leader) ids[r] = o.id;
  }
  std::string table;
  for (const auto& [leader, id] : ids) {
    put<std::int32_t>(table, leader);
    put(table, id);
  }
  return table;
}

Result<CommId> find_id(std::string_view table, const std::vector<int>& ranks,
                       std::string_view axes) {
  if (ranks.empty()) return Status::internal("find_id: an empty group has no id");
  std::size_t at = 0;
  while (at < table.size()) {
    std::int32_t leader = 0;
    CommId id{};
    if (!get(table, at, leader) || !get(table, at, id)) break;
    if (leader == ranks.front()) return id;
  }
  return Status::internal("no communicator id for " + group_text(axes, ranks));
}

Result<std::optional<CommId>> exchange_comm_id(World& world, const GroupRequest& group,
                                               const std::function<Result<CommId>()>& generate,
                                               Deadline deadline, const Status& mine) {
  CommIdOffer offer;
  offer.ranks = group.ranks;
  if (!mine.is_ok()) offer.failure = mine.message().empty() ? "set-up failed" : mine.message();
  // A failure to generate on a leader still takes part in the round (with no id), so that rank 0
  // fails everyone rather than leaving them waiting; the leader reports its own error too.
  Status generated = Status::ok();
  if (mine.is_ok() && !group.ranks.empty() && group.ranks.front() == world.rank()) {
    Result<CommId> id = generate();
    if (id.is_ok()) {
      offer.id = *id;
    } else {
      generated = id.status();
    }
  }
  PLANNER_ASSIGN_OR_RETURN(std::vector<std::optional<std::string>> offers,
                           world.gather(encode_offer(offer), deadline));
  std::string message;
  if (world.rank() == 0) message = verdict(build_id_table(offers, group.axes));
  PLANNER_ASSIGN_OR_RETURN(std::string got, world.broadcast(message, deadline));
  PLANNER_RETURN_IF_ERROR(mine);
  PLANNER_RETURN_IF_ERROR(generated);
  std::size_t at = 0;
  std::int32_t ok = 0;
  std::int32_t code = 0;
  if (!get(std::string_view(got), at, ok) || !get(std::string_view(got), at, code)) {
    return Status::internal("malformed communicator id table from rank 0");
  }
  const std::string_view rest = std::string_view(got).substr(at);
  if (ok != 1) return Status(static_cast<StatusCode>(code), std::string(rest));
  if (group.ranks.empty()) return std::optional<CommId>();
  PLANNER_ASSIGN_OR_RETURN(CommId id, find_id(rest, group.ranks, group.axes));
  return std::optional<CommId>(id);
}

}  // namespace planner::exec
