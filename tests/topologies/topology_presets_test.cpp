// Every shipped topology preset loads, builds, and matches the reference data it cites.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "planner/topo/capacity.hpp"
#include "test_topologies.hpp"

namespace planner::topo {
namespace {

TEST(TopologyPresets, AllLoadAndBuild) {
  auto catalog = TopologyCatalog::load_builtin();
  ASSERT_TRUE(catalog) << catalog.status().message();
  ASSERT_EQ(catalog->all().size(), 11u);
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
  EXPECT_EQ(build_cluster(spec).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace planner::topo
