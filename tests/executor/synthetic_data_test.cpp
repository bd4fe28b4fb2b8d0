#include "planner/exec/synthetic_data.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace planner::exec {
namespace {

TEST(SyntheticTokens, EachSequenceIsAFunctionOfSeedAndIndex) {
  SyntheticTokens a(11, 64, 16), b(11, 64, 16), c(12, 64, 16);
  std::vector<std::int32_t> x(17), y(17), z(17), w(17);
  a.sequence(5, x.data());
  b.sequence(5, y.data());
  c.sequence(5, z.data());
  a.sequence(6, w.data());
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  EXPECT_NE(x, w);
}

TEST(SyntheticTokens, TokensFollowTheMarkovChain) {
  constexpr std::int64_t kVocab = 64;
  SyntheticTokens data(3, kVocab, 63);
  std::vector<std::int32_t> seq(64);
  std::int64_t follows = 0, transitions = 0;
  std::set<std::int32_t> seen;
  for (std::int64_t g = 0; g < 200; ++g) {
    data.sequence(g, seq.data());
    for (std::size_t p = 0; p < seq.size(); ++p) {
      ASSERT_GE(seq[p], 0);
      ASSERT_LT(seq[p], kVocab);
      seen.insert(seq[p]);
      if (p == 0) continue;
      ++transitions;
      const auto next = (SyntheticTokens::kSuccessorMultiplier * seq[p - 1] +
                         SyntheticTokens::kSuccessorIncrement) %
                        kVocab;
      if (seq[p] == next) ++follows;
    }
  }
  // P(successor) = 0.75 + 0.25 / vocab; 12,600 transitions give a standard error of 0.004.
  const double expected = SyntheticTokens::kFollowProbability + 0.25 / kVocab;
  EXPECT_NEAR(static_cast<double>(follows) / static_cast<double>(transitions), expected, 0.02);
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(kVocab));
}

TEST(SyntheticTokens, DataParallelRanksReadDisjointShardsOfEachGlobalBatch) {
  TrainingSpec t;
  t.global_batch_size = 8;
  t.seq_length = 16;
  ParallelConfig p;
  p.dp = 2;
  p.micro_batch_size = 2;
  // Megatron's sampler order: step 1, dp rank 1, micro-batch 1, sample 1 -> 8 + 4 + 2 + 1.
  EXPECT_EQ(sequence_index(t, p, 1, 1, 1, 1), 15);
  for (std::int64_t step = 0; step < 3; ++step) {
    std::set<std::int64_t> read;
    for (int d = 0; d < 2; ++d)
      for (int mb = 0; mb < 2; ++mb)
        for (int i = 0; i < 2; ++i)
          EXPECT_TRUE(read.insert(sequence_index(t, p, step, d, mb, i)).second);
    EXPECT_EQ(*read.begin(), step * 8);
    EXPECT_EQ(*read.rbegin(), step * 8 + 7);
  }
  const std::string text = describe_data(t, p, 64);
  EXPECT_NE(text.find("seed 1234"), std::string::npos) << text;
  EXPECT_NE(text.find("step s reads sequences 8s+0..8s+7: dp 0 -> 8s+0..8s+3, dp 1 -> 8s+4..8s+7"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("2 micro-batches of 2"), std::string::npos) << text;
}

}  // namespace
}  // namespace planner::exec
