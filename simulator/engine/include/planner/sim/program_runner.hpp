// The program runner: times a step program (core/program.hpp) on a cluster with the engine, the
// compute model, the collective planner and the flow-level network.
//
// Execution semantics are program.hpp's: every op runs on its rank's stream in program order once
// the ops it depends on have finished. The parts:
//   * comm_plans.hpp   the network plan of every collective and message, built before the run;
//   * comm_matcher.hpp when communication starts: a collective when every simulated member has
//                      issued it, a send and its receive together, a message to a rank that was
//                      not lowered at once (or with the rank's mirrored send);
//   * compute_units.hpp each rank's compute unit (one kernel at a time) and what slows it: its
//                      own communication sharing the SMs, other ranks sharing a host's cores;
//   * network.hpp      the data movement of every phase of a plan;
//   * time_accounting.hpp, after the run: the time buckets of each rank and the critical path,
//                      from the op timings the run recorded.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "planner/core/hardware_profile.hpp"
#include "planner/core/host_model.hpp"
#include "planner/core/parallel_config.hpp"
#include "planner/core/program.hpp"
#include "planner/core/status.hpp"
#include "planner/sim/collectives.hpp"
#include "planner/sim/compute_model.hpp"
#include "planner/sim/time_accounting.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::sim {

struct RunOptions {
  std::optional<Algorithm> algorithm;  // force a collective algorithm where it applies
  bool background = true;       // load the fabric with the symmetric traffic of unsimulated ranks
  bool balanced_fabric = true;  // pool equal-cost links (fabric.hpp); false: hashed ECMP routes
  bool keep_op_times = true;
  bool trace = false;  // build a Chrome trace-event JSON (implies keep_op_times)
  // Walk the critical path (ProgramRun::critical_buckets and critical_path); off, they stay empty
  // and the run keeps no per-op predecessors (a sweep ranks by step time alone).
  bool critical_path = true;
  int critical_path_top = 10;
  // How attention ops are timed (compute_model.hpp): flash-style, or unfused with the s×s scores
  // in HBM (frameworks before FlashAttention). simulate() also stores the scores in its memory
  // check.
  AttentionKernel attention = AttentionKernel::kFlash;
  // The host thread that issues each rank's ops (host_model.hpp); all zero: no host, every op
  // issued as soon as its stream and dependencies allow.
  HostCosts host;
};

struct RunContext {
  const topo::Cluster* cluster = nullptr;
  std::span<const int> gpu_of_rank;  // every rank of the program (workers, then servers)
  const HardwareProfile* profile = nullptr;
  // The parallel config the program was lowered from; needed for background copies (nullptr:
  // none, as for hand-built programs).
  const ParallelConfig* parallel = nullptr;
  // The cluster's network resources under `profile` with options.balanced_fabric; nullptr: built
  // here (callers that run many simulations on one cluster build it once).
  const Fabric* fabric = nullptr;
  // Optional: plans shared with other simulations on the same cluster, profile and fabric (a
  // sweep's); nullptr: every plan is built here.
  PlanMemo* plan_memo = nullptr;
  RunOptions options;
};

struct OpTiming {
  OpId id;
  OpKind kind = OpKind::kGemm;
  Stream stream = Stream::kCompute;
  Time issue;  // reached the head of its stream with its dependencies met
  Time start;  // began: compute at issue; communication when its peers had arrived
  Time end;
  Bytes bytes;  // communication: the nccl-tests size; compute: HBM bytes read and written
};

struct RankRun {
  int rank = 0;
  int stage = 0;
  RankKind kind = RankKind::kWorker;
  Time finish;     // end of its last op
  Time host_wait;  // time its compute stream had an op ready that the host had not yet issued
  std::array<Time, kNumTimeBuckets> buckets{};  // over [0, makespan]
  std::vector<OpTiming> ops;                    // in program order when kept
};

// What the collectives of one axis did: algorithm, protocol, how many, how long.
struct CollectiveUse {
  TimeBucket axis = TimeBucket::kTp;
  OpKind kind = OpKind::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;
  std::string protocol;
  int group_size = 0;
  int count = 0;   // instances started (one per collective call, not per member)
  Bytes bytes;     // per instance, summed
  Time busy;       // from data start to end, summed over instances
  int copies = 0;  // background copies that loaded the fabric with each instance
};

struct RunStats {
  std::uint64_t events = 0;
  std::uint64_t ops = 0;
  std::uint64_t transfers = 0;
  std::uint64_t solves = 0;
  std::uint64_t solve_links = 0;
  std::size_t largest_component = 0;
  std::size_t peak_queue = 0;
  std::size_t plans = 0;  // distinct collective / message plans built
};

struct ProgramRun {
  Time makespan;
  std::vector<RankRun> ranks;  // the program's ranks, in its order
  std::array<Time, kNumTimeBuckets> critical_buckets{};
  std::vector<PathEntry> critical_path;  // top entries by time
  std::vector<CollectiveUse> collectives;
  RunStats stats;
  std::string trace_json;  // when options.trace
};

// Fails (kInvalidInput) when a rank has no GPU or the profile lacks a needed GEMM rate, and
// (kInternal) when the program stalls: ops left with no event to run them.
Result<ProgramRun> run_program(const StepProgram& program, const RunContext& context);

}  // namespace planner::sim

namespace planner {

template <>
struct EnumTraits<sim::AttentionKernel> {
  static constexpr std::string_view kWhat = "attention kernel";
  static constexpr std::array<std::pair<sim::AttentionKernel, std::string_view>, 3> kNames{{
      {sim::AttentionKernel::kFlash, "flash"},
      {sim::AttentionKernel::kFusedSoftmax, "fused-softmax"},
      {sim::AttentionKernel::kUnfused, "unfused"},
  }};
};

}  // namespace planner
