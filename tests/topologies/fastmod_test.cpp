// The division-free remainder route walks use to pick among equal-cost links: the same choice as
// x % d for every x, so routes are unchanged.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

#include "cluster_impl.hpp"

namespace planner::topo {
namespace {

TEST(Fastmod, EqualsTheRemainder) {
  std::mt19937_64 rng(42);
  const std::uint64_t edges[] = {0,
                                 1,
                                 2,
                                 3,
                                 std::numeric_limits<std::uint64_t>::max(),
                                 std::numeric_limits<std::uint64_t>::max() - 1,
                                 std::uint64_t{1} << 63,
                                 (std::uint64_t{1} << 32) - 1};
  for (std::uint64_t d = 1; d <= 300; ++d) {
    const Uint128 m = fastmod_magic(d);
    for (std::uint64_t x : edges)
      ASSERT_EQ(fastmod(x, m, d), x % d) << x << " mod " << d;
    for (int i = 0; i < 2000; ++i) {
      const std::uint64_t x = rng();
      ASSERT_EQ(fastmod(x, m, d), x % d) << x << " mod " << d;
    }
  }
  for (std::uint64_t d : {std::uint64_t{1} << 40, std::numeric_limits<std::uint64_t>::max()}) {
    const std::uint64_t x = rng();
    EXPECT_EQ(fastmod(x, fastmod_magic(d), d), x % d);
  }
}

}  // namespace
}  // namespace planner::topo
