// The sweep library: enumeration and memory pruning, analytic ranking, the simulated top K, the
// same answer on any number of threads or shards, cancellation, and the sweep document.
#include "planner/search/sweep.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stop_token>
#include <string>
#include <vector>

#include "planner/core/catalog.hpp"
#include "planner/core/schedule.hpp"
#include "planner/search/estimate.hpp"
#include "planner/search/sweep_spec.hpp"
#include "planner/topo/topology_catalog.hpp"
#include "support/corpus.hpp"

namespace planner::search {
namespace {

// llama3-8b on up to 16 H100s, 64 sequences of 2,048 tokens: a few thousand candidates, the
// best 4 simulated.
SweepRequest small_request(int threads = 1) {
  const Catalog& catalog = builtin_catalog();
  SweepScenario sc;
  sc.model = catalog.model("llama3-8b").value();
  sc.gpu = catalog.gpu("h100").value();
  sc.topology = topo::topology_for_gpu(sc.gpu).value();
  sc.training.seq_length = 2048;
  sc.training.global_batch_size = 64;
  sc.max_gpus = 16;
  sc.min_gpus = 8;
  SweepRequest req;
  req.scenarios.push_back(sc);
  req.options.threads = threads;
  req.options.top_k = 4;
  req.options.keep = 40;
  req.options.sim.ranks = RankSubset::kOnePerStage;
  req.options.sim.run.keep_op_times = false;
  return req;
}

const SweepResult& small_result() {
  static const SweepResult result = run_sweep(small_request()).value().result;
  return result;
}

std::vector<std::uint64_t> ids(const std::vector<RankedPlan>& plans) {
  std::vector<std::uint64_t> out;
  for (const RankedPlan& p : plans)
    out.push_back(p.id);
  return out;
}

// No plan of the ranking is faster and cheaper than a point of the frontier, by the numbers shown
// for each (its simulation where it has one).
void expect_no_ranked_plan_beats_the_frontier(const SweepResult& r) {
  for (const RankedPlan& p : r.pareto) {
    for (const RankedPlan& q : r.ranking) {
      const Economics &a = q.economics, &b = p.economics;
      const bool beats =
          a.time_to_train_s <= b.time_to_train_s && a.total_cost.raw() <= b.total_cost.raw() &&
          (a.time_to_train_s < b.time_to_train_s || a.total_cost.raw() < b.total_cost.raw());
      EXPECT_FALSE(beats) << "#" << q.position << " " << short_label(q.parallel)
                          << " beats the frontier's " << short_label(p.parallel);
    }
  }
}

TEST(Sweep, CountsAddUpAndMemoryPrunes) {
  const SweepResult& r = small_result();
  const SweepCounts& c = r.counts;
  EXPECT_GT(c.candidates, 1000);
  EXPECT_GT(c.out_of_memory, 0);  // e.g. tp1 pp1 without ZeRO does not fit 8B with Adam in 80 GB
  EXPECT_EQ(c.candidates, c.out_of_memory + c.evaluated);
  EXPECT_EQ(c.feasible, c.evaluated - c.over_budget - c.over_deadline);
  EXPECT_EQ(c.simulated, 4);
  EXPECT_EQ(c.simulation_failures, 0);
  EXPECT_EQ(r.ranking.size(), 40u);
  ASSERT_EQ(r.scenarios.size(), 1u);
  EXPECT_EQ(r.scenarios[0].max_gpus, 16);
  // Default token budget: 20 tokens per parameter (Chinchilla).
  EXPECT_NEAR(r.scenarios[0].token_budget / 8.03e9, kChinchillaTokensPerParam, 0.5);
}

TEST(Sweep, RankingIsOrderedAndPlansFit) {
  const SweepResult& r = small_result();
  for (std::size_t i = 0; i < r.ranking.size(); ++i) {
    const RankedPlan& p = r.ranking[i];
    EXPECT_EQ(p.position, static_cast<int>(i) + 1);
    EXPECT_EQ(p.tier, i < 4 ? Tier::kSimulated : Tier::kEstimate) << i;
    EXPECT_EQ(p.simulated.has_value(), i < 4) << i;
    EXPECT_LE(p.metrics().peak_memory.raw(), p.metrics().capacity.raw()) << i;
    const int world = p.parallel.world_size();
    EXPECT_GE(world, 8);
    EXPECT_LE(world, 16);
    EXPECT_EQ(world % 8, 0);      // whole nodes
    EXPECT_LE(p.parallel.tp, 8);  // within the NVLink domain
    EXPECT_GT(p.objective, 0);
    EXPECT_DOUBLE_EQ(p.objective, p.economics.tokens_per_usd);
  }
  // The simulated plans are ranked by their simulation, the rest by estimate.
  for (std::size_t i = 1; i < r.ranking.size(); ++i) {
    if (i == 4) continue;
    EXPECT_GE(r.ranking[i - 1].objective, r.ranking[i].objective) << i;
  }
  // The estimate tier's best outranks every plan it left for later.
  double best_estimate = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    best_estimate = std::max(best_estimate, r.ranking[i].estimate.tokens_per_second /
                                                r.ranking[i].parallel.world_size());
  }
  for (std::size_t i = 4; i < r.ranking.size(); ++i) {
    EXPECT_GE(best_estimate * (1 + 1e-9),
              r.ranking[i].estimate.tokens_per_second / r.ranking[i].parallel.world_size())
        << i;
  }
}

TEST(Sweep, AnalyticEstimateIsCloseToTheSimulation) {
  const SweepResult& r = small_result();
  EXPECT_EQ(r.error.plans, 4);
  EXPECT_LT(r.error.max_abs_pct, 25.0);
  EXPECT_LE(r.error.mean_abs_pct, r.error.max_abs_pct);
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    const RankedPlan& p = r.ranking[static_cast<std::size_t>(i)];
    const double e = static_cast<double>(p.estimate.step_time.raw());
    const double s = static_cast<double>(p.simulated->step_time.raw());
    ASSERT_GT(s, 0);
    sum += std::abs(e - s) / s * 100;
  }
  EXPECT_NEAR(r.error.mean_abs_pct, sum / 4, 1e-6);
}

// ZeRO-3 plans: the estimate follows the simulation's order on the data-parallel stream, where a
// layer's backward gather queues behind the reduce-scatter of the layer after it (here 1.2 % at
// most). When it assumed both hidden under the backward pass, it was 11.6 % below the simulation
// here and 31 % on GPT-3 175B over 1,536 A100s, and filled the simulated top K with plans it
// flattered.
TEST(Sweep, AnalyticEstimateFollowsTheSimulationForZeroThree) {
  SweepRequest req = small_request();
  req.space.zero_stages = {3};
  req.space.pp = {1};
  req.options.top_k = 4;
  auto run = run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  const SweepResult& r = run->result;
  ASSERT_EQ(r.error.plans, 4);
  for (const RankedPlan& p : r.ranking)
    EXPECT_EQ(p.parallel.zero_stage, 3);
  EXPECT_LT(r.error.max_abs_pct, 5.0);
}

