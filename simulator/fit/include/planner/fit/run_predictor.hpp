// Predicting the step time of mapped records (accuracy.hpp's RunSetup): the machinery shared by
// `planner accuracy`, its ranking report and cross-validation.
//
// A record's prediction simulates each of its candidate configurations (one per combination of
// the values its null fields may take) and keeps the fastest that fits in memory; when none fits,
// the one needing the least memory is simulated again without the memory check (the run did
// happen, so planner's memory model is what is off) and flagged. Simulations run one rank per
// pipeline stage (RankSubset::kOnePerStage) on `threads` threads, largest first; results do not
// depend on the thread count.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "planner/fit/accuracy.hpp"
#include "planner/sim/fabric.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::fit {

// Runs fn(0) ... fn(n − 1) on `threads` threads (the caller's included).
void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& fn);

// `threads` when positive, else the machine's hardware threads.
int resolve_threads(int threads);

// A record ready to simulate.
struct PreparedRun {
  RunSetup setup;
  std::shared_ptr<const topo::Cluster> cluster;
  std::shared_ptr<const sim::Fabric> fabric;  // of the cluster and setup.profile
  std::vector<ParallelConfig> candidates;     // candidate_configs(setup), at least one
};

// Builds the cluster and fabric and lists the candidates; the error message is the reason the
// record cannot be modelled.
Result<PreparedRun> prepare_run(RunSetup setup);

// Rebuilds the fabric after setup.profile changed (link efficiencies and latencies live in it).
void rebuild_fabric(PreparedRun& run);

struct RunPrediction {
  bool ok = false;
  std::string failure;  // when !ok: the first simulation error, or why nothing could be simulated
  ParallelConfig parallel;  // the configuration predicted
  std::optional<sim::SimResult> result;
  int candidates = 0;
  int out_of_memory = 0;
  bool forced_memory = false;
};

// Predicts every run (see the header), in the order given.
std::vector<RunPrediction> predict_runs(std::span<const PreparedRun* const> runs, int threads);

// A record of the input as `planner accuracy` selects and maps it.
struct MappedRun {
  std::size_t input = 0;                // index into the input records
  RunAccuracy accuracy;                 // id, source, grade, GPU type; skip_reason when unmapped
  std::optional<PreparedRun> prepared;  // empty when the record cannot be modelled
};

// Selects (AccuracyOptions::only, gpu_type) and maps the records, in input order. Fails like
// evaluate_accuracy().
Result<std::vector<MappedRun>> map_runs(std::span<const PublishedRun> runs,
                                        const AccuracyOptions& options, const Catalog& catalog,
                                        const topo::TopologyCatalog& topologies);

// Fills a record's accuracy entry from its setup and prediction: modelled with the error, the
// configuration chosen and how, or skipped with the reason.
void fill_accuracy(const RunSetup& setup, const RunPrediction& prediction, RunAccuracy& accuracy);

}  // namespace planner::fit
