#include "planner/core/rank_grid.hpp"

#include <gtest/gtest.h>

namespace planner {
namespace {

using Groups = std::vector<std::vector<int>>;

// The worked example in rank_grid.hpp.
TEST(RankGrid, WorkedExampleFromTheHeader) {
  AxisSizes s;
  s.tp = 2;
  s.pp = 2;
  s.dp = 2;
  auto grid = RankGrid::create(s, "tp-pp-dp");
  ASSERT_TRUE(grid) << grid.status().message();
  EXPECT_EQ(grid->world_size(), 8);
  EXPECT_EQ(*grid->groups("dp"), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(*grid->groups("tp"), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(*grid->groups("pp"), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(*grid->groups("tp-pp"), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(grid->coordinate(6, Axis::kDp), 1);
  EXPECT_EQ(grid->coordinate(6, Axis::kPp), 1);
  EXPECT_EQ(grid->coordinate(6, Axis::kTp), 0);
}

TEST(RankGrid, DefaultOrderPutsTensorParallelInnermost) {
  ParallelConfig p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 2;
  auto grid = RankGrid::dense(p);
  ASSERT_TRUE(grid);
  EXPECT_EQ(grid->world_size(), 64);
  EXPECT_EQ(*grid->group_of(13, "tp"), (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  // tp-cp-ep-dp-pp: dp stride is tp = 8, pp stride is tp x dp = 16.
  EXPECT_EQ(*grid->group_of(3, "dp"), (std::vector<int>{3, 11}));
  EXPECT_EQ(*grid->group_of(3, "pp"), (std::vector<int>{3, 19, 35, 51}));
}

TEST(RankGrid, EveryRankInExactlyOneGroup) {
  AxisSizes s;
  s.tp = 2;
  s.cp = 2;
  s.dp = 3;
  s.pp = 2;
  auto grid = RankGrid::create(s);
  ASSERT_TRUE(grid);
  for (const char* axes : {"tp", "cp", "dp", "pp", "dp-cp", "tp-pp", "tp-cp-dp-pp"}) {
    auto groups = grid->groups(axes);
    ASSERT_TRUE(groups) << axes;
    std::vector<int> seen(static_cast<std::size_t>(grid->world_size()), 0);
    for (const auto& g : *groups) {
      for (int r : g)
        ++seen[static_cast<std::size_t>(r)];
    }
    for (int count : seen)
      EXPECT_EQ(count, 1) << axes;
  }
  EXPECT_EQ(grid->groups("dp-cp")->front(), (std::vector<int>{0, 2, 4, 6, 8, 10}));
}

TEST(RankGrid, ExpertGridCarvesExpertParallelismOutOfDataParallel) {
  ParallelConfig p;
  p.tp = 2;
  p.dp = 8;
  p.ep = 4;
  auto dense = RankGrid::dense(p);
  auto expert = RankGrid::expert(p);
  ASSERT_TRUE(dense);
  ASSERT_TRUE(expert);
  EXPECT_EQ(dense->world_size(), expert->world_size());
  EXPECT_EQ(*expert->group_of(0, "ep"), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(*expert->group_of(0, "dp"), (std::vector<int>{0, 8}));
  EXPECT_EQ(*dense->group_of(0, "dp"), (std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14}));
}

TEST(RankGrid, RejectsBadOrders) {
  AxisSizes s;
  s.tp = 2;
  s.dp = 2;
  EXPECT_FALSE(RankGrid::create(s, "tp-tp-dp"));
  EXPECT_FALSE(RankGrid::create(s, "tp-xp-dp"));
  auto missing = RankGrid::create(s, "tp-pp");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("leaves out dp"), std::string::npos);
  auto grid = RankGrid::create(s, "dp-tp");
  ASSERT_TRUE(grid);
  EXPECT_EQ(*grid->group_of(0, "tp"), (std::vector<int>{0, 2}));
  EXPECT_FALSE(grid->groups("zz"));
}

// The expert grid's worked example in rank_grid.hpp (Megatron-core's expert rank generator).
TEST(RankGrid, ExpertGridWorkedExampleFromTheHeader) {
  ParallelConfig p;
  p.tp = 2;
  p.dp = 4;
  p.pp = 2;
  p.ep = 4;
  p.etp = 1;
  auto dense = RankGrid::dense(p);
  auto expert = RankGrid::expert(p);
  ASSERT_TRUE(dense && expert);
  EXPECT_EQ(*dense->groups("tp"),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(*dense->groups("dp"),
            (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(*expert->groups("ep"),
            (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}));
  EXPECT_EQ(*expert->groups("dp"),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(expert->groups("tp")->size(), 16u);  // etp = 1: one rank each
  EXPECT_TRUE(RankGrid::same_stages(*dense, *expert));
  EXPECT_EQ(p.expert_dp(), 2);
  // etp = tp = 2: the expert tensor parallel groups are the tp groups and the ep groups the
  // dense dp groups.
  p.etp = 2;
  auto expert2 = RankGrid::expert(p);
  ASSERT_TRUE(expert2);
  EXPECT_EQ(*expert2->groups("tp"), *dense->groups("tp"));
  EXPECT_EQ(*expert2->groups("ep"), *dense->groups("dp"));
  EXPECT_EQ(p.expert_dp(), 1);
  // etp x ep must divide the stage's tp x cp x dp ranks.
  p.ep = 8;
  EXPECT_FALSE(RankGrid::expert(p));
}

// Expert parallelism spanning nodes: 2 nodes of 8 GPUs, tp 1, ep 16 holds all 16 ranks, and with
// etp 2 the ep group strides over the expert tensor parallel pairs.
TEST(RankGrid, ExpertGroupsSpanNodes) {
  ParallelConfig p;
  p.dp = 16;
  p.ep = 16;
  auto expert = RankGrid::expert(p);
  ASSERT_TRUE(expert);
  ASSERT_EQ(expert->groups("ep")->size(), 1u);
  EXPECT_EQ((*expert->groups("ep"))[0].size(), 16u);
  p.tp = 2;
  p.dp = 8;
  p.ep = 8;
  p.etp = 2;
  auto e2 = RankGrid::expert(p);
  ASSERT_TRUE(e2);
  EXPECT_EQ(*e2->group_of(1, "ep"), (std::vector<int>{1, 3, 5, 7, 9, 11, 13, 15}));
}

// Orders that put cp or dp outside pp place ranks on different stages in the two grids.
TEST(RankGrid, ExpertGridMustKeepTheDenseStages) {
  ParallelConfig p;
  p.cp = 2;
  p.dp = 2;
  p.pp = 2;
  p.order = "tp-cp-pp-dp";
  auto dense = RankGrid::dense(p);
  auto expert = RankGrid::expert(p);
  ASSERT_TRUE(dense && expert);
  EXPECT_FALSE(RankGrid::same_stages(*dense, *expert));
  p.order = "tp-cp-dp-pp";
  EXPECT_TRUE(RankGrid::same_stages(*RankGrid::dense(p), *RankGrid::expert(p)));
}

// same_stages compares the pipeline axis's strides; every rank's stage agrees with it, over the
// orders and sizes of small grids.
TEST(RankGrid, SameStagesAgreesWithEveryRanksStage) {
  const char* orders[] = {"tp-cp-ep-dp-pp", "tp-cp-pp-dp", "tp-pp-cp-dp", "pp-tp-cp-dp",
                          "tp-cp-dp-pp"};
  int compared = 0, differing = 0;
  for (const char* order : orders) {
    for (int tp : {1, 2}) {
      for (int cp : {1, 2}) {
        for (int dp : {1, 2, 4}) {
          for (int pp : {1, 2, 3}) {
            for (int ep : {1, 2, 4}) {
              for (int etp : {1, 2}) {
                ParallelConfig p;
                p.tp = tp;
                p.cp = cp;
                p.dp = dp;
                p.pp = pp;
                p.ep = ep;
                p.etp = etp;
                p.order = order;
                auto dense = RankGrid::dense(p);
                auto expert = RankGrid::expert(p);
                if (!dense || !expert) continue;
                bool every = true;
                for (int r = 0; r < dense->world_size(); ++r)
                  every =
                      every && dense->coordinate(r, Axis::kPp) == expert->coordinate(r, Axis::kPp);
                EXPECT_EQ(RankGrid::same_stages(*dense, *expert), every)
                    << order << " tp" << tp << " cp" << cp << " dp" << dp << " pp" << pp << " ep"
                    << ep << " etp" << etp;
                ++compared;
                differing += every ? 0 : 1;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(differing, 10);  // both answers are exercised
}

}  // namespace
}  // namespace planner
