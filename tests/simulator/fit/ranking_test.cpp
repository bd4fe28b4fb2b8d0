// Ranking accuracy: the metric math on small hand-made groups, and the grouping of an accuracy
// report's runs.
#include "planner/fit/ranking.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace planner::fit {
namespace {

TEST(Spearman, PerfectReversedAndKnownValue) {
  const std::vector<double> m{1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(*spearman(std::vector<double>{10, 20, 30, 40, 50}, m), 1.0);
  EXPECT_DOUBLE_EQ(*spearman(std::vector<double>{5, 4, 3, 2, 1}, m), -1.0);
  // Ranks (1,3,2,5,4) against (1,2,3,4,5): Σd² = 4, ρ = 1 − 6·4/(5·24) = 0.8.
  EXPECT_NEAR(*spearman(std::vector<double>{0.1, 0.3, 0.2, 0.5, 0.4}, m), 0.8, 1e-12);
  // Only the order matters, not the values.
  EXPECT_NEAR(*spearman(std::vector<double>{1, 1000, 2, 1e6, 3e5}, m), 0.8, 1e-12);
}

TEST(Spearman, TiesShareTheirMeanRank) {
  // Predicted (1, 1, 2) → ranks (1.5, 1.5, 3); measured (1, 2, 3) → (1, 2, 3). Deviations from
  // the mean rank 2: (−0.5, −0.5, 1) and (−1, 0, 1); ρ = 1.5 / sqrt(1.5 · 2) = 0.866.
  EXPECT_NEAR(*spearman(std::vector<double>{1, 1, 2}, std::vector<double>{1, 2, 3}),
              1.5 / std::sqrt(1.5 * 2.0), 1e-12);
}

TEST(Spearman, UndefinedCases) {
  EXPECT_FALSE(spearman(std::vector<double>{1}, std::vector<double>{2}));
  EXPECT_FALSE(spearman(std::vector<double>{1, 2}, std::vector<double>{1, 2, 3}));
  EXPECT_FALSE(spearman(std::vector<double>{3, 3, 3}, std::vector<double>{1, 2, 3}));
}

TEST(Top1Regret, PickBestTiesAndUndefined) {
  // Planner picks the second (predicted 1.0), which measured 1.2 against a best of 1.0.
  EXPECT_NEAR(*top1_regret(std::vector<double>{2.0, 1.0, 3.0}, std::vector<double>{1.0, 1.2, 1.5}),
              0.2, 1e-12);
  // Right pick: no regret.
  EXPECT_DOUBLE_EQ(*top1_regret(std::vector<double>{1, 2}, std::vector<double>{5, 6}), 0.0);
  // A tie between the first two picks: the mean of their regrets (0 and 0.5).
  EXPECT_NEAR(*top1_regret(std::vector<double>{1, 1, 2}, std::vector<double>{2, 3, 4}), 0.25,
              1e-12);
  EXPECT_FALSE(top1_regret(std::vector<double>{1}, std::vector<double>{1}));
  EXPECT_FALSE(top1_regret(std::vector<double>{1, 2}, std::vector<double>{1}));
}

// An accuracy report over hand-made records, as evaluate_accuracy() would produce.
struct Fixture {
  std::vector<PublishedRun> runs;
  AccuracyReport report;
  void add(const std::string& id, int hidden, int gpus, std::int64_t gbs, double predicted,
           double measured, bool modelled = true) {
    PublishedRun r;
    r.id = id;
    r.model.layers = 12;
    r.model.hidden = hidden;
    r.model.heads = 16;
    r.model.ffn_hidden = 4 * hidden;
    r.model.seq_len = 1024;
    r.model.vocab = 50257;
    r.hardware.gpu = "A100-SXM4";
    runs.push_back(r);
    RunAccuracy a;
    a.id = id;
    a.modelled = modelled;
    a.published = measured;
    a.predicted = predicted;
    a.error_percent = 100 * (predicted - measured) / measured;
    a.plan.parallel.dp = gpus;
    a.plan.training.global_batch_size = gbs;
    report.runs.push_back(a);
  }
};

TEST(RankAccuracy, GroupsByModelClusterAndBatch) {
  Fixture f;
  f.add("a", 1024, 8, 16, 1.0, 2.0);  // group 1: planner picks a (measured 2.0), best is b
  f.add("b", 1024, 8, 16, 1.5, 1.0);
  f.add("c", 1024, 8, 16, 2.0, 3.0);
  f.add("d", 1024, 4, 16, 1.0, 1.0);  // group 2 (other GPU count): a single configuration
  f.add("e", 2048, 8, 16, 1.0, 1.0);  // group 3 (other model)
  f.add("g", 2048, 8, 16, 2.0, 2.5);
  f.add("h", 2048, 8, 32, 1.0, 1.0);  // group 4 (other batch)
  f.add("x", 2048, 8, 32, 1.0, 1.0, /*modelled=*/false);
  summarize_accuracy(f.report);
  const RankingReport r = rank_accuracy(f.runs, f.report);
  ASSERT_EQ(r.groups.size(), 4u);
  EXPECT_EQ(r.ranked_groups, 2);
  const RankingGroup& g1 = r.groups[0];
  EXPECT_EQ(g1.runs.size(), 3u);
  EXPECT_EQ(g1.picked, "a");
  EXPECT_EQ(g1.best, "b");
  EXPECT_NEAR(*g1.top1_regret, 1.0, 1e-12);
  // Predicted ranks (1,2,3), measured (2,1,3): ρ = 1 − 6·2/(3·8) = 0.5.
  EXPECT_NEAR(*g1.spearman, 0.5, 1e-12);
  EXPECT_NEAR(g1.mape_percent, (50 + 50 + 100.0 / 3) / 3, 1e-9);
  EXPECT_EQ(g1.cluster, "8 x A100-SXM4");
  EXPECT_FALSE(r.groups[1].spearman);
  EXPECT_FALSE(r.groups[1].top1_regret);
  EXPECT_NEAR(*r.groups[2].spearman, 1.0, 1e-12);
  EXPECT_NEAR(*r.groups[2].top1_regret, 0.0, 1e-12);
  EXPECT_NEAR(*r.mean_spearman, 0.75, 1e-12);
  EXPECT_NEAR(*r.mean_top1_regret, 0.5, 1e-12);
  EXPECT_NEAR(r.worst_top1_regret, 1.0, 1e-12);
  EXPECT_NE(r.worst_group.find("global batch 16"), std::string::npos) << r.worst_group;
  EXPECT_EQ(r.accuracy.modelled, 7);
}

}  // namespace
}  // namespace planner::fit
