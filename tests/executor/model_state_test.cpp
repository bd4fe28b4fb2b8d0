#include "planner/exec/model_state.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "exec_test_plans.hpp"
#include "planner/exec/cpu_device.hpp"

namespace planner::exec {
namespace {

using testing::gpt_test_model;
using testing::llama_test_model;

// A data-parallel group of `size` ranks seen from member `rank`, for the shard layout (ModelState
// only asks for the size and this rank's index).
class FakeGroup final : public Communicator {
 public:
  FakeGroup(int size, int rank) : rank_(rank) {
    for (int r = 0; r < size; ++r)
      ranks_.push_back(r);
  }
  const std::string& axes() const override { return axes_; }
  const std::vector<int>& ranks() const override { return ranks_; }
  int rank() const override { return rank_; }
  Result<Ticket> all_reduce(void*, std::int64_t, DType, ReduceOp, std::string_view) override {
    return Status::internal("not a real group");
  }
  Result<Ticket> all_gather(const void*, void*, std::int64_t, DType, std::string_view) override {
    return Status::internal("not a real group");
  }
  Result<Ticket> reduce_scatter(const void*, void*, std::int64_t, DType, ReduceOp,
                                std::string_view) override {
    return Status::internal("not a real group");
  }
  Result<Ticket> all_to_all(const void*, void*, std::int64_t, DType, std::string_view) override {
    return Status::internal("not a real group");
  }
  Result<Ticket> all_to_all_v(const void*, const std::vector<std::int64_t>&, void*,
                              const std::vector<std::int64_t>&, DType, std::string_view) override {
    return Status::internal("not a real group");
  }
  Result<Ticket> broadcast(void*, std::int64_t, DType, int, std::string_view) override {
    return Status::internal("not a real group");
  }
  Result<Ticket> send(const void*, std::int64_t, DType, int, std::uint32_t,
                      std::string_view) override {
    return Status::internal("not a real group");
  }
  Result<Ticket> recv(void*, std::int64_t, DType, int, std::uint32_t, std::string_view) override {
    return Status::internal("not a real group");
  }

