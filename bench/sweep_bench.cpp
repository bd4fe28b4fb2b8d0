// Sweep speed (issue 6): the analytic tier in plans per second per core, and the whole sweep of
// the reference case, Turing-NLG / Megatron 530B on up to 5,128 A100-80GB GPUs (DGX A100
// SuperPOD), global batch 2,520 sequences of 2,048 tokens: enumeration, memory pruning, analytic
// ranking and the full simulation of the best 32.
// Run: build/bin/bench_sweep   (bench/README.md gives the CLI command for the same case)
// Counters: candidates/s (valid plans enumerated, memory-pruned ones included), estimates/s
// (plans that fit and got an analytic estimate), both per second of the one benchmark thread's
// CPU time; peak RSS. Target: at least 100,000 plans per second per core for the analytic tier,
// the whole sweep under 5 s with peak memory under 500 MiB.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <memory>

#include "planner/core/catalog.hpp"
#include "planner/search/sweep.hpp"
#include "planner/search/sweep_spec.hpp"
#include "planner/topo/topology_catalog.hpp"

namespace {

using planner::search::SweepRequest;

constexpr int kReferenceGpus = 5128;
constexpr std::int64_t kReferenceBatch = 2520;
constexpr std::int64_t kReferenceSeq = 2048;
// The GPU catalogue has no on-demand A100-80GB price; the ranking's speed does not depend on it
// (an assumed rate, USD per GPU-hour).
constexpr double kAssumedUsdPerGpuHour = 1.79;

SweepRequest reference_request(int threads) {
  const planner::Catalog& catalog = planner::builtin_catalog();
  planner::search::SweepScenario sc;
  sc.model = catalog.model("megatron-530b").value();
  sc.gpu = catalog.gpu("a100-80gb").value();
  sc.topology = planner::topo::topology_for_gpu(sc.gpu).value();
  sc.training.global_batch_size = kReferenceBatch;
  sc.training.seq_length = kReferenceSeq;
  sc.max_gpus = kReferenceGpus;
  SweepRequest req;
  req.scenarios.push_back(sc);
  req.options.threads = threads;
  req.pricing.overrides.push_back({sc.gpu.name, planner::Usd(kAssumedUsdPerGpuHour)});
  req.options.sim.ranks = planner::RankSubset::kOnePerStage;
  req.options.sim.run.keep_op_times = false;
  return req;
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux: KiB
}

// The analytic tier on one thread over a prepared setup (estimator caches warm after the first
// iteration, as in a long sweep).
void BM_AnalyticTier(benchmark::State& state) {
  auto setup = planner::search::SweepSetup::prepare(reference_request(1));
  if (!setup) {
    state.SkipWithError(setup.status().message().c_str());
    return;
  }
  std::int64_t candidates = 0, evaluated = 0;
  for (auto _ : state) {
    auto partial = planner::search::run_analytic(**setup, {});
    if (!partial) {
      state.SkipWithError(partial.status().message().c_str());
      return;
    }
    candidates += partial->counts.candidates;
    evaluated += partial->counts.evaluated;
    benchmark::DoNotOptimize(partial->best.data());
  }
  state.counters["candidates/s"] =
      benchmark::Counter(static_cast<double>(candidates), benchmark::Counter::kIsRate);
  state.counters["estimates/s"] =
      benchmark::Counter(static_cast<double>(evaluated), benchmark::Counter::kIsRate);
  state.counters["candidates"] =
      static_cast<double>(candidates) / static_cast<double>(state.iterations());
  state.counters["peak_RSS_MiB"] = peak_rss_mib();
}
BENCHMARK(BM_AnalyticTier)->Unit(benchmark::kMillisecond);

// The whole sweep from the request, as `planner sweep` runs it (threads: the argument).
void BM_WholeSweep(benchmark::State& state) {
  const SweepRequest req = reference_request(static_cast<int>(state.range(0)));
  double error = 0;
  for (auto _ : state) {
    auto result = planner::search::run_sweep(req);
    if (!result) {
      state.SkipWithError(result.status().message().c_str());
      return;
    }
    error = result->result.error.mean_abs_pct;
    benchmark::DoNotOptimize(result->result.ranking.data());
  }
  state.counters["estimate_error_pct"] = error;
  state.counters["peak_RSS_MiB"] = peak_rss_mib();
}
BENCHMARK(BM_WholeSweep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
