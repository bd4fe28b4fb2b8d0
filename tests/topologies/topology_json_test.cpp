// Reading topology documents: generators, defaults and where errors point.
#include <gtest/gtest.h>

#include "test_topologies.hpp"

namespace planner::topo {
namespace {

std::string with_node(const std::string& node, const std::string& fabric = R"({"type": "none"})") {
  return R"({"schema_version": 1, "kind": "topology", "name": "t", "description": "d",
             "gpu": "h100", "sources": ["s"], "node": )" +
         node + R"(, "fabric": )" + fabric + "}";
}

std::string errors(const std::string& json) {
  auto spec = parse_topology(json, "t.json");
  return spec ? std::string("accepted") : spec.status().message();
}

TEST(TopologyJson, NvswitchGeneratorBuildsTheDgxLayout) {
  auto spec = parse_topology(with_node(R"({"generator": "nvswitch", "gpus": 8,
      "nvlink": {"kind": "nvlink4", "count": 18, "latency_ns": 250},
      "pcie": {"kind": "pcie5", "latency_ns": 150}, "pcie_switches": 4, "cpus": 2,
      "cpu_link": {"kind": "cpu-interconnect", "bandwidth_GBps": 64, "latency_ns": 120},
      "nics": 8})"),
                             "t.json");
  ASSERT_TRUE(spec) << spec.status().message();
  EXPECT_EQ(spec->gpu, "H100-SXM5-80GB");  // alias resolved to the preset name
  const NodeSpec& n = spec->node;
  EXPECT_EQ(n.generator, "nvswitch");
  EXPECT_EQ(n.count(DeviceKind::kGpu), 8);
  EXPECT_EQ(n.count(DeviceKind::kNvSwitch), 1);
  EXPECT_EQ(n.count(DeviceKind::kPcieSwitch), 4);
  EXPECT_EQ(n.count(DeviceKind::kNic), 8);
  EXPECT_EQ(n.links.size(), 29u);
  EXPECT_EQ(n.devices[static_cast<std::size_t>(n.find("nic5"))].serves,
            std::vector<std::string>{"gpu5"});
  const NodeLink& first = n.links.front();
  EXPECT_EQ(first.a, "gpu0");
  EXPECT_EQ(first.b, "nvswitch");
  EXPECT_EQ(first.link.count, 18);
  EXPECT_DOUBLE_EQ(first.link.bandwidth.raw(), GBps(450).raw());
  EXPECT_EQ(first.link.latency, nanoseconds(250));
  // GPUs 2i, 2i+1 and NICs 2i, 2i+1 share PCIe switch i.
  auto switch_of = [&](const std::string& id) {
    for (const NodeLink& l : n.links) {
      if (l.a == id && l.b.rfind("pcie", 0) == 0) return l.b;
    }
    return std::string();
  };
  EXPECT_EQ(switch_of("gpu5"), "pcie2");
  EXPECT_EQ(switch_of("nic5"), "pcie2");
}

TEST(TopologyJson, FabricDerivesUplinksFromOversubscription) {
  auto spec = parse_topology(testing::fat_tree_json(32, 4), "t.json");
  ASSERT_TRUE(spec) << spec.status().message();
  EXPECT_EQ(spec->fabric.uplinks_per_leaf, 8);
  EXPECT_DOUBLE_EQ(spec->fabric.leaf_oversubscription(), 4.0);
  EXPECT_EQ(spec->fabric_summary(), "fat-tree, 2 tiers, 32 ports/leaf, 4:1, ethernet 100 Gb/s");
  EXPECT_EQ(errors(testing::fat_tree_json(32, 3)),
            "t.json: /fabric/oversubscription: 32 down links of 12.5 GB/s at 3:1 oversubscription "
            "need 10.67 uplinks of 12.5 GB/s; that must be a whole number >= 1");
}

TEST(TopologyJson, LinkBandwidthDefaultsToTheKindsNominalRate) {
  auto spec = parse_topology(with_node(R"({"devices": [{"id": "g", "kind": "gpu"},
      {"id": "h", "kind": "gpu"}], "links": [{"a": "g", "b": "h", "kind": "nvlink5", "count": 2,
      "latency_ns": 1}]})"),
                             "t.json");
  ASSERT_TRUE(spec) << spec.status().message();
  EXPECT_DOUBLE_EQ(spec->node.links[0].link.bandwidth.raw(), GBps(100).raw());
  EXPECT_EQ(
      errors(with_node(R"({"devices": [{"id": "g", "kind": "gpu"}, {"id": "h", "kind": "gpu"}],
      "links": [{"a": "g", "b": "h", "kind": "roce", "latency_ns": 1}]})")),
      "t.json: /node/links/0/kind: \"roce\" links have no standard rate: give bandwidth_GBps "
      "or bandwidth_Gbps (per direction, per link)");
}

TEST(TopologyJson, GeneratorParametersAreChecked) {
  EXPECT_EQ(errors(with_node(R"({"generator": "nvswitch", "gpus": 8,
      "pcie": {"kind": "pcie5", "latency_ns": 1}, "pcie_switches": 3, "cpus": 1, "nics": 0})")),
            "t.json: /node/nvlink: required by the nvswitch generator\n"
            "t.json: /node/pcie_switches: must divide gpus (8), got 3");
  EXPECT_EQ(errors(with_node(R"({"generator": "pcie", "gpus": 8,
      "pcie": {"kind": "nvlink4", "latency_ns": 1}, "pcie_switches": 4, "cpus": 2, "nics": 3})")),
            "t.json: /node/pcie/kind: expected a PCIe kind (pcie3 .. pcie6), got \"nvlink4\"\n"
            "t.json: /node/cpu_link: required when cpus >= 2\n"
            "t.json: /node/nics: must divide or be a multiple of pcie_switches (4), got 3");
}

TEST(TopologyJson, GeneratorAndExplicitListsExcludeEachOther) {
  EXPECT_EQ(errors(with_node(R"({"generator": "pcie", "gpus": 1,
      "pcie": {"kind": "pcie4", "latency_ns": 1}, "pcie_switches": 1, "cpus": 1, "nics": 0,
      "devices": []})")),
            "t.json: /node/generator: give a generator or explicit devices and links, not both");
}

}  // namespace
}  // namespace planner::topo