 private:
  std::string axes_ = "dp";
  std::vector<int> ranks_;
  int rank_;
};

std::unique_ptr<ModelState> make_state(CpuDevice& dev, const ModelSpec& model, int tp, int tp_rank,
                                       int zero = 0, Communicator* dp = nullptr,
                                       std::int64_t bucket = 40'000'000) {
  ModelState::Config c;
  c.model = model;
  c.parallel.tp = tp;
  c.parallel.zero_stage = zero;
  c.tp_rank = tp_rank;
  c.bucket_elements = bucket;
  c.seed = 99;
  c.dp = dp;
  auto state = ModelState::create(dev, c);
  EXPECT_TRUE(state) << state.status().message();
  return state ? std::move(state).value() : nullptr;
}

std::vector<float> values(const ModelState& s, int layer, OpRole role) {
  const int t = s.find(layer, role);
  EXPECT_GE(t, 0) << to_string(role);
  if (t < 0) return {};
  const float* p = s.param(t);
  return std::vector<float>(p, p + s.tensors()[static_cast<std::size_t>(t)].elements);
}

// Rows [r0, r0 + rows) of a row-major matrix with `cols` columns, from `offset`.
std::vector<float> rows_of(const std::vector<float>& m, std::int64_t offset, std::int64_t r0,
                           std::int64_t rows, std::int64_t cols) {
  const auto begin = m.begin() + offset + r0 * cols;
  return std::vector<float>(begin, begin + rows * cols);
}

// Columns [c0, c0 + cols) of a rows x full_cols row-major matrix.
std::vector<float> cols_of(const std::vector<float>& m, std::int64_t rows, std::int64_t full_cols,
                           std::int64_t c0, std::int64_t cols) {
  std::vector<float> out;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      out.push_back(m[static_cast<std::size_t>(r * full_cols + c0 + c)]);
  return out;
}

TEST(ModelState, TensorParallelShardsHoldTheSingleRankModelsValues) {
  for (const ModelSpec& m : {gpt_test_model(), llama_test_model()}) {
    CpuDevice dev(0, 1);
    auto full = make_state(dev, m, 1, 0);
    ASSERT_TRUE(full);
    const std::int64_t h = m.hidden, q = m.q_dim(), kv = m.kv_dim(), f = m.ffn_hidden;
    for (int r = 0; r < 2; ++r) {
      auto part = make_state(dev, m, 2, r);
      ASSERT_TRUE(part);
      // Word embedding rows of this vocabulary shard; learned positions replicated.
      const auto emb = values(*full, OpId::kNone, OpRole::kEmbedding);
      const auto emb_r = values(*part, OpId::kNone, OpRole::kEmbedding);
      const std::int64_t v_l = m.vocab / 2;
      EXPECT_EQ(rows_of(emb_r, 0, 0, v_l, h), rows_of(emb, 0, r * v_l, v_l, h)) << m.name;
      EXPECT_EQ(std::vector<float>(emb_r.begin() + v_l * h, emb_r.end()),
                std::vector<float>(emb.begin() + m.vocab * h, emb.end()));
      for (int layer : {0, 3}) {
        // Fused QKV rows: this rank's query heads, then its K heads, then its V heads.
        const auto qkv = values(*full, layer, OpRole::kAttnQkv);
        const auto qkv_r = values(*part, layer, OpRole::kAttnQkv);
        EXPECT_EQ(rows_of(qkv_r, 0, 0, q / 2, h), rows_of(qkv, 0, r * q / 2, q / 2, h));
        EXPECT_EQ(rows_of(qkv_r, 0, q / 2, kv / 2, h), rows_of(qkv, 0, q + r * kv / 2, kv / 2, h));
        EXPECT_EQ(rows_of(qkv_r, 0, q / 2 + kv / 2, kv / 2, h),
                  rows_of(qkv, 0, q + kv + r * kv / 2, kv / 2, h));
        // Row-parallel weights: a block of columns; the replicated bias whole.
        const auto out = values(*full, layer, OpRole::kAttnOut);
        const auto out_r = values(*part, layer, OpRole::kAttnOut);
        EXPECT_EQ(std::vector<float>(out_r.begin(), out_r.begin() + h * q / 2),
                  cols_of(out, h, q, r * q / 2, q / 2));
        const auto down = values(*full, layer, OpRole::kMlpDown);
        const auto down_r = values(*part, layer, OpRole::kMlpDown);
        EXPECT_EQ(std::vector<float>(down_r.begin(), down_r.begin() + h * f / 2),
                  cols_of(down, h, f, r * f / 2, f / 2));
        const auto up = values(*full, layer, OpRole::kMlpUp);
        const auto up_r = values(*part, layer, OpRole::kMlpUp);
        EXPECT_EQ(rows_of(up_r, 0, 0, f / 2, h), rows_of(up, 0, r * f / 2, f / 2, h));
        EXPECT_EQ(values(*part, layer, OpRole::kAttnNorm), values(*full, layer, OpRole::kAttnNorm));
      }
    }
  }
}

TEST(ModelState, InitialisationFollowsMegatron) {
  const ModelSpec m = gpt_test_model();
  CpuDevice dev(0, 1);
  auto s = make_state(dev, m, 1, 0);
  ASSERT_TRUE(s);
  auto stddev = [](const std::vector<float>& v, std::size_t n) {
    double sum = 0, sq = 0;
    for (std::size_t i = 0; i < n; ++i) {
      sum += v[i];
      sq += static_cast<double>(v[i]) * v[i];
    }
    const double mean = sum / static_cast<double>(n);
    return std::sqrt(sq / static_cast<double>(n) - mean * mean);
  };
  const auto norm = values(*s, 1, OpRole::kAttnNorm);
  EXPECT_EQ(norm[0], 1.0f);
  EXPECT_EQ(norm[static_cast<std::size_t>(m.hidden)], 0.0f);  // LayerNorm beta
  const auto qkv = values(*s, 1, OpRole::kAttnQkv);
  EXPECT_NEAR(stddev(qkv, static_cast<std::size_t>(3 * m.hidden * m.hidden)), kInitStd, 0.002);
  EXPECT_EQ(qkv.back(), 0.0f);  // bias
  const auto down = values(*s, 1, OpRole::kMlpDown);
  EXPECT_NEAR(stddev(down, static_cast<std::size_t>(m.hidden * m.ffn_hidden)),
              kInitStd / std::sqrt(2.0 * m.num_layers), 0.001);
}

TEST(ModelState, GroupsAreTheLoweringsBucketsAndShardOverDataParallelRanks) {
  const ModelSpec m = gpt_test_model();
  auto part = ModelPartition::create(m, ParallelConfig{});
  ASSERT_TRUE(part);
  const StageParams sp = part->stage_params(0, 3000);
  ASSERT_GT(sp.buckets.size(), 3u);
  CpuDevice dev(0, 1);
  for (int zero : {0, 1}) {
    std::int64_t covered = 0;
    for (int r = 0; r < 3; ++r) {
      FakeGroup dp(3, r);
      auto s = make_state(dev, m, 1, 0, zero, &dp, 3000);
      ASSERT_TRUE(s);
      ASSERT_EQ(s->groups().size(), sp.buckets.size());
      for (std::size_t b = 0; b < sp.buckets.size(); ++b) {
        const ParamGroup& g = s->groups()[b];
        EXPECT_EQ(g.tensors, sp.buckets[b].tensors);
        EXPECT_EQ(g.elements, sp.buckets[b].elements);
        EXPECT_EQ(g.sharded, zero >= 1);
        if (zero == 0) {
          EXPECT_EQ(g.shard(), g.elements);
          continue;
        }
        EXPECT_EQ(g.padded % 3, 0);
        EXPECT_EQ(g.shard_begin, std::min(g.elements, r * g.padded / 3));
        covered += g.shard();
        std::int64_t offset = 0;
        for (int t : g.tensors) {
          EXPECT_EQ(s->place(t).offset, offset);
          offset += s->tensors()[static_cast<std::size_t>(t)].elements;
        }
      }
    }
    if (zero == 1) {
      EXPECT_EQ(covered, part->rank_params(0).total());
    }
  }
}

TEST(ModelState, ZeroThreeGroupsALayerEach) {
  ModelSpec m = gpt_test_model(/*tied=*/true);
  CpuDevice dev(0, 1);
  FakeGroup dp(2, 0);
  auto s = make_state(dev, m, 1, 0, 3, &dp);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->groups().size(), static_cast<std::size_t>(m.num_layers + 2));
  for (int l = 0; l < m.num_layers; ++l) {
    EXPECT_EQ(s->group_for(l, 0), s->group_of(s->find(l, OpRole::kAttnQkv)));
  }
  EXPECT_EQ(s->group_for(OpId::kNone, 2), s->group_of(s->find(OpId::kNone, OpRole::kEmbedding)));
  EXPECT_EQ(s->group_for(OpId::kNone, 3), s->group_of(s->find(OpId::kNone, OpRole::kFinalNorm)));
  // A single-stage tied model's LM head is its embedding.
  EXPECT_EQ(s->find(OpId::kNone, OpRole::kLmHead), s->find(OpId::kNone, OpRole::kEmbedding));
}

TEST(CpuDevice, AccountsMemoryAndRefusesToExceedItsCapacity) {
  CpuDevice dev(1 << 20, 1);
  auto a = dev.allocate(1000, "a");
  ASSERT_TRUE(a);
  EXPECT_EQ(dev.memory().in_use, 1024);  // 64-byte blocks
  auto b = dev.allocate(512 * 1024, "b");
  ASSERT_TRUE(b);
  dev.deallocate(*b, 512 * 1024);
  EXPECT_EQ(dev.memory().in_use, 1024);
  EXPECT_EQ(dev.memory().peak, 1024 + 512 * 1024);
  auto again = dev.allocate(512 * 1024, "again");  // served from the cache
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *b);
  auto big = dev.allocate(1 << 20, "activations of layer 3");
  ASSERT_FALSE(big);
  EXPECT_NE(big.status().message().find("activations of layer 3"), std::string::npos);
  dev.deallocate(*again, 512 * 1024);
  dev.deallocate(*a, 1000);
  EXPECT_EQ(dev.memory().in_use, 0);
  dev.reset_peak();
  EXPECT_EQ(dev.memory().peak, 0);
}

TEST(CpuDevice, CopiesRowsBetweenPitches) {
  CpuDevice dev(0, 1);
  const float src[6] = {1, 2, 3, 4, 5, 6};  // 2 rows of 3
  float dst[4] = {};
  dev.copy_2d(dst, 2 * sizeof(float), src + 1, 3 * sizeof(float), 2 * sizeof(float), 2);
  EXPECT_EQ(std::vector<float>(dst, dst + 4), (std::vector<float>{2, 3, 5, 6}));
  const Event e0 = dev.record();
  const Event e1 = dev.record();
  EXPECT_LE(dev.seconds(e0), dev.seconds(e1));
}

}  // namespace
}  // namespace planner::exec
