// Bottleneck, injection and bisection bandwidths, checked against the link figures they come from.
#include <gtest/gtest.h>

#include "planner/topo/capacity.hpp"
#include "test_topologies.hpp"

namespace planner::topo {
namespace {

using testing::build;
using testing::preset;
using testing::range;

// Bandwidths are flows of whole bytes/s: compare to the byte.
void expect_bw(Bandwidth actual, Bandwidth expected) {
  EXPECT_NEAR(actual.raw(), expected.raw(), 1.0)
      << to_GBps(actual) << " GB/s vs " << to_GBps(expected) << " GB/s";
}

TEST(Capacity, TensorParallelGroupInADgxH100RunsAtTheNvlink4Rate) {
  const Cluster c = build(preset("dgx-h100-superpod"), 2);
  auto g = group_bandwidth(c, range(0, 8));
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->islands, 1);
  EXPECT_EQ(g->intra_class, LinkClass::kNvlink);
  expect_bw(g->intra, GBps(450));  // reference data: NVLink4, 450 GB/s per direction
  expect_bw(g->bottleneck, GBps(450));
  expect_bw(g->injection, Bandwidth::zero());
}

TEST(Capacity, GroupAcrossTwoDgxH100NodesIsBoundedByTheNics) {
  const Cluster c = build(preset("dgx-h100-superpod"), 2);
  auto g = group_bandwidth(c, range(0, 16));
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->islands, 2);
  expect_bw(g->intra, GBps(450));
  expect_bw(g->injection, Gbps(400));  // one 400 Gb/s NDR NIC per GPU
  expect_bw(g->fabric, Gbps(400));     // non-blocking rails
  expect_bw(g->bottleneck, Gbps(400));
  // A data-parallel group, one GPU per node on the same rail, gets that GPU's NIC.
  auto dp = group_bandwidth(c, std::vector<int>{3, 11});
  ASSERT_TRUE(dp);
  expect_bw(dp->bottleneck, Gbps(400));
  expect_bw(dp->intra, Bandwidth::zero());
}

TEST(Capacity, DoublingOversubscriptionHalvesCrossLeafBisection) {
  // 8 one-GPU nodes, 4 per leaf at 100 Gb/s: the halves are the two leaves.
  const Bandwidth r1 = bisection_bandwidth(build(testing::parse(testing::fat_tree_json(4, 1)), 8));
  const Bandwidth r2 = bisection_bandwidth(build(testing::parse(testing::fat_tree_json(4, 2)), 8));
  const Bandwidth r4 = bisection_bandwidth(build(testing::parse(testing::fat_tree_json(4, 4)), 8));
  expect_bw(r1, Gbps(4 * 100));
  expect_bw(r2, Gbps(2 * 100));
  expect_bw(r4, Gbps(1 * 100));
  EXPECT_DOUBLE_EQ(r1 / r2, 2.0);
  EXPECT_DOUBLE_EQ(r2 / r4, 2.0);
  // Within one leaf the oversubscription does not matter.
  const Cluster c = build(testing::parse(testing::fat_tree_json(4, 4)), 8);
  auto same_leaf = cut_bandwidth(c, std::vector<int>{0, 1}, std::vector<int>{2, 3});
  ASSERT_TRUE(same_leaf);
  expect_bw(*same_leaf, Gbps(2 * 100));
  auto g = group_bandwidth(c, range(0, 8));
  ASSERT_TRUE(g);
  expect_bw(g->injection, Gbps(100));
  expect_bw(g->fabric, Gbps(100) / 4);
  expect_bw(g->bottleneck, Gbps(100) / 4);
}

TEST(Capacity, InjectionFollowsNicsPerGpu) {
  // Reference data node_network_configs: p4d 4x 100 Gb/s for 8 GPUs, p5 32x 100 Gb/s.
  const Cluster p4d = build(preset("aws-p4d"), 1);
  auto all = injection_bandwidth(p4d, range(0, 8));
  ASSERT_TRUE(all);
  expect_bw(*all, Gbps(400) / 8);
  auto one = injection_bandwidth(p4d, std::vector<int>{5});
  ASSERT_TRUE(one);
  expect_bw(*one, Gbps(100));
  const Cluster p5 = build(preset("aws-p5"), 1);
  auto p5_all = injection_bandwidth(p5, range(0, 8));
  ASSERT_TRUE(p5_all);
  expect_bw(*p5_all, Gbps(3200) / 8);
}

