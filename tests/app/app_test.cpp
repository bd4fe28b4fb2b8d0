// The app's actions as a front-end calls them: the default scenario (one for both front-ends), a
// sweep with its setup kept, where a plan runs, and profiles by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "planner/app/defaults.hpp"
#include "planner/app/explain.hpp"
#include "planner/app/profiles.hpp"
#include "planner/app/simulate.hpp"
#include "planner/app/sweep.hpp"
#include "planner/core/catalog.hpp"
#include "planner/core/diagnostics.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/plan.hpp"
#include "planner/search/sweep_spec.hpp"
#include "planner/topo/topology_catalog.hpp"
#include "support/command.hpp"

namespace planner::app {
namespace {

search::SweepRequest default_request() {
  const Json doc = default_scenario_document();
  auto req = search::parse_sweep_spec(doc.dump(), "default.json", builtin_catalog(),
                                      [](std::string_view n) { return topo::resolve_topology(n); });
  if (!req) throw std::runtime_error(req.status().message());
  return *req;
}

TEST(DefaultScenario, IsTheCliDefaultAsASweepDocument) {
  const DefaultScenario& d = default_scenario();
  const search::SweepRequest req = default_request();
  ASSERT_EQ(req.scenarios.size(), 1u);
  const search::SweepScenario& s = req.scenarios[0];
  EXPECT_EQ(s.model.name, builtin_catalog().model(d.model)->name);
  EXPECT_TRUE(s.gpu.matches(std::string(d.gpu)));
  EXPECT_EQ(s.max_gpus, 64);
  // The first topology preset with the GPU, as `planner sweep --gpu h100` picks it.
  EXPECT_EQ(s.topology.name, topo::topology_for_gpu(s.gpu)->name);
  // The model's maximum sequence (Llama 3 8B: 8,192) and 4 Mi tokens per step.
  EXPECT_EQ(s.training.seq_length, 8192);
  EXPECT_EQ(s.training.global_batch_size, 512);
  EXPECT_EQ(s.training.token_budget, 0);  // Chinchilla: 20 tokens per parameter
  EXPECT_EQ(req.options.top_k, 32);
  EXPECT_EQ(req.options.keep, d.keep);
}

TEST(DefaultScenario, SequenceAndBatchDefaults) {
  ModelSpec m;
  m.max_seq_len = 4096;
  EXPECT_EQ(default_seq_length(m), 4096);
  // A config's maximum is a long-context limit: the default stops at 8,192 ...
  m.max_seq_len = 1 << 20;
  EXPECT_EQ(default_seq_length(m), kMaxDefaultSeqLength);
  // ... unless the model states its pre-training length.
  m.pretrain_seq_len = 32768;
  EXPECT_EQ(default_seq_length(m), 32768);
  m = ModelSpec{};
  EXPECT_EQ(default_seq_length(m), kFallbackSeqLength);
  EXPECT_EQ(default_global_batch(2048), 2048);
  EXPECT_EQ(default_global_batch(std::int64_t{1} << 30), 1);  // at least one sequence
}

TEST(RunSweep, KeepsTheSetupAndUsesEveryCoreByDefault) {
  search::SweepRequest req = default_request();
  req.scenarios[0].max_gpus = 16;
  req.scenarios[0].min_gpus = 8;
  req.scenarios[0].training.seq_length = 2048;
  req.scenarios[0].training.global_batch_size = 64;
  req.options.top_k = 2;
  req.options.keep = 10;
  auto run = app::run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  ASSERT_TRUE(run->setup);
  ASSERT_TRUE(run->result);
  EXPECT_GE(run->setup->request().options.threads, 1);
  EXPECT_GT(run->seconds, 0);
  ASSERT_FALSE(run->result->ranking.empty());
  // The setup rebuilds the best plan's document.
  const search::RankedPlan& best = run->result->ranking.front();
  const Plan plan = run->setup->plan_of(best.scenario, best.parallel);
  EXPECT_EQ(plan.parallel.world_size(), best.parallel.world_size());
  // The same request on one thread ranks the same plans.
  SweepRunOptions one;
  one.threads = 1;
  auto again = app::run_sweep(req, nullptr, one);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->setup->request().options.threads, 1);
  ASSERT_EQ(again->result->ranking.size(), run->result->ranking.size());
  for (std::size_t i = 0; i < run->result->ranking.size(); ++i)
    EXPECT_EQ(again->result->ranking[i].id, run->result->ranking[i].id);
}

// The best plan of an MoE sweep explained: the ep group on the fabric, the all-to-all the
// simulator chose, and per pipeline stage the memory the plan was pruned with. Rank orders that put
// a rank on different stages in the dense and the expert grid are not ranked.
TEST(ExplainPlan, MoePlanWithPipeline) {
  search::SweepRequest req = default_request();
  auto& sc = req.scenarios[0];
  sc.model = *builtin_catalog().model("qwen3-30b-a3b");
  sc.max_gpus = 16;
  sc.min_gpus = 16;
  sc.training.seq_length = 4096;
  sc.training.global_batch_size = 256;
  req.space.pp = {2};
  req.space.ep = {8};
  req.options.top_k = 2;
  req.options.keep = 40;
  auto run = app::run_sweep(req);
  ASSERT_TRUE(run) << run.status().message();
  ASSERT_FALSE(run->result->ranking.empty());
  EXPECT_EQ(run->result->counts.simulation_failures, 0);
  for (const search::RankedPlan& r : run->result->ranking) {
    Diagnostics diag("plan");
    check_parallel(sc.model, sc.training, r.parallel, diag);
    EXPECT_TRUE(diag.empty()) << short_label(r.parallel) << " " << r.parallel.order;
  }
  const search::RankedPlan& best = run->result->ranking.front();
  ASSERT_TRUE(best.simulated);
  auto x = app::explain_plan(*run->setup, best);
  ASSERT_TRUE(x) << x.status().message();
  EXPECT_TRUE(x->simulated);
  EXPECT_EQ(x->parallel, best.parallel);
  EXPECT_EQ(x->step_time, best.simulated->step_time);
  EXPECT_EQ(x->microbatches, 256 / (best.parallel.dp * best.parallel.micro_batch_size));
  ASSERT_EQ(x->stages.size(), 2u);
  EXPECT_EQ(x->stages[0].layers + x->stages[1].layers, 48);
  Bytes peak;
  for (const StageExplanation& s : x->stages)
    peak = std::max(peak, s.memory.total());
  EXPECT_EQ(peak, best.simulated->peak_memory);
  ASSERT_TRUE(x->experts);
  const ExpertParallelExplanation& e = *x->experts;
  EXPECT_EQ(e.ep, 8);
  EXPECT_EQ(e.local_experts, 128 / 8);
  EXPECT_EQ(e.group_gpus, 8);
  EXPECT_EQ(e.group_nodes, 1);  // aws-p5: 8 GPUs per NVLink node
  EXPECT_EQ(e.group_nvlink_domains, 1);
  // The simulator's algorithm follows the plan's all-to-all.
  EXPECT_EQ(e.algorithm,
            best.parallel.moe_a2a == MoeA2a::kHierarchical ? "hierarchical-a2a" : "direct");
  EXPECT_GT(e.calls, 0);
  EXPECT_GT(e.ms_per_call, 0);
  EXPECT_GT(e.mb_per_call, 0);
  EXPECT_EQ(e.routing, "dropless");

  // A plan only estimated (beyond top_k) is explained without all-to-all figures.
  const auto estimated = std::find_if(run->result->ranking.begin(), run->result->ranking.end(),
                                      [](const search::RankedPlan& r) { return !r.simulated; });
  ASSERT_NE(estimated, run->result->ranking.end());
  auto y = app::explain_plan(*run->setup, *estimated);
  ASSERT_TRUE(y) << y.status().message();
  EXPECT_FALSE(y->simulated);
  ASSERT_TRUE(y->experts);
  EXPECT_TRUE(y->experts->algorithm.empty());
  EXPECT_EQ(y->stages.size(), static_cast<std::size_t>(estimated->parallel.pp));
}

TEST(RunSweep, HandsTheStepsToADistributedRunner) {
  search::SweepRequest req = default_request();
  req.scenarios[0].max_gpus = 8;
  req.scenarios[0].training.seq_length = 2048;
  req.scenarios[0].training.global_batch_size = 16;
  SweepRunOptions options;
  int calls = 0;
  options.distributed = [&](const search::SweepSetup&, search::ProgressSink*) {
    ++calls;
    return Result<std::optional<search::SweepResult>>(std::optional<search::SweepResult>());
  };
  auto run = app::run_sweep(req, nullptr, options);
  ASSERT_TRUE(run) << run.status().message();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(run->setup);
  EXPECT_FALSE(run->result);  // a rank other than 0
}

TEST(SweepInputs, MergesTheOrigin) {
  const search::SweepRequest req = default_request();
  const Json j = sweep_inputs(req, {{"command", "gui sweep"}});
  EXPECT_EQ(j["command"], "gui sweep");
  EXPECT_EQ(j["top_k"], 32);
  ASSERT_EQ(j["scenarios"].size(), 1u);
  EXPECT_EQ(j["scenarios"][0]["max_gpus"], 64);
  EXPECT_FALSE(j["scenarios"][0].contains("offering"));  // the request's, recorded beside top_k
  EXPECT_EQ(j["offering"], "on-demand");
  // A scenario priced on its own (sweep --all-offerings) records its offering.
  search::SweepRequest spot = req;
  spot.scenarios[0].pricing = search::PricingOptions{};
  spot.scenarios[0].pricing->offering = Offering::kSpot;
  EXPECT_EQ(sweep_inputs(spot, {})["scenarios"][0]["offering"], "spot");
}

Plan gpt3_plan(int tp, int pp, int dp) {
  Plan p;
  p.model = builtin_catalog().model("gpt3-175b").value();
  p.training.seq_length = 2048;
  p.training.global_batch_size = 64;
  p.parallel.tp = tp;
  p.parallel.pp = pp;
  p.parallel.dp = dp;
  p.name = "gpt3";
  return p;
}

TEST(PlacePlan, TopologyFromTheGpuAndJustEnoughNodes) {
  Plan p = gpt3_plan(8, 8, 2);
  p.gpu = builtin_catalog().gpu("a100-80gb").value();
  auto placed = place_plan(p, std::nullopt, "", 0);
  ASSERT_TRUE(placed) << placed.status().message();
  EXPECT_EQ(placed->topology.name, topo::topology_for_gpu(p.gpu)->name);
  EXPECT_EQ(placed->nodes, 16);  // 128 GPUs on 8-GPU nodes
  EXPECT_EQ(placed->plan.cluster.nodes, 16);
  EXPECT_EQ(placed->plan.cluster.gpus_per_node, 8);
  EXPECT_EQ(placed->plan.cluster.topology, placed->topology.name);
  // A GPU that disagrees with the named topology is bad input.
  auto wrong = place_plan(p, std::nullopt, "dgx-h100-superpod", 0);
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(wrong.status().message().find("disagrees with topology"), std::string::npos);
  // No GPU and no topology: nothing to simulate on.
  auto none = place_plan(gpt3_plan(8, 8, 2), std::nullopt, "", 0);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidInput);
  // A topology alone gives the GPU; explicit nodes win.
  auto named = place_plan(gpt3_plan(8, 8, 2), std::nullopt, "dgx-h100-superpod", 20);
  ASSERT_TRUE(named) << named.status().message();
  EXPECT_TRUE(named->plan.gpu.matches("H100"));
  EXPECT_EQ(named->nodes, 20);
}