// The small sweep with `layers` layers on pp 4, its best 3 plans simulated.
SweepRequest pp4_request(int layers) {
  SweepRequest req = small_request();
  req.scenarios[0].model.num_layers = layers;
  req.space.pp = {4};
  req.options.top_k = 3;
  req.options.keep = 10;
  return req;
}

// A listed pp that does not divide the layers is searched with the balanced uneven split (30
// layers on pp 4: 7 + 8 + 8 + 7 with one virtual stage), and the estimate follows the simulation
// there too; unlisted, with uneven_stages.
TEST(Sweep, UnevenStagesAreSearchedAndEstimated) {
  SweepRequest req = pp4_request(30);
  auto run = run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  const SweepResult& r = run->result;
  ASSERT_FALSE(r.ranking.empty());
  for (const RankedPlan& p : r.ranking) {
    EXPECT_EQ(p.parallel.pp, 4);
    EXPECT_GT(p.parallel.first_stage_layers, 0) << short_label(p.parallel);
    if (p.parallel.virtual_stages == 1) {
      EXPECT_EQ(p.parallel.first_stage_layers, 7);
      EXPECT_EQ(p.parallel.last_stage_layers, 7);
    }
  }
  EXPECT_EQ(r.counts.simulation_failures, 0);
  EXPECT_EQ(r.error.plans, 3);
  EXPECT_LT(r.error.max_abs_pct, 25.0);
  // Unlisted, pp 4 is searched only with uneven_stages, which is on by default where 4 does not
  // divide the layers (30), off where it does (32).
  req.space.pp.clear();
  req.options.top_k = 0;
  req.space.uneven_stages = false;
  auto even = run_sweep(req);
  ASSERT_TRUE(even) << even.status().message();
  req.space.uneven_stages = true;
  auto uneven = run_sweep(req);
  ASSERT_TRUE(uneven) << uneven.status().message();
  EXPECT_GT(uneven->result.counts.candidates, even->result.counts.candidates);
  req.space.uneven_stages.reset();
  auto automatic = run_sweep(req);
  ASSERT_TRUE(automatic) << automatic.status().message();
  EXPECT_EQ(automatic->result.counts.candidates, uneven->result.counts.candidates);
  EXPECT_TRUE(searches_uneven_stages(req.space, 61));
  EXPECT_TRUE(searches_uneven_stages(req.space, 94));
  EXPECT_TRUE(searches_uneven_stages(req.space, 126));
  EXPECT_FALSE(searches_uneven_stages(req.space, 32));
  EXPECT_FALSE(searches_uneven_stages(req.space, 36));
}

// Virtual stages that no split of the stages holds are searched in the balanced layout of chunks
// of unequal size (Megatron-core's --pipeline-model-parallel-layout): 30 layers on pp 4 in 4 chunks
// a stage as 1 + 14 × 2 + 1, estimated and simulated like any other plan.
TEST(Sweep, InterleavedPlansTakeTheBalancedLayout) {
  SweepRequest req = pp4_request(30);
  req.space.schedules = {Schedule::kInterleaved};
  req.space.virtual_stages = {4};
  auto run = run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  const SweepResult& r = run->result;
  ASSERT_FALSE(r.ranking.empty());
  for (const RankedPlan& p : r.ranking) {
    EXPECT_EQ(p.parallel.virtual_stages, 4) << short_label(p.parallel);
    EXPECT_EQ(p.parallel.first_stage_layers, 0);
    EXPECT_EQ(layout_text(p.parallel.layout), "1,2x14,1") << short_label(p.parallel);
  }
  EXPECT_EQ(r.counts.simulation_failures, 0);
  EXPECT_EQ(r.error.plans, 3);
  EXPECT_LT(r.error.max_abs_pct, 25.0);
  // Where the layers split evenly no layout is searched.
  req.scenarios[0].model.num_layers = 32;
  auto even = run_sweep(req);
  ASSERT_TRUE(even) << even.status().message();
  ASSERT_FALSE(even->result.ranking.empty());
  for (const RankedPlan& p : even->result.ranking)
    EXPECT_TRUE(p.parallel.layout.empty()) << short_label(p.parallel);
}

// Megatron-core runs the interleaved schedule with a number of micro-batches that pp does not
// divide: 20 sequences over dp 1 and micro-batch 4 are 5 micro-batches on pp 4, searched,
// estimated and simulated like any other plan; fewer micro-batches than stages are not.
TEST(Sweep, InterleavedPlansNeedNoMultipleOfPpMicroBatches) {
  SweepRequest req = small_request();
  req.scenarios[0].training.global_batch_size = 20;
  req.scenarios[0].min_gpus = 16;
  req.space.tp = {4};
  req.space.pp = {4};
  req.space.schedules = {Schedule::kInterleaved};
  req.options.top_k = 2;
  req.options.keep = 200;
  auto run = run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  const SweepResult& r = run->result;
  ASSERT_FALSE(r.ranking.empty());
  bool remainder = false;
  for (const RankedPlan& p : r.ranking) {
    const std::int64_t m = 20 / (p.parallel.dp * p.parallel.micro_batch_size);
    EXPECT_GE(m, 4) << short_label(p.parallel);
    remainder = remainder || m % 4 != 0;
  }
  EXPECT_TRUE(remainder) << "no plan with 5 or 10 micro-batches on pp 4 was searched";
  EXPECT_EQ(r.counts.simulation_failures, 0);
  EXPECT_EQ(r.error.plans, 2);
}

// A DeepSeek-V3-shaped MoE (its first 3 layers dense, then MoE; 8 layers to keep the test small)
// on up to 64 H100s: the estimate's probe must time an MoE layer too. Before it did, every MoE
// layer cost nothing in the estimate (the 2-layer probe held DeepSeek's dense layers only) and
// the estimate was 97% below the simulation.
// A sweep of an MoE preset cut to `layers` layers on min_gpus to max_gpus H100s (sequences of
// 4,096 tokens), simulating `top_k` plans with one rank per stage.
SweepRequest moe_request(const std::string& model, int layers, std::int64_t gbs, int min_gpus,
                         int max_gpus, int threads, int top_k, int keep) {
  const Catalog& catalog = builtin_catalog();
  SweepScenario sc;
  sc.model = catalog.model(model).value();
  sc.model.num_layers = layers;
  sc.model.mtp_layers = 0;
  sc.gpu = catalog.gpu("h100").value();
  sc.topology = topo::topology_for_gpu(sc.gpu).value();
  sc.training.seq_length = 4096;
  sc.training.global_batch_size = gbs;
  sc.max_gpus = max_gpus;
  sc.min_gpus = min_gpus;
  SweepRequest req;
  req.scenarios.push_back(sc);
  req.options.threads = threads;
  req.options.top_k = top_k;
  req.options.keep = keep;
  req.options.sim.ranks = RankSubset::kOnePerStage;
  req.options.sim.run.keep_op_times = false;
  return req;
}

