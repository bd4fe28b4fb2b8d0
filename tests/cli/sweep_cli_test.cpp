// planner sweep, run the way a user runs it: the built-in default, JSON and CSV, the emitted plan
// (validated and simulated), the CI gate, sweep documents and the database record.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "planner/store/store.hpp"
#include "support/command.hpp"

namespace planner {
namespace {

using testing::CommandResult;
using testing::run_planner;
using testing::TempDir;

template <class T>
T take(Result<T> result) {
  if (!result) throw std::runtime_error(result.status().message());
  return std::move(result).value();
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// llama3-8b on up to 16 H100s, a small batch, the best 4 simulated: well under a second.
std::vector<std::string> small(std::vector<std::string> extra, const std::string& threads = "2") {
  std::vector<std::string> args = {"sweep", "--gpus",  "16", "--gbs",     "64",    "--seq",
                                   "2048",  "--top-k", "4",  "--threads", threads, "--no-progress"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// `planner simulate` of the plan `p` (a sweep result's "parallel") of small()'s llama3-8b under
// `stack`, as JSON.
std::vector<std::string> simulate_args(const nlohmann::json& p, const std::string& stack) {
  std::vector<std::string> args = {"simulate",
                                   "--model",
                                   "llama3-8b",
                                   "--gpu",
                                   "h100",
                                   "--tp",
                                   std::to_string(p["tp"].get<int>()),
                                   "--pp",
                                   std::to_string(p["pp"].get<int>()),
                                   "--dp",
                                   std::to_string(p["dp"].get<int>()),
                                   "--mbs",
                                   std::to_string(p["micro_batch_size"].get<int>()),
                                   "--zero",
                                   std::to_string(p["zero_stage"].get<int>()),
                                   "--recompute",
                                   p["recompute"].get<std::string>(),
                                   "--schedule",
                                   p["schedule"].get<std::string>(),
                                   "--vpp",
                                   std::to_string(p["virtual_stages"].get<int>()),
                                   "--seq",
                                   "2048",
                                   "--gbs",
                                   "64",
                                   "--stack",
                                   stack,
                                   "--json",
                                   "--no-db"};
  if (p["sequence_parallel"].get<bool>()) args.push_back("--sp");
  return args;
}

// Every GPU preset sweeps on its default topology at a catalogue price, without --price.
TEST(SweepCli, EveryGpuPresetSweepsWithoutAPrice) {
  const auto gpus = nlohmann::json::parse(run_planner({"gpu", "list", "--json"}).out);
  ASSERT_GE(gpus.size(), 14u);
  for (const auto& gpu : gpus) {
    const std::string name = gpu["name"];
    if (name == "cpu-host") continue;  // planner exec's own CPU ranks: nothing to rent
    const std::string precision = gpu["peak_tflops"].contains("bf16") ? "bf16" : "fp16";
    const CommandResult r =
        run_planner({"sweep", "--gpu",     name,    "--precision",   precision, "--gpus", "16",
                     "--gbs", "64",        "--seq", "2048",          "--top-k", "1",      "--keep",
                     "4",     "--threads", "2",     "--no-progress", "--no-db", "--json"});
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    const auto res = nlohmann::json::parse(r.out);
    const auto& scenario = res["scenarios"][0];
    EXPECT_GT(scenario["usd_per_gpu_hour"].get<double>(), 0) << name;
    EXPECT_FALSE(scenario["price_source"].get<std::string>().empty()) << name;
    EXPECT_FALSE(res["ranking"].empty()) << name;
  }
}

// "Which cloud": Llama 3 70B on five H100/H200 instances of three providers, each on its own
// network at its provider's price, ranked together.
TEST(SweepCli, InstancesRankCloudsTogetherAtTheirPrices) {
  const std::vector<std::string> args = {
      "sweep",
      "--model",
      "llama3-70b",
      "--instances",
      "p5.48xlarge,p5en.48xlarge,a3-megagpu-8g,a3-ultragpu-8g,Standard_ND96isr_H100_v5",
      "--gpus",
      "64",
      "--gbs",
      "128",
      "--seq",
      "4096",
      "--top-k",
      "5",
      "--keep",
      "40",
      "--threads",
      "2",
      "--no-progress",
      "--no-db"};
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const CommandResult r = run_planner(json_args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto res = nlohmann::json::parse(r.out);
  const std::vector<std::pair<std::string, std::string>> expected{
      {"AWS", "p5.48xlarge"},
      {"AWS", "p5en.48xlarge"},
      {"GCP", "a3-megagpu-8g"},
      {"GCP", "a3-ultragpu-8g"},
      {"Azure", "Standard_ND96isr_H100_v5"}};
  ASSERT_EQ(res["scenarios"].size(), expected.size());
  std::set<double> prices;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& sc = res["scenarios"][i];
    EXPECT_EQ(sc["provider"], expected[i].first);
    EXPECT_EQ(sc["instance"], expected[i].second);
    EXPECT_TRUE(contains(sc["name"], expected[i].second)) << sc["name"];
    EXPECT_FALSE(sc["price_date"].get<std::string>().empty()) << expected[i].second;
    EXPECT_FALSE(sc["price_source"].get<std::string>().empty()) << expected[i].second;
    prices.insert(sc["usd_per_gpu_hour"].get<double>());
  }
  EXPECT_GE(prices.size(), 4u);  // each at its own provider's price, not one GPU's default
  // One ranking over all of them: the simulated plans by effective tokens per dollar.
  const auto& ranking = res["ranking"];
  ASSERT_FALSE(ranking.empty());
  double last = 1e300;
  for (const auto& p : ranking) {
    if (!p.contains("simulated")) break;
    EXPECT_LE(p["tokens_per_usd"].get<double>(), last * (1 + 1e-12));
    last = p["tokens_per_usd"].get<double>();
  }

  const CommandResult text = run_planner(args);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const char* what : {"INSTANCE", "GCP a3-megagpu-8g", "Azure Standard_ND96isr_H100_v5",
                           "s5: llama3-70b on 64 x H100-SXM5-80GB, Azure"}) {
    EXPECT_TRUE(contains(text.out, what)) << what << "\n" << text.out;
  }

  const CommandResult reference = run_planner({"sweep", "--instances", "dgx-b200", "--no-db"});
  EXPECT_EQ(reference.exit_code, 2);
  EXPECT_TRUE(contains(reference.err, "dgx-b200 is no cloud instance")) << reference.err;
  const CommandResult unpriced = run_planner({"sweep", "--instances", "a4-highgpu-8g", "--no-db"});
  EXPECT_EQ(unpriced.exit_code, 2);
  EXPECT_TRUE(contains(unpriced.err, "no on-demand price from GCP for instance a4-highgpu-8g"))
      << unpriced.err;
  const CommandResult both =
      run_planner({"sweep", "--instances", "p5.48xlarge", "--gpu", "h100", "--no-db"});
  EXPECT_EQ(both.exit_code, 2);
}

TEST(SweepCli, DefaultScenarioPrintsARanking) {
  TempDir dir;
  const CommandResult r = run_planner({"sweep", "--db", dir.file("p.db")});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (const char* what :
       {"llama3-8b on 64 x H100", "valid plans", "do not fit in memory", "estimate vs simulation",
        "ranked by effective tokens per dollar", "TOKENS/$", "goodput of #1", "Pareto frontier"}) {
    EXPECT_TRUE(contains(r.out, what)) << what << "\n" << r.out;
  }
  EXPECT_TRUE(r.err.empty()) << r.err;  // no progress bar when stderr is not a terminal

  // Recorded: one sweep run with its kept plans, simulated ones first.
  store::Database db = take(store::Database::open(dir.file("p.db")));
  const auto runs = take(store::list_runs(db));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].kind, store::RunKind::kSweep);
  EXPECT_EQ(runs[0].status, store::RunStatus::kOk);
  const auto entries = take(store::get_sweep_results(db, runs[0].id));
  ASSERT_EQ(entries.size(), 100u);
  EXPECT_EQ(entries[0].position, 1);
  EXPECT_EQ(entries[0].tier, store::MetricSource::kSimulated);
  EXPECT_EQ(entries[99].tier, store::MetricSource::kAnalytic);
}

TEST(SweepCli, JsonIsTheSameForAnyThreadCount) {
  auto one = run_planner(small({"--json", "--no-db"}, "1"));
  auto two = run_planner(small({"--json", "--no-db"}));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_EQ(two.exit_code, 0) << two.err;
  nlohmann::json a = nlohmann::json::parse(one.out), b = nlohmann::json::parse(two.out);
  EXPECT_EQ(a["kind"], "sweep-result");
  a.erase("seconds");
  b.erase("seconds");
  EXPECT_EQ(a, b);
  ASSERT_EQ(a["ranking"].size(), 100u);
  EXPECT_EQ(a["ranking"][0]["tier"], "simulated");
  EXPECT_EQ(a["counts"]["simulated"], 4);
  EXPECT_GT(a["ranking"][0]["tokens_per_usd"].get<double>(),
            a["ranking"][99]["tokens_per_usd"].get<double>());
}

// A sweep runs the stack's attention kernel, as simulate does: Megatron-DeepSpeed's fused softmax
// keeps the s×s scores (more memory, slower than flash attention, no ring attention), --attention
// overrides it, and the simulated best plan agrees with `planner simulate --stack`.
TEST(SweepCli, RunsTheStacksAttentionKernel) {
  auto sweep = [](std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--json", "--no-db", "--cp", "1"});
    const CommandResult r = run_planner(small(extra));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  };
  const nlohmann::json core = sweep({"--host-costs", "none"});
  const nlohmann::json ds = sweep({"--stack", "megatron-deepspeed", "--host-costs", "none"});
  const nlohmann::json ds_flash =
      sweep({"--stack", "megatron-deepspeed", "--host-costs", "none", "--attention", "flash"});
  ASSERT_FALSE(core.is_null() || ds.is_null() || ds_flash.is_null());
  EXPECT_EQ(core["attention"], "flash");
  EXPECT_EQ(ds["attention"], "fused-softmax");
  EXPECT_EQ(ds_flash["attention"], "flash");
  auto best = [](const nlohmann::json& j) {
    return j["ranking"][0]["simulated"]["step_time_s"].get<double>();
  };
  EXPECT_GT(best(ds), best(ds_flash));
  EXPECT_GT(ds["counts"]["out_of_memory"].get<int>(),
            ds_flash["counts"]["out_of_memory"].get<int>());
  EXPECT_LT(ds["estimate_error"]["max_abs_pct"].get<double>(), 10);
  // The simulated best plan is what `planner simulate` gives under the same stack.
  const nlohmann::json& p = ds["ranking"][0]["parallel"];
  std::vector<std::string> args = simulate_args(p, "megatron-deepspeed");
  args.insert(args.end(), {"--host-costs", "none"});
  const CommandResult sim = run_planner(args);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NEAR(nlohmann::json::parse(sim.out)["step_time_s"].get<double>(), best(ds),
              0.02 * best(ds));
  // Ring attention needs a flash-style kernel.
  const CommandResult ring =
      run_planner(small({"--stack", "megatron-deepspeed", "--cp", "2", "--no-db"}));
  EXPECT_EQ(ring.exit_code, 2);
  EXPECT_TRUE(contains(ring.err, "flash-style")) << ring.err;
}

// A stack's plans take only the forms the stack runs: DeepSpeed's PipelineEngine pipelines with
// 1F1B and at most ZeRO-1, and Megatron-DeepSpeed reduces the gradients after the backward pass.
TEST(SweepCli, SearchesWhatTheStackRuns) {
  const CommandResult r = run_planner(
      small({"--stack", "megatron-deepspeed", "--json", "--no-db", "--cp", "1", "--keep", "400"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["ranking"].size(), 400u);
  int piped = 0, sharded = 0;
  for (const auto& plan : j["ranking"]) {
    const auto& p = plan["parallel"];
    EXPECT_FALSE(p["overlap_grad_reduce"].get<bool>()) << plan["label"];
    EXPECT_EQ(p["schedule"], "1f1b") << plan["label"];
    if (p["pp"].get<int>() > 1) {
      ++piped;
      EXPECT_LE(p["zero_stage"].get<int>(), 1) << plan["label"];
    } else if (p["zero_stage"].get<int>() >= 2) {
      ++sharded;
    }
  }
  // Both rules were exercised: pipelined plans, and ZeRO-2/3 where there is no pipeline.
  EXPECT_GT(piped, 0);
  EXPECT_GT(sharded, 0);
  // FSDP has no ZeRO-1; Megatron-LM before Megatron-core no ZeRO-2 or -3.
  for (const auto& [stack, bad] :
       std::vector<std::pair<std::string, std::set<int>>>{{"fsdp", {1}}, {"megatron-lm", {2, 3}}}) {
    const CommandResult s =
        run_planner(small({"--stack", stack, "--json", "--no-db", "--keep", "300"}));
    ASSERT_EQ(s.exit_code, 0) << s.err;
    for (const auto& plan : nlohmann::json::parse(s.out)["ranking"]) {
      EXPECT_EQ(bad.count(plan["parallel"]["zero_stage"].get<int>()), 0u)
          << stack << ": " << plan["label"];
    }
  }
}

// --stack a,b compares stacks: every scenario is swept under each, the scenarios say their
// software, the best plan of each stack is reported beside the ranking, and it is the time
// `planner simulate --stack` gives the same plan.
TEST(SweepCli, ComparesStacks) {
  const CommandResult r = run_planner(
      small({"--stack", "megatron-core,megatron-deepspeed", "--json", "--no-db", "--cp", "1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["scenarios"].size(), 2u);
  EXPECT_EQ(j["scenarios"][0]["stack"], "megatron-core");
  EXPECT_EQ(j["scenarios"][0]["attention"], "flash");
  EXPECT_EQ(j["scenarios"][1]["stack"], "megatron-deepspeed");
  EXPECT_EQ(j["scenarios"][1]["attention"], "fused-softmax");
  EXPECT_TRUE(contains(j["scenarios"][1]["name"], "under megatron-deepspeed"));
  EXPECT_FALSE(j.contains("stack"));  // no one stack for the whole sweep
  const auto& best = j["best_per_stack"];
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0]["stack"], "megatron-core");
  EXPECT_EQ(best[0]["position"], 1);
  EXPECT_EQ(best[1]["stack"], "megatron-deepspeed");
  // Megatron-DeepSpeed issues every op from a slower host and waits for its gradient all-reduce.
  EXPECT_GT(best[1]["step_time_s"].get<double>(), best[0]["step_time_s"].get<double>());
  EXPECT_LT(best[1]["tokens_per_usd"].get<double>(), best[0]["tokens_per_usd"].get<double>());
  const auto& plan = j["ranking"][best[1]["position"].get<int>() - 1];
  EXPECT_EQ(plan["scenario"], j["scenarios"][1]["name"]);
  ASSERT_EQ(plan["tier"], "simulated");
  const auto& p = plan["parallel"];
  const std::vector<std::string> args = simulate_args(p, "megatron-deepspeed");
  const CommandResult sim = run_planner(args);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NEAR(nlohmann::json::parse(sim.out)["step_time_s"].get<double>(),
              best[1]["step_time_s"].get<double>(), 0.02 * best[1]["step_time_s"].get<double>());
  // The text report: each scenario's software, the table of the best per stack.
  const CommandResult text =
      run_planner(small({"--stack", "megatron-core,megatron-deepspeed", "--no-db", "--cp", "1"}));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "  software: megatron-deepspeed, fused-softmax")) << text.out;
  EXPECT_TRUE(contains(text.out, "best plan per stack")) << text.out;
}

TEST(SweepCli, RefusesStacksItCannotCompare) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--stack", "fsdp,fsdp"}, "--stack: fsdp is given twice"},
      {{"--stack", "fsdp,bogus"}, "unknown software stack \"bogus\""},
      {{"--stack", "fsdp,deepspeed", "--host-costs", "gemm=10"}, "not with several --stack"},
      {{"--stack", "fsdp,deepspeed", "--check", "plan.json"}, "give one --stack"},
      // Not a stack, but refused the same way: a recipe the GPU cannot run, or without fp8.
      {{"--gpu", "h100", "--precision", "fp8", "--fp8-recipe", "mxfp8"},
       "--fp8-recipe mxfp8: mxfp8 needs a Blackwell GPU; H100-SXM5-80GB is Hopper"},
      {{"--fp8-recipe", "current"}, "--fp8-recipe current: applies to --precision fp8, not bf16"},
  };
  for (const auto& [extra, message] : cases) {
    std::vector<std::string> args = extra;
    args.push_back("--no-db");
    const CommandResult r = run_planner(small(args));
    EXPECT_EQ(r.exit_code, 2) << message;
    EXPECT_TRUE(contains(r.err, message)) << r.err;
  }
}

// `planner simulate --stack` runs the plan as the stack can: a schedule or ZeRO stage the stack
// does not have is refused, and a stack that reduces gradients after the backward pass exposes
// the data-parallel communication a stack with overlap hides.
TEST(SimulateStackCli, RunsThePlanAsTheStackCan) {
  auto simulate = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {
        "simulate", "--model",      "llama3-8b", "--gpu",       "h100",  "--tp",   "1",
        "--dp",     "16",           "--mbs",     "1",           "--gbs", "32",     "--seq",
        "2048",     "--host-costs", "none",      "--attention", "flash", "--no-db"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_planner(args);
  };
  const CommandResult core = simulate({"--zero", "1", "--recompute", "full", "--json"});
  const CommandResult lm =
      simulate({"--stack", "megatron-lm", "--zero", "1", "--recompute", "full", "--json"});
  ASSERT_EQ(core.exit_code, 0) << core.err;
  ASSERT_EQ(lm.exit_code, 0) << lm.err;
  const auto c = nlohmann::json::parse(core.out), l = nlohmann::json::parse(lm.out);
  EXPECT_GT(l["exposed_comm"]["dp_s"].get<double>(), 2 * c["exposed_comm"]["dp_s"].get<double>());
  EXPECT_GT(l["step_time_s"].get<double>(), c["step_time_s"].get<double>());
  const CommandResult zero = simulate({"--stack", "megatron-lm", "--zero", "3"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_TRUE(contains(zero.err, "--stack megatron-lm: has ZeRO 0, 1, not ZeRO 3")) << zero.err;
  const CommandResult fsdp = simulate({"--stack", "fsdp", "--zero", "1"});
  EXPECT_EQ(fsdp.exit_code, 2);
  EXPECT_TRUE(contains(fsdp.err, "--stack fsdp: has ZeRO 0, 2, 3, not ZeRO 1")) << fsdp.err;
  const CommandResult pipe = run_planner({"simulate",
                                          "--model",
                                          "llama3-8b",
                                          "--gpu",
                                          "h100",
                                          "--pp",
                                          "4",
                                          "--dp",
                                          "2",
                                          "--mbs",
                                          "1",
                                          "--gbs",
                                          "32",
                                          "--schedule",
                                          "interleaved",
                                          "--vpp",
                                          "2",
                                          "--stack",
                                          "megatron-deepspeed",
                                          "--no-db"});
  EXPECT_EQ(pipe.exit_code, 2);
  EXPECT_TRUE(contains(
      pipe.err, "--stack megatron-deepspeed: runs pipelines with 1f1b only, not interleaved"))
      << pipe.err;
}

// Issue 18's MoE dimensions: expert tensor parallelism (by default tp's and 1 where tp > 1) and
// the token routing (the model's unless asked: dropless, or a capacity factor that drops the
// hottest expert's excess under a stated routing imbalance).
TEST(SweepCli, SearchesExpertTensorParallelismAndTokenDropping) {
  auto sweep = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"sweep",  "--model",       "mixtral-8x7b",
                                     "--gpu",  "h100",          "--gpus",
                                     "16",     "--gbs",         "64",
                                     "--seq",  "2048",          "--tp",
                                     "2",      "--top-k",       "4",
                                     "--keep", "300",           "--threads",
                                     "2",      "--no-progress", "--json",
                                     "--no-db"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandResult r = run_planner(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  };
  const nlohmann::json both = sweep({});
  ASSERT_FALSE(both.is_null());
  std::set<int> etps;
  for (const auto& plan : both["ranking"]) {
    const auto& p = plan["parallel"];
    const int etp = p.value("etp", p["tp"].get<int>());
    etps.insert(etp);
    // The MoE layers regroup a stage's tp x cp x dp ranks as etp x ep x expert data parallel.
    EXPECT_EQ(
        (p["tp"].get<int>() * p["cp"].get<int>() * p["dp"].get<int>()) % (etp * p["ep"].get<int>()),
        0)
        << plan["label"];
    EXPECT_FALSE(p.contains("moe_capacity_factor")) << plan["label"];  // the model's routing
  }
  EXPECT_TRUE(etps.count(1)) << "no plan with the experts unsplit";
  // The default searches both: its plans are those of etp 1 and of etp 2 (= tp).
  const nlohmann::json one = sweep({"--etp", "1"});
  const nlohmann::json two = sweep({"--etp", "2"});
  ASSERT_FALSE(one.is_null() || two.is_null());
  for (const auto& plan : two["ranking"])
    EXPECT_FALSE(plan["parallel"].contains("etp"));
  EXPECT_GT(two["counts"]["candidates"].get<int>(), 0);
  EXPECT_EQ(both["counts"]["candidates"].get<int>(),
            one["counts"]["candidates"].get<int>() + two["counts"]["candidates"].get<int>());

  // Under a skewed routing a dropless plan runs the hottest expert's 1.5x load; capacity factor 1
  // drops it and is faster; with balanced routing the two cost the same.
  auto best = [](const nlohmann::json& j) {
    return j["ranking"][0]["simulated"]["step_time_s"].get<double>();
  };
  const nlohmann::json dropless =
      sweep({"--moe-imbalance", "1.5", "--moe-capacity-factor", "dropless"});
  const nlohmann::json dropping = sweep({"--moe-imbalance", "1.5", "--moe-capacity-factor", "1"});
  const nlohmann::json balanced = sweep({"--moe-capacity-factor", "dropless,1"});
  ASSERT_FALSE(dropless.is_null() || dropping.is_null() || balanced.is_null());
  EXPECT_EQ(dropless["ranking"][0]["parallel"]["moe_capacity_factor"], "dropless");
  EXPECT_EQ(dropless["ranking"][0]["parallel"]["moe_imbalance"], 1.5);
  EXPECT_EQ(dropping["ranking"][0]["parallel"]["moe_capacity_factor"], 1.0);
  EXPECT_GT(best(dropless), 1.05 * best(dropping));
  EXPECT_NEAR(best(balanced), best(dropping), 0.02 * best(dropping));

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--moe-capacity-factor", "0"},
        std::vector<std::string>{"--moe-capacity-factor", "lots"},
        std::vector<std::string>{"--moe-imbalance", "0.5"},
        std::vector<std::string>{"--etp", "0"}}) {
    std::vector<std::string> args = {"sweep", "--model", "mixtral-8x7b", "--gpu",
                                     "h100",  "--gpus",  "16",           "--no-db"};
    args.insert(args.end(), bad.begin(), bad.end());
    const CommandResult r = run_planner(args);
    EXPECT_EQ(r.exit_code, 2) << bad[0] << " " << bad[1] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, bad[0])) << r.err;
  }
}

