// The sweep: planner's main job. For one or more scenarios (a model and training setup on a
// cluster of one GPU type with up to N GPUs) it enumerates every valid plan, prunes those that do
// not fit in memory, ranks the rest by the analytic estimate (estimate.hpp) priced with
// economics.hpp, re-runs the best K through the discrete-event simulator and ranks those by it.
//
// The search space (SearchSpace; an empty list means "every valid value"):
//   tp     divisors allowed by check_parallel(), within the cluster's NVLink domain unless
//          tp_within_nvlink is off
//   cp     1, and powers of two leaving at least kMinTokensPerCpRank tokens per rank (ring
//          attention on shorter blocks cannot hide its K/V exchange), that check_parallel()
//          accepts; only 1 when the attention kernel (SweepOptions::attention) materialises the
//          scores, as ring attention needs a flash-style kernel
//   ep     1 for dense models; for MoE the divisors of the expert count that divide dp × cp
//   pp     divisors of the layer count
//   dp     divisors of the global batch (with the micro-batch size); world = tp·cp·dp·pp must be
//          whole nodes (a multiple of the GPUs per node, as a plan document's cluster is) and
//          between the scenario's min and max GPUs
//   micro-batch size   divisors of global batch / dp
//   schedule           gpipe, 1f1b, interleaved with every virtual stage count v ≥ 2 that divides
//                      layers / pp (needs pp ≥ 2 and at least pp micro-batches; Megatron-core
//                      runs a number that pp does not divide), zb-h1, dualpipev (2 chunks a
//                      stage in a V; needs pp ≥ 2 and at least 2·pp micro-batches)
//   sequence parallel  off, and on when tp > 1 (MoE with tp > 1 requires it)
//   recompute          none, selective, full
//   ZeRO stage         0-3 (only 0 when dp × cp = 1: sharding over one rank changes nothing)
//   rank order         "tp-cp-ep-dp-pp" and "tp-cp-ep-pp-dp" (only the first when pp or dp is 1)
//   overlap            data-parallel overlap (overlap_grad_reduce and overlap_param_gather) on and
//                      off (only on when dp × cp = 1)
// Every candidate passes core's check_parallel() before it is evaluated.
//
// Ranking: candidates are ordered by effective tokens per dollar (highest first), then by time to
// train, then by candidate id (the enumeration order), a total order: the ranking is the same for
// any number of threads or MPI ranks. Plans over the budget or past the deadline are counted and
// left out. The best top_k (by estimate) are simulated (SimOptions: one rank per stage) and ranked
// by the simulation; the ranking lists them first, then the next best by estimate, up to `keep`.
// Each scenario's best plan is simulated and kept too, however far down it ranks, so that a sweep
// over several clusters (cloud instances, offerings) can compare each cluster's best.
// The Pareto frontier of (time to train, total cost) is taken over every feasible plan by estimate
// (its members carry their simulation when they were among the top_k), then again over its
// members and the ranking by the numbers shown for each, so that no plan of the ranking is both
// faster and cheaper than a point of the frontier.
//
// Progress reaches a ProgressSink (the CLI's progress bar, the GUI's status line); a
// std::stop_token cancels a running sweep between work units (run_sweep() then fails with kRuntime
// "cancelled"). The simulator never reads the clock: rates and times left are the sink's business.
//
// MPI (executor/sweep_mpi.hpp): the work splits by SweepShard; every rank prepares the same
// SweepSetup, evaluates its shard with run_analytic(), rank 0 merges the partial results
// (merge_partials(), serialised with to_json()/parse_partial()), the top_k simulations are split
// again (simulate_candidates()), and finish() builds the result on rank 0.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "planner/core/hardware_profile.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/memory.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/status.hpp"
#include "planner/search/economics.hpp"
#include "planner/search/estimate.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topo/cluster.hpp"
#include "planner/topo/topology_spec.hpp"

