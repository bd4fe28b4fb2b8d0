// Every shipped topology preset loads, builds, and matches the reference data it cites.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "planner/core/pricing.hpp"
#include "planner/topo/capacity.hpp"
#include "test_topologies.hpp"

namespace planner::topo {
namespace {

TEST(TopologyPresets, AllLoadAndBuild) {
  auto catalog = TopologyCatalog::load_builtin();
  ASSERT_TRUE(catalog) << catalog.status().message();
  ASSERT_EQ(catalog->all().size(), 26u);
  for (const TopologySpec& spec : catalog->all()) {
    SCOPED_TRACE(spec.name);
    EXPECT_FALSE(spec.sources.empty());
    EXPECT_NE(builtin_catalog().find_gpu(spec.gpu), nullptr);
    for (int nodes : {1, 2, spec.default_nodes}) {
      auto c = Cluster::build(spec, nodes);
      ASSERT_TRUE(c) << c.status().message();
      // Every GPU reaches every other (spot-check from GPU 0 and the last GPU).
      for (int g = 1; g < c->num_gpus(); ++g) {
        EXPECT_FALSE(c->path(0, g).empty()) << g;
        EXPECT_FALSE(c->path(c->num_gpus() - 1, g - 1).empty()) << g;
      }
    }
  }
  for (const char* name : {"dgx-a100-superpod", "dgx-h100-superpod", "hgx-h200-roce", "aws-p4d",
                           "aws-p5", "gb200-nvl72", "l40s-pcie-100gbe", "dgx1-v100", "cpu-host"}) {
    EXPECT_NE(catalog->find(name), nullptr) << name;
  }
  EXPECT_EQ(catalog->find("DGX-H100")->name, "dgx-h100-superpod");
  EXPECT_EQ(catalog->get("dgx-h900").status().code(), StatusCode::kNotFound);
}

// The 100,000-GPU-class presets at their default size: GPU counts, NVLink domains, every switch
// tier, and the oversubscription their descriptions give.
TEST(TopologyPresets, HundredThousandGpuClustersHaveTheirTiers) {
  auto count = [](const Cluster& c, DeviceKind kind) {
    long long n = 0;
    for (const Device& d : c.devices())
      n += d.kind == kind;
    return n;
  };
  {
    // 12,288 HGX H100 servers; 8 rails of 64 servers per rail group (1,536 leaves); islands of
    // 112 leaves (14 rail groups, 7,168 GPUs): 14 islands of 64 spines; 16 core uplinks per spine
    // at 7:1 (112 down), on 128-port switches.
    const TopologySpec spec = testing::preset("h100-rail-100k");
    EXPECT_EQ(spec.fabric.type, FabricType::kRailOptimized);
    EXPECT_EQ(spec.fabric.tiers, 3);
    EXPECT_EQ(spec.fabric.leaves_per_pod, 7 * spec.fabric.uplinks_per_spine);
    EXPECT_EQ(spec.fabric.leaves_per_pod + spec.fabric.uplinks_per_spine, spec.fabric.radix);
    const Cluster c = testing::build(spec, spec.default_nodes);
    EXPECT_EQ(c.num_gpus(), 98304);
    EXPECT_EQ(c.nvlink_domain_size(), 8);
    EXPECT_EQ(c.nics_per_node(), 8);
    EXPECT_EQ(count(c, DeviceKind::kLeaf), 1536);
    EXPECT_EQ(count(c, DeviceKind::kSpine), 14 * 64);
    EXPECT_EQ(count(c, DeviceKind::kCore), 64 * 16);
    EXPECT_DOUBLE_EQ(spec.fabric.leaf_oversubscription(), 1.0);
    EXPECT_DOUBLE_EQ(spec.fabric.spine_oversubscription(), 7.0);
    // A rail leaf serves the same rail of 64 consecutive servers; the next rail group is a spine
    // away (two more hops).
    EXPECT_EQ(c.path(0, 8 * 63).size(), c.path(0, 8).size());
    EXPECT_EQ(c.path(0, 8 * 64).size(), c.path(0, 8 * 63).size() + 2);
    // GPUs of one island meet at a spine; of two islands, at a core (two more hops).
    EXPECT_EQ(c.path(0, 7168).size(), c.path(0, 7160).size() + 2);
  }
  {
    // 1,408 NVL72 racks of 18 trays: one NVLink domain per rack, one rail group per rack (4
    // leaves), pods of 64 leaves (16 racks), non-blocking on 128-port switches.
    const TopologySpec spec = testing::preset("gb200-nvl72-100k");
    EXPECT_EQ(spec.fabric.type, FabricType::kRailOptimized);
    EXPECT_EQ(spec.fabric.tiers, 3);
    EXPECT_DOUBLE_EQ(spec.fabric.leaf_oversubscription(), 1.0);
    EXPECT_DOUBLE_EQ(spec.fabric.spine_oversubscription(), 1.0);
    EXPECT_EQ(spec.fabric.leaves_per_pod + spec.fabric.uplinks_per_spine, spec.fabric.radix);
    const Cluster c = testing::build(spec, spec.default_nodes);
    EXPECT_EQ(c.num_gpus(), 101376);
    EXPECT_EQ(c.nvlink_domain_size(), 72);
    EXPECT_EQ(c.num_islands(), 1408);
    EXPECT_EQ(count(c, DeviceKind::kLeaf), 1408 * 4);
    EXPECT_EQ(count(c, DeviceKind::kSpine), 88 * 18);
    EXPECT_EQ(count(c, DeviceKind::kCore), 18 * 64);
  }
}

TEST(TopologyPresets, NodeNetworkMatchesTheReferenceData) {
  // reference data hardware_specs.json node_network_configs: per-node NIC bandwidth in GB/s.
  std::ifstream in(std::string(PLANNER_TEST_DATA_DIR) + "/reference/hardware_specs.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  std::map<std::string, double> per_node;
  for (const auto& entry : ref["links"]["node_network_configs"]) {
    if (entry["per_node_GBps"].is_number()) {
      per_node[entry["system"].get<std::string>()] = entry["per_node_GBps"].get<double>();
    }
  }
  const std::map<std::string, std::string> system_of{
      {"dgx-a100-superpod", "DGX A100 / Selene"},
      {"dgx-h100-superpod", "DGX H100"},
      {"aws-p4d", "AWS p4d.24xlarge"},
      {"aws-p5", "AWS p5.48xlarge"},
      {"aws-p6-b200", "AWS p6-b200"},
      {"gcp-a3-mega", "GCP A3 Mega (H100)"},
      {"hgx-h200-roce", "Meta Llama 3 RoCE cluster (H100)"},
  };
  for (const auto& [preset, system] : system_of) {
    SCOPED_TRACE(preset);
    ASSERT_TRUE(per_node.count(system)) << system;
    const Cluster c = testing::build(testing::preset(preset), 1);
    std::vector<int> all(static_cast<std::size_t>(c.gpus_per_node()));
    for (int g = 0; g < c.gpus_per_node(); ++g)
      all[static_cast<std::size_t>(g)] = g;
    auto per_gpu = injection_bandwidth(c, all);
    ASSERT_TRUE(per_gpu);
    EXPECT_NEAR(to_GBps(*per_gpu) * c.gpus_per_node(), per_node[system], 1e-6);
  }
}

TEST(TopologyPresets, NvlinkDomainsMatchTheHardware) {
  const std::map<std::string, int> domain{
      {"dgx-a100-superpod", 8},
      {"dgx-h100-superpod", 8},
      {"hgx-h200-roce", 8},
      {"aws-p4d", 8},
      {"aws-p5", 8},
      {"gb200-nvl72", 72},
      {"gb300-nvl72", 72},
      {"dgx-b200", 8},
      {"dgx-b300", 8},
      {"h800-ib", 8},
      {"hgx-h200-ib", 8},
      {"mi300x-platform", 8},
      {"aws-p5en", 8},
      {"aws-p6-b200", 8},
      {"gcp-a3-mega", 8},
      {"gcp-a3-ultra", 8},
      {"gcp-a4", 8},
      {"azure-nd-h100-v5", 8},
      {"l40s-pcie-100gbe", 1},
      {"dgx1-v100", 8},
      {"cpu-host", 1},
  };
  for (const auto& [name, size] : domain) {
    const TopologySpec spec = testing::preset(name);
    EXPECT_EQ(testing::build(spec, spec.default_nodes).nvlink_domain_size(), size) << name;
  }
}

TEST(TopologyPresets, EveryGpuTypeOfAPresetHasADefaultTopology) {
  for (const TopologySpec& t : builtin_topologies().all()) {
    const GpuSpec* gpu = builtin_catalog().find_gpu(t.gpu);
    ASSERT_NE(gpu, nullptr) << t.name;
    auto chosen = topology_for_gpu(*gpu);
    ASSERT_TRUE(chosen) << chosen.status().message();
    EXPECT_TRUE(gpu->matches(chosen->gpu));
  }
  GpuSpec unknown = *builtin_catalog().find_gpu("H100");
  unknown.name = "X1";
  unknown.aliases.clear();
  auto none = topology_for_gpu(unknown);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("X1"), std::string::npos);
}

// The first preset of a GPU (in topologies/CMakeLists.txt order) is its default topology, used
// when a plan or sweep names only the GPU. Every GPU preset has one, and new presets leave the
// defaults of the GPUs that had one before (H100: aws-p5, which the default sweep runs on).
TEST(TopologyPresets, EveryGpuPresetHasItsDefaultTopology) {
  const std::map<std::string, std::string> expected{
      {"A100-SXM4-40GB", "aws-p4d"},
      {"A100-SXM4-80GB", "dgx-a100-superpod"},
      {"H100-SXM5-80GB", "aws-p5"},
      {"H200-SXM-141GB", "hgx-h200-roce"},
      {"H800-SXM5-80GB", "h800-ib"},
      {"B200-SXM-180GB", "dgx-b200"},
      {"B300-SXM-288GB", "dgx-b300"},
      {"GB200-B200-186GB", "gb200-nvl72"},
      {"GB300-B300-288GB", "gb300-nvl72"},
      {"MI300X", "mi300x-platform"},
      {"L40S", "l40s-pcie-100gbe"},
      {"V100-SXM2-32GB", "dgx1-v100"},
      {"V100-SXM3-32GB", "dgx2-v100"},
      {"V100-SXM3-32GB-H", "dgx2h-v100"},
      {"cpu-host", "cpu-host"},
  };
  EXPECT_EQ(builtin_catalog().gpus().size(), expected.size());
  for (const GpuSpec& gpu : builtin_catalog().gpus()) {
    auto chosen = topology_for_gpu(gpu);
    ASSERT_TRUE(chosen) << gpu.name << " has no topology preset: " << chosen.status().message();
    ASSERT_TRUE(expected.count(gpu.name)) << gpu.name << ": add its default topology here";
    EXPECT_EQ(chosen->name, expected.at(gpu.name)) << gpu.name;
  }
}

// A preset's GPUs talk within the node at the NVLink (or Infinity Fabric) rate of their GPU preset.
TEST(TopologyPresets, NodeLinksMatchTheGpuPresets) {
  for (const TopologySpec& t : builtin_topologies().all()) {
    if (t.node.generator != "nvswitch") continue;
    SCOPED_TRACE(t.name);
    const GpuSpec* gpu = builtin_catalog().find_gpu(t.gpu);
    ASSERT_NE(gpu, nullptr);
    const Cluster c = testing::build(t, 1);
    std::vector<int> node(static_cast<std::size_t>(c.gpus_per_node()));
    for (int g = 0; g < c.gpus_per_node(); ++g)
      node[static_cast<std::size_t>(g)] = g;
    auto group = group_bandwidth(c, node);
    ASSERT_TRUE(group) << group.status().message();
    EXPECT_NEAR(to_GBps(group->intra), to_GBps(gpu->nvlink_bandwidth), 1e-6);
  }
}

// Cloud instance presets name the instance the price data prices, so a sweep can pair an
// instance's network with its price.
TEST(TopologyPresets, CloudInstancesPairWithTheirPrices) {
  std::map<std::string, int> providers_of_h100_h200;
  int priced = 0;
  for (const TopologySpec& t : builtin_topologies().all()) {
    if (t.instance.empty()) continue;
    SCOPED_TRACE(t.name);
    EXPECT_TRUE(t.matches(t.instance)) << "an alias names the instance";
    const GpuSpec* gpu = builtin_catalog().find_gpu(t.gpu);
    ASSERT_NE(gpu, nullptr);
    PriceQuery q;
    q.provider = t.provider;
    q.instance = t.instance;
    auto price = choose_price(*gpu, q, {}, {}, std::nullopt);
    if (t.name == "gcp-a4") {  // the price data has no a4-highgpu-8g price
      EXPECT_FALSE(price);
      continue;
    }
    ASSERT_TRUE(price) << price.status().message();
    EXPECT_EQ(price->entry->gpus_per_instance, t.gpus_per_node());
    EXPECT_TRUE(price->entry->priced_as.empty());
    ++priced;
    if (gpu->name == "H100-SXM5-80GB" || gpu->name == "H200-SXM-141GB") {
      ++providers_of_h100_h200[t.provider];
    }
  }
  EXPECT_EQ(priced, 7);
  // Enough for a "which cloud" sweep: at least four H100/H200 instances from three providers.
  int instances = 0;
  for (const auto& [provider, n] : providers_of_h100_h200)
    instances += n;
  EXPECT_GE(instances, 4);
  EXPECT_GE(providers_of_h100_h200.size(), 3u);
}

TEST(TopologyPresets, ClusterSpecsPickOrNameTheirTopology) {
  ClusterSpec spec;
  spec.nodes = 4;
  spec.gpus_per_node = 8;
  spec.gpu = "h100";
  auto picked = build_cluster(spec);
  ASSERT_TRUE(picked) << picked.status().message();
  EXPECT_EQ(picked->spec().gpu, "H100-SXM5-80GB");
  EXPECT_EQ(picked->num_gpus(), 32);
  spec.topology = "aws-p5";
  auto named = build_cluster(spec);
  ASSERT_TRUE(named);
  EXPECT_EQ(named->spec().name, "aws-p5");
  spec.topology = "dgx-a100";
  EXPECT_EQ(build_cluster(spec).status().message(),
            "topology \"dgx-a100-superpod\" has 8x A100-SXM4-80GB nodes, but the cluster asks for "
            "8x H100-SXM5-80GB");
  spec.topology.clear();
  spec.gpu = "MI300X";
  spec.gpus_per_node = 4;  // no MI300X preset has 4-GPU nodes
  EXPECT_EQ(build_cluster(spec).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace planner::topo
