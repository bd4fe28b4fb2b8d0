// Golden fingerprints: the exact simulated picoseconds of three small plans, every rank simulated
// and one rank per pipeline stage, so that any change to a model's output is a visible, reviewed
// diff of the expected values below (after ASTRA-sim's exact analytical times and OMNeT++'s event
// fingerprints).
//
// A fingerprint is the step time, the mean time per bucket of the simulated workers, the critical
// path's buckets and its top entry, and the run's event and transfer counts, all integers
// (Time::raw(), picoseconds). Simulated time is integer and the models' floating point is IEEE
// double without reassociation or contraction (x86-64, no -ffast-math), so the values are the same
// in every build type.
//
// To regenerate after a deliberate change of a model: run
//   PLANNER_UPDATE_GOLDENS=1 build/bin/sim_unit_test --gtest_filter='Golden*'
// which prints each case's fingerprint as the C++ literal to paste here (and does not fail), then
// review the diff of the numbers and say in the commit why they changed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "planner/core/catalog.hpp"
#include "planner/sim/simulate.hpp"
#include "simulator/sim_test_support.hpp"

namespace planner::sim {
namespace {

bool update_goldens() {
  const char* v = std::getenv("PLANNER_UPDATE_GOLDENS");
  return v != nullptr && std::string(v) == "1";
}

std::string fingerprint(const SimResult& r) {
  std::string out = "step " + std::to_string(r.step_time.raw()) + "\nbuckets";
  for (std::size_t b = 0; b < kNumTimeBuckets; ++b) {
    out += " " + std::string(to_string(static_cast<TimeBucket>(b))) + "=" +
           std::to_string(r.mean_buckets[b].raw());
  }
  out += "\ncritical";
  for (std::size_t b = 0; b < kNumTimeBuckets; ++b) {
    out += " " + std::string(to_string(static_cast<TimeBucket>(b))) + "=" +
           std::to_string(r.critical_buckets[b].raw());
  }
  if (!r.critical_path.empty()) {
    const PathEntry& top = r.critical_path.front();
    out += "\ntop " + top.label + " " + std::to_string(top.time.raw()) + " ops " +
           std::to_string(top.ops);
  }
  out += "\nevents " + std::to_string(r.stats.events) + " transfers " +
         std::to_string(r.stats.transfers) + "\n";
  return out;
}

// The literal to paste for `name`.
std::string as_literal(const std::string& name, const std::string& fp) {
  return "    // " + name + "\n    R\"(" + fp + ")\",\n";
}

SimInput input_on(const std::string& topology, int nodes) {
  SimInput in;
  in.cluster = testing::preset_cluster(topology, nodes);
  auto spec = topo::builtin_topologies().get(topology);
  if (!spec) throw std::runtime_error(spec.status().message());
  in.plan.gpu = *builtin_catalog().find_gpu(spec->gpu);
  in.profile = std::make_shared<const HardwareProfile>(*builtin_profile_for(in.plan.gpu));
  return in;
}

// gpt-tiny on one cpu-host node, tp2 pp2 dp2 interleaved (2 virtual stages), fp32. The profile is
// the preset's with what a calibration adds on a 4-core host: host cores shared by the 8 ranks,
// an oversubscription efficiency and a measured bandwidth for one memory-bound kind.
SimInput gpt_tiny_cpu_host() {
  SimInput in = input_on("cpu-host", 1);
  HardwareProfile profile = *in.profile;
  profile.compute.host_cores = 4;
  profile.compute.oversubscribed_efficiency = 0.85;
  profile.compute.memory_bound[static_cast<std::size_t>(OpKind::kActivation)] = GBps(12.0);
  profile.compute.memory_bound_source = "golden test";
  in.profile = std::make_shared<const HardwareProfile>(std::move(profile));
  in.plan.model = *builtin_catalog().find_model("gpt-tiny");
  in.plan.training.precision = Precision::kFp32;
  in.plan.training.seq_length = 256;
  in.plan.training.global_batch_size = 16;
  ParallelConfig& p = in.plan.parallel;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.schedule = Schedule::kInterleaved;
  p.virtual_stages = 2;
  return in;
}

// Megatron-LM's 1.7B GPT (Narayanan et al. 2021) on two DGX A100 nodes: tp2 pp2 dp4 with
// sequence parallelism, ZeRO-1 (distributed optimizer) and selective recompute.
SimInput megatron_a100() {
  SimInput in = input_on("dgx-a100-superpod", 2);
  in.plan.model = *builtin_catalog().find_model("megatron-1.7b");
  in.plan.training.seq_length = 2048;
  in.plan.training.global_batch_size = 16;
  ParallelConfig& p = in.plan.parallel;
  p.tp = 2;
  p.pp = 2;
  p.dp = 4;
  p.sequence_parallel = true;
  p.zero_stage = 1;
  p.recompute = Recompute::kSelective;
  return in;
}

// Llama 3 8B (8 of its 32 layers) on two DGX H100 nodes: tp2 cp2 pp2 dp2 with sequence
// parallelism at sequence 8192 (a context-parallel ring of two).
SimInput llama3_cp_h100() {
  SimInput in = input_on("dgx-h100-superpod", 2);
  in.plan.model = *builtin_catalog().find_model("llama3-8b");
  in.plan.model.num_layers = 8;
  in.plan.training.seq_length = 8192;
  in.plan.training.global_batch_size = 8;
  ParallelConfig& p = in.plan.parallel;
  p.tp = 2;
  p.cp = 2;
  p.pp = 2;
  p.dp = 2;
  p.sequence_parallel = true;
  return in;
}

void check(const std::string& name, SimInput in, RankSubset subset, const char* expected) {
  in.options.ranks = subset;
  auto r = simulate(in);
  ASSERT_TRUE(r) << name << ": " << r.status().message();
  ASSERT_TRUE(r->simulated) << name;
  const std::string got = fingerprint(*r);
  if (update_goldens()) {
    std::cout << as_literal(name, got);
    return;
  }
  EXPECT_EQ(got, expected) << name
                           << ": a model's output changed; if on purpose, regenerate (see the "
                              "header) and paste:\n"
                           << as_literal(name, got);
}

TEST(Golden, GptTinyCpuHostInterleaved) {
  check("gpt-tiny cpu-host all", gpt_tiny_cpu_host(), RankSubset::kAll,
        R"(step 85982406197
buckets compute=77150048049 tp=3404645292 cp=0 ep=0 pp=1131277882 dp=254333600 other=0 idle=4042101373
critical compute=81616505797 tp=3263632000 cp=0 ep=0 pp=731750400 dp=370518000 other=0 idle=0
top fwd.mlp_up gemm 6522547600 ops 17
events 4540 transfers 554
)");
  check("gpt-tiny cpu-host stage", gpt_tiny_cpu_host(), RankSubset::kOnePerStage,
        R"(step 45882896676
buckets compute=37046474368 tp=3495910880 cp=0 ep=0 pp=1146145840 dp=254333600 other=0 idle=3940031988
critical compute=41386102996 tp=3394525280 cp=0 ep=0 pp=731750400 dp=370518000 other=0 idle=0
top bwd.attn_core attention 3819835621 ops 17
events 1316 transfers 229
)");
}

TEST(Golden, MegatronA100Zero1Selective) {
  check("megatron-1.7b a100 all", megatron_a100(), RankSubset::kAll,
        R"(step 192666336917
buckets compute=131507251852 tp=12462216562 cp=0 ep=0 pp=984891337 dp=7388206959 other=0 idle=40323770207
critical compute=170082975980 tp=15493418999 cp=0 ep=0 pp=441616000 dp=6648325938 other=0 idle=0
top bwd.mlp_up gemm 15190981585 ops 60
events 27866 transfers 4149
)");
  check("megatron-1.7b a100 stage", megatron_a100(), RankSubset::kOnePerStage,
        R"(step 192666336917
buckets compute=131507251852 tp=12462216562 cp=0 ep=0 pp=984891337 dp=7388206959 other=0 idle=40323770207
critical compute=170082975980 tp=15493418999 cp=0 ep=0 pp=441616000 dp=6648325938 other=0 idle=0
top bwd.mlp_up gemm 15190981585 ops 60
events 4546 transfers 1050
)");
}

TEST(Golden, Llama3ContextParallelH100) {
  check("llama3-8b h100 cp all", llama3_cp_h100(), RankSubset::kAll,
        R"(step 188610346933
buckets compute=128876261997 tp=6329776877 cp=1124633376 ep=0 pp=1710427625 dp=1110438117 other=0 idle=49458808940
critical compute=176045769328 tp=8013569838 cp=1405791720 ep=0 pp=762324086 dp=2382891961 other=0 idle=0
top bwd.attn_core attention 22561312550 ops 40
events 12912 transfers 2560
)");
  check("llama3-8b h100 cp stage", llama3_cp_h100(), RankSubset::kOnePerStage,
        R"(step 188610346933
buckets compute=128876261997 tp=6329776877 cp=1124633376 ep=0 pp=1710427625 dp=1110438117 other=0 idle=49458808940
critical compute=176045769328 tp=8013569838 cp=1405791720 ep=0 pp=762324086 dp=2382891961 other=0 idle=0
top bwd.attn_core attention 22561312550 ops 40
events 2258 transfers 642
)");
}

}  // namespace
}  // namespace planner::sim
