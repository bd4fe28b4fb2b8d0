#include "planner/kernels/cpu/embedding.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_support.hpp"

namespace planner::kernels::cpu {
namespace {

using testing::random_floats;
using testing::random_ids;

constexpr std::int64_t kVocab = 11, kDim = 19, kTokens = 40;

TEST(Embedding, ForwardGathersAndVocabShardsSumToTheFullLookup) {
  const auto weight = random_floats(kVocab * kDim, 1);
  const auto ids = random_ids(kTokens, kVocab, 2);
  std::vector<float> full(kTokens * kDim);
  embedding_forward(ids.data(), kTokens, weight.data(), 0, kVocab, kDim, full.data());
  for (std::int64_t t = 0; t < kTokens; ++t) {
    for (std::int64_t c = 0; c < kDim; ++c)
      EXPECT_EQ(full[t * kDim + c], weight[ids[t] * kDim + c]);
  }
  // Three uneven vocabulary shards [0, 4), [4, 9), [9, 11): each zero outside its rows; they sum to
  // full.
  const std::vector<std::int64_t> starts = {0, 4, 9, kVocab};
  std::vector<float> summed(kTokens * kDim, 0.0f);
  for (std::size_t s = 0; s + 1 < starts.size(); ++s) {
    std::vector<float> part(kTokens * kDim, -1.0f);
    embedding_forward(ids.data(), kTokens, weight.data() + starts[s] * kDim, starts[s],
                      starts[s + 1] - starts[s], kDim, part.data());
    for (std::size_t i = 0; i < part.size(); ++i)
      summed[i] += part[i];
  }
  EXPECT_EQ(summed, full);
}

TEST(Embedding, BackwardScatterAddsDeterministically) {
  const auto ids = random_ids(kTokens, kVocab, 3);  // 40 tokens over 11 ids: plenty of repeats
  const auto dout = random_floats(kTokens * kDim, 4);
  std::vector<float> dweight(kVocab * kDim, 0.0f);
  embedding_backward(ids.data(), kTokens, dout.data(), 0, kVocab, kDim, dweight.data());
  // Against central differences of L = sum dout * lookup(weight), in double.
  const auto doutd = testing::to_double(dout);
  const auto want = testing::numeric_gradient(
      [&](const std::vector<double>& w) {
        std::vector<double> out(kTokens * kDim);
        for (std::int64_t t = 0; t < kTokens; ++t) {
          for (std::int64_t c = 0; c < kDim; ++c)
            out[t * kDim + c] = w[ids[t] * kDim + c];
        }
        return testing::weighted_sum(out, doutd);
      },
      std::vector<double>(kVocab * kDim, 0.0));
  testing::expect_close(dweight, want, 1e-5, 1e-6, "dweight");
  // Bitwise reproducible, and it accumulates onto existing gradients.
  std::vector<float> again(kVocab * kDim, 0.0f);
  embedding_backward(ids.data(), kTokens, dout.data(), 0, kVocab, kDim, again.data());
  EXPECT_EQ(again, dweight);
  embedding_backward(ids.data(), kTokens, dout.data(), 0, kVocab, kDim, again.data());
  for (std::size_t i = 0; i < again.size(); ++i)
    EXPECT_NEAR(again[i], 2 * dweight[i], 1e-5);
  // A vocabulary shard gets exactly its rows of the full gradient.
  std::vector<float> shard(5 * kDim, 0.0f);
  embedding_backward(ids.data(), kTokens, dout.data(), 4, 5, kDim, shard.data());
  EXPECT_EQ(shard, std::vector<float>(dweight.begin() + 4 * kDim, dweight.begin() + 9 * kDim));
}

TEST(PositionEmbedding, ForwardAddsAndBackwardSumsOverBatch) {
  const std::int64_t batch = 3, seq = 4, max_positions = 10;
  const auto table = random_floats(max_positions * kDim, 5);
  // A context-parallel rank holding the chunks [1, 3) and [6, 8) of a sequence of 8.
  const std::vector<std::int32_t> positions = {1, 2, 6, 7};
  const auto x0 = random_floats(batch * seq * kDim, 6);
  auto x = x0;
  position_embedding_forward(positions.data(), batch, seq, table.data(), kDim, x.data());
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < seq; ++s) {
      for (std::int64_t c = 0; c < kDim; ++c) {
        const std::int64_t i = (b * seq + s) * kDim + c;
        EXPECT_EQ(x[i], x0[i] + table[positions[s] * kDim + c]);
      }
    }
  }
  const auto dx = random_floats(batch * seq * kDim, 7);
  std::vector<float> dtable(max_positions * kDim, 0.0f);
  position_embedding_backward(positions.data(), batch, seq, dx.data(), kDim, dtable.data());
  const auto dxd = testing::to_double(dx);
  const auto want = testing::numeric_gradient(
      [&](const std::vector<double>& t) {
        std::vector<double> out(batch * seq * kDim);
        for (std::int64_t b = 0; b < batch; ++b) {
          for (std::int64_t s = 0; s < seq; ++s) {
            for (std::int64_t c = 0; c < kDim; ++c) {
              out[(b * seq + s) * kDim + c] =
                  x0[(b * seq + s) * kDim + c] + t[positions[s] * kDim + c];
            }
          }
        }
        return testing::weighted_sum(out, dxd);
      },
      testing::to_double(table));
  testing::expect_close(dtable, want, 1e-5, 1e-6, "dtable");
  for (std::int64_t c = 0; c < kDim; ++c)
    EXPECT_EQ(dtable[0 * kDim + c], 0.0f);  // untouched row
}

}  // namespace
}  // namespace planner::kernels::cpu