namespace planner::search {

// Ring attention blocks shorter than this cannot hide their K/V exchange behind the attention
// compute (assumption; long-context runs use cp at 8k tokens and beyond): the default cp values
// leave at least this many tokens per cp rank.
inline constexpr std::int64_t kMinTokensPerCpRank = 1024;
inline constexpr int kDefaultTopK = 32;
inline constexpr int kDefaultKeep = 100;

// One model and training setup on a cluster of one GPU type.
struct SweepScenario {
  std::string name;  // empty: "<model> on <max_gpus> x <gpu>"
  ModelSpec model;
  TrainingSpec training;  // token_budget 0: kChinchillaTokensPerParam × parameters
  GpuSpec gpu;
  topo::TopologySpec topology;
  int max_gpus = 0;
  int min_gpus = 0;                                // 0: max_gpus / 2
  std::shared_ptr<const HardwareProfile> profile;  // empty: the GPU's preset, else derived
  std::optional<PricingOptions> pricing;           // empty: the request's
  // Price at the topology's cloud instance (its provider and instance, as the price catalogue
  // names them) rather than by the default rule: `planner sweep --instances`.
  bool priced_at_instance = false;
  // Where the scenario was given, for errors found when the sweep is set up: "sweep.json:
  // /clusters/1" for a sweep document's cluster; empty: "scenario N".
  std::string origin;
  // The software stack this scenario's plans run under (its host costs and default attention
  // kernel); empty: the request's (SweepOptions::stack). Scenarios that differ only here compare
  // stacks: `planner sweep --stack megatron-core,fsdp`.
  std::optional<SoftwareStack> stack;
};

// What makes a scenario impossible before anything is searched, for the caller to place (a sweep
// document's field, a flag); empty when nothing does. The GPU has no `precision` mode (its
// datasheet peak is zero), or `gpus` GPUs need more nodes of the topology than a cluster may have
// (limits::kMaxNodes).
std::string precision_problem(const GpuSpec& gpu, Precision precision);
std::string node_count_problem(const topo::TopologySpec& topology, std::int64_t gpus);

// Hoffmann et al. 2022 ("Training Compute-Optimal Large Language Models", arXiv:2203.15556):
// about 20 training tokens per parameter is compute-optimal. The default token budget.
inline constexpr double kChinchillaTokensPerParam = 20;

struct SearchSpace {
  std::vector<int> tp, pp, dp, cp, ep, virtual_stages;
  std::vector<std::int64_t> micro_batch_sizes;
  std::vector<Schedule> schedules;
  std::vector<Recompute> recompute;
  // The module sets selective recompute tries (ParallelConfig::recompute_modules, Megatron-core's
  // --recompute-modules), each a selective candidate of its own; empty: core_attn only.
  std::vector<std::uint8_t> recompute_modules;
  std::vector<int> zero_stages;
  std::vector<bool> sequence_parallel;
  std::vector<std::string> orders;
  std::vector<bool> overlap;
  // How MoE tokens cross between ranks (ParallelConfig::moe_a2a), for plans with ep > 1.
  std::vector<MoeA2a> moe_a2a;
  // Megatron-core's EP all-to-all overlap (ParallelConfig::moe_a2a_overlap), for plans with ep > 1
  // on a schedule whose passes it merges (interleaved, or 1f1b with pp 1).
  std::vector<bool> moe_a2a_overlap;
  // Expert tensor parallel sizes (ParallelConfig::etp, Megatron's --expert-tensor-parallel-size)
  // for MoE plans; empty: the plan's tp and, where tp > 1, 1 (experts unsplit beside tp-split
  // attention, as DeepSeek-V3's and Qwen3's Megatron recipes run them).
  std::vector<int> etp;
  // Token routing of MoE plans (ParallelConfig::moe_capacity_factor): capacity factors, 0 for
  // dropless; empty: the model's only. Dropping tokens changes what is trained, so a sweep tries
  // it only when asked.
  std::vector<double> moe_capacity;
  // The routing imbalance every MoE plan is timed with (ParallelConfig::moe_imbalance: the
  // hottest expert's tokens over the mean, 1 balanced): what a capacity factor below it trades
  // dropped tokens for.
  double moe_imbalance = 1.0;
  bool tp_within_nvlink = true;
  // A pp listed in `pp` that does not divide the layers is searched with the balanced uneven split
  // (balanced_stage_split, model_partition.hpp). With uneven_stages, so are the powers of two
  // that do not divide them, with at least kMinUnevenStageLayers layers a stage: it adds about
  // half again as many plans to a sweep of a model whose depth has few powers of two among its
  // divisors (Megatron 530B's 105 layers: 638,088 plans become 987,576). Unset, it is on where 4
  // does not divide the layers (searches_uneven_stages): DeepSeek-V3's 61, Qwen3-235B's 94 and
  // Llama 3 405B's 126 layers would otherwise leave no power of two beyond 2 for pp, where their
  // published runs use 8 and 16. The interleaved schedule with 2 or 4 chunks a stage that neither
  // split holds runs them in the balanced layout of chunks of unequal size (balanced_layout),
  // always.
  std::optional<bool> uneven_stages;
};

// Whether a sweep of a model with `layers` layers searches the powers of two for pp that do not
// divide them (SearchSpace::uneven_stages; unset: where 4 does not divide the layers).
inline bool searches_uneven_stages(const SearchSpace& space, int layers) {
  return space.uneven_stages.value_or(layers % 4 != 0);
}

inline constexpr int kMinUnevenStageLayers = 4;

struct SweepConstraints {
  std::optional<double> budget_usd;  // total cost of the token budget
  std::optional<double> deadline_s;  // time to train the token budget
};

struct SweepOptions {
  int threads = 1;
  int top_k = kDefaultTopK;  // plans re-run by the simulator
  int keep = kDefaultKeep;   // ranked plans kept in the result (at least top_k; and the best of
                             // each scenario)
  int pareto_max = 24;       // frontier points kept (evenly spread over time to train)
  sim::SimOptions sim;       // for the top_k (ranks, background; op times are not kept)
  // The software stack the plans run under where a scenario names none: its host costs
  // (host_model.hpp) time every estimate and simulation, unless `host` overrides them.
  SoftwareStack stack = SoftwareStack::kMegatronCore;
  std::optional<HostCosts> host;
  // The attention kernel of every estimate and simulation (its time, and whether the s×s scores
  // take memory), unless given: the scenario's stack's (default_attention).
  std::optional<AttentionImpl> attention;
};

struct SweepRequest {
  std::vector<SweepScenario> scenarios;
  SearchSpace space;
  SweepConstraints constraints;
  PricingOptions pricing;
  FailureModel failures;
  SweepOptions options;
};

enum class SweepPhase { kPrepare, kAnalytic, kSimulate, kDone };

// Counts so far; `done` of `total` work items of the phase (work units while ranking analytically,
// plans while simulating). `evaluated` counts analytic estimates.
struct SweepProgress {
  SweepPhase phase = SweepPhase::kPrepare;
  std::int64_t done = 0;
  std::int64_t total = 0;
  std::int64_t evaluated = 0;
  std::int64_t pruned = 0;
};

// Receives progress. Calls come from the sweep's worker threads, one at a time.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  virtual void on_progress(const SweepProgress& progress) = 0;
};

