// The flows of collective algorithm steps and the link loads they create.
#include <gtest/gtest.h>

#include "planner/topo/collective_flows.hpp"
#include "test_topologies.hpp"

namespace planner::topo {
namespace {

using testing::build;
using testing::preset;
using testing::range;

TEST(CollectiveFlows, RingInsideADgxH100) {
  const Cluster c = build(preset("dgx-h100-superpod"), 2);
  auto flows = step_flows(c, range(0, 8), StepPattern::kRing, 0);
  ASSERT_TRUE(flows) << flows.status().message();
  ASSERT_EQ(flows->size(), 8u);
  EXPECT_EQ((*flows)[7].src_gpu, 7);
  EXPECT_EQ((*flows)[7].dst_gpu, 0);
  for (const Flow& f : *flows) {
    ASSERT_EQ(f.links.size(), 2u);
    EXPECT_EQ(c.link(f.links[0]).kind, LinkKind::kNvlink4);
  }
  for (const auto& [id, load] : link_loads(*flows))
    EXPECT_EQ(load, 1) << c.device_name(c.link(id).src);
  EXPECT_NEAR(equal_share_rate(c, *flows).raw(), GBps(450).raw(), 1.0);
}

TEST(CollectiveFlows, RingAcrossNodesCrossesTheNics) {
  const Cluster c = build(preset("dgx-h100-superpod"), 2);
  auto flows = step_flows(c, range(0, 16), StepPattern::kRing, 0);
  ASSERT_TRUE(flows);
  int crossing = 0;
  for (const Flow& f : *flows) {
    const bool off_node = c.node_of(f.src_gpu) != c.node_of(f.dst_gpu);
    crossing += off_node ? 1 : 0;
    EXPECT_EQ(off_node, c.path_bandwidth(f.links) == Gbps(400)) << f.src_gpu;
  }
  EXPECT_EQ(crossing, 2);
  EXPECT_NEAR(equal_share_rate(c, *flows).raw(), Gbps(400).raw(), 1.0);
}

TEST(CollectiveFlows, OversubscribedUplinksShareLoad) {
  // 8 one-GPU nodes, 4 per leaf, 4:1: one uplink per leaf. Pairwise step 3 sends i -> i+4: all 4
  // flows of each leaf leave through its single uplink.
  const Cluster c = build(testing::parse(testing::fat_tree_json(4, 4)), 8);
  auto flows = step_flows(c, range(0, 8), StepPattern::kPairwise, 3);
  ASSERT_TRUE(flows);
  int max_load = 0;
  for (const auto& [id, load] : link_loads(*flows))
    max_load = std::max(max_load, load);
  EXPECT_EQ(max_load, 4);
  EXPECT_NEAR(equal_share_rate(c, *flows).raw(), (Gbps(100) / 4).raw(), 1.0);
}

TEST(CollectiveFlows, StepPatterns) {
  EXPECT_EQ(*step_count(StepPattern::kRing, 16), 1);
  EXPECT_EQ(*step_count(StepPattern::kRecursiveDoubling, 16), 4);
  EXPECT_EQ(*step_count(StepPattern::kPairwise, 16), 15);
  EXPECT_FALSE(step_count(StepPattern::kRecursiveDoubling, 12));
  const Cluster c = build(preset("dgx-h100-superpod"), 2);
  auto doubling = step_flows(c, range(0, 16), StepPattern::kRecursiveDoubling, 2);
  ASSERT_TRUE(doubling);
  for (const Flow& f : *doubling)
    EXPECT_EQ(f.dst_gpu, f.src_gpu ^ 4);
  auto first = step_flows(c, range(0, 16), StepPattern::kPairwise, 0);
  auto ring = step_flows(c, range(0, 16), StepPattern::kRing, 0);
  ASSERT_TRUE(first && ring);
  for (std::size_t i = 0; i < 16; ++i)
    EXPECT_EQ((*first)[i].dst_gpu, (*ring)[i].dst_gpu);
  EXPECT_EQ(step_flows(c, range(0, 8), StepPattern::kPairwise, 7).status().message(),
            "step 7 is out of range: the pairwise pattern has 7 step(s) for 8 GPUs");
  EXPECT_FALSE(step_flows(c, std::vector<int>{1, 1}, StepPattern::kRing, 0));
  // Channels may route differently but always between the same GPUs.
  auto other = step_flows(c, range(0, 16), StepPattern::kRing, 0, 5);
  ASSERT_TRUE(other);
  EXPECT_EQ((*other)[7].dst_gpu, 8);
}

}  // namespace
}  // namespace planner::topo
