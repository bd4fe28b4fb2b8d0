// Core micro-benchmarks: how fast plans load and rank grids enumerate groups.
// Run: build/bench/bench_core
#include <benchmark/benchmark.h>

#include "planner/core/catalog.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/rank_grid.hpp"

namespace {

constexpr const char* kPlan = R"({
  "schema_version": 1, "kind": "plan", "model": "llama3-405b",
  "cluster": {"nodes": 2048, "gpus_per_node": 8, "gpu": "H100"},
  "training": {"global_batch_size": 2048, "seq_length": 8192},
  "parallel": {"tp": 8, "pp": 16, "micro_batch_size": 1}
})";

void BM_ParsePlan(benchmark::State& state) {
  const planner::Catalog& catalog = planner::builtin_catalog();
  for (auto _ : state) {
    auto plan = planner::parse_plan(kPlan, "plan.json", catalog);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_ParsePlan);

void BM_RankGridDataParallelGroups(benchmark::State& state) {
  planner::ParallelConfig p;
  p.tp = 8;
  p.pp = 16;
  p.dp = static_cast<int>(state.range(0));
  auto grid = planner::RankGrid::dense(p);
  for (auto _ : state) {
    auto groups = grid->groups("dp");
    benchmark::DoNotOptimize(groups);
  }
  state.SetItemsProcessed(state.iterations() * grid->world_size());
}
BENCHMARK(BM_RankGridDataParallelGroups)->Arg(16)->Arg(128);

void BM_LoadBuiltinCatalog(benchmark::State& state) {
  for (auto _ : state) {
    auto c = planner::Catalog::load_builtin();
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_LoadBuiltinCatalog);

}  // namespace

BENCHMARK_MAIN();