struct SweepShard {
  int index = 0;
  int count = 1;
};

// What a plan was judged by: the analytic estimate or the simulation.
enum class Tier { kEstimate, kSimulated };

struct PlanMetrics {
  Time step_time;
  double tokens_per_second = 0;
  double mfu = 0;
  double hfu = 0;
  double bubble_fraction = 0;
  std::array<Time, sim::kNumTimeBuckets> buckets{};  // compute, exposed comm per axis, idle
  Bytes peak_memory;
  Bytes capacity;
  Time exposed(sim::TimeBucket axis) const { return buckets[static_cast<std::size_t>(axis)]; }
};

struct RankedPlan {
  int position = 0;  // 1 = best
  int scenario = 0;
  std::uint64_t id = 0;  // enumeration order within the request (scenario in the top bits)
  ParallelConfig parallel;
  PlanMetrics estimate;
  std::optional<PlanMetrics> simulated;
  Tier tier = Tier::kEstimate;  // which metrics `economics` and the ranking used
  Economics economics;
  double objective = 0;  // effective tokens per dollar
  std::string note;      // why it wins or loses (bubble, exposed communication, memory)

  const PlanMetrics& metrics() const { return simulated ? *simulated : estimate; }
};

struct SweepCounts {
  static constexpr std::int64_t kNoBytes = std::numeric_limits<std::int64_t>::max();
  std::int64_t candidates = 0;     // valid plans enumerated
  std::int64_t out_of_memory = 0;  // pruned by memory
  std::int64_t evaluated = 0;      // analytic estimates
  std::int64_t over_budget = 0;
  std::int64_t over_deadline = 0;
  std::int64_t feasible = 0;
  std::int64_t simulated = 0;
  std::int64_t simulation_failures = 0;
  // The extremes behind the counts (what the constraints are up against): the least memory any
  // valid plan needs and the HBM it is compared with, and the cheapest cost and the shortest time
  // to train of the estimated plans. Infinite (or kNoBytes) while there is none.
  std::int64_t min_peak_bytes = kNoBytes;
  std::int64_t hbm_bytes = 0;
  double min_cost_usd = std::numeric_limits<double>::infinity();
  double min_time_to_train_s = std::numeric_limits<double>::infinity();
};

