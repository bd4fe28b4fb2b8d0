// The records planner::store keeps, as plain structs (no SQLite types).
//
// Units: times are planner::Time (integer picoseconds), sizes planner::Bytes, bandwidths
// planner::Bandwidth (bytes/s), wall-clock instants Unix milliseconds (UTC). The database keeps
// the same units in its column names (`duration_ps`, `bytes`, `algbw_GBps`, `created_unix_ms`).
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "planner/core/enums.hpp"
#include "planner/core/units.hpp"

namespace planner::store {

// Row ids. Distinct types so a plan id cannot be passed where a run id is expected.
struct RunId {
  std::int64_t value = 0;
  auto operator<=>(const RunId&) const = default;
};
struct PlanId {
  std::int64_t value = 0;
  auto operator<=>(const PlanId&) const = default;
};
struct ProfileId {
  std::int64_t value = 0;
  auto operator<=>(const ProfileId&) const = default;
};

// What produced a run.
enum class RunKind { kSweep, kSimulate, kExec, kCalibrate, kAccuracy };
// kInterrupted: the process recording the run ended without finishing it (it was killed, or its
// machine went down); see runs.hpp.
enum class RunStatus { kRunning, kOk, kFailed, kInterrupted };
// Where a metric value came from: the sweep's fast analytic estimate, the discrete-event
// simulation, or a measurement on real hardware.
enum class MetricSource { kAnalytic, kSimulated, kMeasured };

// ---- runs

// A run to record. The store adds the creation time, the planner build (version and git commit)
// and, when `hosts` is empty, this machine's host name.
struct NewRun {
  RunKind kind = RunKind::kSimulate;
  std::string label;               // free-form, e.g. the plan name or a user's note
  std::string inputs_json = "{}";  // the run's inputs (command line, documents) as JSON text
  std::vector<std::string> hosts;  // host names, e.g. one per rank for an executed run
  // Seconds of the run's work done before it is recorded (a sweep records itself once it has
  // finished): the creation time is moved back by them, so that the run's duration (created to
  // finished) is the work's, not the time its results took to write. Negative or not finite: 0.
  double seconds_before = 0;
};

struct RunRecord {
  RunId id;
  RunKind kind = RunKind::kSimulate;
  RunStatus status = RunStatus::kRunning;
  std::string label;
  std::string inputs_json;
  std::vector<std::string> hosts;
  std::string planner_version;
  std::string git_commit;
  std::int64_t created_unix_ms = 0;
  std::optional<std::int64_t> finished_unix_ms;
  std::string failure_reason;      // kFailed: why; kInterrupted: which process ended
  std::optional<int> failed_rank;  // the rank that failed, when one did
  std::int64_t plan_count = 0;     // plans linked to the run
  // The process that recorded the run (absent for runs recorded before schema version 4).
  std::string owner_host;
  std::optional<std::int64_t> owner_pid;
};

struct RunFilter {
  std::optional<RunKind> kind;
  std::optional<RunStatus> status;
  int limit = 0;  // newest first; 0 = all
};

// ---- plans

// A plan stored once per content: `hash` is the SHA-256 (hex) of `canonical_json`, the plan
// document with object keys sorted and no whitespace.
struct PlanRecord {
  PlanId id;
  std::string hash;
  std::string label;
  std::string canonical_json;
  std::int64_t created_unix_ms = 0;
};

// ---- predictions and metrics

// One named number with its unit (metrics.hpp lists the shared names and units).
struct Metric {
  std::string name;
  double value = 0.0;
  std::string unit;
};

// A metric as stored: for a plan within a run, from a source.
struct MetricRecord {
  PlanId plan;
  MetricSource source = MetricSource::kSimulated;
  Metric metric;
};

// One operation of the step program as the simulator timed it. `op_id` is the step program's
// stable id; it is unique per (run, plan, rank). `start` is relative to the start of the step.
struct OpPrediction {
  std::string op_id;
  std::string op_kind;  // "gemm", "all_reduce", "send", ...
  int rank = 0;
  std::optional<int> micro_batch;
  Time start;
  Time duration;
  Bytes bytes;  // bytes moved (communication) or touched (compute)
};

// ---- measurements

// One operation as the executor measured it on one rank in one step; `op_id` matches the step
// program (unique per (run, rank, step)). `start` is relative to the start of the step.
struct OpMeasurement {
  int rank = 0;
  std::int64_t step = 0;
  std::string op_id;
  std::string op_kind;
  std::string phase;  // "forward", "backward", "optimizer", ...
  std::optional<Time> start;
  Time wall;
  Bytes bytes;
  std::optional<Bandwidth> algbw;  // collectives: bytes / time (nccl-tests)
  std::optional<Bandwidth> busbw;  // collectives: algbw x the collective's bus factor
};

// One training step of an executed run, over all ranks.
struct StepMeasurement {
  std::int64_t step = 0;
  Time step_time;
  double tokens_per_s = 0.0;
  std::optional<double> loss;
  std::optional<Bytes> peak_memory;  // the largest over ranks
  bool warmup = false;               // warm-up steps are kept but left out of comparisons
};

// ---- hardware profiles (calibration)

// One raw calibration measurement a hardware profile was fitted from.
struct CalibrationSample {
  std::string benchmark;  // "gemm", "all_reduce", "layernorm", ...
  std::string shape;      // e.g. "4096x4096x4096" for a GEMM; empty when not applicable
  std::string precision;  // e.g. "bf16"; empty when not applicable
  Bytes bytes;            // message or buffer size
  int group_size = 1;     // ranks taking part (1 for compute benchmarks)
  std::int64_t iterations = 1;
  Time time;  // time per iteration
  std::optional<Bandwidth> algbw;
  std::optional<Bandwidth> busbw;
  std::optional<FlopRate> flop_rate;
};

struct NewProfile {
  std::string name;             // unique in the database
  std::string description;      // the GPU or host it describes
  std::string parameters_json;  // the fitted model parameters (JSON text)
  std::string provenance;       // how it was made: machine, driver, library versions, date
  std::optional<RunId> run;     // the calibrate run that produced it, when there is one
};

struct HardwareProfile {
  ProfileId id;
  std::string name;
  std::string description;
  std::string parameters_json;
  std::string provenance;
  std::optional<RunId> run;
  std::int64_t created_unix_ms = 0;
  std::int64_t sample_count = 0;
};

enum class ProfileWrite {
  kCreate,   // a profile with the same name is StatusCode::kInvalidInput
  kReplace,  // replaces a profile with the same name, samples included
};

// ---- sweep results

// One evaluated plan of a sweep: its place in the ranking (1 = best), the tier that ranked it, the
// objective value (e.g. effective tokens per dollar), a note on why it wins or loses, and its
// metrics (stored in the metrics table with source = tier).
struct SweepEntry {
  PlanId plan;
  int position = 0;
  MetricSource tier = MetricSource::kAnalytic;
  double objective = 0.0;
  std::string note;
  std::vector<Metric> metrics;
};

struct SweepResultRecord {
  PlanId plan;
  std::string plan_label;
  int position = 0;
  MetricSource tier = MetricSource::kAnalytic;
  double objective = 0.0;
  std::string note;
};

}  // namespace planner::store