// Runs a sweep and checks its estimate against the simulation of the plans it simulated: at
// least `plans` simulated, none further than `max_pct` from its estimate.
void expect_estimate_close(const SweepRequest& req, const std::string& what, int plans,
                           double max_pct) {
  auto run = run_sweep(req);
  ASSERT_TRUE(run) << what << ": " << run.status().message();
  const SweepResult& r = run->result;
  ASSERT_GE(r.error.plans, plans) << what << ": simulated " << r.counts.simulated << ", failed "
                                  << r.counts.simulation_failures;
  EXPECT_LT(r.error.max_abs_pct, max_pct) << what;
}

TEST(Sweep, AnalyticEstimateIsCloseToTheSimulationForMoe) {
  auto run = run_sweep(moe_request("deepseek-v3", 8, 256, 32, 64, 1, 3, 10));
  ASSERT_TRUE(run) << run.status().message();
  const SweepResult& r = run->result;
  // One of the three is out of memory by the simulation's memory report although the sweep's
  // memory prune admitted it (an open inconsistency of the MoE memory models); the others must
  // be simulated and close to the estimate.
  EXPECT_LE(r.counts.simulation_failures, 1);
  ASSERT_GE(r.error.plans, 2) << "simulated " << r.counts.simulated << ", failed "
                              << r.counts.simulation_failures;
  EXPECT_LT(r.error.max_abs_pct, 35.0);
}

// DeepSeek-V3 with its multi-token-prediction module and context parallelism (8 layers, pp 2, cp
// 2, on 32 H100s): the estimate times the MTP module (its layer, projection, LM head and loss) on
// the LM head's stage, and a ring-attention block waits for its K/V transfer. Before it did both,
// the estimate missed the module and every exposed K/V exchange: 33 % under the simulation here
// (5-6 % now), 15-26 % on DeepSeek-V3's own sweeps.
TEST(Sweep, AnalyticEstimateCountsMtpAndTheContextParallelExchange) {
  SweepRequest req = moe_request("deepseek-v3", 8, 64, 32, 32, 1, 4, 10);
  req.scenarios[0].model.mtp_layers = 1;
  req.space.pp = {2};
  req.space.cp = {2};
  req.space.schedules = {Schedule::k1F1B};
  auto run = run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  const SweepResult& r = run->result;
  ASSERT_GE(r.error.plans, 3) << "simulated " << r.counts.simulated << ", failed "
                              << r.counts.simulation_failures;
  EXPECT_LT(r.error.max_abs_pct, 10.0);
  for (const RankedPlan& p : r.ranking) {
    if (!p.simulated) continue;
    EXPECT_EQ(p.parallel.cp, 2);
    // The K/V exchange the simulation exposes, the estimate exposes too (it said none).
    ASSERT_GT(p.simulated->exposed(sim::TimeBucket::kCp), Time(0)) << short_label(p.parallel);
    EXPECT_GT(p.estimate.exposed(sim::TimeBucket::kCp), Time(0)) << short_label(p.parallel);
  }
}

// The estimate sees what shares the network. A ring-attention ring whose tp x cp spans two nodes
// waits each step for its slowest hop, which crosses the network, not for the NVLink hop from rank
// 0 to its neighbour (DeepSeek-V3 cut to 8 layers, tp 4, cp 4 on 64 H100s: the estimate was 54 %
// under the simulation). ZeRO-2's reduce-scatters after every micro-batch share the NICs with the
// all-to-alls of an expert group beyond the node, whether the compute waits for them or not
// (DeepSeek-V3 with ep 256 on 512 H100s: 27 % under). Both are now estimated within 15 %.
TEST(Sweep, AnalyticEstimateSeesWhatSharesTheNetwork) {
  auto check = [](const SweepRequest& req, const char* what) {
    expect_estimate_close(req, what, 1, 15.0);
  };
  SweepRequest ring = moe_request("deepseek-v3", 8, 64, 64, 64, 1, 2, 4);
  ring.space.micro_batch_sizes = {1, 2};
  ring.space.tp = {4};
  ring.space.cp = {4};
  ring.space.pp = {1};
  ring.space.zero_stages = {1};
  ring.space.moe_a2a_overlap = {false};
  check(ring, "tp 4 x cp 4 across two nodes");
  SweepRequest zero2 = moe_request("deepseek-v3", 61, 1024, 512, 512, 1, 2, 4);
  zero2.space.micro_batch_sizes = {1};
  zero2.space.tp = {4};
  zero2.space.cp = {2};
  zero2.space.pp = {1};
  zero2.space.ep = {256};
  zero2.space.zero_stages = {2};
  zero2.space.moe_a2a = {MoeA2a::kNccl};
  zero2.space.moe_a2a_overlap = {true};
  check(zero2, "ZeRO-2 beside ep 256 across 64 nodes");
}

// A sweep of `layers` of an MoE model on 16 H100s at sequence 8192: tp 1, pp 1, context parallel
// `cp`, without the all-to-all overlap.
SweepRequest one_stage_request(const std::string& model, int layers, int cp) {
  SweepRequest req = moe_request(model, layers, 64, 16, 16, 1, 2, 4);
  req.scenarios[0].training.seq_length = 8192;
  req.space.tp = {1};
  req.space.cp = {cp};
  req.space.pp = {1};
  req.space.moe_a2a_overlap = {false};
  return req;
}

// GPT-OSS alternates local attention (a window of 128 tokens) with full attention. With context
// parallelism only the full layers run the K/V ring; the estimate's layer is the mean of its
// kind's layers, ring and all (it took the first, local one: 24 % under the simulation on
// GPT-OSS-120B's sweep on 64 H100s, 2 % now).
TEST(Sweep, AnalyticEstimateAveragesLocalAndFullAttentionLayers) {
  expect_estimate_close(one_stage_request("gpt-oss-120b", 4, 2),
                        "gpt-oss-120b, 4 layers, cp 2 on 16 H100s", 2, 8.0);
}

// A hybrid model's non-MoE layers are of two kinds, Mamba-2 mixers and attention: the estimate's
// dense layer is their mean, weighted by how many of each the model has (it took the first, a
// Mamba mixer, and missed the attention layers: 13.8 % from the simulation, now about 6 %, the
// same few percent too fast as on Qwen3-30B-A3B or a Mamba-only or attention-only pattern here).
TEST(Sweep, AnalyticEstimateWeighsAHybridModelsMixers) {
  expect_estimate_close(one_stage_request("nemotron-3-nano", 13, 1),
                        "nemotron-3-nano, 13 layers (2 attention) on 16 H100s", 2, 8.0);
}

// Qwen3-Next's mixers are Gated DeltaNet and gated attention, each before an MoE block: the
// estimate weighs them as it does Nemotron-H's (8 of its 48 layers: 6 Gated DeltaNet, 2
// attention).
TEST(Sweep, AnalyticEstimateWeighsGatedDeltaNetAndAttention) {
  expect_estimate_close(one_stage_request("qwen3-next-80b-a3b", 16, 1),
                        "qwen3-next-80b-a3b, 8 layers (2 attention) on 16 H100s", 2, 8.0);
}