// How far the analytic step time was from the simulation on the plans simulated.
struct EstimateError {
  int plans = 0;
  double mean_abs_pct = 0;
  double max_abs_pct = 0;
  double mean_signed_pct = 0;  // estimate − simulation, relative to the simulation
};

struct ScenarioInfo {
  std::string name;
  std::string model;
  std::string gpu;
  std::string topology;
  int gpus_per_node = 0;
  int nvlink_domain = 0;
  // How the cluster's nodes sit in its rack-scale NVLink domains when they are placed in equal
  // blocks (topo::place_in_domain_blocks), e.g. "4 racks x 16 of their 18 nodes"; empty else.
  std::string placement;
  int max_gpus = 0;
  int min_gpus = 0;
  std::string profile;
  GpuPrice price;
  PricingOptions pricing;
  double token_budget = 0;
  std::int64_t work_units = 0;
  // The software its plans were timed under: the stack, its attention kernel and host costs.
  SoftwareStack stack = SoftwareStack::kMegatronCore;
  AttentionImpl attention = AttentionImpl::kFlash;
  HostCosts host;
};

struct SweepResult {
  std::vector<ScenarioInfo> scenarios;
  std::vector<RankedPlan> ranking;  // simulated first (by simulation), then by estimate
  std::vector<RankedPlan> pareto;   // by time to train, fastest first
  SweepCounts counts;
  EstimateError error;
  FailureModel failures;
  // The first failed simulation's plan and why it failed (counts.simulation_failures > 0).
  std::string simulation_failure;
};

// ---- the steps (run_sweep() runs them all in one process)

// Everything a sweep shares: per scenario its cluster, profile, fabric, estimator and price, and
// the enumerated work units. Deterministic: every MPI rank builds the same one.
class SweepSetup {
 public:
  static Result<std::shared_ptr<const SweepSetup>> prepare(const SweepRequest& request);

  const SweepRequest& request() const { return request_; }
  std::size_t scenario_count() const;
  const ScenarioInfo& info(int scenario) const;
  // The hardware profile the scenario's plans are estimated and simulated with.
  const std::shared_ptr<const HardwareProfile>& profile(int scenario) const;
  // The scenario's cluster (max_gpus worth of whole nodes of its topology).
  const std::shared_ptr<const topo::Cluster>& cluster(int scenario) const;
  // The topology the scenario's cluster is built from: the request's, with its rack-scale
  // NVLink domains shrunk to the blocks the cluster's nodes are placed in.
  const topo::TopologySpec& topology(int scenario) const;
  // How the scenario's plans are simulated: the request's run options with its stack's host costs
  // and attention kernel.
  const sim::RunOptions& run_options(int scenario) const;
  std::int64_t work_units() const;
  struct Scenario;  // internal: cluster, estimator, work units
  const std::vector<Scenario>& scenarios() const { return scenarios_; }

  // The plan document of a ranked plan (model, cluster of whole nodes, training, parallel).
  Plan plan_of(int scenario, const ParallelConfig& parallel) const;
  // A plan's estimate, simulation and economics in a scenario (for --check); kInvalidInput when
  // check_parallel() rejects it. A plan that does not fit has objective 0 and no simulation.
  Result<RankedPlan> evaluate(int scenario, const ParallelConfig& parallel) const;
  // One step of `parallel` simulated exactly as the sweep simulates its plans (the scenario's
  // cluster, profile, fabric and collective plans, the request's options), the whole result kept
  // (memory per stage, collectives chosen; no op times, trace or critical path).
  Result<sim::SimResult> simulate(int scenario, const ParallelConfig& parallel) const;

 private:
  SweepSetup() = default;
  SweepRequest request_;
  std::vector<Scenario> scenarios_;
};