TEST(SweepCli, CsvHasAHeaderAndARowPerPlan) {
  const CommandResult r = run_planner(small({"--csv", "--keep", "12", "--no-db"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = r.out.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(r.out.substr(start, nl - start));
  ASSERT_EQ(lines.size(), 13u) << r.out;
  EXPECT_TRUE(contains(lines[0], "position")) << lines[0];
  EXPECT_TRUE(lines[1].starts_with("1,")) << lines[1];
}

TEST(SweepCli, EmittedPlanValidatesSimulatesAndPassesTheGate) {
  TempDir dir;
  const std::string plan = dir.file("best.json");
  const CommandResult r = run_planner(small({"--emit-plan", plan, "--no-db"}));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.out, "wrote the best plan to " + plan));
  const CommandResult v = run_planner({"validate", plan});
  EXPECT_EQ(v.exit_code, 0) << v.err << v.out;
  const CommandResult s = run_planner({"simulate", "--plan", plan, "--no-db"});
  EXPECT_EQ(s.exit_code, 0) << s.err << s.out;
  EXPECT_TRUE(contains(s.out, "step time")) << s.out;

  const CommandResult gate = run_planner(small({"--check", plan, "--no-db"}));
  EXPECT_EQ(gate.exit_code, 0) << gate.err << gate.out;
  EXPECT_TRUE(contains(gate.out, "check passed")) << gate.out;
}

TEST(SweepCli, GateFailsOnADeliberatelyBadPlan) {
  TempDir dir;
  const std::string plan = dir.file("bad.json");
  testing::write_file(plan, R"({"schema_version": 1, "kind": "plan", "name": "bad",
    "model": "llama3-8b",
    "cluster": {"nodes": 2, "gpus_per_node": 8, "gpu": "H100"},
    "training": {"global_batch_size": 64, "seq_length": 2048},
    "parallel": {"tp": 8, "pp": 2, "dp": 1, "micro_batch_size": 1, "schedule": "gpipe",
                 "recompute": "full"}})");
  ASSERT_EQ(run_planner({"validate", plan}).exit_code, 0);
  const CommandResult gate = run_planner(small({"--check", plan, "--max-regret", "5%", "--no-db"}));
  EXPECT_EQ(gate.exit_code, 3) << gate.err << gate.out;
  EXPECT_TRUE(contains(gate.out, "check FAILED: this plan is better")) << gate.out;
  EXPECT_TRUE(contains(gate.out, "\"kind\": \"plan\"")) << gate.out;

  const CommandResult loose =
      run_planner(small({"--check", plan, "--max-regret", "99.9%", "--no-db"}));
  EXPECT_EQ(loose.exit_code, 0) << loose.out;
}

