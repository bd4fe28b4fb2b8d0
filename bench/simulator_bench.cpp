// Simulator speed: one training step of the two reference cases, on one core.
// Run: build/bin/bench_simulator   (counters: events/s, ms per simulated step, peak RSS)
// Times and rates are CPU time of the one benchmark thread (the machine may be shared).
//
// The timed loop is the steady state of a sweep: cluster, profile and fabric built once and
// shared; each iteration lowers the plan, checks memory and simulates the step.
// Targets (issue 5): GPT-3 175B on 1,024 A100s (tp 8, pp 8, dp 16, 1F1B, 64 micro-batches) under
// 1 s; Llama 3 405B on 16,384 H100s (tp 8, pp 16, dp 128) under 10 s; memory under 1 GiB. Both
// simulate one rank per pipeline stage with the other ranks' traffic as background (the default).
// Llama 3 405B has 126 layers, which 16 stages do not divide (Meta gave the first and last stages
// fewer layers); the benchmark uses 128, with full recomputation (with selective recomputation
// stage 0 needs 83 GiB at sequence 8192).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>

#include "planner/core/catalog.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topo/topology_catalog.hpp"

namespace {

using planner::sim::SimInput;

SimInput make_input(const char* model, int layers, const char* topology, int nodes,
                    planner::ParallelConfig parallel, std::int64_t gbs, std::int64_t seq) {
  SimInput in;
  const planner::Catalog& catalog = planner::builtin_catalog();
  in.plan.model = *catalog.find_model(model);
  if (layers > 0) in.plan.model.num_layers = layers;
  auto spec = planner::topo::builtin_topologies().get(topology);
  auto cluster = planner::topo::Cluster::build(*spec, nodes);
  in.cluster = std::make_shared<const planner::topo::Cluster>(std::move(cluster).value());
  in.plan.gpu = *catalog.find_gpu(spec->gpu);
  in.profile =
      std::make_shared<const planner::HardwareProfile>(*planner::builtin_profile_for(in.plan.gpu));
  in.plan.training.global_batch_size = gbs;
  in.plan.training.seq_length = seq;
  in.plan.parallel = parallel;
  in.options.run.keep_op_times = false;
  in.fabric = std::make_shared<const planner::sim::Fabric>(
      planner::sim::Fabric::build(*in.cluster, *in.profile));
  return in;
}

// The first call also fills the cluster's lazily built route tables: reported as cold_s.
void run(benchmark::State& state, const SimInput& in) {
  const auto cold_start = std::chrono::steady_clock::now();
  const bool cold_ok = planner::sim::simulate(in).is_ok();
  const double cold =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - cold_start).count();
  if (!cold_ok) {
    state.SkipWithError("simulate failed");
    return;
  }
  std::uint64_t events = 0;
  double step = 0, mfu = 0;
  for (auto _ : state) {
    auto r = planner::sim::simulate(in);
    if (!r || !r->simulated) {
      state.SkipWithError(r ? "does not fit" : r.status().message().c_str());
      return;
    }
    events = r->stats.events;
    step = planner::to_seconds(r->step_time);
    mfu = r->mfu;
    benchmark::DoNotOptimize(r);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["events"] = static_cast<double>(events);
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["sim_step_s"] = step;
  state.counters["mfu"] = mfu;
  state.counters["cold_s"] = cold;
  state.counters["peak_rss_MiB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}

void BM_Gpt3_175B_1024xA100(benchmark::State& state) {
  planner::ParallelConfig p;
  p.tp = 8;
  p.pp = 8;
  p.dp = 16;
  p.sequence_parallel = true;
  p.recompute = planner::Recompute::kSelective;
  p.zero_stage = 1;
  static const SimInput in =
      make_input("gpt3-175b", 0, "dgx-a100-superpod", 128, p, 1024, 2048);  // 64 micro-batches
  run(state, in);
}
BENCHMARK(BM_Gpt3_175B_1024xA100)->Unit(benchmark::kMillisecond);

void BM_Llama3_405B_16384xH100(benchmark::State& state) {
  planner::ParallelConfig p;
  p.tp = 8;
  p.pp = 16;
  p.dp = 128;
  p.sequence_parallel = true;
  p.recompute = planner::Recompute::kFull;  // selective recompute exceeds 80 GiB on stage 0
  p.zero_stage = 1;
  static const SimInput in =
      make_input("llama3-405b", 128, "dgx-h100-superpod", 2048, p, 2048, 8192);  // 16 mbs
  run(state, in);
}
BENCHMARK(BM_Llama3_405B_16384xH100)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