namespace planner {

template <>
struct EnumTraits<store::RunKind> {
  static constexpr std::string_view kWhat = "run kind";
  static constexpr std::array<std::pair<store::RunKind, std::string_view>, 5> kNames{{
      {store::RunKind::kSweep, "sweep"},
      {store::RunKind::kSimulate, "simulate"},
      {store::RunKind::kExec, "exec"},
      {store::RunKind::kCalibrate, "calibrate"},
      {store::RunKind::kAccuracy, "accuracy"},
  }};
};
template <>
struct EnumTraits<store::RunStatus> {
  static constexpr std::string_view kWhat = "run status";
  static constexpr std::array<std::pair<store::RunStatus, std::string_view>, 4> kNames{{
      {store::RunStatus::kRunning, "running"},
      {store::RunStatus::kOk, "ok"},
      {store::RunStatus::kFailed, "failed"},
      {store::RunStatus::kInterrupted, "interrupted"},
  }};
};
template <>
struct EnumTraits<store::MetricSource> {
  static constexpr std::string_view kWhat = "metric source";
  static constexpr std::array<std::pair<store::MetricSource, std::string_view>, 3> kNames{{
      {store::MetricSource::kAnalytic, "analytic"},
      {store::MetricSource::kSimulated, "simulated"},
      {store::MetricSource::kMeasured, "measured"},
  }};
};

}  // namespace planner
