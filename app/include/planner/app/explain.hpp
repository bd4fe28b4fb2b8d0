// Why a ranked plan of a sweep looks the way it does, in Megatron-core's terms: its parallel sizes
// and schedule, where its expert-parallel groups sit on the fabric and which all-to-all moves the
// tokens, and what one GPU of each pipeline stage holds in memory. `planner sweep` prints it for
// its best plan (text and --json).
//
// A plan the sweep simulated is simulated once more exactly as the sweep did (same cluster,
// profile, fabric and options), keeping the collectives the simulator chose; a plan it only
// estimated (beyond --top-k) is not simulated, and its all-to-all figures are left out. The memory
// is core's accounting per stage (memory.hpp), the one the sweep pruned with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/core/memory.hpp"
#include "planner/core/parallel_config.hpp"
#include "planner/core/status.hpp"
#include "planner/core/units.hpp"
#include "planner/search/sweep.hpp"

namespace planner::app {

// The all-to-all of an MoE plan's expert-parallel groups (ep > 1).
struct ExpertParallelExplanation {
  int experts = 0;  // routed experts of the model
  int top_k = 0;
  int ep = 1;                          // expert parallel size
  int etp = 1;                         // expert tensor parallel size
  std::int64_t edp = 1;                // expert data parallel size (tp·cp·dp / (etp·ep))
  std::int64_t local_experts = 0;      // experts one rank holds (experts / ep)
  std::int64_t tokens_per_expert = 0;  // per local expert and micro-batch, busiest rank
  std::string routing;                 // "dropless" or "capacity factor 1.25 (padded)"
  bool fp8_dispatch = false;
  int group_gpus = 0;            // GPUs of one all-to-all group (ep × etp share a dispatch)
  int group_nodes = 0;           // nodes the widest expert-parallel group spans
  int group_nvlink_domains = 0;  // NVLink domains it spans (1: every all-to-all over NVLink)
  bool groups_alike = true;      // every group spans as many nodes and NVLink domains
  std::string algorithm;         // of the dispatch/combine all-to-all the simulator chose
  std::string protocol;
  int calls = 0;           // all-to-alls per step on a simulated rank (dispatch + combine,
                           // forward and backward)
  double mb_per_call = 0;  // MB each member sends per call
  double ms_per_call = 0;  // mean time of one call, fabric load included
  Time exposed;            // all-to-all time the compute stream waited for (per rank)
};

struct StageExplanation {
  int stage = 0;
  int layers = 0;
  StageMemory memory;  // weights, gradients, optimizer state, activations, buffers, overhead
};

struct PlanExplanation {
  std::string label;  // short_label()
  ParallelConfig parallel;
  int microbatches = 0;        // per data-parallel rank and step
  double schedule_bubble = 0;  // the schedule's closed-form bubble fraction
  double bubble = 0;           // simulated: idle (bubble and waiting) / step time
  bool simulated = false;      // the sweep simulated the plan (else: its analytic estimate)
  Time step_time;              // the simulated step (as the sweep ranked it)
  std::optional<ExpertParallelExplanation> experts;  // MoE plans with ep > 1
  std::vector<StageExplanation> stages;
  int peak_stage = 0;
  Bytes capacity;  // the GPU's HBM
};

// Explains `ranked` (a plan of `setup`'s sweep, normally its best). kInvalidInput when the plan
// names no scenario of the sweep or the simulator rejects it.
Result<PlanExplanation> explain_plan(const search::SweepSetup& setup,
                                     const search::RankedPlan& ranked);

}  // namespace planner::app
