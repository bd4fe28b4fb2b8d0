// planner::store bulk writes: rows per second (items_per_second, wall clock, file in the system
// temporary directory) for the per-op tables, sweep results, and the predicted-vs-measured join.
// The target (issue 6): 1e5 per-op rows in well under a second.
// Run: build/bin/bench_store
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "planner/store/store.hpp"

namespace {

using namespace planner;
using namespace planner::store;

// A database in a fresh temporary directory, removed afterwards.
class ScratchDb {
 public:
  ScratchDb() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "planner-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    dir_ = tmpl;
    auto db = Database::open(dir_ + "/planner.db");
    if (!db) std::abort();
    db_.emplace(std::move(db).value());
  }
  ~ScratchDb() {
    db_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchDb(const ScratchDb&) = delete;
  ScratchDb& operator=(const ScratchDb&) = delete;
  Database& db() { return *db_; }

 private:
  std::string dir_;
  std::optional<Database> db_;
};

template <class T>
T take(Result<T> r) {
  if (!r) std::abort();
  return std::move(r).value();
}

std::vector<OpPrediction> predictions(std::int64_t n, int ranks) {
  static const char* kKinds[] = {"gemm", "all_reduce", "send", "recv", "layernorm"};
  std::vector<OpPrediction> ops(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    OpPrediction& op = ops[static_cast<std::size_t>(i)];
    op.rank = static_cast<int>(i % ranks);
    op.op_id = "L" + std::to_string(i / ranks / 12) + ".mb" + std::to_string(i / ranks % 4) +
               ".op" + std::to_string(i / ranks % 12);
    op.op_kind = kKinds[i % 5];
    op.micro_batch = static_cast<int>(i / ranks % 4);
    op.start = microseconds(static_cast<double>(i / ranks) * 10.0);
    op.duration = microseconds(9.5);
    op.bytes = Bytes(1 << 20);
  }
  return ops;
}

std::vector<OpMeasurement> measurements(const std::vector<OpPrediction>& predicted,
                                        std::int64_t steps) {
  std::vector<OpMeasurement> ops;
  ops.reserve(predicted.size() * static_cast<std::size_t>(steps));
  for (std::int64_t step = 0; step < steps; ++step) {
    for (const OpPrediction& p : predicted) {
      OpMeasurement m;
      m.rank = p.rank;
      m.step = step;
      m.op_id = p.op_id;
      m.op_kind = p.op_kind;
      m.phase = "forward";
      m.start = p.start;
      m.wall = p.duration.scaled(1.05);
      m.bytes = p.bytes;
      m.algbw = GBps(100.0);
      m.busbw = GBps(175.0);
      ops.push_back(std::move(m));
    }
  }
  return ops;
}

void BM_InsertPredictedOps(benchmark::State& state) {
  ScratchDb scratch;
  Database& db = scratch.db();
  const PlanId plan = take(put_plan_text(db, R"({"kind": "plan"})", "bench"));
  const auto ops = predictions(state.range(0), 64);
  for (auto _ : state) {
    const RunId run = take(create_run(db, {}));
    if (!add_predicted_ops(db, run, plan, ops).is_ok()) state.SkipWithError("insert failed");
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_InsertPredictedOps)
    ->Arg(1000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_InsertMeasuredOps(benchmark::State& state) {
  ScratchDb scratch;
  Database& db = scratch.db();
  const auto ops = measurements(predictions(state.range(0) / 10, 8), 10);
  for (auto _ : state) {
    const RunId run = take(create_run(db, {}));
    if (!add_measured_ops(db, run, ops).is_ok()) state.SkipWithError("insert failed");
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ops.size()));
}
BENCHMARK(BM_InsertMeasuredOps)->Arg(100000)->Unit(benchmark::kMillisecond)->UseRealTime();

// Sweep results: N evaluated plans with 6 metrics each, stored in one transaction.
void BM_StoreSweepResults(benchmark::State& state) {
  ScratchDb scratch;
  Database& db = scratch.db();
  std::int64_t plans = 0;
  for (auto _ : state) {
    const RunId run = take(create_run(db, {.kind = RunKind::kSweep}));
    auto tx = take(db.write());
    std::vector<SweepEntry> entries;
    for (std::int64_t i = 0; i < state.range(0); ++i, ++plans) {
      SweepEntry e;
      e.plan = take(put_plan_text(
          db, R"({"kind": "plan", "parallel": {"tp": )" + std::to_string(plans) + "}}", "p"));
      e.position = static_cast<int>(i + 1);
      e.objective = 1.0 / static_cast<double>(i + 1);
      e.metrics = {{"step_time", 1.0, "s"},        {"tokens_per_s", 1e6, "tokens/s"},
                   {"mfu", 0.4, "fraction"},       {"bubble_fraction", 0.1, "fraction"},
                   {"peak_memory", 6e10, "bytes"}, {"tokens_per_usd", 1e7, "tokens/USD"}};
      entries.push_back(std::move(e));
    }
    if (!add_sweep_results(db, run, entries).is_ok() || !tx.commit().is_ok()) {
      state.SkipWithError("sweep results failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_StoreSweepResults)->Arg(8112)->Unit(benchmark::kMillisecond)->UseRealTime();

// The predicted-vs-measured join of a run with 1e4 predicted ops measured over 10 steps.
void BM_CompareRun(benchmark::State& state) {
  ScratchDb scratch;
  Database& db = scratch.db();
  const PlanId plan = take(put_plan_text(db, R"({"kind": "plan"})", "bench"));
  const RunId run = take(create_run(db, {.kind = RunKind::kExec}));
  const auto predicted = predictions(state.range(0), 8);
  if (!add_predicted_ops(db, run, plan, predicted).is_ok() ||
      !add_measured_ops(db, run, measurements(predicted, 10)).is_ok()) {
    state.SkipWithError("setup failed");
  }
  for (auto _ : state) {
    auto c = compare_run(db, run);
    if (!c) state.SkipWithError("compare failed");
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * 11);
}
BENCHMARK(BM_CompareRun)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