TEST(SimulatePlan, TimesThePlacedPlan) {
  Plan p = gpt3_plan(8, 8, 2);
  p.gpu = builtin_catalog().gpu("a100-80gb").value();
  p.parallel.sequence_parallel = true;
  p.parallel.recompute = Recompute::kSelective;
  auto placed = place_plan(p, std::nullopt, "", 0);
  ASSERT_TRUE(placed);
  auto r = simulate_plan(*placed, default_profile_for(p.gpu), sim::SimOptions{});
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(r->simulated);
  EXPECT_GT(to_seconds(r->step_time), 0);
}

// planner exec's stored prediction: on the cuda backend the runner's issuing thread (36 us an op,
// core/src/host_model.cpp) sets a tiny model's step, as measured on an H200 (gpt-tiny, global
// batch 16 x 256, micro-batch 4: 15.19 ms a step, bench/gpu/README.md 2026-11-27); without a host
// the prediction is the GPU's 1.3 ms.
TEST(PredictForExec, TheCudaBackendsRunnerIssuesEveryOp) {
  auto plan = parse_plan(R"({"schema_version": 1, "kind": "plan", "model": "gpt-tiny",
      "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu": "H200-SXM-141GB"},
      "training": {"global_batch_size": 16, "seq_length": 256, "precision": "bf16"},
      "parallel": {"tp": 1, "pp": 1, "micro_batch_size": 4}})",
                         "plan", builtin_catalog());
  ASSERT_TRUE(plan) << plan.status().message();
  auto cuda = predict_for_exec(*plan, LowerOptions{}, nullptr, executor_host_costs());
  ASSERT_TRUE(cuda) << cuda.status().message();
  EXPECT_NEAR(to_seconds(cuda->step_time), 15.19e-3, 0.15 * 15.19e-3);
  EXPECT_GT(cuda->host_bound_fraction, 0.8);
  auto gpu_only = predict_for_exec(*plan, LowerOptions{}, nullptr);
  ASSERT_TRUE(gpu_only) << gpu_only.status().message();
  EXPECT_LT(to_seconds(gpu_only->step_time), 3e-3);
  EXPECT_FALSE(executor_host_costs().source.empty());
}

TEST(Profiles, ByNameFileOrDefault) {
  const GpuSpec h100 = builtin_catalog().gpu("h100").value();
  DatabaseRef no_db{"", true};
  auto d = resolve_profile("", h100, no_db);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->name, default_profile_for(h100).name);
  auto preset = resolve_profile(d->name, h100, no_db);
  ASSERT_TRUE(preset);
  EXPECT_EQ(preset->name, d->name);
  auto missing = resolve_profile("no-such-profile", h100, no_db);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(read_profile("", no_db));
  // A file, by path.
  testing::TempDir dir;
  const std::string path = dir.file("p.json");
  std::ofstream(path) << to_json_text(*d);
  auto file = read_profile(path, no_db);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->name, d->name);
}

TEST(Profiles, UseProfileSharesOnePerGpu) {
  search::SweepRequest req = default_request();
  req.scenarios.push_back(req.scenarios[0]);
  ASSERT_TRUE(use_profile(req, "", DatabaseRef{"", true}).is_ok());
  ASSERT_TRUE(req.scenarios[0].profile);
  EXPECT_EQ(req.scenarios[0].profile.get(), req.scenarios[1].profile.get());
}

}  // namespace
}  // namespace planner::app