TEST(Capacity, IntraNodeWithoutNvswitch) {
  // DGX-1: NVLink joins all 8 GPUs; a GPU's 6 NVLink2 links carry 150 GB/s to the others.
  const Cluster dgx1 = build(preset("dgx1-v100"), 1);
  auto all = group_bandwidth(dgx1, range(0, 8));
  ASSERT_TRUE(all);
  EXPECT_EQ(all->intra_class, LinkClass::kNvlink);
  expect_bw(all->intra, GBps(150));
  // GPUs 0 and 5 have no NVLink between them: PCIe Gen3 through the CPUs.
  auto pair = group_bandwidth(dgx1, std::vector<int>{0, 5});
  ASSERT_TRUE(pair);
  EXPECT_EQ(pair->intra_class, LinkClass::kPcie);
  expect_bw(pair->intra, GBps(15.75));
  // L40S: PCIe Gen4 only.
  const Cluster l40s = build(preset("l40s-pcie-100gbe"), 2);
  auto node = group_bandwidth(l40s, range(0, 8));
  ASSERT_TRUE(node);
  EXPECT_EQ(node->intra_class, LinkClass::kPcie);
  expect_bw(node->intra, GBps(31.5));
  auto two = group_bandwidth(l40s, range(0, 16));
  ASSERT_TRUE(two);
  expect_bw(two->injection, Gbps(200) / 8);
  expect_bw(two->bottleneck, Gbps(200) / 8);
}

TEST(Capacity, RackScaleDomainCarriesTheGroup) {
  const Cluster c = build(preset("gb200-nvl72"), 18);
  auto rack = group_bandwidth(c, range(0, 72));
  ASSERT_TRUE(rack);
  EXPECT_EQ(rack->islands, 1);
  expect_bw(rack->intra, GBps(900));  // NVLink5, 18 links
  // Trays 0-8 against trays 9-17: 36 GPUs' NVLink5 plus their 36 NDR NICs through the rail leaves.
  expect_bw(bisection_bandwidth(c), GBps(900) * 36 + Gbps(400) * 36);
  const Cluster two = build(preset("gb200-nvl72"), 36);
  auto racks = group_bandwidth(two, range(0, 144));
  ASSERT_TRUE(racks);
  EXPECT_EQ(racks->islands, 2);
  expect_bw(racks->injection, Gbps(400));
  expect_bw(racks->bottleneck, Gbps(400));
}

TEST(Capacity, BisectionOfDgxH100Nodes) {
  expect_bw(bisection_bandwidth(build(preset("dgx-h100-superpod"), 2)), Gbps(8 * 400));
  expect_bw(bisection_bandwidth(build(preset("dgx-h100-superpod"), 64)), Gbps(32 * 8 * 400));
  // One node: GPUs 0-3 against 4-7 meet on the NVSwitch, and over PCIe (through the CPUs and
  // through the NICs and their leaf), where the senders' PCIe Gen5 links are the limit.
  expect_bw(bisection_bandwidth(build(preset("dgx-h100-superpod"), 1)), GBps(4 * 450 + 4 * 63));
}

TEST(Capacity, RejectsBadGroups) {
  const Cluster c = build(preset("dgx-h100-superpod"), 1);
  auto repeated = group_bandwidth(c, std::vector<int>{0, 0});
  ASSERT_FALSE(repeated);
  EXPECT_EQ(repeated.status().message(), "GPU 0 appears twice in the group");
  auto outside = group_bandwidth(c, std::vector<int>{0, 8});
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.status().message(), "GPU 8 is out of range: the cluster has 8 GPUs");
  auto single = group_bandwidth(c, std::vector<int>{3});
  ASSERT_TRUE(single);
  expect_bw(single->bottleneck, Bandwidth::zero());
}

}  // namespace
}  // namespace planner::topo
