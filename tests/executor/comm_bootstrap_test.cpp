// The communicator set-up round of the cuda backend (comm_bootstrap.hpp): which rank generates a
// group's id, how rank 0 checks the groups, and what every rank gets back, with fake worlds.
#include "planner/exec/comm_bootstrap.hpp"

#include <gtest/gtest.h>

#include <map>

namespace planner::exec {
namespace {

CommId id_of(char c) {
  CommId id{};
  id.fill(c);
  return id;
}

// One rank of a job whose other ranks are simulated: rank 0 receives `others` (index = rank;
// its own entry is replaced by its offer) from gather; other ranks receive `table` from
// broadcast.
class FakeWorld final : public World {
 public:
  FakeWorld(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return size_; }
  const std::string& host() const override { return host_; }
  Result<std::vector<std::optional<std::string>>> gather(std::string_view mine, Deadline) override {
    if (rank_ != 0) return std::vector<std::optional<std::string>>();
    std::vector<std::optional<std::string>> out = others;
    out[0] = std::string(mine);
    return out;
  }
  Result<std::string> broadcast(std::string_view data, Deadline) override {
    if (rank_ == 0) {
      sent = std::string(data);
      return sent;
    }
    return received;
  }
  [[noreturn]] void abort(int code) override { std::exit(code); }

  std::vector<std::optional<std::string>> others;
  std::string sent;      // rank 0: what it broadcast
  std::string received;  // other ranks: what rank 0 broadcast
  int generated = 0;

 private:
  int rank_;
  int size_;
  std::string host_ = "fake";
};

// 4 ranks in tp groups [0,1] and [2,3]; ids 'a' and 'c' from their leaders.
std::vector<std::optional<std::string>> tp_offers() {
  return {encode_offer({{0, 1}, id_of('a'), ""}), encode_offer({{0, 1}, std::nullopt, ""}),
          encode_offer({{2, 3}, id_of('c'), ""}), encode_offer({{2, 3}, std::nullopt, ""})};
}

TEST(CommBootstrap, EveryRankGetsItsGroupsIdFromTheGroupsLeader) {
  auto table = build_id_table(tp_offers(), "tp");
  ASSERT_TRUE(table) << table.status().message();
  for (int r = 0; r < 4; ++r) {
    const std::vector<int> group = r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
    auto id = find_id(*table, group, "tp");
    ASSERT_TRUE(id) << id.status().message();
    EXPECT_EQ(*id, id_of(r < 2 ? 'a' : 'c')) << r;
  }
  EXPECT_FALSE(find_id(*table, {1, 3}, "tp"));
}

TEST(CommBootstrap, TheWholeRoundOnRankZeroAndAnotherRank) {
  // Rank 0 leads [0,1] and generates once; it broadcasts the table that rank 3 then reads.
  FakeWorld root(0, 4);
  root.others = tp_offers();
  int calls = 0;
  auto generate = [&]() -> Result<CommId> {
    ++calls;
    return id_of('z');
  };
  auto mine = exchange_comm_id(root, {"tp", {0, 1}}, generate, Deadline::after(10));
  ASSERT_TRUE(mine) << mine.status().message();
  ASSERT_TRUE(mine->has_value());
  EXPECT_EQ(**mine, id_of('z'));  // its own id, not the simulated offer's
  EXPECT_EQ(calls, 1);

  FakeWorld member(3, 4);
  member.received = root.sent;
  auto theirs = exchange_comm_id(member, {"tp", {2, 3}}, generate, Deadline::after(10));
  ASSERT_TRUE(theirs) << theirs.status().message();
  EXPECT_EQ(**theirs, id_of('c'));
  EXPECT_EQ(calls, 1);  // rank 3 does not lead its group: it generates nothing

  // A rank in no group of this kind takes part and gets nothing.
  FakeWorld outside(3, 4);
  outside.received = root.sent;
  auto none = exchange_comm_id(outside, {"ep", {}}, generate, Deadline::after(10));
  ASSERT_TRUE(none) << none.status().message();
  EXPECT_FALSE(none->has_value());
}

TEST(CommBootstrap, DisagreementsFailEveryRankWithTheSameMessage) {
  auto offers = tp_offers();
  offers[1] = encode_offer({{1, 0}, std::nullopt, ""});  // rank 1 orders the group differently
  auto bad = build_id_table(offers, "tp");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
  EXPECT_NE(bad.status().message().find("ranks disagree on the tp groups"), std::string::npos)
      << bad.status().message();

  offers = tp_offers();
  offers[2] = encode_offer({{2, 3}, std::nullopt, ""});  // the leader offers no id
  EXPECT_FALSE(build_id_table(offers, "tp"));
  offers = tp_offers();
  offers[3] = encode_offer({{0, 1}, std::nullopt, ""});  // a group without the rank
  EXPECT_FALSE(build_id_table(offers, "tp"));

  // The verdict reaches the other ranks as the same error.
  FakeWorld root(0, 4);
  root.others = tp_offers();
  root.others[1] = encode_offer({{0, 1, 2}, std::nullopt, ""});
  auto generate = []() -> Result<CommId> { return id_of('z'); };
  auto at_root = exchange_comm_id(root, {"tp", {0, 1}}, generate, Deadline::after(10));
  ASSERT_FALSE(at_root);
  FakeWorld member(2, 4);
  member.received = root.sent;
  auto at_member = exchange_comm_id(member, {"tp", {2, 3}}, generate, Deadline::after(10));
  ASSERT_FALSE(at_member);
  EXPECT_EQ(at_member.status().message(), at_root.status().message());
}

TEST(CommBootstrap, MissingRanksAndFailedRanksAreNamed) {
  auto offers = tp_offers();
  offers[2].reset();  // rank 2 never reported
  auto missing = build_id_table(offers, "tp");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kTimeout);
  EXPECT_NE(missing.status().message().find("rank(s) 2"), std::string::npos);

  offers = tp_offers();
  offers[3] = encode_offer({{2, 3}, std::nullopt, "the cuda backend needs an NVIDIA GPU"});
  auto failed = build_id_table(offers, "tp");
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.status().code(), StatusCode::kRuntime);
  EXPECT_EQ(failed.status().message(), "rank 3: the cuda backend needs an NVIDIA GPU");

  // A rank whose own set-up failed still takes part and gets its own failure back.
  FakeWorld root(0, 4);
  root.others = tp_offers();
  auto generate = []() -> Result<CommId> { return id_of('z'); };
  auto st = exchange_comm_id(root, {"tp", {0, 1}}, generate, Deadline::after(10),
                             Status::unavailable("no GPU here"));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(root.sent.empty());  // it still broadcast the (failing) verdict
}

}  // namespace
}  // namespace planner::exec