TEST(SweepCli, SpecRunsEveryScenarioAndBadSpecsNameTheField) {
  TempDir dir;
  const std::string spec = dir.file("sweep.json");
  testing::write_file(spec, R"({"schema_version": 1, "kind": "sweep", "name": "two sizes",
    "models": ["llama3-8b"], "training": {"global_batch_size": 64, "seq_length": 2048},
    "clusters": [{"gpu": "h100", "gpus": [8, 16], "min_gpus": 8}],
    "space": {"schedule": ["1f1b"]}, "search": {"top_k": 2, "keep": 10}})");
  ASSERT_EQ(run_planner({"validate", spec}).exit_code, 0);
  const CommandResult r =
      run_planner({"sweep", "--spec", spec, "--json", "--no-db", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["scenarios"].size(), 2u);
  EXPECT_EQ(j["scenarios"][0]["max_gpus"], 8);
  EXPECT_EQ(j["scenarios"][1]["max_gpus"], 16);
  EXPECT_EQ(j["ranking"].size(), 10u);
  for (const auto& p : j["ranking"])
    EXPECT_EQ(p["parallel"]["schedule"], "1f1b");

  const std::string bad = std::string(PLANNER_TEST_DATA_DIR) + "/bad-sweep/sweep_zero_gpus.json";
  const CommandResult e = run_planner({"sweep", "--spec", bad, "--no-db"});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_TRUE(contains(e.err, "sweep_zero_gpus.json: /clusters/0/gpus/1: must be")) << e.err;

  // Found only when the sweep is set up (a GPU with no price for the offering; --price could give
  // one): named by the file and the cluster, not "scenario 1".
  const std::string unpriced = dir.file("unpriced.json");
  testing::write_file(unpriced, R"({"schema_version": 1, "kind": "sweep",
    "models": ["llama3-8b"], "training": {"global_batch_size": 64, "seq_length": 2048,
    "precision": "fp16"}, "clusters": [{"gpu": "h100", "gpus": [8]},
    {"gpu": "v100-sxm2-32gb", "gpus": [8], "offering": "capacity-block"}]})");
  const CommandResult u = run_planner({"sweep", "--spec", unpriced, "--no-db"});
  EXPECT_EQ(u.exit_code, 2) << u.out;
  EXPECT_TRUE(
      contains(u.err, unpriced + ": /clusters/1: V100-SXM2-32GB has no capacity-block price"))
      << u.err;
  EXPECT_EQ(run_planner({"sweep", "--spec", unpriced, "--no-db", "--price", "V100-SXM2-32GB=1",
                         "--top-k", "1", "--keep", "1"})
                .exit_code,
            0);

  const CommandResult flag = run_planner({"sweep", "--price", "H100", "--no-db"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_TRUE(contains(flag.err, "--price: expected GPU=USD_PER_GPU_HOUR")) << flag.err;
}

TEST(SweepCli, TwoSweepsWritingOneDatabaseBothLand) {
  TempDir dir;
  const std::string db_path = dir.file("shared.db");
  CommandResult a, b;
  std::thread other([&] { b = run_planner(small({"--keep", "20", "--db", db_path}, "1")); });
  a = run_planner(small({"--keep", "20", "--db", db_path}, "1"));
  other.join();
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  store::Database db = take(store::Database::open(db_path));
  const auto runs = take(store::list_runs(db));
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& run : runs) {
    EXPECT_EQ(run.kind, store::RunKind::kSweep);
    EXPECT_EQ(run.status, store::RunStatus::kOk);
    EXPECT_EQ(take(store::get_sweep_results(db, run.id)).size(), 20u);
  }
}

