#include "planner/app/explain.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "planner/core/model_partition.hpp"
#include "planner/core/moe_routing.hpp"
#include "planner/core/rank_grid.hpp"
#include "planner/core/schedule.hpp"
#include "planner/sim/collectives.hpp"
#include "planner/sim/simulate.hpp"

namespace planner::app {
namespace {

std::string routing_text(const MoeRouting& r, const ParallelConfig& p) {
  if (r.dropless) return "dropless";
  char buf[64];
  std::snprintf(buf, sizeof buf, "capacity factor %.3g", r.capacity_factor);
  return std::string(buf) + (p.moe_pad_to_capacity ? " (padded)" : "");
}

}  // namespace

Result<PlanExplanation> explain_plan(const search::SweepSetup& setup,
                                     const search::RankedPlan& ranked) {
  if (ranked.scenario < 0 || static_cast<std::size_t>(ranked.scenario) >= setup.scenario_count()) {
    return Status::invalid_input("plan " + std::to_string(ranked.id) + " names no scenario");
  }
  const Plan plan = setup.plan_of(ranked.scenario, ranked.parallel);
  const ParallelConfig& p = ranked.parallel;
  PlanExplanation out;
  out.label = short_label(p);
  out.parallel = p;
  // A plan the sweep simulated is simulated again the same way (for the collectives it chose);
  // one only estimated keeps its memory accounting and leaves the all-to-all figures out.
  std::optional<sim::SimResult> sim;
  MemoryReport memory;
  out.microbatches = static_cast<int>(plan.num_microbatches());
  if (ranked.simulated) {
    PLANNER_ASSIGN_OR_RETURN(sim, setup.simulate(ranked.scenario, p));
    memory = sim->memory;
    out.simulated = true;
    out.bubble = sim->bubble_fraction;
    out.step_time = sim->step_time;
  } else {
    PLANNER_ASSIGN_OR_RETURN(
        memory, estimate_memory(plan.model, plan.training, p, plan.gpu,
                                sim::memory_with(setup.request().options.sim.memory,
                                                 setup.run_options(ranked.scenario).attention)));
    out.bubble = ranked.estimate.bubble_fraction;
    out.step_time = ranked.estimate.step_time;
  }
  out.schedule_bubble = bubble_fraction(p.schedule, p.pp, out.microbatches, p.virtual_stages);
  out.peak_stage = memory.peak_stage;
  out.capacity = memory.capacity;
  PLANNER_ASSIGN_OR_RETURN(const std::vector<int> layers,
                           stage_layer_counts(plan.model.num_layers, p));
  for (const StageMemory& m : memory.stages) {
    StageExplanation s;
    s.stage = m.stage;
    s.layers = static_cast<std::size_t>(m.stage) < layers.size()
                   ? layers[static_cast<std::size_t>(m.stage)]
                   : 0;
    s.memory = m;
    out.stages.push_back(std::move(s));
  }

  if (!plan.model.is_moe() || p.ep <= 1) return out;
  ExpertParallelExplanation e;
  const MoeRouting routing = moe_routing(plan.model, p, plan.training.seq_length);
  e.experts = static_cast<int>(plan.model.moe->num_experts);
  e.top_k = static_cast<int>(plan.model.moe->top_k);
  e.ep = p.ep;
  e.etp = p.expert_tp();
  e.edp = p.expert_dp();
  e.local_experts = routing.local_experts;
  e.tokens_per_expert = routing.per_expert;
  e.routing = routing_text(routing, p);
  e.fp8_dispatch = p.moe_fp8_dispatch;
  // Where the expert-parallel groups sit: the one spanning the most NVLink domains, then nodes
  // (its all-to-alls pace the others'; groups differ where they straddle racks unevenly).
  PLANNER_ASSIGN_OR_RETURN(const RankGrid grid, RankGrid::expert(p));
  PLANNER_ASSIGN_OR_RETURN(const std::vector<std::vector<int>> groups, grid.groups("ep"));
  const topo::Cluster& cluster = *setup.cluster(ranked.scenario);
  PLANNER_ASSIGN_OR_RETURN(const std::vector<int> gpu_of_rank,
                           sim::default_gpu_of_rank(p, cluster));
  for (const std::vector<int>& group : groups) {
    std::set<int> nodes, domains;
    for (int rank : group) {
      const int gpu = gpu_of_rank[static_cast<std::size_t>(rank)];
      nodes.insert(cluster.node_of(gpu));
      domains.insert(cluster.nvlink_domain_of(gpu));
    }
    const int n = static_cast<int>(nodes.size()), d = static_cast<int>(domains.size());
    if (e.group_gpus > 0 && (d != e.group_nvlink_domains || n != e.group_nodes))
      e.groups_alike = false;
    if (d > e.group_nvlink_domains || (d == e.group_nvlink_domains && n > e.group_nodes)) {
      e.group_gpus = static_cast<int>(group.size());
      e.group_nodes = n;
      e.group_nvlink_domains = d;
    }
  }
  // The dispatch and combine all-to-alls: the most used (algorithm, protocol) of the ep axis.
  const sim::CollectiveUse* main = nullptr;
  int calls = 0;
  Bytes bytes;
  Time busy;
  if (sim) {
    for (const sim::CollectiveUse& c : sim->collectives) {
      if (c.axis != sim::TimeBucket::kEp || c.kind != OpKind::kAllToAll || c.count == 0) continue;
      calls += c.count;
      bytes = bytes + c.bytes;
      busy = busy + c.busy;
      if (main == nullptr || c.count > main->count) main = &c;
    }
  }
  if (main != nullptr) {
    e.algorithm = std::string(to_string(main->algorithm));
    e.protocol = main->protocol;
    const int ranks = std::max(1, sim->simulated_ranks);
    e.calls = calls / ranks;
    e.mb_per_call = static_cast<double>(bytes.raw()) / calls / 1e6;
    e.ms_per_call = to_milliseconds(busy) / calls;
  }
  if (sim) e.exposed = sim->exposed(sim::TimeBucket::kEp);
  out.experts = e;
  return out;
}

}  // namespace planner::app