// On GB200 NVL72 racks of 18 nodes, a cluster of 37 nodes (148 GPUs: no equal blocks of racks
// divide it, so its nodes fill the racks in order) runs 128-GPU plans on one rack and 14 nodes
// of the next: a stage of 16 nodes (pp 2), an expert group of 4 nodes (ep 16) or a
// ring-attention ring of 4 nodes (tp 4 x cp 4) starting on node 16 straddles the two racks, and
// its all-to-alls or K/V exchanges cross the scale-out network while rank 0's stay on NVLink. The
// step waits for the slowest: the estimate costs the stage spanning the most racks and, in it,
// the group spanning the most. It costed rank 0's: 50 %, 15 % and 40 % from the simulation here
// (7 % or less now), 61 % on average on the best 32 plans of Kimi K2 on 256 GB200s (3 % now;
// there the sweep now places the cluster's 64 nodes in 4 racks of 16, and nothing straddles).
TEST(Sweep, AnalyticEstimateCostsTheGroupsThatStraddleRacks) {
  auto check = [](SweepRequest req, const char* what) {
    req.scenarios[0].gpu = builtin_catalog().gpu("gb200").value();
    req.scenarios[0].topology = topo::builtin_topologies().get("gb200-nvl72").value();
    expect_estimate_close(req, what, 2, 10.0);
  };
  // DeepSeek-V3 cut to 8 layers on 128 of 148 GPUs, the axes fixed.
  auto fixed = [](int tp, int cp, int pp, int ep) {
    SweepRequest req = moe_request("deepseek-v3", 8, 256, 128, 148, 1, 2, 4);
    req.space.tp = {tp};
    req.space.cp = {cp};
    req.space.pp = {pp};
    req.space.ep = {ep};
    req.space.moe_a2a_overlap = {false};
    return req;
  };
  check(fixed(1, 1, 2, 64), "pp 2 x ep 64: the second stage straddles the racks");
  check(fixed(1, 1, 1, 16), "ep 16: the fifth expert group straddles the racks");
  SweepRequest ring = fixed(4, 4, 1, 8);
  ring.space.micro_batch_sizes = {1};
  check(ring, "tp 4 x cp 4: the fifth ring straddles the racks");

  // 256 GPUs (64 nodes) sit in 4 racks of 16 nodes: every group of the plans stays in its rack.
  SweepRequest blocks = fixed(1, 1, 2, 64);
  blocks.scenarios[0].gpu = builtin_catalog().gpu("gb200").value();
  blocks.scenarios[0].topology = topo::builtin_topologies().get("gb200-nvl72").value();
  blocks.scenarios[0].min_gpus = blocks.scenarios[0].max_gpus = 256;
  auto placed = run_sweep(blocks);
  ASSERT_TRUE(placed) << placed.status().message();
  EXPECT_EQ(placed->result.scenarios[0].placement, "4 racks x 16 of their 18 nodes");
  EXPECT_EQ(placed->setup->cluster(0)->nvlink_domain_size(), 64);
  EXPECT_EQ(run_sweep(fixed(1, 1, 2, 64)).value().result.scenarios[0].placement, "");
}

// DeepSeek-V3's 61 layers on pp 16 (256 B300s, ep 8, 1F1B): the sweep tries Megatron's balanced
// split (3 + 14 × 4 + 2, the embedding and the loss counted as a layer each) and the one that also
// counts the MTP module on the last stage (4 + 14 × 4 + 1); the second balances the stages and
// simulates faster.
TEST(Sweep, SearchesTheSplitThatCountsTheMtpModule) {
  SweepRequest req = moe_request("deepseek-v3", 61, 512, 256, 256, 1, 4, 10);
  req.scenarios[0].model.mtp_layers = 1;
  req.space.tp = {1};
  req.space.pp = {16};
  req.space.cp = {1};
  req.space.ep = {8};
  req.space.micro_batch_sizes = {1};
  req.space.schedules = {Schedule::k1F1B};
  req.space.recompute = {Recompute::kNone};
  req.space.zero_stages = {1};
  req.space.overlap = {true};
  req.space.moe_a2a = {MoeA2a::kNccl};
  req.space.orders = {"tp-cp-ep-dp-pp"};
  // B300s: DeepSeek-V3 on pp 16 × ep 8 needs more than an H100 or H200 holds.
  req.scenarios[0].gpu = builtin_catalog().gpu("b300").value();
  req.scenarios[0].topology = topo::topology_for_gpu(req.scenarios[0].gpu).value();
  auto run = run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  std::map<std::pair<int, int>, Time> simulated;
  for (const RankedPlan& p : run->result.ranking) {
    if (p.simulated)
      simulated[{p.parallel.first_stage_layers, p.parallel.last_stage_layers}] =
          p.simulated->step_time;
  }
  ASSERT_EQ(simulated.size(), 2u);
  const std::pair<int, int> megatron{3, 2}, with_mtp{4, 1};
  ASSERT_TRUE(simulated.count(megatron) && simulated.count(with_mtp));
  EXPECT_LT(to_seconds(simulated[with_mtp]), 0.95 * to_seconds(simulated[megatron]));
  EXPECT_EQ(run->result.ranking.front().parallel.first_stage_layers, 4);
}

// The MoE all-to-all is a search dimension for plans with expert parallelism (without it there is
// no all-to-all: one value), and the space can fix it.
TEST(Sweep, SearchesTheHierarchicalAllToAllWhereThereIsExpertParallelism) {
  SweepRequest req = moe_request("qwen3-30b-a3b", 4, 64, 32, 32, 2, 4, 400);
  req.space.pp = {1};
  auto run = run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  int hierarchical = 0;
  for (const RankedPlan& r : run->result.ranking) {
    const ParallelConfig& p = r.parallel;
    if (p.moe_a2a != MoeA2a::kHierarchical) continue;
    ++hierarchical;
    EXPECT_GT(p.ep, 1) << short_label(p);
  }
  EXPECT_GT(hierarchical, 0);
  // One copy per node and GPU instead of one per expert: the best plan sends hierarchically, and
  // so does every plan of the frontier (taken by the analytic estimate) that has an all-to-all.
  const ParallelConfig& best = run->result.ranking.front().parallel;
  if (best.ep > 1) {
    EXPECT_EQ(best.moe_a2a, MoeA2a::kHierarchical);
  }
  ASSERT_FALSE(run->result.pareto.empty());
  for (const RankedPlan& r : run->result.pareto) {
    if (r.parallel.ep > 1) {
      EXPECT_EQ(r.parallel.moe_a2a, MoeA2a::kHierarchical) << short_label(r.parallel);
    }
  }
  // Ranked by the estimate alone, ep 16 across two nodes: the analytic tier times each form with
  // its own lines (the nccl plan, estimated first, must not lend the other its all-to-all).
  SweepRequest estimated = req;
  estimated.space.ep = {16};
  estimated.options.top_k = 0;
  auto est = run_sweep(estimated);
  ASSERT_TRUE(est) << est.status().message();
  ASSERT_FALSE(est->result.ranking.empty());
  const RankedPlan& top = est->result.ranking.front();
  EXPECT_EQ(top.tier, Tier::kEstimate);
  EXPECT_EQ(top.parallel.moe_a2a, MoeA2a::kHierarchical) << short_label(top.parallel);
  req.space.moe_a2a = {MoeA2a::kNccl};
  auto nccl = run_sweep(req);
  ASSERT_TRUE(nccl) << nccl.status().message();
  for (const RankedPlan& r : nccl->result.ranking)
    EXPECT_EQ(r.parallel.moe_a2a, MoeA2a::kNccl) << short_label(r.parallel);
  EXPECT_LT(nccl->result.counts.candidates, run->result.counts.candidates);
}