// A plan as the analytic tier ranked it: enough to order it and to rebuild it from its id.
struct Candidate {
  std::uint64_t id = 0;
  double objective = 0;  // effective tokens per dollar
  double time_s = 0;     // time to train the token budget
  double cost_usd = 0;   // its total cost
  bool operator==(const Candidate&) const = default;
};
// The ranking order: higher objective, then shorter time to train, then smaller id.
bool ranks_before(const Candidate& a, const Candidate& b);

// A shard's analytic results: its best candidates, its Pareto frontier and its counts.
struct AnalyticPartial {
  // In ranking order: at most max(keep, top_k), and the best of each scenario beyond them.
  std::vector<Candidate> best;
  std::vector<Candidate> pareto;  // by time to train
  SweepCounts counts;
};

Result<AnalyticPartial> run_analytic(const SweepSetup& setup, SweepShard shard,
                                     ProgressSink* sink = nullptr, std::stop_token stop = {});
AnalyticPartial merge_partials(const SweepSetup& setup, std::vector<AnalyticPartial> parts);
Json to_json(const AnalyticPartial& partial);
Result<AnalyticPartial> parse_partial(const Json& json);

// The candidates the simulator re-runs: the first top_k of the merged ranking and, when top_k > 0,
// the best of each scenario not among them.
std::vector<Candidate> simulation_candidates(const SweepSetup& setup,
                                             const AnalyticPartial& merged);
// Simulates candidates (`threads` at a time), in order; a failed simulation leaves `simulated`
// empty (and counts as a simulation failure in finish()).
Result<std::vector<RankedPlan>> simulate_candidates(const SweepSetup& setup,
                                                    const std::vector<Candidate>& candidates,
                                                    ProgressSink* sink = nullptr,
                                                    std::stop_token stop = {});
Json to_json(const std::vector<RankedPlan>& simulated);
// Rebuilds simulated plans from to_json() (ids and simulated metrics; the rest is recomputed).
Result<std::vector<RankedPlan>> parse_simulated(const SweepSetup& setup, const Json& json);

// The final ranking: `simulated` (the top_k after simulation) first, then the rest of `merged`.
Result<SweepResult> finish(const SweepSetup& setup, const AnalyticPartial& merged,
                           std::vector<RankedPlan> simulated);

// A sweep's result with the setup it was computed in (which rebuilds any ranked plan).
struct SweepOutcome {
  std::shared_ptr<const SweepSetup> setup;
  SweepResult result;
};

// All steps in this process: prepare, run_analytic() over every work unit,
// simulate_candidates() on the simulation candidates, finish(). Progress starts with a kPrepare
// report and ends with a kDone one.
Result<SweepOutcome> run_sweep(const SweepRequest& request, ProgressSink* sink = nullptr,
                               std::stop_token stop = {});

// Why a sweep ranked no plan, as a sentence a user can act on (which constraint removed the plans
// and by how much: the smallest memory need against the HBM, the cheapest cost against the
// budget, the fastest time against the deadline; for a search space with no valid plan, the
// fixed dimensions that leave none, found by relaxing each in turn); empty when it ranked some.
std::string explain_empty(const SweepSetup& setup, const SweepResult& result);

// Percent by which `plan` falls short of `best` on the objective (0 when it is at least as good;
// 100 when it does not run).
double regret_pct(const RankedPlan& best, const RankedPlan& plan);

}  // namespace planner::search

namespace planner {

template <>
struct EnumTraits<search::Tier> {
  static constexpr std::string_view kWhat = "tier";
  static constexpr std::array<std::pair<search::Tier, std::string_view>, 2> kNames{{
      {search::Tier::kEstimate, "estimate"},
      {search::Tier::kSimulated, "simulated"},
  }};
};
template <>
struct EnumTraits<search::SweepPhase> {
  static constexpr std::string_view kWhat = "sweep phase";
  static constexpr std::array<std::pair<search::SweepPhase, std::string_view>, 4> kNames{{
      {search::SweepPhase::kPrepare, "prepare"},
      {search::SweepPhase::kAnalytic, "analytic"},
      {search::SweepPhase::kSimulate, "simulate"},
      {search::SweepPhase::kDone, "done"},
  }};
};

}  // namespace planner
