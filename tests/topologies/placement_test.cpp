// Placement of rank-grid ranks onto GPUs.
#include <gtest/gtest.h>

#include "planner/topo/capacity.hpp"
#include "planner/topo/placement.hpp"
#include "test_topologies.hpp"

namespace planner::topo {
namespace {

using testing::build;
using testing::preset;

RankGrid grid(int tp, int dp, int pp, std::string_view order = kDefaultRankOrder) {
  AxisSizes s;
  s.tp = tp;
  s.dp = dp;
  s.pp = pp;
  auto g = RankGrid::create(s, order);
  if (!g) throw std::runtime_error(g.status().message());
  return *g;
}

TEST(Placement, DefaultPutsEachTensorParallelGroupOnOneNode) {
  const Cluster c = build(preset("dgx-h100-superpod"), 8);
  // The grid's own order puts dp innermost; placement still keeps tp within a node.
  const RankGrid g = grid(8, 4, 2, "dp-tp-pp");
  auto p = Placement::by_order(g, c);
  ASSERT_TRUE(p) << p.status().message();
  auto tp_groups = g.groups("tp");
  ASSERT_TRUE(tp_groups);
  ASSERT_EQ(tp_groups->size(), 8u);
  for (const auto& group : *tp_groups) {
    const std::vector<int> gpus = p->gpus(group);
    for (int gpu : gpus)
      EXPECT_TRUE(c.shares(gpus.front(), gpu, Scope::kNode)) << gpu;
    auto bw = group_bandwidth(c, gpus);
    ASSERT_TRUE(bw);
    EXPECT_NEAR(bw->bottleneck.raw(), GBps(450).raw(), 1.0);
  }
  // Pipeline stages outermost: stage 0 on nodes 0-3, stage 1 on nodes 4-7.
  for (int rank = 0; rank < g.world_size(); ++rank) {
    EXPECT_EQ(c.node_of(p->gpu(rank)) / 4, g.coordinate(rank, Axis::kPp)) << rank;
  }
}

TEST(Placement, WorkedExampleFromTheHeader) {
  // tp=2, dp=2, pp=2 on two 4-GPU nodes.
  const TopologySpec spec = testing::parse(R"({"schema_version": 1, "kind": "topology",
    "name": "four", "description": "4 GPUs", "gpu": "L40S", "sources": ["test"],
    "node": {"generator": "pcie", "gpus": 4, "pcie": {"kind": "pcie4", "latency_ns": 100},
             "pcie_switches": 1, "cpus": 1, "nics": 1},
    "fabric": {"type": "leaf-spine", "hosts_per_leaf": 4,
      "host_link": {"kind": "ethernet", "bandwidth_Gbps": 100, "latency_ns": 500},
      "switch_link": {"kind": "ethernet", "bandwidth_Gbps": 100, "latency_ns": 300}}})");
  const Cluster c = build(spec, 2);
  const RankGrid g = grid(2, 2, 2);
  auto p = Placement::by_order(g, c);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->gpu_of_rank(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // pp innermost instead: stage pairs share a node, tp pairs are split across nodes.
  auto q = Placement::by_order(g, c, "pp-dp-tp");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->gpu_of_rank(), (std::vector<int>{0, 4, 2, 6, 1, 5, 3, 7}));
  EXPECT_FALSE(c.shares(q->gpu(0), q->gpu(1), Scope::kNode));
}

TEST(Placement, ExplicitMapsAreChecked) {
  const Cluster c = build(preset("dgx-h100-superpod"), 1);
  const RankGrid g = grid(2, 2, 1);
  auto ok = Placement::explicit_map(g, c, {7, 6, 5, 4});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->gpu(1), 6);
  EXPECT_EQ(Placement::explicit_map(g, c, {0, 1, 2}).status().message(),
            "placement: the map lists 3 GPUs for 4 ranks");
  EXPECT_EQ(Placement::explicit_map(g, c, {0, 1, 2, 2}).status().message(),
            "placement: ranks 2 and 3 both map to GPU 2");
  EXPECT_EQ(Placement::explicit_map(g, c, {0, 1, 2, 8}).status().message(),
            "placement: rank 3 maps to GPU 8, outside 0..7");
  EXPECT_EQ(Placement::by_order(grid(8, 2, 1), c).status().message(),
            "placement: the rank grid has 16 ranks but the cluster has 8 GPUs");
  EXPECT_FALSE(Placement::by_order(g, c, "tp-xx"));
}

// Jobs beyond one NVL72 rack (18 trays) sit in equal blocks, one per rack: 32 trays as 2 x 16,
// 64 as 4 x 16, 36 as 2 whole racks, 40 as 4 x 10; a job within one rack, a prime 37 trays (no
// block of at least half a rack divides it) and a topology without rack-scale NVLink are left as
// they are. The cluster built on the blocks keeps a block's GPUs in one NVLink domain.
TEST(Placement, JobsBeyondARackSitInEqualBlocks) {
  const TopologySpec nvl72 = preset("gb200-nvl72");
  ASSERT_TRUE(nvl72.nvlink_domain);
  ASSERT_EQ(nvl72.nvlink_domain->nodes, 18);
  auto block = [&](int nodes) {
    TopologySpec t = nvl72;
    const int b = place_in_domain_blocks(t, nodes);
    EXPECT_EQ(t.nvlink_domain->nodes, b > 0 ? b : 18) << nodes;
    return b;
  };
  EXPECT_EQ(block(32), 16);
  EXPECT_EQ(block(64), 16);
  EXPECT_EQ(block(36), 0);
  EXPECT_EQ(block(40), 10);
  EXPECT_EQ(block(16), 0);
  EXPECT_EQ(block(18), 0);
  EXPECT_EQ(block(37), 0);
  TopologySpec dgx = preset("dgx-h100-superpod");
  EXPECT_EQ(place_in_domain_blocks(dgx, 64), 0);

  TopologySpec t = nvl72;
  ASSERT_EQ(place_in_domain_blocks(t, 32), 16);
  const Cluster c = build(t, 32);
  EXPECT_EQ(c.nvlink_domain_of(0), c.nvlink_domain_of(16 * 4 - 1));  // trays 0-15
  EXPECT_NE(c.nvlink_domain_of(16 * 4 - 1), c.nvlink_domain_of(16 * 4));
  EXPECT_EQ(c.nvlink_domain_of(16 * 4), c.nvlink_domain_of(32 * 4 - 1));  // trays 16-31
}

}  // namespace
}  // namespace planner::topo
