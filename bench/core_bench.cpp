// Core micro-benchmarks: how fast plans load and rank grids enumerate groups, and how parsing
// scales with the number of keys and the nesting depth (linear; limits.hpp bounds both). Run:
// build/bench/bench_core
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>

#include "planner/core/catalog.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/limits.hpp"
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

// An array of `objects` objects of `keys` keys each: {"k0":0,"k1":0,...}.
std::string objects_with_keys(int objects, int keys) {
  std::string s = "[";
  for (int o = 0; o < objects; ++o) {
    s += o ? ",{" : "{";
    for (int k = 0; k < keys; ++k)
      s += (k ? ",\"k" : "\"k") + std::to_string(k) + "\":0";
    s += "}";
  }
  return s + "]";
}

// Keys of one large object: linear in the number of keys (inserting through the ordered map's
// linear search made 200,000 keys take 28 s). Items = keys.
void BM_ParseKeys(benchmark::State& state) {
  const int keys = static_cast<int>(state.range(0));
  const int per_object =
      static_cast<int>(std::min<std::int64_t>(keys, planner::limits::kMaxObjectKeys));
  const std::string text = objects_with_keys(keys / per_object, per_object);
  for (auto _ : state) {
    planner::Diagnostics diag("keys.json");
    auto doc = planner::parse_json_text(text, diag);
    if (!doc) state.SkipWithError(diag.to_string().c_str());
    benchmark::DoNotOptimize(doc);
  }
  state.SetItemsProcessed(state.iterations() * keys);
  state.counters["bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_ParseKeys)->Arg(10'000)->Arg(200'000)->Unit(benchmark::kMillisecond);

// A document nested far beyond the limit is refused after reading kMaxNestingDepth levels, however
// deep it goes (100,000 levels used to cost about 10 GB).
void BM_RefuseDeepNesting(benchmark::State& state) {
  const auto depth = static_cast<std::size_t>(state.range(0));
  const std::string text = std::string(depth, '[') + std::string(depth, ']');
  for (auto _ : state) {
    planner::Diagnostics diag("deep.json");
    auto doc = planner::parse_json_text(text, diag);
    if (doc) state.SkipWithError("accepted");
    benchmark::DoNotOptimize(doc);
  }
}
BENCHMARK(BM_RefuseDeepNesting)->Arg(100'000)->Unit(benchmark::kMicrosecond);

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
