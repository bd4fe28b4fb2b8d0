// Topology micro-benchmarks: building large cluster graphs, routing and capacity queries.
// Target: a 16,384-GPU fat-tree (2048 DGX H100 nodes, 3 tiers) builds in under 2 s.
// Run: build/bin/bench_topo
#include <benchmark/benchmark.h>

#include <numeric>

#include "planner/topo/capacity.hpp"
#include "planner/topo/cluster.hpp"
#include "planner/topo/collective_flows.hpp"
#include "planner/topo/link_kind.hpp"
#include "planner/topo/topology_catalog.hpp"
#include "planner/topo/topology_spec.hpp"

namespace {

using planner::topo::Cluster;

constexpr int k16kGpuNodes = 2048;  // x 8 GPUs = 16,384

const planner::topo::TopologySpec& preset(const char* name) {
  static const auto& catalog = planner::topo::builtin_topologies();
  return *catalog.find(name);
}

void BM_Build16kGpuCluster(benchmark::State& state, const char* name, int nodes) {
  for (auto _ : state) {
    auto c = Cluster::build(preset(name), nodes);
    if (!c) state.SkipWithError(c.status().message().c_str());
    benchmark::DoNotOptimize(c);
  }
  auto c = Cluster::build(preset(name), nodes);
  state.counters["gpus"] = c->num_gpus();
  state.counters["devices"] = static_cast<double>(c->devices().size());
  state.counters["links"] = static_cast<double>(c->links().size());
}
BENCHMARK_CAPTURE(BM_Build16kGpuCluster, dgx_h100_rail_fat_tree, "dgx-h100-superpod", k16kGpuNodes)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Build16kGpuCluster, aws_p5_fat_tree, "aws-p5", k16kGpuNodes)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Build16kGpuCluster, gb200_nvl72, "gb200-nvl72", 4096)
    ->Unit(benchmark::kMillisecond);

// A data-parallel ring over one GPU per node across all 2048 nodes: every flow crosses the fabric.
void BM_RingStepAcross16kGpus(benchmark::State& state) {
  const auto c = Cluster::build(preset("dgx-h100-superpod"), k16kGpuNodes);
  std::vector<int> group(k16kGpuNodes);
  for (int n = 0; n < k16kGpuNodes; ++n)
    group[static_cast<std::size_t>(n)] = n * 8 + 3;
  for (auto _ : state) {
    auto flows = planner::topo::step_flows(*c, group, planner::topo::StepPattern::kRing, 0);
    benchmark::DoNotOptimize(flows);
  }
  state.SetItemsProcessed(state.iterations() * k16kGpuNodes);
}
BENCHMARK(BM_RingStepAcross16kGpus)->Unit(benchmark::kMillisecond);

void BM_Bisection16kGpus(benchmark::State& state) {
  const auto c = Cluster::build(preset("dgx-h100-superpod"), k16kGpuNodes);
  for (auto _ : state)
    benchmark::DoNotOptimize(planner::topo::bisection_bandwidth(*c));
}
BENCHMARK(BM_Bisection16kGpus)->Unit(benchmark::kMillisecond);

void BM_GroupBandwidth(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const auto c = Cluster::build(preset("dgx-h100-superpod"), nodes);
  std::vector<int> group(static_cast<std::size_t>(nodes));
  for (int n = 0; n < nodes; ++n)
    group[static_cast<std::size_t>(n)] = n * 8;
  for (auto _ : state)
    benchmark::DoNotOptimize(planner::topo::group_bandwidth(*c, group));
}
BENCHMARK(BM_GroupBandwidth)->Arg(64)->Arg(k16kGpuNodes)->Unit(benchmark::kMillisecond);

}  // namespace

// One node of `gpus` GPUs behind an NVSwitch, built into a one-node cluster: node checks are
// linear in the node's devices and the routes between its GPUs quadratic (every pair is kept), so
// the node is bounded at limits::kMaxGpusPerNode (1,024). 65,536 GPUs per node used to hang.
void BM_BuildLargeNode(benchmark::State& state) {
  planner::topo::TopologySpec spec = preset("dgx-h100-superpod");
  planner::topo::NodeGeneratorParams params;
  params.gpus = static_cast<int>(state.range(0));
  params.nvlink = planner::topo::LinkSpec{
      planner::topo::LinkKind::kNvlink4, 18,
      *planner::topo::nominal_bandwidth(planner::topo::LinkKind::kNvlink4) * 18,
      planner::nanoseconds(250)};
  params.pcie = {planner::topo::LinkKind::kPcie5, 1,
                 *planner::topo::nominal_bandwidth(planner::topo::LinkKind::kPcie5),
                 planner::nanoseconds(150)};
  params.pcie_switches = params.gpus / 2;
  params.cpus = 2;
  params.cpu_link = params.pcie;
  params.cpu_link->kind = planner::topo::LinkKind::kCpuInterconnect;
  params.nics = params.gpus;
  auto node = planner::topo::generate_node(params);
  if (!node) {
    state.SkipWithError(node.status().message().c_str());
    return;
  }
  spec.node = *node;
  for (auto _ : state) {
    auto c = Cluster::build(spec, 1);
    if (!c) state.SkipWithError(c.status().message().c_str());
    benchmark::DoNotOptimize(c);
  }
  state.counters["devices"] = static_cast<double>(spec.node.devices.size());
}
BENCHMARK(BM_BuildLargeNode)->Arg(128)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
