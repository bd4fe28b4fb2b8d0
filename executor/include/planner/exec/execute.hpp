// execute(): runs a plan for a number of training steps on every rank of a World, measures every
// op, and hands rank 0 the measurements step by step (ExecObserver); StoreRecorder writes them to
// the database. `planner exec` is a thin front-end over this.
//
// Per step, after the runner finishes its ops, every rank sends rank 0 its timings, loss and peak
// memory (the control channel, outside the step program and its timings); rank 0 turns them into
// the store's records and tells every rank whether to go on. A rank that fails (a timeout, an MPI
// error) reports the reason instead; rank 0 stops the run and names the rank. All of it is bounded
// by the timeout: a rank that never reports fails the run after 3 x timeout.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/plan.hpp"
#include "planner/core/program.hpp"
#include "planner/core/status.hpp"
#include "planner/exec/backend.hpp"
#include "planner/exec/runner.hpp"
#include "planner/store/records.hpp"

namespace planner::exec {

// Host memory a cpu rank needs beyond its tensors: libraries, Open MPI's shared-memory segments
// and OpenBLAS's work buffers. Measured: the maximum resident set of `planner exec` ranks of the
// gpt-tiny plans (1, 2 and 8 ranks, Open MPI 4.1.4, OpenBLAS 0.3.21, Debian 12) exceeds their peak
// tensor memory by 18-21 MiB; large GEMMs also touch OpenBLAS's 32 MiB work buffer per thread
// (its default BUFFER_SIZE). 20 + 2 threads x 32 = 84 MiB, rounded up.
inline constexpr double kCpuRankOverheadMiB = 96;

struct ExecOptions {
  std::int64_t steps = 20;  // the run ends after step `steps` - 1 (a resumed run included)
  std::int64_t warmup = 2;  // the first steps this process runs, measured but marked as warm-up
  std::string backend = "cpu";
  RunnerOptions runner;
  BackendOptions backend_options;
  // Checkpoints (checkpoint.hpp): after every `checkpoint_every` completed steps (0: never), into
  // checkpoint_dir. resume: first load the newest complete checkpoint in checkpoint_dir and go on
  // from its step (refused, before any step runs, when it is missing, corrupt or another plan's).
  std::int64_t checkpoint_every = 0;
  std::string checkpoint_dir;
  bool resume = false;
};

// Checks that the plan can run on `ranks` ranks (0: do not check) of `backend`, before anything
// starts: the backend exists; the ranks match the plan's world size; the backend trains in the
// plan's precision; the executor implements everything the plan uses (check_runnable); one rank's
// peak memory (estimate_memory, with kCpuRankOverheadMiB on cpu) fits the plan's GPU (for cpu
// plans, the cpu-host preset). Bad input (kInvalidInput) with every reason, or kUnavailable.
Status check_executable(const Plan& plan, std::string_view backend, int ranks);

// What rank 0 learns before the first step.
struct ExecStart {
  int ranks = 0;
  std::vector<std::string> hosts;  // per rank
  std::string backend;
  std::string device;           // rank 0's device description
  std::string data;             // the data and shard assignment of step 0 (synthetic_data.hpp)
  std::int64_t first_step = 0;  // the step this run starts with (> 0 when resumed)
};

// One completed step, over all ranks.
struct StepRecord {
  store::StepMeasurement step;  // step time = slowest rank; peak memory = largest rank
  double loss = 0;              // mean token loss of the global batch (nats)
  std::int64_t steps = 0;       // steps of the run
};

struct ExecSummary {
  std::int64_t steps = 0;
  double step_time_s = 0;  // median over the measured (non-warm-up) steps; all when none
  double tokens_per_s = 0;
  double final_loss = 0;
  std::int64_t peak_memory = 0;
  double mfu = 0;  // model FLOPs / (step time x ranks x the plan GPU's peak); 0 when unknown
};

// Receives rank 0's view of the run. Errors returned from it stop the run (they fail it).
class ExecObserver {
 public:
  virtual ~ExecObserver() = default;
  virtual Status on_start(const ExecStart& start) = 0;
  virtual Status on_step(const StepRecord& step, std::span<const store::OpMeasurement> ops) = 0;
  virtual Status on_finish(const ExecSummary& summary) = 0;
  virtual void on_failure(std::string_view reason, std::optional<int> rank) = 0;
};

struct ExecResult {
  std::int64_t first_step = 0;     // the first step run (> 0 when resumed from a checkpoint)
  std::vector<double> losses;      // per step run, on every rank
  std::vector<double> step_times;  // per step (slowest rank), on every rank
  ExecSummary summary;             // rank 0 (others: losses only)
};

// Runs steps first_step .. options.steps - 1 of `plan` on every rank of `world` (collective;
// first_step is 0, or the resumed checkpoint's step). `observer` is used on rank 0 only and may be
// null. On failure every rank returns an error; the job should then end
// (World::abort), since communication of the failed step may still be pending.
Result<ExecResult> execute(const Plan& plan, World& world, const ExecOptions& options,
                           ExecObserver* observer);

// The nccl-tests bus-bandwidth factor (busbw = algbw x factor) of a communication op over `ranks`
// ranks: all-reduce 2(n-1)/n; all-gather, reduce-scatter and all-to-all (n-1)/n; broadcast, send
// and receive 1. 0 for computation.
double bus_bandwidth_factor(OpKind kind, int ranks);

}  // namespace planner::exec