// --profile predicts with another hardware profile: the H100 preset with half its GEMM rates makes
// the best plan's estimated step slower, and the result names the profile it used.
TEST(SweepCli, ProfileReplacesThePreset) {
  TempDir dir;
  nlohmann::json profile = nlohmann::json::parse(testing::slurp(
      std::string(PLANNER_SOURCE_DIR) + "/core/presets/profiles/h100-sxm5-80gb.json"));
  profile["name"] = "h100-half-gemm";
  for (auto& [precision, rate] : profile["compute"]["gemm"].items())
    rate["tflops"] = rate["tflops"].get<double>() / 2;
  const std::string file = dir.file("half.json");
  testing::write_file(file, profile.dump());

  const CommandResult preset = run_planner(small({"--json", "--no-db"}));
  const CommandResult half = run_planner(small({"--json", "--no-db", "--profile", file}));
  ASSERT_EQ(preset.exit_code, 0) << preset.err;
  ASSERT_EQ(half.exit_code, 0) << half.err;
  const auto a = nlohmann::json::parse(preset.out), b = nlohmann::json::parse(half.out);
  EXPECT_EQ(b["scenarios"][0]["profile"], "h100-half-gemm");
  EXPECT_GT(b["ranking"][0]["estimate"]["step_time_s"].get<double>(),
            a["ranking"][0]["estimate"]["step_time_s"].get<double>() * 1.2);

  const CommandResult missing = run_planner(small({"--no-db", "--profile", "no-such-profile"}));
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_TRUE(contains(missing.err, "no-such-profile")) << missing.err;
}

