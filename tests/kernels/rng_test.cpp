#include "planner/kernels/cpu/rng.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "common/philox.hpp"

namespace planner::kernels::cpu {
namespace {

TEST(Rng, PhiloxKnownAnswers) {
  // Known-answer vectors of Philox4x32-10 from Random123 (kat_vectors, "philox4x32 10").
  using Words = std::array<std::uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Words{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (Words{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (Words{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Rng, StreamIdsAreFnv1a) {
  EXPECT_EQ(tensor_stream_id(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(tensor_stream_id("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(tensor_stream_id("layers.0.attn.q.weight"), tensor_stream_id("layers.1.attn.q.weight"));
}

TEST(Rng, ShardsHoldExactlyTheValuesOfTheFullTensor) {
  // A 24 x 40 weight initialised whole, then by 4 column-parallel shards, 3 row-parallel shards and
  // uneven flat (ZeRO-style) pieces: every piece is bitwise the same slice of the full tensor.
  const std::uint64_t seed = 1234, stream = tensor_stream_id("layers.2.mlp.fc1.weight");
  const std::int64_t rows = 24, cols = 40;
  std::vector<float> full(rows * cols);
  fill_normal(seed, stream, 0, rows * cols, 0.0f, 0.02f, full.data());

  for (std::int64_t tp : {2, 4}) {
    const std::int64_t w = cols / tp;
    for (std::int64_t r = 0; r < tp; ++r) {
      std::vector<float> shard(rows * w);
      fill_normal_block(seed, stream, cols, 0, r * w, rows, w, 0.0f, 0.02f, shard.data());
      for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < w; ++j) {
          ASSERT_EQ(shard[i * w + j], full[i * cols + r * w + j]) << tp << " " << r;
        }
      }
    }
  }
  for (std::int64_t r = 0; r < 3; ++r) {
    std::vector<float> shard(8 * cols);
    fill_normal_block(seed, stream, cols, r * 8, 0, 8, cols, 0.0f, 0.02f, shard.data());
    EXPECT_EQ(shard,
              std::vector<float>(full.begin() + r * 8 * cols, full.begin() + (r + 1) * 8 * cols));
  }
  const std::vector<std::int64_t> cuts = {0, 100, 101, 517, rows * cols};
  for (std::size_t p = 0; p + 1 < cuts.size(); ++p) {
    std::vector<float> piece(cuts[p + 1] - cuts[p]);
    fill_normal(seed, stream, static_cast<std::uint64_t>(cuts[p]), cuts[p + 1] - cuts[p], 0.0f,
                0.02f, piece.data());
    EXPECT_EQ(piece, std::vector<float>(full.begin() + cuts[p], full.begin() + cuts[p + 1]));
  }
  // Another stream or seed gives other values.
  EXPECT_NE(normal_at(seed, stream, 0), normal_at(seed, stream + 1, 0));
  EXPECT_NE(normal_at(seed, stream, 0), normal_at(seed + 1, stream, 0));
}

TEST(Rng, NormalAndUniformMoments) {
  const std::int64_t n = 200000;
  std::vector<float> x(n), u(n);
  fill_normal(7, 1, 0, n, 0.0f, 1.0f, x.data());
  fill_uniform(7, 2, 0, n, 0.0f, 1.0f, u.data());
  double mean = 0, var = 0, umean = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    mean += x[i];
    var += static_cast<double>(x[i]) * x[i];
    umean += u[i];
    ASSERT_GE(u[i], 0.0f);
    ASSERT_LT(u[i], 1.0f);
    ASSERT_LT(std::abs(x[i]), 6.8f);
  }
  mean /= n;
  var = var / n - mean * mean;
  umean /= n;
  // Five standard errors: sd(mean) = 1/sqrt(n) = 0.0022, sd(var) = sqrt(2/n) = 0.0032,
  // sd(uniform mean) = sqrt(1/12/n) = 0.00065.
  EXPECT_NEAR(mean, 0.0, 0.011);
  EXPECT_NEAR(var, 1.0, 0.016);
  EXPECT_NEAR(umean, 0.5, 0.0033);
}

TEST(Rng, TokensCoverTheVocabulary) {
  const std::int64_t n = 50000, vocab = 50;
  std::vector<std::int32_t> ids(n);
  fill_tokens(3, 4, 0, n, vocab, ids.data());
  std::vector<int> count(vocab, 0);
  for (std::int32_t id : ids) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, vocab);
    ++count[id];
  }
  // Expected 1000 per id, sd about 31.
  for (int c : count)
    EXPECT_NEAR(c, 1000, 160);
  std::vector<std::int32_t> tail(10);
  fill_tokens(3, 4, n - 10, 10, vocab, tail.data());
  EXPECT_EQ(tail, std::vector<std::int32_t>(ids.end() - 10, ids.end()));
}

TEST(Rng, PortableLogAndCosineMatchLibmToDoubleRounding) {
  // normal_at's log and cosine use only basic IEEE operations, so the CUDA kernels reproduce them
  // bit for bit; they must still be as accurate as libm's to a few double ulps.
  std::mt19937_64 gen(11);
  double worst_log = 0, worst_cos = 0;
  for (int i = 0; i < 200000; ++i) {
    const auto w = static_cast<std::uint32_t>(gen());
    const double u1 = (static_cast<double>(w) + 0.5) / 4294967296.0;
    const double want_log = std::log(u1);
    worst_log =
        std::max(worst_log, std::abs(common::portable_log(u1) - want_log) / std::abs(want_log));
    const double u2 = static_cast<double>(w) / 4294967296.0;
    const double want_cos = std::cos(2.0 * std::numbers::pi * u2);
    // Absolute: near the zeros of cos the libm value inherits the rounding of 2 pi u2 (~1e-16).
    worst_cos = std::max(worst_cos, std::abs(common::portable_cos_2pi(u2) - want_cos));
  }
  EXPECT_LT(worst_log, 1e-15);
  EXPECT_LT(worst_cos, 1e-15);
  EXPECT_EQ(common::portable_log(1.0), 0.0);
  EXPECT_NEAR(common::portable_log(0.5 / 4294967296.0), std::log(0.5 / 4294967296.0), 1e-13);
  EXPECT_EQ(common::portable_cos_2pi(0.0), 1.0);
  EXPECT_EQ(common::portable_cos_2pi(0.5), -1.0);
  EXPECT_EQ(common::portable_cos_2pi(0.25), 0.0);
}

TEST(Rng, NormalValuesEqualLibmBoxMullerUpToRareLastBitTies) {
  // The float result rounds a double accurate to ~1e-16, so it differs from libm's Box-Muller
  // only when that double sits within a few double ulps of a float rounding boundary (~2^-28 of
  // cases), and then by one float ulp.
  const std::uint64_t seed = 5, stream = 6;
  int differing = 0;
  const int n = 1000000;
  for (int i = 0; i < n; ++i) {
    const std::array<std::uint32_t, 4> w =
        philox4x32_10({static_cast<std::uint32_t>(i), 0, static_cast<std::uint32_t>(stream), 0},
                      {static_cast<std::uint32_t>(seed), 0});
    const double u1 = (static_cast<double>(w[0]) + 0.5) / 4294967296.0;
    const double u2 = static_cast<double>(w[1]) / 4294967296.0;
    const auto libm =
        static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
    const float got = normal_at(seed, stream, static_cast<std::uint64_t>(i));
    if (got != libm) {
      ++differing;
      ASSERT_EQ(std::nextafter(got, libm), libm) << i << ": more than one float ulp apart";
    }
  }
  EXPECT_LE(differing, 10);
}

}  // namespace
}  // namespace planner::kernels::cpu