// Recompute module sets are selective candidates of their own: two sets, twice the selective
// candidates; the moe set recomputes the MoE blocks' forward (slower than core_attn alone) and
// keeps less of them (its peak lower on the same plan).
TEST(Sweep, SearchesRecomputeModuleSets) {
  SweepRequest req = moe_request("qwen3-30b-a3b", 4, 64, 32, 32, 2, 4, 400);
  req.space.pp = {1};
  req.space.recompute = {Recompute::kSelective};
  auto plain = run_sweep(req);
  ASSERT_TRUE(plain) << plain.status().message();
  const std::uint8_t moe =
      module_bit(RecomputeModule::kCoreAttn) | module_bit(RecomputeModule::kMoe);
  req.space.recompute_modules = {kDefaultRecomputeModules, moe};
  auto both = run_sweep(req);
  ASSERT_TRUE(both) << both.status().message();
  EXPECT_EQ(both->result.counts.candidates, 2 * plain->result.counts.candidates);
  // The label leaves out whether a sharded plan overlaps its gradient reduction: pair on both.
  auto key = [](const ParallelConfig& p) {
    return short_label(p) + (p.overlap_grad_reduce ? "" : " no-overlap");
  };
  std::map<std::string, const RankedPlan*> by_label;
  for (const RankedPlan& r : both->result.ranking)
    by_label[key(r.parallel)] = &r;
  int pairs = 0;
  for (const RankedPlan& r : both->result.ranking) {
    if (r.parallel.recompute_modules != moe) continue;
    ParallelConfig core = r.parallel;
    core.recompute_modules = kDefaultRecomputeModules;
    const auto it = by_label.find(key(core));
    if (it == by_label.end() || it->second->tier != r.tier) continue;
    ++pairs;
    EXPECT_LT(r.metrics().peak_memory.raw(), it->second->metrics().peak_memory.raw())
        << short_label(r.parallel);
    EXPECT_GT(to_seconds(r.metrics().step_time), to_seconds(it->second->metrics().step_time))
        << short_label(r.parallel);
  }
  EXPECT_GT(pairs, 0);
}

// Megatron-core's EP all-to-all overlap is a search dimension of the plans it applies to: expert
// parallelism on the interleaved schedule, or on 1f1b with one stage and two micro-batches or
// more. The analytic tier estimates the merged passes within 10 % of their simulation, and a
// space that rules it out leaves none.
TEST(Sweep, SearchesTheAllToAllOverlapWhereItApplies) {
  SweepRequest req = moe_request("qwen3-30b-a3b", 48, 64, 16, 16, 2, 8, 2000);
  req.space.pp = {1, 2};
  auto run = run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  int merged = 0, simulated = 0;
  for (const RankedPlan& r : run->result.ranking) {
    const ParallelConfig& p = r.parallel;
    if (!p.moe_a2a_overlap) continue;
    ++merged;
    EXPECT_GT(p.ep, 1) << short_label(p);
    const std::int64_t micro = 64 / (static_cast<std::int64_t>(p.dp) * p.micro_batch_size);
    EXPECT_TRUE(p.schedule == Schedule::kInterleaved ||
                (p.schedule == Schedule::k1F1B && p.pp == 1 && micro >= 2))
        << short_label(p);
    if (r.tier != Tier::kSimulated) continue;
    ++simulated;
    const double est = to_seconds(r.estimate.step_time);
    const double sim = to_seconds(r.metrics().step_time);
    EXPECT_NEAR(est / sim, 1.0, 0.10) << short_label(p);
  }
  EXPECT_GT(merged, 0);
  EXPECT_GT(simulated, 0);
  req.space.moe_a2a_overlap = {false};
  auto apart = run_sweep(req);
  ASSERT_TRUE(apart) << apart.status().message();
  for (const RankedPlan& r : apart->result.ranking)
    EXPECT_FALSE(r.parallel.moe_a2a_overlap) << short_label(r.parallel);
  EXPECT_LT(apart->result.counts.candidates, run->result.counts.candidates);
}

// How much a merged pair hides depends on its chunks: each all-to-all hides only under the other
// pass's segment placed after it, so chunks of one MoE layer (the interleaved schedule with as many
// chunks as layers per stage) hide about half their all-to-all time, where the estimate used to
// hide all of it (Qwen3-235B-A22B on 256 H100s: 12 % under the simulation on average, 19 % at
// worst). Qwen3-235B-A22B cut to 8 layers on 64 H100s, pp 2 of 4 one-layer chunks, ep 32 across
// four nodes: every merged plan the sweep simulates is estimated within 5 % (it was 10-11 % under).
TEST(Sweep, AnalyticEstimateTimesTheMergedPairsChunks) {
  SweepRequest req = moe_request("qwen3-235b-a22b", 8, 256, 64, 64, 1, 4, 8);
  req.space.tp = {1};
  req.space.pp = {2};
  req.space.cp = {1};
  req.space.ep = {32};
  req.space.virtual_stages = {4};
  req.space.schedules = {Schedule::kInterleaved};
  req.space.moe_a2a_overlap = {true};
  req.space.micro_batch_sizes = {1};
  auto run = run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  int simulated = 0;
  for (const RankedPlan& r : run->result.ranking) {
    if (r.tier != Tier::kSimulated) continue;
    ++simulated;
    EXPECT_TRUE(r.parallel.moe_a2a_overlap) << short_label(r.parallel);
    EXPECT_NEAR(to_seconds(r.estimate.step_time) / to_seconds(r.metrics().step_time), 1.0, 0.05)
        << short_label(r.parallel);
  }
  EXPECT_GT(simulated, 0);
}

// DeepSeek's DualPipeV is a schedule of the search: two chunks a stage, pp ≥ 2 and at least 2·pp
// micro-batches, never with the EP overlap flag (it merges its chunks itself). Its analytic
// estimate stays within 10 % of the simulation, for Qwen3-30B with expert parallelism and for a
// dense Llama 3 8B.
TEST(Sweep, SearchesDualPipeVWhereItApplies) {
  std::vector<SweepRequest> reqs{moe_request("qwen3-30b-a3b", 48, 64, 16, 16, 2, 8, 2000),
                                 small_request(2)};
  for (SweepRequest& req : reqs) {
    req.space.schedules = {Schedule::kDualPipeV};
    req.options.top_k = 8;
    auto run = run_sweep(req);
    ASSERT_TRUE(run) << run.status().message();
    int simulated = 0;
    for (const RankedPlan& r : run->result.ranking) {
      const ParallelConfig& p = r.parallel;
      const std::int64_t micro = req.scenarios[0].training.global_batch_size /
                                 (static_cast<std::int64_t>(p.dp) * p.micro_batch_size);
      if (p.pp == 1) continue;  // one stage: 1F1B stands for every schedule
      EXPECT_EQ(p.schedule, Schedule::kDualPipeV) << short_label(p);
      EXPECT_EQ(p.virtual_stages, 2) << short_label(p);
      EXPECT_GE(micro, 2 * p.pp) << short_label(p);
      EXPECT_FALSE(p.moe_a2a_overlap) << short_label(p);
      if (r.tier != Tier::kSimulated) continue;
      ++simulated;
      EXPECT_NEAR(to_seconds(r.estimate.step_time) / to_seconds(r.metrics().step_time), 1.0, 0.10)
          << short_label(p);
    }
    EXPECT_GT(simulated, 0) << req.scenarios[0].model.name;
  }
}

