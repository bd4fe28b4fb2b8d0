// `planner topology list|show|dot` and `planner validate` on topology files, run as a user runs
// them.
#include <gtest/gtest.h>

#include "planner/topo/topology_catalog.hpp"
#include "support/command.hpp"

namespace planner {
namespace {

constexpr auto planner = testing::run_planner;

TEST(TopologyCli, ListShowsEveryPresetWithItsFigures) {
  auto r = planner({"topology", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const topo::TopologySpec& spec : topo::builtin_topologies().all()) {
    EXPECT_NE(r.out.find(spec.name), std::string::npos) << spec.name;
  }
  // dgx-h100-superpod: 8 GPUs, NVLink domain 8, one 400 Gb/s NIC per GPU.
  EXPECT_NE(r.out.find("dgx-h100-superpod  H100-SXM5-80GB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("50.0 GB/s"), std::string::npos);
  EXPECT_NE(r.out.find("Sources:"), std::string::npos);
  auto json = planner({"topology", "list", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"nvlink_domain_gpus\": 72"), std::string::npos) << json.out;
}

TEST(TopologyCli, ShowRunsOnEveryPreset) {
  for (const topo::TopologySpec& spec : topo::builtin_topologies().all()) {
    auto r = planner({"topology", "show", spec.name});
    ASSERT_EQ(r.exit_code, 0) << spec.name << ": " << r.err;
    EXPECT_NE(r.out.find("bisection"), std::string::npos) << spec.name;
    EXPECT_NE(r.out.find("NVLink domain"), std::string::npos) << spec.name;
    EXPECT_NE(r.out.find(spec.sources.front()), std::string::npos) << spec.name;
  }
}

TEST(TopologyCli, ShowGivesTheNumbers) {
  auto r = planner({"topology", "show", "dgx-h100", "--nodes", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"gpus\": 16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"bisection_GBps\": 400.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"node_intra_GBps_per_gpu\": 450.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"whole_node\": 50.0"), std::string::npos) << r.out;
  auto text = planner({"topology", "show", "dgx-h100-superpod", "--nodes", "2"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("2 node(s) x 8 GPUs = 16 GPUs"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("400 Gb/s"), std::string::npos) << text.out;
}

TEST(TopologyCli, DotExportsEveryCable) {
  auto r = planner({"topology", "dot", "dgx1-v100", "--nodes", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("graph \"dgx1-v100\" {", 0), 0u) << r.out.substr(0, 80);
  EXPECT_NE(r.out.find("subgraph cluster_node1"), std::string::npos);
  EXPECT_NE(r.out.find("\"n0.gpu0\" -- \"n0.gpu3\" [label=\"nvlink2 x2\\n50 GB/s\"]"),
            std::string::npos);
  // Per node 33 cables (16 NVLink, 8 GPU-PCIe, 4 NIC-PCIe, 4 PCIe-CPU, 1 CPU-CPU), plus 8 NIC
  // cables to the one leaf that holds all 8 NIC ports (so no spines).
  std::size_t edges = 0;
  for (std::size_t at = r.out.find(" -- "); at != std::string::npos;
       at = r.out.find(" -- ", at + 1))
    ++edges;
  EXPECT_EQ(edges, 2u * 33 + 8);
}

TEST(TopologyCli, FilePathsWorkWhereNamesDo) {
  testing::TempDir dir;
  const std::string file = dir.file("mine.json");
  testing::write_file(
      file, testing::slurp(std::string(PLANNER_SOURCE_DIR) + "/topologies/presets/aws-p5.json"));
  auto r = planner({"topology", "show", file, "--nodes", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 node(s) x 8 GPUs"), std::string::npos);
  auto v = planner({"validate", file});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

TEST(TopologyCli, BadInputsExitTwoNamingTheElement) {
  auto unknown = planner({"topology", "show", "dgx-h900"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("error: unknown topology \"dgx-h900\"; known topologies: "),
            std::string::npos)
      << unknown.err;
  const std::string bad =
      std::string(PLANNER_TEST_DATA_DIR) + "/bad-topology/topology_dangling_endpoint.json";
  auto v = planner({"validate", bad});
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_NE(v.out.find(bad + ": /node/links/2/a: unknown device \"gpu9\""), std::string::npos)
      << v.out;
  auto show = planner({"topology", "show", bad});
  EXPECT_EQ(show.exit_code, 2);
  EXPECT_NE(show.err.find("error: " + bad + ": /node/links/2/a: unknown device \"gpu9\""),
            std::string::npos)
      << show.err;
  auto missing = planner({"topology", "show", "nope/none.json"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no such file"), std::string::npos);
  auto too_big = planner({"topology", "show", "dgx1-v100", "--nodes", "500"});
  EXPECT_EQ(too_big.exit_code, 2);
  EXPECT_NE(too_big.err.find("use 3 tiers"), std::string::npos) << too_big.err;
}

}  // namespace
}  // namespace planner