// Numeric flags refuse NaN, infinities and values out of range, naming the flag and the range in
// plain numbers (never 1.8e308), with exit code 2.
TEST(SweepCli, NumericFlagsOutOfRangeAreRefusedByName) {
  const std::vector<std::vector<std::string>> cases = {
      {"--tokens", "nan"}, {"--tokens", "1e400"}, {"--budget", "-5"},  {"--tp", "0"},
      {"--gpus", "0"},     {"--pue", "inf"},      {"--deadline", "0"}, {"--mbs", "-1"}};
  for (const auto& c : cases) {
    const CommandResult r = run_planner({"sweep", c[0], c[1], "--no-db"});
    EXPECT_EQ(r.exit_code, 2) << c[0] << " " << c[1] << "\n" << r.out << r.err;
    EXPECT_TRUE(contains(r.err, c[0])) << r.err;
    EXPECT_FALSE(contains(r.err, "1.8e+308") || contains(r.err, "1.79769e+308")) << r.err;
  }
  const CommandResult min = run_planner({"sweep", "--gpus", "64", "--min-gpus", "1024", "--no-db"});
  EXPECT_EQ(min.exit_code, 2) << min.out;
  EXPECT_TRUE(contains(min.err, "--min-gpus (1024) exceeds --gpus (64)")) << min.err;
  const CommandResult price = run_planner({"sweep", "--price", "H100=nan", "--no-db"});
  EXPECT_EQ(price.exit_code, 2) << price.out;
  // A GPU without the precision and a cluster of more nodes than planner builds: named by their
  // flags (they were "scenario 1: hardware profile ..." and "scenario 1: topology ...").
  const CommandResult v100 = run_planner({"sweep", "--gpu", "v100-sxm2-32gb", "--no-db"});
  EXPECT_EQ(v100.exit_code, 2) << v100.out;
  EXPECT_TRUE(
      contains(v100.err, "--precision bf16: V100-SXM2-32GB has no bf16 mode (it has fp32, fp16)"))
      << v100.err;
  const CommandResult huge = run_planner({"sweep", "--gpus", "16000000", "--no-db"});
  EXPECT_EQ(huge.exit_code, 2) << huge.out;
  EXPECT_TRUE(contains(huge.err,
                       "--gpus 16000000: 16000000 GPUs need 2000000 nodes of 8 (topology aws-p5); "
                       "a cluster has at most 1000000 nodes"))
      << huge.err;
}

// A sweep in which no plan survives fails (exit 1) and says which constraint removed them.
TEST(SweepCli, NoFeasiblePlanSaysWhyAndFails) {
  const CommandResult budget = run_planner(small({"--budget", "10", "--no-db"}));
  EXPECT_EQ(budget.exit_code, 1) << budget.out << budget.err;
  EXPECT_TRUE(contains(budget.err, "budget")) << budget.err;
  EXPECT_TRUE(contains(budget.err, "$")) << budget.err;

  const CommandResult batch =
      run_planner({"sweep", "--gpus", "8", "--gbs", "3", "--mbs", "2", "--seq", "2048", "--no-db"});
  EXPECT_EQ(batch.exit_code, 1) << batch.out << batch.err;
  EXPECT_TRUE(contains(batch.err, "micro_batch_size")) << batch.err;

  const CommandResult json = run_planner(small({"--budget", "10", "--no-db", "--json"}));
  EXPECT_EQ(json.exit_code, 1);
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_TRUE(j.contains("no_plan")) << json.out;
  EXPECT_TRUE(j["ranking"].empty());
}

