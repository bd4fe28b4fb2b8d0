// Background copies of the ranks a representative simulation leaves out.
#include "planner/sim/symmetry.hpp"

#include <gtest/gtest.h>

#include "planner/core/lowering.hpp"
#include "simulator/sim_test_support.hpp"

namespace planner::sim {
namespace {

// tp 2, pp 2, dp 4 on two 8-GPU nodes: stage 0 fills node 0 (ranks 0-7), stage 1 node 1.
struct Fixture {
  ParallelConfig parallel;
  std::shared_ptr<const topo::Cluster> cluster = testing::preset_cluster("dgx-h100-superpod", 2);
  std::vector<int> gpus;
  Fixture() {
    parallel.tp = 2;
    parallel.pp = 2;
    parallel.dp = 4;
    for (int r = 0; r < 16; ++r)
      gpus.push_back(r);
  }
  Symmetry make(const std::vector<int>& simulated) const {
    auto s = Symmetry::create(parallel, *cluster, gpus, simulated);
    if (!s) throw std::runtime_error(s.status().message());
    return std::move(s).value();
  }
};

TEST(Symmetry, OnePerStageCopiesTheOtherGroupsOfTheStage) {
  const Fixture f;
  const Symmetry s = f.make(representative_ranks(f.parallel, RankSubset::kOnePerStage));
  // The dp group of tp rank 0 in stage 0 carries the dp group of tp rank 1.
  EXPECT_EQ(s.group_copies({"dp", {0, 2, 4, 6}}), (std::vector<std::vector<int>>{{1, 3, 5, 7}}));
  // The tp group of replica 0 carries the tp groups of replicas 1-3.
  EXPECT_EQ(s.group_copies({"tp", {0, 1}}),
            (std::vector<std::vector<int>>{{2, 3}, {4, 5}, {6, 7}}));
  // The pipeline send 0 -> 8 carries every other (tp, dp) index's send.
  const auto p2p = s.p2p_copies(0, 8);
  EXPECT_EQ(p2p.size(), 7u);
  EXPECT_EQ(p2p.front(), (std::pair<int, int>{1, 9}));
  // A group spanning every rank has no copies.
  EXPECT_TRUE(s.group_copies({"tp-cp-dp-pp", f.gpus}).empty());
}

TEST(Symmetry, ReplicaDealsCopiesOutRoundRobin) {
  const Fixture f;
  // One data-parallel replica: ranks 0, 1 (stage 0) and 8, 9 (stage 1).
  const Symmetry s = f.make(representative_ranks(f.parallel, RankSubset::kDataParallelReplica));
  // Both dp groups of stage 0 are simulated: no copies for either.
  EXPECT_TRUE(s.group_copies({"dp", {0, 2, 4, 6}}).empty());
  // Three tp groups of stage 0 are copies; there is one simulated tp group per stage.
  EXPECT_EQ(s.group_copies({"tp", {0, 1}}).size(), 3u);
  // Sends: 2 simulated pairs (tp 0 and 1 of replica 0), 6 copies, 3 each.
  EXPECT_EQ(s.p2p_copies(0, 8), (std::vector<std::pair<int, int>>{{2, 10}, {4, 12}, {6, 14}}));
  EXPECT_EQ(s.p2p_copies(1, 9), (std::vector<std::pair<int, int>>{{3, 11}, {5, 13}, {7, 15}}));
}

TEST(Symmetry, EverySimulatedMeansNoCopies) {
  const Fixture f;
  const Symmetry s = f.make(f.gpus);
  EXPECT_TRUE(s.group_copies({"dp", {0, 2, 4, 6}}).empty());
  EXPECT_TRUE(s.p2p_copies(0, 8).empty());
}

// Copies confined to an island without simulated GPUs are dropped: with one rank per stage on a
// 4-node cluster (tp 8 fills a node), the tp groups of the other replicas sit on unsimulated
// nodes.
TEST(Symmetry, DropsCopiesOnIslandsWithoutSimulatedGpus) {
  ParallelConfig p;
  p.tp = 8;
  p.pp = 2;
  p.dp = 2;
  auto cluster = testing::preset_cluster("dgx-h100-superpod", 4);
  std::vector<int> gpus;
  for (int r = 0; r < 32; ++r)
    gpus.push_back(r);
  const auto simulated = representative_ranks(p, RankSubset::kOnePerStage);  // 0 and 16
  auto s = Symmetry::create(p, *cluster, gpus, simulated);
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_TRUE(s->group_copies({"tp", {0, 1, 2, 3, 4, 5, 6, 7}}).empty());
  EXPECT_EQ(s->group_copies({"dp", {0, 8}}).size(), 7u);  // cross-node: kept
}

}  // namespace
}  // namespace planner::sim