// DualPipeV's makespan in the estimate is its schedule run (with each chunk taking half the
// stage's times at 2p micro-batches, and what one more adds beyond), whatever stage times the
// thread ran before: its runs are cached by the stages' times.
TEST(Sweep, DualPipeVMakespanIsItsScheduleRunForEveryStageTimes) {
  constexpr int p = 4;
  const std::vector<double> f{1.0, 1.2, 0.9, 1.1}, w(p, 0.0);
  auto run = [&](const std::vector<double>& b, int m) {
    auto sched = PipelineSchedule::create(Schedule::kDualPipeV, p, m, 2);
    EXPECT_TRUE(sched) << sched.status().message();
    std::vector<PassTimes> t;
    for (std::size_t s = 0; s < f.size(); ++s)
      t.push_back({f[s] / 2, b[s] / 2, w[s] / 2});
    auto r = run_schedule(*sched, t);
    EXPECT_TRUE(r) << r.status().message();
    return r ? r->makespan : 0.0;
  };
  const std::vector<std::vector<double>> backward{
      {2.0, 2.4, 1.8, 2.2}, {2.0, 3.0, 1.8, 2.2}, {2.0, 2.4, 1.8, 2.2}, {4.0, 2.4, 1.8, 2.2}};
  for (const std::vector<double>& b : backward) {
    EXPECT_DOUBLE_EQ(pipeline_makespan(Schedule::kDualPipeV, 2 * p, 2, f, b, w, 0.0),
                     run(b, 2 * p));
    double busiest = 0;
    for (std::size_t s = 0; s < f.size(); ++s)
      busiest = std::max(busiest, f[s] + b[s] + w[s]);
    const double base = run(b, 2 * p);
    EXPECT_DOUBLE_EQ(pipeline_makespan(Schedule::kDualPipeV, 2 * p + 3, 2, f, b, w, 0.0),
                     base + 3 * std::max(run(b, 2 * p + 1) - base, busiest));
  }
}

// A dense model has no all-to-all: a space that allows only the hierarchical form leaves its
// plans as they are (NCCL's value), not invalid.
TEST(Sweep, DenseSweepIgnoresAFixedAllToAll) {
  const SweepResult& free = small_result();
  SweepRequest req = small_request();
  req.space.moe_a2a = {MoeA2a::kHierarchical};
  auto fixed = run_sweep(req);
  ASSERT_TRUE(fixed) << fixed.status().message();
  EXPECT_EQ(fixed->result.counts.candidates, free.counts.candidates);
  EXPECT_EQ(ids(fixed->result.ranking), ids(free.ranking));
  ASSERT_FALSE(fixed->result.ranking.empty());
  for (const RankedPlan& r : fixed->result.ranking)
    EXPECT_EQ(r.parallel.moe_a2a, MoeA2a::kNccl) << short_label(r.parallel);
}

TEST(Sweep, SameResultOnAnyNumberOfThreads) {
  const SweepResult& one = small_result();
  const SweepResult three = run_sweep(small_request(3)).value().result;
  EXPECT_EQ(ids(one.ranking), ids(three.ranking));
  EXPECT_EQ(ids(one.pareto), ids(three.pareto));
  for (std::size_t i = 0; i < one.ranking.size(); ++i) {
    EXPECT_EQ(one.ranking[i].objective, three.ranking[i].objective) << i;
    EXPECT_EQ(one.ranking[i].metrics().step_time, three.ranking[i].metrics().step_time) << i;
  }
  EXPECT_EQ(one.counts.candidates, three.counts.candidates);
  EXPECT_EQ(one.counts.out_of_memory, three.counts.out_of_memory);
  EXPECT_EQ(one.error.mean_abs_pct, three.error.mean_abs_pct);
}

TEST(Sweep, ShardsMergedThroughJsonEqualOneProcess) {
  const SweepRequest req = small_request();
  auto setup = SweepSetup::prepare(req).value();
  const AnalyticPartial whole = run_analytic(*setup, {0, 1}).value();
  std::vector<AnalyticPartial> parts;
  for (int i = 0; i < 3; ++i) {
    const AnalyticPartial part = run_analytic(*setup, {i, 3}).value();
    parts.push_back(parse_partial(to_json(part)).value());  // as MPI carries it
  }
  const AnalyticPartial merged = merge_partials(*setup, std::move(parts));
  EXPECT_EQ(merged.best, whole.best);
  EXPECT_EQ(merged.pareto, whole.pareto);
  EXPECT_EQ(merged.counts.candidates, whole.counts.candidates);
  EXPECT_EQ(merged.counts.evaluated, whole.counts.evaluated);

  const std::vector<Candidate> top = simulation_candidates(*setup, merged);
  ASSERT_EQ(top.size(), 4u);
  const auto sims = simulate_candidates(*setup, top).value();
  const auto again = parse_simulated(*setup, to_json(sims)).value();
  const SweepResult r = finish(*setup, merged, again).value();
  EXPECT_EQ(ids(r.ranking), ids(small_result().ranking));
}

TEST(Sweep, ParetoFrontierIsNonDominated) {
  const SweepResult& r = small_result();
  ASSERT_FALSE(r.pareto.empty());
  for (std::size_t i = 1; i < r.pareto.size(); ++i) {
    const Economics& a = r.pareto[i - 1].economics;
    const Economics& b = r.pareto[i].economics;
    EXPECT_LE(a.time_to_train_s, b.time_to_train_s);    // fastest first
    EXPECT_GT(a.total_cost.raw(), b.total_cost.raw());  // each slower one is cheaper
  }
  // The cheapest plan on the frontier costs no more than the best-ranked one's estimate.
  EXPECT_LE(r.pareto.back().economics.total_cost.raw(),
            r.ranking.front().economics.total_cost.raw() * (1 + 1e-9));
  expect_no_ranked_plan_beats_the_frontier(r);
}

