// Setting up a communicator per rank-grid group from an id that one member generates and MPI
// carries to the others, as NCCL's ncclCommInitRank needs (the cuda backend's ncclUniqueId; the
// logic here is plain C++, so CI tests it with fake worlds).
//
// One round per group kind (tp, dp, ...), collective over the World: every rank offers its group
// (empty when in none) and, when it is the group's member 0, a freshly generated id; rank 0
// gathers the offers, checks that the members of every group agree on it and that every group has
// its id, and broadcasts the table of ids by group leader (member 0's global rank); each rank then
// finds its group's id. Any disagreement fails the round on every rank with the same message.
// Every exchange is bounded by the deadline.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/exec/backend.hpp"

namespace planner::exec {

// An opaque communicator id (NCCL_UNIQUE_ID_BYTES of ncclUniqueId).
inline constexpr std::size_t kCommIdBytes = 128;
using CommId = std::array<char, kCommIdBytes>;

// One rank's offer: its group (global ranks, member 0 first; empty when in none) and, from member
// 0 only, the group's id; or why this rank cannot take part (its set-up failed), which then fails
// the round on every rank.
struct CommIdOffer {
  std::vector<int> ranks;
  std::optional<CommId> id;
  std::string failure;
};

std::string encode_offer(const CommIdOffer& offer);

// Rank 0: from every rank's encoded offer (index = rank; nullopt for a rank that did not report),
// the table every rank receives. kTimeout names ranks that did not report; kRuntime the first rank
// that offered a failure; kInternal a rank whose group does not contain it, members that disagree
// on their group, or a group without its id.
// `axes` names the groups in messages.
Result<std::string> build_id_table(const std::vector<std::optional<std::string>>& offers,
                                   std::string_view axes);

// The id of the group led by `ranks[0]` in a table from build_id_table (kInternal when absent).
Result<CommId> find_id(std::string_view table, const std::vector<int>& ranks,
                       std::string_view axes);

// The whole round over `world` (collective): `generate` is called on member 0 of `group` only.
// Returns the group's id, or nullopt for a rank in no group of this kind. A rank whose own set-up
// failed passes the failure as `mine` (it still takes part, so the others learn of it instead of
// waiting) and gets it back.
Result<std::optional<CommId>> exchange_comm_id(World& world, const GroupRequest& group,
                                               const std::function<Result<CommId>()>& generate,
                                               Deadline deadline,
                                               const Status& mine = Status::ok());

}  // namespace planner::exec
