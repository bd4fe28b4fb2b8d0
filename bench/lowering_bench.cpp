// Step-program benchmarks: how fast (and how compactly) a training step lowers, and how fast the
// schedule and program checkers run.
// Run: build/bin/bench_lowering   (counters: ops, ranks, MiB held by the program)
//
// Target (issue 3): the simulator times one step of GPT-3 175B on 1024 A100s (tp 8, pp 8, dp 16,
// 1F1B, 64 micro-batches) in under a second, so lowering one data-parallel replica (64 ranks)
// must take well under a second and little memory.
#include <benchmark/benchmark.h>

#include "planner/core/catalog.hpp"
#include "planner/core/lowering.hpp"
#include "planner/core/schedule.hpp"

namespace {

using planner::ParallelConfig;

ParallelConfig gpt3_1024() {
  ParallelConfig p;
  p.tp = 8;
  p.pp = 8;
  p.dp = 16;
  p.sequence_parallel = true;
  p.recompute = planner::Recompute::kSelective;
  p.zero_stage = 1;
  return p;
}

planner::TrainingSpec gpt3_training() {
  planner::TrainingSpec t;
  t.global_batch_size = 1024;  // 64 micro-batches per replica
  t.seq_length = 2048;
  return t;
}

void lower_subset(benchmark::State& state, planner::RankSubset subset) {
  const planner::ModelSpec& model = *planner::builtin_catalog().find_model("gpt3-175b");
  const ParallelConfig p = gpt3_1024();
  planner::LowerOptions o;
  o.ranks = planner::representative_ranks(p, subset);
  std::size_t ops = 0, bytes = 0;
  for (auto _ : state) {
    auto prog = planner::lower(model, gpt3_training(), p, o);
    if (!prog) {
      state.SkipWithError(prog.status().message().c_str());
      return;
    }
    ops = prog->total_ops();
    bytes = prog->memory_bytes();
    benchmark::DoNotOptimize(prog);
  }
  state.counters["ranks"] = static_cast<double>(o.ranks.size());
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["MiB"] = static_cast<double>(bytes) / (1 << 20);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ops));
}

void BM_LowerGpt3DataParallelReplica(benchmark::State& state) {
  lower_subset(state, planner::RankSubset::kDataParallelReplica);
}
BENCHMARK(BM_LowerGpt3DataParallelReplica)->Unit(benchmark::kMillisecond);

void BM_LowerGpt3OnePerStage(benchmark::State& state) {
  lower_subset(state, planner::RankSubset::kOnePerStage);
}
BENCHMARK(BM_LowerGpt3OnePerStage)->Unit(benchmark::kMillisecond);

// The whole check (matching, collective order, deadlock run) on a complete 64-rank program.
void BM_CheckProgram(benchmark::State& state) {
  ParallelConfig p;
  p.tp = 4;
  p.pp = 4;
  p.dp = 4;
  p.sequence_parallel = true;
  planner::TrainingSpec t;
  t.global_batch_size = 64;
  t.seq_length = 2048;
  auto prog = planner::lower(*planner::builtin_catalog().find_model("llama2-7b"), t, p);
  for (auto _ : state) {
    auto st = planner::check_program(*prog);
    benchmark::DoNotOptimize(st);
  }
  state.counters["ops"] = static_cast<double>(prog->total_ops());
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(prog->total_ops()));
}
BENCHMARK(BM_CheckProgram)->Unit(benchmark::kMillisecond);

void BM_RunInterleavedSchedule(benchmark::State& state) {
  auto sched = planner::PipelineSchedule::create(planner::Schedule::kInterleaved, 16, 128, 4);
  for (auto _ : state) {
    auto run = planner::run_schedule(*sched, planner::PassTimes{});
    benchmark::DoNotOptimize(run);
  }
}
BENCHMARK(BM_RunInterleavedSchedule)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