// The header says what is being trained: the sequence length (the model's pre-training length by
// default, not its long-context maximum), the batch and the precision; rank-order variants fold.
TEST(SweepCli, HeaderShowsSequenceAndBatchAndOrderVariantsFold) {
  const CommandResult r = run_planner({"sweep", "--no-db", "--no-progress", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "training: sequences of 8,192 tokens, global batch 512 sequences"))
      << r.out;
  const CommandResult j = run_planner(
      {"sweep", "--no-db", "--json", "--model", "mixtral-8x7b", "--gpus", "16", "--top-k", "0"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  // Mixtral's config allows 32,768-token sequences, the length it was trained at.
  EXPECT_EQ(nlohmann::json::parse(j.out)["scenarios"][0]["seq_length"], 32768);
  // Llama 3 70B: the best plans come with and without data-parallel overlap at the same rate; the
  // table shows one row for both.
  const CommandResult big =
      run_planner({"sweep", "--model", "llama3-70b", "--gpus", "64", "--gbs", "128", "--seq",
                   "4096", "--top-k", "4", "--no-db", "--no-progress", "--threads", "2"});
  ASSERT_EQ(big.exit_code, 0) << big.err;
  EXPECT_TRUE(contains(big.out, "(+1)")) << big.out;
  EXPECT_TRUE(contains(big.out, "folded into it")) << big.out;
}

// Where 4 does not divide the layers the sweep also searches the powers of two for pp that do not
// divide them, with uneven stages, and says so; --no-uneven-stages keeps to the divisors,
// --uneven-stages asks for them anywhere, and the two exclude each other.
TEST(SweepCli, UnevenStagesAreSearchedWhereFourDoesNotDivideTheLayers) {
  TempDir dir;
  const std::string model = dir.file("eighteen.json");
  testing::write_file(model, R"({"schema_version": 1, "kind": "model", "name": "gpt-eighteen",
    "family": "gpt", "source": "test", "layers": 18, "hidden": 128, "heads": 4, "kv_heads": 4,
    "ffn_hidden": 512, "mlp": "gelu", "norm": "layernorm", "position_embedding": "learned",
    "vocab": 512, "max_seq_len": 256, "bias": true})");
  const std::vector<std::string> base = {"sweep",  "--model", model,     "--gpu", "h100",
                                         "--gpus", "16",      "--no-db", "--top", "1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_planner(args);
  };
  const auto plans = [](const std::string& out) {
    return out.substr(0, out.find(" valid plans"))
        .substr(out.rfind('\n', out.find(" valid plans")) + 1);
  };
  const CommandResult automatic = with({});
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  EXPECT_NE(automatic.out.find("pipeline: 4 does not divide the 18 layers"), std::string::npos)
      << automatic.out;
  const CommandResult divisors = with({"--no-uneven-stages"});
  ASSERT_EQ(divisors.exit_code, 0) << divisors.err;
  EXPECT_EQ(divisors.out.find("pipeline:"), std::string::npos);
  const CommandResult asked = with({"--uneven-stages"});
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_EQ(asked.out.find("pipeline:"), std::string::npos);
  EXPECT_EQ(plans(automatic.out), plans(asked.out));
  EXPECT_NE(plans(automatic.out), plans(divisors.out));
  EXPECT_EQ(with({"--uneven-stages", "--no-uneven-stages"}).exit_code, 2);
}

// The best plan is explained as Megatron-core users read a plan: ep and its groups on the fabric,
// pp and the schedule, the all-to-all the simulator chose, and the memory of each pipeline stage
// (issue 18's DeepSeek-V3 on 2,048 H800s). The explanation describes #1 of the ranking and its
// memory adds up to the peak the ranking shows.
TEST(SweepCli, BestMoePlanIsExplained) {
  const CommandResult r = run_planner({"sweep", "--model", "deepseek-v3", "--gpu", "h800", "--gpus",
                                       "2048", "--no-db", "--json", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& first = j["ranking"][0];
  const auto& best = j["best_plan"];
  ASSERT_TRUE(best.is_object()) << r.out.substr(0, 2000);
  EXPECT_EQ(best["label"], first["label"]);
  EXPECT_EQ(best["position"], 1);
  EXPECT_EQ(best["parallel"], first["parallel"]);
  EXPECT_EQ(best["simulated"], true);
  EXPECT_NEAR(best["step_time_s"].get<double>(), first["simulated"]["step_time_s"].get<double>(),
              1e-9);
  const int ep = best["parallel"]["ep"];
  ASSERT_GT(ep, 1);
  const auto& e = best["experts"];
  EXPECT_EQ(e["experts"], 256);
  EXPECT_EQ(e["top_k"], 8);
  EXPECT_EQ(e["local_experts"], 256 / ep);
  EXPECT_EQ(e["group_gpus"], ep);
  // h800-ib: NVLink inside the 8-GPU node only.
  EXPECT_EQ(e["group_nodes"], std::max(1, ep * e["etp"].get<int>() / 8));
  EXPECT_EQ(e["group_nvlink_domains"], e["group_nodes"]);
  EXPECT_EQ(e["over_network"], e["group_nodes"].get<int>() > 1);
  // The sweep tries both forms of the all-to-all (NCCL's, a message to every peer, and the
  // hierarchical one, a token once per node and GPU; Sweep.SearchesTheHierarchicalAllToAll...):
  // the explanation names the algorithm of the one #1 uses.
  const bool hierarchical = best["parallel"].value("moe_a2a", "nccl") == "hierarchical";
  EXPECT_EQ(e["all_to_all_algorithm"], hierarchical ? "hierarchical-a2a" : "direct");
  // 4 does not divide DeepSeek-V3's 61 layers: pp 2, 4, 8, ... are searched with uneven stages,
  // and the plans that rank use them (its own run used pp 16).
  int pipelined = 0;
  for (const auto& row : j["ranking"])
    pipelined += row["parallel"]["pp"].get<int>() > 1 ? 1 : 0;
  EXPECT_GT(pipelined, 0);
  EXPECT_FALSE(e["all_to_all_protocol"].get<std::string>().empty());
  EXPECT_GT(e["all_to_all_calls"].get<int>(), 0);
  EXPECT_GT(e["all_to_all_ms_per_call"].get<double>(), 0);
  EXPECT_NEAR(e["all_to_all_exposed_s"].get<double>(),
              first["simulated"]["exposed_comm"]["ep_s"].get<double>(), 1e-9);
  const auto& stages = best["memory_per_stage"];
  ASSERT_EQ(stages.size(), static_cast<std::size_t>(best["parallel"]["pp"].get<int>()));
  int layers = 0;
  std::int64_t peak = 0;
  for (const auto& s : stages) {
    layers += s["layers"].get<int>();
    const std::int64_t parts =
        s["weights_bytes"].get<std::int64_t>() + s["gradients_bytes"].get<std::int64_t>() +
        s["optimizer_bytes"].get<std::int64_t>() + s["activations_bytes"].get<std::int64_t>() +
        s["comm_buffers_bytes"].get<std::int64_t>() + s["overhead_bytes"].get<std::int64_t>();
    EXPECT_EQ(s["total_bytes"].get<std::int64_t>(), parts);
    EXPECT_GT(s["optimizer_bytes"].get<std::int64_t>(), 0);
    peak = std::max(peak, parts);
  }
  EXPECT_EQ(layers, 61);
  EXPECT_EQ(peak, first["simulated"]["peak_memory_bytes"].get<std::int64_t>());
  EXPECT_EQ(j["counts"]["simulation_failures"], 0);

  // A pipeline plan in text: one memory row per stage. Rank orders that put a rank on different
  // stages in the dense and the expert grid (pp inside dp with ep > 1) are not plans: none is
  // ranked, and every simulated one runs.
  const CommandResult t = run_planner({"sweep", "--model", "qwen3-30b-a3b", "--gpus", "16", "--pp",
                                       "2", "--ep", "8", "--moe-a2a", "nccl", "--top-k", "2",
                                       "--no-db", "--threads", "2", "--no-progress"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  for (const char* what :
       {"best plan explained (#1 ", "· pp 2 ·", "· ep 8 (expert tp 1, expert dp 1)", "16 per GPU",
        "spans 1 node and 1 NVLink domain (NVLink only)", "NCCL all-to-all, direct algorithm",
        "memory per GPU of each pipeline stage", "OPTIMIZER", "(peak)"}) {
    EXPECT_TRUE(contains(t.out, what)) << what << "\n" << t.out;
  }
  EXPECT_FALSE(contains(t.out, "tp-cp-ep-pp-dp")) << t.out;
  EXPECT_FALSE(contains(t.out, "simulations failed")) << t.out;
  EXPECT_TRUE(t.err.empty()) << t.err;

  // The hierarchical form inside one node has no network leg: the explanation says what it saves
  // there (one copy per destination GPU) and not a hop over the network.
  const CommandResult h = run_planner({"sweep", "--model", "qwen3-30b-a3b", "--gpus", "16", "--pp",
                                       "2", "--ep", "8", "--moe-a2a", "hierarchical", "--top-k",
                                       "2", "--no-db", "--threads", "2", "--no-progress"});
  ASSERT_EQ(h.exit_code, 0) << h.err;
  EXPECT_TRUE(contains(h.out,
                       "spans 1 node and 1 NVLink domain (NVLink only); hierarchical "
                       "all-to-all (a token once per destination GPU, over NVLink"))
      << h.out;
  EXPECT_FALSE(contains(h.out, "over the network, then NVLink")) << h.out;

  // dualpipev fixed: the best plan says which DualPipe plan it is; dualpipe itself is searched as
  // dualpipev.
  const CommandResult v = run_planner(
      {"sweep", "--model", "qwen3-30b-a3b", "--gpus", "16", "--pp", "2", "--ep", "8", "--schedule",
       "dualpipev", "--gbs", "64", "--top-k", "2", "--no-db", "--threads", "2", "--no-progress"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_TRUE(contains(v.out,
                       "the cut-in-half form of DeepSeek's DualPipe on 4 ranks: "
                       "--schedule dualpipe --pp 4 --dp 4 is this plan"))
      << v.out;
  const CommandResult d = run_planner({"sweep", "--model", "qwen3-30b-a3b", "--gpus", "16",
                                       "--schedule", "dualpipe", "--no-db", "--no-progress"});
  EXPECT_EQ(d.exit_code, 2);
  EXPECT_TRUE(contains(d.err, "searches DeepSeek's DualPipe in its cut-in-half form")) << d.err;

  // The EP all-to-all overlap fixed on: the best plan merges its passes and says so.
  const CommandResult o =
      run_planner({"sweep", "--model", "qwen3-30b-a3b", "--gpus", "16", "--pp", "1", "--ep", "16",
                   "--gbs", "64", "--moe-a2a-overlap", "on", "--top-k", "2", "--no-db", "--threads",
                   "2", "--no-progress"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(contains(o.out, "a2a-overlap")) << o.out;
  EXPECT_TRUE(contains(o.out, "one more warm-up forward per stage")) << o.out;
  EXPECT_EQ(run_planner({"sweep", "--model", "qwen3-30b-a3b", "--gpus", "16", "--moe-a2a-overlap",
                         "sometimes", "--no-db"})
                .exit_code,
            2);
}

// A price older than 12 months (AWS's H100 capacity block of 2024-Q4) is printed with a warning,
// in the header and the JSON; today's on-demand price is not. A sequence longer than the model's
// context is planned (a long-context extension) but said to be one.
TEST(SweepCli, OldPricesAndOverlongSequencesAreWarnedAbout) {
  const CommandResult old = run_planner(small({"--offering", "capacity-block", "--no-db"}));
  ASSERT_EQ(old.exit_code, 0) << old.err;
  EXPECT_TRUE(contains(old.out, "  warning: the price is ")) << old.out;
  EXPECT_TRUE(contains(old.out, " months old (2024-Q4")) << old.out;
  const CommandResult json =
      run_planner(small({"--offering", "capacity-block", "--no-db", "--json"}));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto warnings = nlohmann::json::parse(json.out)["scenarios"][0]["price_warnings"];
  ASSERT_EQ(warnings.size(), 1u) << json.out;
  EXPECT_TRUE(contains(warnings[0].get<std::string>(), "months old")) << json.out;

  const CommandResult today = run_planner(small({"--no-db"}));
  ASSERT_EQ(today.exit_code, 0) << today.err;
  EXPECT_FALSE(contains(today.out, "warning:")) << today.out;

  const CommandResult longer = run_planner({"sweep", "--gpus", "16", "--gbs", "16", "--seq",
                                            "16384", "--top-k", "0", "--no-db", "--no-progress"});
  ASSERT_EQ(longer.exit_code, 0) << longer.err;
  EXPECT_TRUE(contains(longer.out,
                       "warning: sequences of 16,384 tokens are longer than "
                       "llama3-8b's context of 8,192 (max_seq_len)"))
      << longer.out;
}

// "Which cloud" for one GPU: every cloud instance with H100s, once per offering the catalogue
// prices it at, ranked together, with each instance's best plan after the ranking.
TEST(SweepCli, AllOfferingsRanksEveryInstanceAndOfferingOfTheGpu) {
  const std::vector<std::string> args = small(
      {"--model", "llama3-8b", "--gpu", "h100", "--all-offerings", "--keep", "20", "--no-db"});
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const CommandResult r = run_planner(json_args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto res = nlohmann::json::parse(r.out);
  // The catalogue's H100 instances with a topology preset: AWS p5 (every offering), GCP a3-mega
  // (no capacity block) and Azure ND H100 v5 (on-demand only).
  const std::set<std::string> expected{
      "AWS p5.48xlarge on-demand",      "AWS p5.48xlarge spot",
      "AWS p5.48xlarge reserved-1y",    "AWS p5.48xlarge reserved-3y",
      "AWS p5.48xlarge capacity-block", "GCP a3-megagpu-8g on-demand",
      "GCP a3-megagpu-8g spot",         "GCP a3-megagpu-8g reserved-1y",
      "GCP a3-megagpu-8g reserved-3y",  "Azure Standard_ND96isr_H100_v5 on-demand"};
  const auto catalogue = nlohmann::json::parse(run_planner({"price", "list", "--json"}).out);
  std::map<std::string, std::string> label_of;  // scenario name -> instance and offering
  std::map<std::string, double> price_of;
  for (const auto& sc : res["scenarios"]) {
    const std::string label = sc["provider"].get<std::string>() + " " +
                              sc["instance"].get<std::string>() + " " +
                              sc["offering"].get<std::string>();
    label_of[sc["name"]] = label;
    price_of[label] = sc["usd_per_gpu_hour"];
    EXPECT_EQ(sc["gpu"], "H100-SXM5-80GB");
    // Priced at the catalogue's record of that instance and offering.
    bool found = false;
    for (const auto& rec : catalogue) {
      found = found ||
              (rec["provider"] == sc["provider"] && rec["offering"] == sc["offering"] &&
               rec["instance"].get<std::string>().starts_with(sc["instance"].get<std::string>()) &&
               rec["usd_per_gpu_hour"] == sc["usd_per_gpu_hour"]);
    }
    EXPECT_TRUE(found) << label;
  }
  EXPECT_EQ(label_of.size(), expected.size());
  std::set<std::string> labels;
  for (const auto& [name, label] : label_of)
    labels.insert(label);
  EXPECT_EQ(labels, expected);
  EXPECT_DOUBLE_EQ(price_of["AWS p5.48xlarge on-demand"], 6.88);

  // The summary: one line per instance and offering, its first plan in the ranking.
  std::map<std::string, int> first_position;
  for (const auto& p : res["ranking"]) {
    first_position.emplace(label_of[p["scenario"]], p["position"].get<int>());
  }
  const auto& best = res["best_per_instance"];
  ASSERT_EQ(best.size(), expected.size());
  int last = 0;
  for (const auto& b : best) {
    const std::string label = b["instance"];
    ASSERT_TRUE(first_position.count(label)) << label;
    EXPECT_EQ(b["position"], first_position[label]) << label;
    EXPECT_GT(b["position"].get<int>(), last);  // in the ranking's order
    last = b["position"];
    EXPECT_GT(b["tokens_per_usd"].get<double>(), 0);
    EXPECT_GT(b["total_cost_usd"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(b["usd_per_gpu_hour"].get<double>(), price_of[label]);
    // Each instance's best is kept and simulated, however far down the ranking it is.
    EXPECT_EQ(b["tier"], res["ranking"][0]["tier"]) << label;
  }
  EXPECT_EQ(best[0]["position"], 1);

  const CommandResult text = run_planner(args);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const auto summary = text.out.find("best plan per instance");
  ASSERT_NE(summary, std::string::npos) << text.out;
  for (const std::string& label : expected) {
    EXPECT_TRUE(contains(text.out.substr(summary), label)) << label << "\n" << text.out;
  }
  EXPECT_TRUE(contains(
      text.out, "s6: llama3-8b on 16 x H100-SXM5-80GB, Azure Standard_ND96isr_H100_v5 on-demand"))
      << text.out;

  // --offering and --provider narrow it.
  json_args.insert(json_args.end(), {"--offering", "spot"});
  const auto spot = nlohmann::json::parse(run_planner(json_args).out);
  ASSERT_EQ(spot["scenarios"].size(), 2u);
  for (const auto& sc : spot["scenarios"])
    EXPECT_EQ(sc["offering"], "spot");
  const CommandResult gcp = run_planner(
      small({"--gpu", "h100", "--all-offerings", "--provider", "gcp", "--no-db", "--json"}));
  ASSERT_EQ(gcp.exit_code, 0) << gcp.err;
  const auto gcp_res = nlohmann::json::parse(gcp.out);
  ASSERT_EQ(gcp_res["scenarios"].size(), 4u);
  for (const auto& sc : gcp_res["scenarios"])
    EXPECT_EQ(sc["instance"], "a3-megagpu-8g");

  const CommandResult none =
      run_planner({"sweep", "--gpu", "v100-sxm2-32gb", "--all-offerings", "--no-db"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(contains(none.err, "--all-offerings: no cloud instance has V100-SXM2-32GB GPUs"))
      << none.err;
  const CommandResult unpriced =
      run_planner({"sweep", "--gpu", "h100", "--all-offerings", "--provider", "azure", "--offering",
                   "spot", "--no-db"});
  EXPECT_EQ(unpriced.exit_code, 2);
  EXPECT_TRUE(contains(unpriced.err,
                       "no spot price for the instances with H100-SXM5-80GB GPUs "
                       "from azure (Standard_ND96isr_H100_v5)"))
      << unpriced.err;
  EXPECT_EQ(
      run_planner({"sweep", "--all-offerings", "--instances", "p5.48xlarge", "--no-db"}).exit_code,
      2);
}

// A user's price file wins over the catalogue; a bad one is refused naming the file and field.
TEST(SweepCli, PriceFileOverridesTheCatalogue) {
  TempDir dir;
  const std::string file = dir.file("my-prices.json");
  testing::write_file(file, R"([{"gpu": "H100", "provider": "AWS", "instance": "p5.48xlarge",
    "gpus_per_instance": 8, "offering": "on-demand", "usd_per_instance_hour": 24.0,
    "usd_per_gpu_hour": 3.0, "region": "us-east-1", "date": "2026-11-20",
    "source": "our negotiated rate"}])");
  const CommandResult base = run_planner(small({"--no-db", "--json"}));
  ASSERT_EQ(base.exit_code, 0) << base.err;
  const CommandResult mine = run_planner(small({"--no-db", "--json", "--prices", file}));
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  const auto b = nlohmann::json::parse(base.out);
  const auto m = nlohmann::json::parse(mine.out);
  EXPECT_DOUBLE_EQ(b["scenarios"][0]["usd_per_gpu_hour"].get<double>(), 6.88);
  EXPECT_DOUBLE_EQ(m["scenarios"][0]["usd_per_gpu_hour"].get<double>(), 3.0);
  EXPECT_EQ(m["scenarios"][0]["price_file"], file);
  EXPECT_EQ(m["scenarios"][0]["price_source"], "our negotiated rate");
  EXPECT_FALSE(b["scenarios"][0].contains("price_file"));
  // The same plan, at 3.00 instead of 6.88 per GPU-hour.
  EXPECT_EQ(m["ranking"][0]["label"], b["ranking"][0]["label"]);
  EXPECT_NEAR(m["ranking"][0]["tokens_per_usd"].get<double>() /
                  b["ranking"][0]["tokens_per_usd"].get<double>(),
              6.88 / 3.0, 1e-9);
  const CommandResult text = run_planner(small({"--no-db", "--prices", file}));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.out,
                       "at $3.000/GPU-hour on-demand (AWS p5.48xlarge, 2026-11-20; our "
                       "negotiated rate; from " +
                           file + ")"))
      << text.out;
  // Offerings the file has no price for still come from the catalogue.
  const CommandResult spot =
      run_planner(small({"--no-db", "--json", "--prices", file, "--offering", "spot"}));
  ASSERT_EQ(spot.exit_code, 0) << spot.err;
  EXPECT_DOUBLE_EQ(
      nlohmann::json::parse(spot.out)["scenarios"][0]["usd_per_gpu_hour"].get<double>(), 1.65227);

  const std::string bad = dir.file("bad-prices.json");
  testing::write_file(bad, R"([{"gpu": "H100", "provider": "AWS", "instance": "p5.48xlarge",
    "gpus_per_instance": 8, "offering": "hourly", "usd_per_gpu_hour": 3.0,
    "date": "2026-11-20", "source": "x"}])");
  const CommandResult e = run_planner(small({"--no-db", "--prices", bad}));
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_TRUE(contains(e.err, bad + ": /0/offering")) << e.err;
  const CommandResult missing = run_planner(small({"--no-db", "--prices", dir.file("none.json")}));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(contains(missing.err, dir.file("none.json"))) << missing.err;
}

// A sweep document's cluster may name a cloud instance: its topology, GPU and price come with it.
TEST(SweepCli, SpecClusterNamesACloudInstance) {
  TempDir dir;
  const std::string spec = dir.file("clouds.json");
  testing::write_file(spec, R"({"schema_version": 1, "kind": "sweep",
    "models": ["llama3-8b"], "training": {"global_batch_size": 64, "seq_length": 2048},
    "clusters": [{"instance": "p5.48xlarge", "gpus": [16]},
                 {"instance": "a3-megagpu-8g", "gpu": "h100", "gpus": [16], "offering": "spot"},
                 {"gpu": "h100", "gpus": [16], "provider": "GCP"}],
    "search": {"top_k": 2, "keep": 50}})");
  ASSERT_EQ(run_planner({"validate", spec}).exit_code, 0);
  const CommandResult r =
      run_planner({"sweep", "--spec", spec, "--json", "--no-db", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["scenarios"].size(), 3u);
  EXPECT_EQ(j["scenarios"][0]["topology"], "aws-p5");
  EXPECT_EQ(j["scenarios"][0]["instance"], "p5.48xlarge");
  EXPECT_DOUBLE_EQ(j["scenarios"][0]["usd_per_gpu_hour"].get<double>(), 6.88);
  EXPECT_EQ(j["scenarios"][1]["topology"], "gcp-a3-mega");
  EXPECT_EQ(j["scenarios"][1]["provider"], "GCP");
  EXPECT_EQ(j["scenarios"][1]["offering"], "spot");
  EXPECT_DOUBLE_EQ(j["scenarios"][1]["usd_per_gpu_hour"].get<double>(), 2.90941);
  // "provider": the GPU's default topology at that provider's price (the default rule among its
  // records: of GCP's 8-GPU H100 instances, both dated 2026-07-30, the cheaper a3-highgpu-8g).
  EXPECT_EQ(j["scenarios"][2]["topology"], "aws-p5");
  EXPECT_EQ(j["scenarios"][2]["price_provider"], "GCP");
  EXPECT_EQ(j["scenarios"][2]["price_instance"], "a3-highgpu-8g");
  EXPECT_FALSE(j["scenarios"][2].contains("instance"));  // not priced at its own instance
  EXPECT_DOUBLE_EQ(j["scenarios"][2]["usd_per_gpu_hour"].get<double>(), 11.06125);
  EXPECT_EQ(j["best_per_instance"].size(), 3u);

  const auto refused = [&](const std::string& cluster, const std::string& message) {
    const std::string bad = dir.file("bad.json");
    testing::write_file(bad, R"({"schema_version": 1, "kind": "sweep", "models": ["llama3-8b"],
      "training": {"global_batch_size": 64, "seq_length": 2048}, "clusters": [)" +
                                 cluster + "]}");
    const CommandResult e = run_planner({"sweep", "--spec", bad, "--no-db"});
    EXPECT_EQ(e.exit_code, 2) << cluster;
    EXPECT_TRUE(contains(e.err, bad + ": " + message)) << e.err;
    return e.err;
  };
  const std::string unknown = refused(R"({"instance": "p9.mega", "gpus": [16]})",
                                      "/clusters/0/instance: unknown cloud instance \"p9.mega\"; "
                                      "known instances: ");
  for (const char* known : {"p5.48xlarge", "a3-megagpu-8g", "Standard_ND96isr_H100_v5"})
    EXPECT_TRUE(contains(unknown, known)) << known << ": " << unknown;
  refused(R"({"instance": "dgx-b200", "gpus": [16]})",
          "/clusters/0/instance: topology dgx-b200 is no cloud instance");
  refused(R"({"instance": "p5.48xlarge", "topology": "aws-p5", "gpus": [16]})",
          "/clusters/0/topology: give either an instance or a topology");
  refused(R"({"instance": "p5.48xlarge", "provider": "GCP", "gpus": [16]})",
          "/clusters/0/provider: give either an instance or a provider");
  refused(R"({"instance": "p5.48xlarge", "gpu": "a100-80gb", "gpus": [16]})",
          "/clusters/0/instance: instance p5.48xlarge (topology aws-p5) has H100-SXM5-80GB GPUs");
}

}  // namespace
}  // namespace planner
