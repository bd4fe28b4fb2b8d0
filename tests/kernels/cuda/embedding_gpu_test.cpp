#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_support.hpp"
#include "planner/kernels/cpu/embedding.hpp"
#include "planner/kernels/cpu/rope.hpp"
#include "planner/kernels/cuda/embedding.hpp"
#include "planner/kernels/cuda/rope.hpp"

namespace planner::kernels::cuda::testing {
namespace {

template <class T>
class CudaEmbedding : public GpuTest {};
TYPED_TEST_SUITE(CudaEmbedding, ElementTypes);

TYPED_TEST(CudaEmbedding, VocabParallelLookupAndGradientMatchTheCpuBitwise) {
  using T = TypeParam;
  // 700 tokens over a vocabulary of 50 (every id repeats many times, more than a block's 256
  // slots for some), split over two ranks at row 23.
  const std::int64_t tokens = 700, vocab = 50, dim = 300;
  std::vector<std::int32_t> ids = random_ids(tokens, vocab, 31);
  for (std::int64_t t = 0; t < 300; ++t)
    ids[t * 2] = 7;  // id 7 in 300+ slots
  const auto weight = quantize<T>(random_floats(vocab * dim, 32));
  const auto dout = quantize<T>(random_floats(tokens * dim, 33));
  auto d_ids = upload_ids(ids, this->stream());
  auto d_dout = upload<T>(dout, this->stream());
  for (const auto& [start, rows] : {std::pair<std::int64_t, std::int64_t>{0, 23}, {23, 27}}) {
    const std::string what = "embedding rows " + std::to_string(start);
    const std::vector<float> shard(weight.begin() + start * dim,
                                   weight.begin() + (start + rows) * dim);
    auto d_weight = upload<T>(shard, this->stream());
    auto d_out = zeros<T>(tokens * dim, this->stream());
    require(embedding_forward(d_ids.data(), tokens, d_weight.data(), start, rows, dim, d_out.data(),
                              this->stream()));
    std::vector<float> want(tokens * dim);
    cpu::embedding_forward(ids.data(), tokens, shard.data(), start, rows, dim, want.data());
    expect_matches_cpu<T>(download(d_out, this->stream()), want, KernelKind::kExact, what);

    const auto dweight0 = random_floats(rows * dim, 34);
    auto d_dweight = upload<float>(dweight0, this->stream());
    require(embedding_backward(d_ids.data(), tokens, d_dout.data(), start, rows, dim,
                               d_dweight.data(), this->stream()));
    std::vector<float> want_dweight = dweight0;
    cpu::embedding_backward(ids.data(), tokens, dout.data(), start, rows, dim, want_dweight.data());
    expect_close_fp32(download(d_dweight, this->stream()), want_dweight, KernelKind::kExact,
                      what + " backward");
  }
}

TYPED_TEST(CudaEmbedding, PositionEmbeddingMatchesTheCpuBitwise) {
  using T = TypeParam;
  // Two context-parallel chunks of a 64-position table, one position listed twice.
  const std::int64_t batch = 3, dim = 96, table_rows = 64;
  std::vector<std::int32_t> positions;
  for (std::int32_t p = 8; p < 16; ++p)
    positions.push_back(p);
  for (std::int32_t p = 48; p < 56; ++p)
    positions.push_back(p);
  positions.push_back(10);
  const auto seq = static_cast<std::int64_t>(positions.size());
  const auto table = quantize<T>(random_floats(table_rows * dim, 41));
  const auto x = quantize<T>(random_floats(batch * seq * dim, 42));
  auto d_pos = upload_ids(positions, this->stream());
  auto d_table = upload<T>(table, this->stream());
  auto d_x = upload<T>(x, this->stream());
  require(position_embedding_forward(d_pos.data(), batch, seq, d_table.data(), dim, d_x.data(),
                                     this->stream()));
  std::vector<float> want = x;
  cpu::position_embedding_forward(positions.data(), batch, seq, table.data(), dim, want.data());
  expect_matches_cpu<T>(download(d_x, this->stream()), want, KernelKind::kExact, "position fwd");

  const auto dtable0 = random_floats(table_rows * dim, 43);
  auto d_dtable = upload<float>(dtable0, this->stream());
  auto d_dx = upload<T>(x, this->stream());
  require(position_embedding_backward(d_pos.data(), batch, seq, d_dx.data(), dim, d_dtable.data(),
                                      this->stream()));
  std::vector<float> want_dtable = dtable0;
  cpu::position_embedding_backward(positions.data(), batch, seq, x.data(), dim, want_dtable.data());
  expect_close_fp32(download(d_dtable, this->stream()), want_dtable, KernelKind::kExact,
                    "position backward");
}

TYPED_TEST(CudaEmbedding, RopeRotatesLikeTheCpu) {
  using T = TypeParam;
  const std::int64_t batch = 2, heads = 3, head_dim = 64;
  std::vector<std::int32_t> positions;
  for (std::int32_t p = 0; p < 40; ++p)
    positions.push_back(p * 97);  // up to 3783: large angles
  const auto seq = static_cast<std::int64_t>(positions.size());
  const double theta = 500000.0;  // Llama 3
  std::vector<float> table(seq * head_dim);
  cpu::rope_table(positions.data(), seq, head_dim, theta, table.data());

  // The device table: CUDA's double pow/cos/sin against glibc's, rounded to float.
  auto d_pos = upload_ids(positions, this->stream());
  auto d_table = zeros<float>(seq * head_dim, this->stream());
  require(rope_table(d_pos.data(), seq, head_dim, theta, d_table.data(), this->stream()));
  cpu::testing::expect_close(download(d_table, this->stream()), table, 1.2e-7, 1e-7, "rope table");

  // With the CPU's table the rotation is bit-identical in fp32.
  auto cpu_table = upload<float>(table, this->stream());
  const auto x = quantize<T>(random_floats(batch * seq * heads * head_dim, 51));
  auto d_x = upload<T>(x, this->stream());
  require(rope_forward(cpu_table.data(), batch, seq, heads, head_dim, d_x.data(), this->stream()));
  std::vector<float> want = x;
  cpu::rope_forward(table.data(), batch, seq, heads, head_dim, want.data());
  expect_matches_cpu<T>(download(d_x, this->stream()), want, KernelKind::kExact, "rope forward");
  auto d_dx = upload<T>(x, this->stream());
  require(
      rope_backward(cpu_table.data(), batch, seq, heads, head_dim, d_dx.data(), this->stream()));
  want = x;
  cpu::rope_backward(table.data(), batch, seq, heads, head_dim, want.data());
  expect_matches_cpu<T>(download(d_dx, this->stream()), want, KernelKind::kExact, "rope backward");
}

}  // namespace
}  // namespace planner::kernels::cuda::testing