// DeepSeek-V3 on up to 2,048 H800s (the issue's sweep): the plan the estimate puts on the frontier
// next to the best is beaten by the best once both are simulated, and the frontier shown follows
// the simulation.
TEST(Sweep, FrontierFollowsTheSimulatedPlans) {
  SweepScenario sc;
  sc.model = builtin_catalog().model("deepseek-v3").value();
  sc.gpu = builtin_catalog().gpu("h800").value();
  sc.topology = topo::topology_for_gpu(sc.gpu).value();
  sc.training.seq_length = 4096;
  sc.training.global_batch_size = 1024;
  sc.max_gpus = 2048;
  SweepRequest req;
  req.scenarios.push_back(sc);
  req.options.sim.ranks = RankSubset::kOnePerStage;
  req.options.sim.run.keep_op_times = false;
  req.space.uneven_stages = false;  // the sweep whose frontier showed a beaten plan
  auto run = run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  const SweepResult& r = run->result;
  ASSERT_GE(r.pareto.size(), 2u);
  expect_no_ranked_plan_beats_the_frontier(r);
  const std::vector<std::uint64_t> front = ids(r.pareto);
  EXPECT_NE(std::find(front.begin(), front.end(), r.ranking.front().id), front.end())
      << "the best plan is the cheapest simulated one: it belongs on the frontier";
}

TEST(Sweep, EvaluateAndRegret) {
  const SweepResult& r = small_result();
  auto setup = SweepSetup::prepare(small_request()).value();
  const RankedPlan& best = r.ranking.front();
  const RankedPlan again = setup->evaluate(0, best.parallel).value();
  EXPECT_NEAR(again.objective, best.objective, best.objective * 1e-12);
  EXPECT_DOUBLE_EQ(regret_pct(best, again), 0);
  const RankedPlan& last = r.ranking.back();
  const double regret = regret_pct(best, last);
  EXPECT_NEAR(regret, (1 - last.objective / best.objective) * 100, 1e-9);
  EXPECT_GT(regret, 0);

  ParallelConfig bad = best.parallel;
  bad.tp = 3;  // does not divide the heads
  EXPECT_EQ(setup->evaluate(0, bad).status().code(), StatusCode::kInvalidInput);
}

TEST(Sweep, FixedAxesAndConstraintsNarrowTheSpace) {
  SweepRequest req = small_request();
  req.space.tp = {2};
  req.space.schedules = {Schedule::k1F1B};
  req.options.top_k = 1;
  const SweepResult r = run_sweep(req).value().result;
  ASSERT_FALSE(r.ranking.empty());
  for (const RankedPlan& p : r.ranking) {
    EXPECT_EQ(p.parallel.tp, 2);
    EXPECT_EQ(p.parallel.schedule, Schedule::k1F1B);
  }
  EXPECT_LT(r.counts.candidates, small_result().counts.candidates);

  req.constraints.budget_usd = 1.0;  // nothing trains 160B tokens for a dollar
  const SweepResult none = run_sweep(req).value().result;
  EXPECT_TRUE(none.ranking.empty());
  EXPECT_EQ(none.counts.feasible, 0);
  EXPECT_EQ(none.counts.over_budget, none.counts.evaluated);
}

// An empty ranking explains itself: the budget against the cheapest plan, a fixed micro-batch size
// that divides no batch, memory against the smallest need; a ranking with plans needs no words.
TEST(Sweep, ExplainEmptyNamesTheConstraint) {
  EXPECT_EQ(explain_empty(*SweepSetup::prepare(small_request()).value(), small_result()), "");

  SweepRequest budget = small_request();
  budget.constraints.budget_usd = 1.0;
  const SweepOutcome b = run_sweep(budget).value();
  const std::string why = explain_empty(*b.setup, b.result);
  EXPECT_NE(why.find("the cheapest costs $"), std::string::npos) << why;
  EXPECT_NE(why.find("against the budget of $1"), std::string::npos) << why;
  EXPECT_TRUE(std::isfinite(b.result.counts.min_cost_usd));

  SweepRequest batch = small_request();
  batch.scenarios[0].training.global_batch_size = 3;
  batch.space.micro_batch_sizes = {2};
  const SweepOutcome m = run_sweep(batch).value();
  EXPECT_EQ(m.result.counts.candidates, 0);
  EXPECT_NE(explain_empty(*m.setup, m.result).find("micro_batch_size 2"), std::string::npos)
      << explain_empty(*m.setup, m.result);

  SweepRequest big = small_request();
  big.scenarios[0].model = builtin_catalog().model("llama3-405b").value();
  big.scenarios[0].max_gpus = 8;
  big.scenarios[0].min_gpus = 8;
  const SweepOutcome o = run_sweep(big).value();
  const std::string mem = explain_empty(*o.setup, o.result);
  EXPECT_NE(mem.find("fits in memory"), std::string::npos) << mem;
  EXPECT_NE(mem.find("GiB of HBM"), std::string::npos) << mem;
}

class CountingSink : public ProgressSink {
 public:
  void on_progress(const SweepProgress& p) override {
    ++calls;
    last = p;
  }
  int calls = 0;
  SweepProgress last;
};

TEST(Sweep, ReportsProgressAndCancels) {
  CountingSink sink;
  SweepRequest req = small_request();
  req.options.top_k = 1;
  ASSERT_TRUE(run_sweep(req, &sink).is_ok());
  EXPECT_GT(sink.calls, 1);
  EXPECT_EQ(sink.last.phase, SweepPhase::kDone);

  std::stop_source stop;
  stop.request_stop();
  const auto cancelled = run_sweep(req, nullptr, stop.get_token());
  ASSERT_FALSE(cancelled.is_ok());
  EXPECT_EQ(cancelled.status().code(), StatusCode::kRuntime);
  EXPECT_NE(cancelled.status().message().find("cancelled"), std::string::npos);
}

TEST(SweepSpec, ParsesAScenarioGrid) {
  const std::string doc = R"({"schema_version": 1, "kind": "sweep", "name": "grid",
    "models": ["llama3-8b"], "training": {"global_batch_size": 64, "seq_length": 2048},
    "clusters": [{"gpu": "h100", "gpus": [8, 16]}],
    "space": {"tp": [1, 2], "schedule": ["1f1b"], "etp": [1],
              "moe_capacity_factor": ["dropless", 1.25], "moe_imbalance": 1.3,
              "recompute_modules": [["moe_act", "layernorm"], "core_attn+mlp"]},
    "constraints": {"deadline_days": 30},
    "search": {"top_k": 2, "keep": 10}})";
  const auto resolver = [](std::string_view name) { return topo::resolve_topology(name); };
  const SweepRequest req = parse_sweep_spec(doc, "sweep.json", builtin_catalog(), resolver).value();
  ASSERT_EQ(req.scenarios.size(), 2u);
  EXPECT_EQ(req.scenarios[0].max_gpus, 8);
  EXPECT_EQ(req.scenarios[1].max_gpus, 16);
  EXPECT_EQ(req.space.tp, (std::vector<int>{1, 2}));
  EXPECT_EQ(req.space.etp, (std::vector<int>{1}));
  EXPECT_EQ(req.space.moe_capacity, (std::vector<double>{0.0, 1.25}));
  EXPECT_DOUBLE_EQ(req.space.moe_imbalance, 1.3);
  using RM = RecomputeModule;
  EXPECT_EQ(req.space.recompute_modules,
            (std::vector<std::uint8_t>{
                static_cast<std::uint8_t>(module_bit(RM::kMoeAct) | module_bit(RM::kLayernorm)),
                static_cast<std::uint8_t>(module_bit(RM::kCoreAttn) | module_bit(RM::kMlp))}));
  EXPECT_EQ(req.options.top_k, 2);
  ASSERT_TRUE(req.constraints.deadline_s.has_value());
  EXPECT_DOUBLE_EQ(*req.constraints.deadline_s, 30 * 86400.0);
}

