// A cluster stated in numbers becomes a topology whose links carry exactly those numbers: NVLink
// per GPU, NICs × rate per node (800 Gb/s per node stays 800), the fabric's oversubscription.
#include "planner/topo/cluster_numbers.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "planner/core/catalog.hpp"
#include "planner/topo/capacity.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::topo {
namespace {

void expect_bw(Bandwidth actual, Bandwidth expected) {
  EXPECT_NEAR(actual.raw(), expected.raw(), 1.0)
      << to_GBps(actual) << " GB/s vs " << to_GBps(expected) << " GB/s";
}

std::vector<int> range(int from, int to) {
  std::vector<int> v(static_cast<std::size_t>(to - from));
  std::iota(v.begin(), v.end(), from);
  return v;
}

Cluster build(const ClusterNumbers& n, const std::string& gpu, int nodes) {
  auto spec = topology_from_numbers(n, builtin_catalog().gpu(gpu).value(), nodes);
  EXPECT_TRUE(spec) << spec.status().message();
  auto c = Cluster::build(*spec, nodes);
  EXPECT_TRUE(c) << c.status().message();
  return std::move(c).value();
}

TEST(ClusterNumbers, NodeAndNicsCarryTheStatedRates) {
  // A measured sweep's cluster: 8 A100 with NVLink3, 4 x 200 Gb/s HDR = 800 Gb/s per node.
  ClusterNumbers n;
  n.gpus_per_node = 8;
  n.nvlink_GBps = 300;
  n.nics = 4;
  n.nic_Gbps = 200;
  const Cluster c = build(n, "a100-80gb", 2);
  auto node = group_bandwidth(c, range(0, 8));
  ASSERT_TRUE(node);
  expect_bw(node->intra, GBps(300));
  // All 8 GPUs of a node sending off-node share 800 Gb/s: 100 Gb/s each, not 200.
  auto off = injection_bandwidth(c, range(0, 8));
  ASSERT_TRUE(off);
  expect_bw(*off, Gbps(800.0 / 8));
  expect_bw(bisection_bandwidth(c), Gbps(800));
  EXPECT_EQ(nic_link_kind(n), LinkKind::kIbHdr);  // by its rate
}

TEST(ClusterNumbers, BloomStyleFourNicNodes) {
  // BLOOM's Jean Zay nodes: 8 A100 80GB, 4 x 100 Gb/s per node (Omni-Path there; stated here as
  // Ethernet, the kind for a link kind planner has no name for).
  ClusterNumbers n;
  n.nvlink_GBps = 300;
  n.nics = 4;
  n.nic_Gbps = 100;
  n.nic_kind = LinkKind::kEthernet;
  auto spec = topology_from_numbers(n, builtin_catalog().gpu("a100-80gb").value(), 48);
  ASSERT_TRUE(spec) << spec.status().message();
  EXPECT_EQ(spec->fabric.host_link.kind, LinkKind::kEthernet);
  EXPECT_EQ(spec->node.count(DeviceKind::kNic), 4);
  EXPECT_EQ(spec->fabric.tiers, 2);  // 192 ports: 6 leaves of 32
  EXPECT_NE(spec->name.find("4 x 100 Gb/s ethernet"), std::string::npos) << spec->name;
  auto c = Cluster::build(*spec, 48);
  ASSERT_TRUE(c);
  expect_bw(*injection_bandwidth(*c, range(0, 8)), Gbps(400.0 / 8));
}

TEST(ClusterNumbers, OversubscriptionHalvesCrossLeafBandwidth) {
  ClusterNumbers n;
  n.gpus_per_node = 1;
  n.nvlink_GBps = 0;
  n.nics = 1;
  n.nic_Gbps = 100;
  n.oversubscription = 2;
  auto spec = topology_from_numbers(n, builtin_catalog().gpu("h100").value(), 128);
  ASSERT_TRUE(spec) << spec.status().message();
  EXPECT_EQ(spec->fabric.hosts_per_leaf, 42);
  EXPECT_EQ(spec->fabric.uplinks_per_leaf, 21);
  EXPECT_DOUBLE_EQ(spec->fabric.leaf_oversubscription(), 2.0);
  EXPECT_EQ(spec->node.count(DeviceKind::kNvSwitch), 0);  // PCIe only
  n.oversubscription = 1;
  auto flat = topology_from_numbers(n, builtin_catalog().gpu("h100").value(), 128);
  ASSERT_TRUE(flat);
  EXPECT_EQ(flat->fabric.hosts_per_leaf, 32);
  EXPECT_DOUBLE_EQ(flat->fabric.leaf_oversubscription(), 1.0);
}

TEST(ClusterNumbers, LargeClustersGetThreeTiers) {
  ClusterNumbers n;
  n.nvlink_GBps = 450;
  n.nics = 8;
  n.nic_Gbps = 400;
  n.fabric = FabricType::kRailOptimized;
  auto spec = topology_from_numbers(n, builtin_catalog().gpu("h100").value(), 1024);
  ASSERT_TRUE(spec) << spec.status().message();
  EXPECT_EQ(spec->fabric.tiers, 3);
  EXPECT_EQ(spec->fabric.type, FabricType::kRailOptimized);
  EXPECT_EQ(nic_link_kind(n), LinkKind::kIbNdr);
  n.tiers = 2;
  EXPECT_FALSE(topology_from_numbers(n, builtin_catalog().gpu("h100").value(), 1024));
}

TEST(ClusterNumbers, BadNumbersAreErrors) {
  const GpuSpec gpu = builtin_catalog().gpu("h100").value();
  ClusterNumbers n;
  n.gpus_per_node = 0;
  EXPECT_FALSE(topology_from_numbers(n, gpu, 1));
  n = {};
  n.nics = 4;  // no rate
  auto no_rate = topology_from_numbers(n, gpu, 2);
  ASSERT_FALSE(no_rate);
  EXPECT_NE(no_rate.status().message().find("NIC Gb/s"), std::string::npos);
  n = {};
  EXPECT_FALSE(topology_from_numbers(n, gpu, 2));  // two nodes, no NICs
  auto one = topology_from_numbers(n, gpu, 1);     // one node needs none
  EXPECT_TRUE(one) << one.status().message();
  n.oversubscription = 0.5;
  EXPECT_FALSE(topology_from_numbers(n, gpu, 1));
}

TEST(ClusterNumbers, OversubscriptionText) {
  EXPECT_EQ(parse_oversubscription("1:1"), 1.0);
  EXPECT_EQ(parse_oversubscription("2:1"), 2.0);
  EXPECT_EQ(parse_oversubscription("3"), 3.0);
  EXPECT_EQ(parse_oversubscription("1.5"), 1.5);
  EXPECT_FALSE(parse_oversubscription("1:2"));
  EXPECT_FALSE(parse_oversubscription("fast"));
  EXPECT_FALSE(parse_oversubscription("2:"));
  EXPECT_FALSE(parse_oversubscription(""));
}

}  // namespace
}  // namespace planner::topo
