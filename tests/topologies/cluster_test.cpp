// Cluster graphs: ids, counts, routes and ECMP on the presets and on small fat-trees.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "cluster_impl.hpp"
#include "test_topologies.hpp"

namespace planner::topo {
namespace {

using testing::build;
using testing::preset;

// Checks that `path` is a chain of links from src's device to dst's device where only switches
// and CPUs forward.
void expect_route(const Cluster& c, int src, int dst, const std::vector<LinkId>& path) {
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(c.link(path.front()).src, c.gpu_device(src));
  EXPECT_EQ(c.link(path.back()).dst, c.gpu_device(dst));
  for (std::size_t i = 1; i < path.size(); ++i) {
    const DeviceId via = c.link(path[i]).src;
    EXPECT_EQ(c.link(path[i - 1]).dst, via);
    EXPECT_NE(c.device(via).kind, DeviceKind::kGpu) << c.device_name(via);
    if (c.device(via).kind == DeviceKind::kNic) {
      const bool up = is_fabric_switch(c.device(c.link(path[i]).dst).kind);
      const bool down = is_fabric_switch(c.device(c.link(path[i - 1]).src).kind);
      EXPECT_NE(up, down) << "a NIC forwarded traffic inside a node at " << c.device_name(via);
    }
  }
}

std::vector<LinkKind> kinds(const Cluster& c, const std::vector<LinkId>& path) {
  std::vector<LinkKind> out;
  for (LinkId id : path)
    out.push_back(c.link(id).kind);
  return out;
}

TEST(Cluster, DgxH100CountsAndIds) {
  const Cluster c = build(preset("dgx-h100-superpod"), 2);
  EXPECT_EQ(c.num_nodes(), 2);
  EXPECT_EQ(c.gpus_per_node(), 8);
  EXPECT_EQ(c.num_gpus(), 16);
  EXPECT_EQ(c.nics_per_node(), 8);
  // Per node: 8 GPUs, 1 NVSwitch, 4 PCIe switches, 2 CPUs, 8 NICs. One scalable unit: 8 rail
  // leaves with 32 uplinks each to the 32 spines of one pod; no cores above a single pod.
  EXPECT_EQ(c.devices_per_node(), 23);
  EXPECT_EQ(c.devices().size(), 2u * 23 + 8 + 32);
  // Per node 29 cables (8 NVLink, 8 GPU-PCIe, 8 NIC-PCIe, 4 PCIe-CPU, 1 CPU-CPU); 16 NIC-leaf;
  // 8 x 32 leaf-spine. Two directed links each.
  EXPECT_EQ(c.links().size(), 2u * (2 * 29 + 16 + 8 * 32));
  for (LinkId id = 0; id < static_cast<LinkId>(c.links().size()); ++id) {
    const Link& l = c.link(id);
    const Link& r = c.link(Cluster::reverse(id));
    EXPECT_EQ(l.src, r.dst);
    EXPECT_EQ(l.dst, r.src);
    EXPECT_EQ(l.kind, r.kind);
    EXPECT_GT(l.bandwidth.raw(), 0);
  }
  for (int g = 0; g < c.num_gpus(); ++g) {
    EXPECT_EQ(c.device(c.gpu_device(g)).gpu, g);
    EXPECT_EQ(c.device(c.gpu_device(g)).node, g / 8);
  }
  EXPECT_EQ(c.device_name(c.gpu_device(10)), "n1.gpu2");
  EXPECT_EQ(c.device_name(static_cast<DeviceId>(2 * 23)), "leaf0");
  EXPECT_EQ(c.nvlink_domain_size(), 8);
  // The NVLink of a GPU bonds 18 links of 25 GB/s.
  const Link& nvlink = c.link(c.out_links(c.gpu_device(0)).front());
  EXPECT_EQ(nvlink.kind, LinkKind::kNvlink4);
  EXPECT_EQ(nvlink.count, 18);
  EXPECT_DOUBLE_EQ(nvlink.bandwidth.raw(), GBps(450).raw());
}

TEST(Cluster, RoutesPreferNvlinkInsideANodeAndRailsAcrossNodes) {
  const Cluster c = build(preset("dgx-h100-superpod"), 2);
  const auto intra = c.path(0, 1);
  expect_route(c, 0, 1, intra);
  EXPECT_EQ(kinds(c, intra), (std::vector{LinkKind::kNvlink4, LinkKind::kNvlink4}));
  EXPECT_EQ(c.link(intra[0]).dst, c.attached(0, DeviceKind::kNvSwitch));

  // Same rail on both nodes: up the PCIe switch to NIC 0, rail leaf 0, back down; no spine.
  const auto rail = c.path(0, 8);
  expect_route(c, 0, 8, rail);
  EXPECT_EQ(kinds(c, rail), (std::vector{LinkKind::kPcie5, LinkKind::kPcie5, LinkKind::kIbNdr,
                                         LinkKind::kIbNdr, LinkKind::kPcie5, LinkKind::kPcie5}));
  // Rail 0 to rail 1 crosses a spine.
  const auto cross = c.path(0, 9);
  expect_route(c, 0, 9, cross);
  ASSERT_EQ(cross.size(), 8u);
  EXPECT_EQ(c.device(c.link(cross[3]).dst).kind, DeviceKind::kSpine);
  EXPECT_EQ(c.path_latency(rail), nanoseconds(4 * 150 + 2 * 600));
  EXPECT_DOUBLE_EQ(c.path_bandwidth(rail).raw(), Gbps(400).raw());
  EXPECT_TRUE(c.path(3, 3).empty());
}

TEST(Cluster, EcmpSpreadsFlowsAcrossSpines) {
  // 8 one-GPU nodes, 4 per leaf, non-blocking: 4 uplinks per leaf to 4 spines.
  const Cluster c = build(testing::parse(testing::fat_tree_json(4, 1)), 8);
  std::map<DeviceId, int> per_spine;
  for (std::uint64_t h = 0; h < 256; ++h) {
    const auto p = c.path(0, 5, h);
    expect_route(c, 0, 5, p);
    EXPECT_EQ(p, c.path(0, 5, h)) << "the same hash must give the same route";
    int spines = 0;
    for (LinkId id : p) {
      if (c.device(c.link(id).dst).kind == DeviceKind::kSpine) {
        ++per_spine[c.link(id).dst];
        ++spines;
      }
    }
    EXPECT_EQ(spines, 1);
  }
  ASSERT_EQ(per_spine.size(), 4u);
  for (const auto& [spine, n] : per_spine)
    EXPECT_GT(n, 256 / 4 / 2) << c.device_name(spine);
  // Same leaf: no spine at all.
  EXPECT_EQ(c.path(0, 3).size(), 6u);
}

TEST(Cluster, ThreeTierRoutesClimbToCoresOnlyBetweenPods) {
  // 2 hosts per leaf, 2 leaves per pod: nodes 0-3 in pod 0, 4-7 in pod 1.
  const Cluster c = build(testing::parse(testing::fat_tree_json(2, 1, 3, 2)), 8);
  int cores = 0;
  for (const Device& d : c.devices())
    cores += d.kind == DeviceKind::kCore ? 1 : 0;
  EXPECT_EQ(cores, 2 * 2);  // 2 planes (uplinks per leaf) x 2 uplinks per spine
  auto tiers_crossed = [&](int a, int b) {
    std::set<DeviceKind> seen;
    for (LinkId id : c.path(a, b))
      seen.insert(c.device(c.link(id).dst).kind);
    return seen;
  };
  EXPECT_EQ(tiers_crossed(0, 2).count(DeviceKind::kCore), 0u);
  EXPECT_EQ(tiers_crossed(0, 2).count(DeviceKind::kSpine), 1u);
  EXPECT_EQ(tiers_crossed(0, 6).count(DeviceKind::kCore), 1u);
  std::set<DeviceId> cores_used;
  for (std::uint64_t h = 0; h < 64; ++h) {
    for (LinkId id : c.path(0, 6, h)) {
      if (c.device(c.link(id).dst).kind == DeviceKind::kCore) cores_used.insert(c.link(id).dst);
    }
  }
  EXPECT_EQ(cores_used.size(), 4u);
}

// The regular fabrics' routes without tables pick, for every hash, the links the walk down the
// search's distance tables picks: every leaf pair of 2- and 3-tier fat-trees and rail-optimized
// presets, 24 hashes each (leaf pairs sampled on the larger ones).
TEST(Cluster, RegularFabricRoutesMatchTheTableWalk) {
  struct Case {
    TopologySpec spec;
    int nodes;
  };
  const std::vector<Case> cases = {
      {testing::parse(testing::fat_tree_json(4, 1)), 8},
      {testing::parse(testing::fat_tree_json(2, 1, 3, 2)), 8},
      {testing::parse(testing::fat_tree_json(2, 2, 3, 3)), 13},
      {preset("dgx-h100-superpod"), 96},
      {preset("aws-p5"), 40},
      {preset("gb200-nvl72"), 90},
      {preset("hgx-h200-roce"), 64},
      {preset("dgx1-v100"), 24},
  };
  for (const Case& k : cases) {
    const Cluster c = build(k.spec, k.nodes);
    const ClusterInternals::Impl& m = ClusterInternals::of(c);
    ASSERT_TRUE(m.regular) << k.spec.name;
    const int step = std::max(1, m.leaves / 24);
    int compared = 0;
    for (int a = 0; a < m.leaves; a += step) {
      for (int b = 0; b < m.leaves; b += (b % 3 == 0 ? 1 : step)) {
        for (std::uint64_t h = 0; h < 24; ++h) {
          const std::uint64_t hash = mix_hash(h, static_cast<std::uint64_t>(a * 7919 + b));
          std::vector<LinkId> fast, walked;
          m.regular_route(a, b, hash, fast);
          m.table_route(a, b, hash, walked);
          ASSERT_EQ(fast, walked) << k.spec.name << " leaf " << a << " -> " << b << " hash " << h;
          ++compared;
        }
      }
    }
    EXPECT_GE(compared, 24 * 4) << k.spec.name;
  }
}

TEST(Cluster, RackScaleNvlinkDomain) {
  const Cluster c = build(preset("gb200-nvl72"), 36);
  EXPECT_EQ(c.gpus_per_node(), 4);
  EXPECT_EQ(c.nvlink_domain_size(), 72);
  EXPECT_EQ(c.num_islands(), 2);
  EXPECT_EQ(c.island_of(71), 0);
  EXPECT_EQ(c.island_of(72), 1);
  // Inside a tray and across trays of a rack: through the NVLink switch, not the Grace CPU.
  for (int dst : {1, 2, 40}) {
    const auto p = c.path(0, dst);
    expect_route(c, 0, dst, p);
    EXPECT_EQ(kinds(c, p), (std::vector{LinkKind::kNvlink5, LinkKind::kNvlink5})) << dst;
  }
  EXPECT_TRUE(c.shares(0, 71, Scope::kNvlinkDomain));
  EXPECT_TRUE(c.shares(0, 71, Scope::kNvSwitch));
  EXPECT_FALSE(c.shares(0, 72, Scope::kNvlinkDomain));
  // Across racks: over the InfiniBand rails.
  const auto p = c.path(0, 72);
  expect_route(c, 0, 72, p);
  EXPECT_EQ(p.front(), c.path(0, 73).front());
  EXPECT_EQ(c.link(p[2]).kind, LinkKind::kIbNdr);
}

TEST(Cluster, HybridCubeMeshUsesNvlinkWhereItExistsAndPcieElsewhere) {
  const Cluster c = build(preset("dgx1-v100"), 1);
  EXPECT_EQ(c.nvlink_domain_size(), 8);
  const auto direct = c.path(0, 3);
  ASSERT_EQ(direct.size(), 1u);
  EXPECT_EQ(c.link(direct[0]).kind, LinkKind::kNvlink2);
  EXPECT_EQ(c.link(direct[0]).count, 2);
  EXPECT_DOUBLE_EQ(c.link(direct[0]).bandwidth.raw(), GBps(50).raw());
  // GPU 0 and 5 have no NVLink between them: PCIe through both CPUs.
  const auto indirect = c.path(0, 5);
  expect_route(c, 0, 5, indirect);
  EXPECT_EQ(kinds(c, indirect),
            (std::vector{LinkKind::kPcie3, LinkKind::kPcie3, LinkKind::kCpuInterconnect,
                         LinkKind::kPcie3, LinkKind::kPcie3}));
  // Every GPU has 6 NVLink links.
  for (int g = 0; g < 8; ++g) {
    int links = 0;
    for (LinkId id : c.out_links(c.gpu_device(g))) {
      if (link_class(c.link(id).kind) == LinkClass::kNvlink) links += c.link(id).count;
    }
    EXPECT_EQ(links, 6) << g;
  }
}

TEST(Cluster, SharedSwitchesAndNics) {
  const Cluster h100 = build(preset("dgx-h100-superpod"), 2);
  EXPECT_TRUE(h100.shares(0, 1, Scope::kPcieSwitch));
  EXPECT_FALSE(h100.shares(0, 2, Scope::kPcieSwitch));
  EXPECT_TRUE(h100.shares(0, 7, Scope::kNvSwitch));
  EXPECT_FALSE(h100.shares(0, 8, Scope::kNvSwitch));
  EXPECT_FALSE(h100.shares(0, 1, Scope::kNic));
  EXPECT_TRUE(h100.shares(0, 7, Scope::kNode));
  EXPECT_FALSE(h100.shares(7, 8, Scope::kNode));
  ASSERT_EQ(h100.nics_of(9).size(), 1u);
  EXPECT_EQ(h100.device_name(h100.nics_of(9)[0]), "n1.nic1");

  const Cluster p4d = build(preset("aws-p4d"), 1);
  EXPECT_TRUE(p4d.shares(0, 1, Scope::kNic));
  EXPECT_FALSE(p4d.shares(1, 2, Scope::kNic));

  const Cluster p5 = build(preset("aws-p5"), 2);
  ASSERT_EQ(p5.nics_of(3).size(), 4u);
  std::set<DeviceId> first_hops;
  for (std::uint64_t h = 0; h < 64; ++h) {
    const auto p = p5.path(3, 11, h);
    expect_route(p5, 3, 11, p);
    first_hops.insert(p5.link(p[1]).dst);
  }
  EXPECT_EQ(first_hops.size(), 4u) << "flows should spread over the GPU's 4 EFA NICs";

  const Cluster l40s = build(preset("l40s-pcie-100gbe"), 1);
  EXPECT_EQ(l40s.nvlink_domain_size(), 1);
  EXPECT_EQ(l40s.attached(0, DeviceKind::kNvSwitch), kNoDevice);
  EXPECT_NE(l40s.nvlink_domain_of(0), l40s.nvlink_domain_of(1));
}

TEST(Cluster, BuildRejectsImpossibleSizes) {
  auto zero = Cluster::build(preset("dgx-h100-superpod"), 0);
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.status().message().find("node count must be between 1"), std::string::npos);
  // 2-tier EDR with 36-port switches: 18 NIC ports per leaf, so at most 36 leaves (162 nodes).
  EXPECT_TRUE(Cluster::build(preset("dgx1-v100"), 162));
  auto big = Cluster::build(preset("dgx1-v100"), 163);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.status().message(),
            "topology \"dgx1-v100\": /fabric/tiers: 163 nodes need 37 leaves, so spines with 37 "
            "ports, more than the radix 36; use 3 tiers or fewer nodes");
}

TEST(Cluster, ConcurrentRouteLookupsAgree) {
  const Cluster c = build(preset("dgx-h100-superpod"), 256);
  std::vector<std::vector<LinkId>> expected;
  for (int g = 0; g < 64; ++g)
    expected.push_back(c.path(g * 31 % c.num_gpus(), (g * 97 + 13) % c.num_gpus(), g));
  const Cluster fresh = build(preset("dgx-h100-superpod"), 256);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int g = 0; g < 64; ++g) {
        if (fresh.path(g * 31 % fresh.num_gpus(), (g * 97 + 13) % fresh.num_gpus(), g) !=
            expected[static_cast<std::size_t>(g)]) {
          ++mismatches[static_cast<std::size_t>(t)];
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace planner::topo