TEST(SweepSpec, BadFieldsNameTheirPointer) {
  const auto resolver = [](std::string_view name) { return topo::resolve_topology(name); };
  const auto r = parse_sweep_spec(
      R"({"schema_version": 1, "kind": "sweep", "models": ["llama3-8b"],
          "clusters": [{"gpu": "h100", "gpus": [8, 0]}],
          "space": {"tpp": [1], "recompute_modules": [["moe", "experts"], 3]}})",
      "sweep.json", builtin_catalog(), resolver);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  const std::string m = r.status().message();
  EXPECT_NE(m.find("sweep.json"), std::string::npos) << m;
  EXPECT_NE(m.find("/clusters/0/gpus/1"), std::string::npos) << m;
  EXPECT_NE(m.find("/space/tpp"), std::string::npos) << m;
  EXPECT_NE(m.find("/space/recompute_modules/0: unknown recompute module \"experts\""),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("/space/recompute_modules/1: expected a list of recompute modules"),
            std::string::npos)
      << m;
}

// The corpus of bad sweep documents under tests/data/bad-sweep/ (NAME.json with the exact
// diagnostics `planner validate` prints in NAME.expected); apart from tests/data/bad/ so core's
// corpus test needs no simulator.
TEST(SweepSpec, BadCorpusGivesItsExactErrors) {
  const std::string dir = std::string(PLANNER_TEST_DATA_DIR) + "/bad-sweep";
  EXPECT_GE(planner::testing::corpus_files(dir).size(), 8u);
  const auto resolver = [](std::string_view name) { return topo::resolve_topology(name); };
  DocumentTypes types;
  register_core_documents(types, builtin_catalog());
  register_sweep_documents(types, builtin_catalog(), resolver);
  planner::testing::expect_corpus_diagnostics(
      dir, types,
      [&](const std::filesystem::path& file, const std::string& text, const Diagnostics& diag) {
        // The loader `planner sweep --spec` uses reports the same problems.
        auto parsed = parse_sweep_spec(text, file.filename().string(), builtin_catalog(), resolver);
        ASSERT_FALSE(parsed) << file.filename();
        EXPECT_EQ(parsed.status().message(), diag.to_string()) << file.filename();
      });
}

// Goodput pinned by its closed forms (economics.hpp): Young's interval and the useful fraction at
// it, 1 − sqrt(2δ/M) − R/M; spot capacity adds its preemptions; billing is whole nodes.
TEST(Economics, GoodputFollowsYoungAndBillsWholeNodes) {
  EXPECT_DOUBLE_EQ(young_daly_interval(3600, 50), std::sqrt(2.0 * 3600 * 50));
  const double tau = young_daly_interval(36000, 72);
  EXPECT_NEAR(useful_fraction(36000, 72, 600, tau), 1 - std::sqrt(2 * 72 / 36000.0) - 600 / 36000.0,
              1e-12);
  EXPECT_DOUBLE_EQ(useful_fraction(std::numeric_limits<double>::infinity(), 72, 600, 1e9), 1.0);

  FailureModel f;
  f.interruptions_per_gpu_hour = 1e-4;
  f.spot_preemptions_per_node_hour = 1e-3;
  f.checkpoint_bandwidth = GBps(100);
  f.restart = seconds(600);
  const Bytes ckpt = bytes(200'000'000'000);  // 2 s at 100 GB/s
  const Goodput on_demand = goodput(f, 1024, 128, ckpt, false);
  EXPECT_NEAR(on_demand.interruptions_per_hour, 0.1024, 1e-12);
  EXPECT_NEAR(on_demand.mtbf_s, 3600 / 0.1024, 1e-6);
  EXPECT_NEAR(on_demand.checkpoint_s, 2.0, 1e-9);
  EXPECT_NEAR(on_demand.interval_s, std::sqrt(2 * 2.0 * on_demand.mtbf_s), 1e-6);
  const Goodput spot = goodput(f, 1024, 128, ckpt, true);
  EXPECT_NEAR(spot.interruptions_per_hour, 0.1024 + 0.128, 1e-12);
  EXPECT_LT(spot.useful_fraction, on_demand.useful_fraction);

  const GpuSpec h100 = builtin_catalog().gpu("h100").value();
  PricingOptions pricing;
  pricing.overrides.push_back({"H100", Usd(2.0)});
  const GpuPrice price = resolve_price(h100, pricing).value();
  EXPECT_TRUE(price.overridden);
  const Economics e = economics(1e6, 12, 8, h100, price, pricing, f, ckpt, 1e12);
  EXPECT_EQ(e.billed_gpus, 16);  // 12 GPUs bill two 8-GPU nodes
  EXPECT_NEAR(e.usd_per_hour.raw(), 32.0, 1e-9);
  EXPECT_NEAR(e.effective_tokens_per_second, 1e6 * e.goodput.useful_fraction, 1e-6);
  EXPECT_NEAR(e.tokens_per_usd, e.effective_tokens_per_second * 3600 / 32.0, 1e-6);
  EXPECT_NEAR(e.time_to_train_s, 1e12 / e.effective_tokens_per_second, 1e-6);
  EXPECT_NEAR(e.total_cost.raw(), e.time_to_train_s / 3600 * 32.0, 1e-6);

  pricing.usd_per_kwh = 0.10;  // energy: TDP × PUE × GPUs × $/kWh
  const Economics with_energy = economics(1e6, 12, 8, h100, price, pricing, f, ckpt, 1e12);
  EXPECT_NEAR(with_energy.energy_usd_per_hour.raw(),
              h100.tdp_watts / 1000 * kDefaultPue * 0.10 * 16, 1e-9);
  EXPECT_LT(with_energy.tokens_per_usd, e.tokens_per_usd);
}

TEST(Economics, PricesAtAProviderOrInstance) {
  const GpuSpec h100 = builtin_catalog().gpu("h100").value();
  PricingOptions pricing;
  const GpuPrice by_default = resolve_price(h100, pricing).value();
  EXPECT_EQ(by_default.provider, "AWS");  // the default rule's reference provider
  pricing.provider = "GCP";
  pricing.instance = "a3-megagpu-8g";
  const GpuPrice gcp = resolve_price(h100, pricing).value();
  EXPECT_EQ(gcp.provider, "GCP");
  EXPECT_EQ(gcp.instance, "a3-megagpu-8g");
  EXPECT_FALSE(gcp.date.empty());
  EXPECT_NE(gcp.usd_per_gpu_hour.raw(), by_default.usd_per_gpu_hour.raw());
  pricing.instance = "a3-nonexistent-8g";
  auto none = resolve_price(h100, pricing);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(
      none.status().message().find("no on-demand price from GCP for instance a3-nonexistent-8g"),
      std::string::npos)
      << none.status().message();
  pricing.overrides.push_back({"H100", Usd(2.0)});  // an override still wins
  EXPECT_TRUE(resolve_price(h100, pricing).value().overridden);
}

}  // namespace
}  // namespace planner::search
