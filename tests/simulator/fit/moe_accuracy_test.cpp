// Mixture-of-experts records (the reference data's moe_runs.json, a sample of it in
// tests/data/reference/moe_runs_sample.json): the MoE preset of the record's shape, ep and etp as
// published (chosen or assumed when null), the precision's FP8 recipe, token routing (dropless or
// token dropping with a capacity factor, force-balanced or not), NVL72 GPUs and topologies, and
// every record of the sample modelled within bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "planner/core/model_partition.hpp"
#include "planner/core/published_run.hpp"
#include "planner/fit/accuracy.hpp"

namespace planner::fit {
namespace {

const std::string kSample = std::string(PLANNER_TEST_DATA_DIR) + "/reference/moe_runs_sample.json";

std::vector<PublishedRun> sample() {
  auto runs = load_published_runs_file(kSample);
  EXPECT_TRUE(runs) << runs.status().message();
  return runs ? *runs : std::vector<PublishedRun>{};
}

const PublishedRun& by_id(const std::vector<PublishedRun>& runs, const std::string& id) {
  auto it =
      std::find_if(runs.begin(), runs.end(), [&](const PublishedRun& r) { return r.id == id; });
  EXPECT_NE(it, runs.end()) << id;
  return *it;
}

const ChosenField* assumption(const RunSetup& s, const std::string& field) {
  for (const ChosenField& a : s.assumptions) {
    if (a.field == field) return &a;
  }
  return nullptr;
}

Result<RunSetup> map(const PublishedRun& run) {
  return map_published_run(run, builtin_catalog(), topo::builtin_topologies());
}

// DeepSeek-V3 on 256 GB200 (Megatron-Bridge 25.09, "(tokendrop)"): the deepseek-v3 preset with its
// MLA and dense first layers, GB200 in its NVL72 rack, ep 64 / etp 1, FP8, capacity factor 1
// padded; pp 4 × 4 virtual stages hold 61 layers in chunks of unequal size.
TEST(MapMoeRun, DeepSeekV3OnGb200) {
  const auto runs = sample();
  auto s = map(by_id(runs, "mb2509_gb200_deepseek_v3_fp8_256g"));
  ASSERT_TRUE(s) << s.status().message();
  const ModelSpec& m = s->plan.model;
  ASSERT_TRUE(m.is_moe());
  EXPECT_EQ(m.moe->num_experts, 256);
  EXPECT_EQ(m.moe->first_dense_layers, 3);
  EXPECT_EQ(m.moe->shared_experts, 1);
  EXPECT_TRUE(m.mla.has_value());
  const ChosenField* structure = assumption(*s, "model structure");
  ASSERT_NE(structure, nullptr);
  EXPECT_EQ(structure->value, "deepseek-v3");
  EXPECT_EQ(s->plan.gpu.name, "GB200-B200-186GB");
  EXPECT_EQ(s->topology.name, "gb200-nvl72");
  EXPECT_EQ(s->topology.gpus_per_node(), 4);
  EXPECT_EQ(s->nodes, 64);
  // The NVLink domain's 72 GPUs written as the node's: the same rack of 4-GPU trays.
  PublishedRun rack = by_id(runs, "mb2509_gb200_deepseek_v3_fp8_256g");
  rack.hardware.gpus_per_node = 72;
  auto r = map(rack);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->topology.name, "gb200-nvl72");
  EXPECT_EQ(r->nodes, 64);
  rack.hardware.gpus_per_node = 8;
  EXPECT_FALSE(map(rack));
  EXPECT_EQ(s->plan.parallel.ep, 64);
  EXPECT_EQ(s->plan.parallel.etp, 1);
  EXPECT_EQ(s->plan.training.precision, Precision::kFp8);
  EXPECT_DOUBLE_EQ(s->plan.parallel.moe_capacity_factor, 1.0);
  EXPECT_TRUE(s->plan.parallel.moe_pad_to_capacity);
  EXPECT_EQ(s->software.stack, SoftwareStack::kNemo);
  // The published 4 chunks a stage, of unequal size: Megatron-core's layout, balanced, the MTP
  // module's layer and its LM head on the last virtual stage too.
  EXPECT_EQ(assumption(*s, "/parallel/virtual_stages"), nullptr);
  EXPECT_EQ(assumption(*s, "/parallel/first_stage_layers"), nullptr);
  const ChosenField* layout = assumption(*s, "/parallel/layout");
  ASSERT_NE(layout, nullptr);
  EXPECT_EQ(layout->value, "4x14,3,2");
  EXPECT_NE(layout->reason.find("--pipeline-model-parallel-layout"), std::string::npos);
  const std::vector<ParallelConfig> configs = candidate_configs(*s);
  ASSERT_FALSE(configs.empty());
  for (const ParallelConfig& c : configs) {
    EXPECT_EQ(c.ep, 64);
    EXPECT_EQ(c.virtual_stages, 4);
    EXPECT_EQ(c.schedule, Schedule::kInterleaved);
    EXPECT_EQ(c.first_stage_layers, 0);
    EXPECT_EQ(layout_text(c.layout), "4x14,3,2");
    EXPECT_TRUE(stage_layer_counts(61, c)) << short_label(c);
  }
}

// A record whose virtual-stage field is empty because the source's table has no value ("VP
// n/a": Megatron-Bridge's tables when the pipeline is not interleaved) runs one chunk a stage,
// saying why; with nothing said, the counts that split the layers are candidates.
TEST(MapMoeRun, NoInterleavingInTheTextMeansOneChunkAStage) {
  const auto runs = sample();
  PublishedRun run = by_id(runs, "mb2604_b200_gpt_oss_120b_bf16_64g");
  run.parallel.pp = 2;  // 36 layers: 2, 3, 6, 9 or 18 chunks a stage split them too
  run.parallel.dp = 32;
  run.notes = "Table GA=32. VP \"n/a\" in table (no interleaving).";
  auto s = map(run);
  ASSERT_TRUE(s) << s.status().message();
  const ChosenField* vs = assumption(*s, "/parallel/virtual_stages");
  ASSERT_NE(vs, nullptr);
  EXPECT_EQ(vs->value, "1");
  EXPECT_NE(vs->reason.find("not interleaved"), std::string::npos) << vs->reason;
  const std::vector<ParallelConfig> configs = candidate_configs(*s);
  ASSERT_FALSE(configs.empty());
  for (const ParallelConfig& c : configs)
    EXPECT_EQ(c.virtual_stages, 1) << short_label(c);
  run.notes = "Table GA=32.";
  auto open = map(run);
  ASSERT_TRUE(open) << open.status().message();
  bool interleaved = false;
  for (const ParallelConfig& c : candidate_configs(*open))
    interleaved = interleaved || c.virtual_stages > 1;
  EXPECT_TRUE(interleaved);
}

// Mixtral 8x22B on 128 H100 (Megatron-MoE model zoo): dropless, not force-balanced; its pair
// with --moe-router-force-load-balancing says so; token dropping takes the stated capacity factor.
TEST(MapMoeRun, MixtralRoutingFromTheRecordsText) {
  const auto runs = sample();
  PublishedRun run = by_id(runs, "mz_h100_mixtral_8x22b_128g_dropless");
  auto s = map(run);
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_EQ(assumption(*s, "model structure")->value, "mixtral-8x22b");
  EXPECT_EQ(s->plan.model.vocab, 32000);  // null in the record: the preset's
  EXPECT_EQ(s->plan.parallel.ep, 8);
  EXPECT_EQ(s->plan.parallel.etp, 1);
  EXPECT_EQ(s->plan.training.precision, Precision::kBf16);
  EXPECT_EQ(s->software.stack, SoftwareStack::kMegatronCore);
  EXPECT_DOUBLE_EQ(s->plan.parallel.moe_capacity_factor, 0.0);  // dropless
  const ChosenField* routing = assumption(*s, "routing");
  ASSERT_NE(routing, nullptr);
  EXPECT_NE(routing->reason.find("the record says dropless"), std::string::npos) << routing->reason;
  EXPECT_EQ(routing->reason.find("force-balances"), std::string::npos) << routing->reason;

  run.id = "mz_h100_mixtral_8x22b_128g_dropless_forcedbalance";
  s = map(run);
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_NE(assumption(*s, "routing")->reason.find("force-balances"), std::string::npos);

  // A record that quotes the force-balancing flag (to say how its twin ran) but says its own
  // routing was the router's: not force-balanced.
  run.id = "mz_h100_qwen3_235b_a22b_256g_seq16k_dropless";
  run.notes =
      "TFLOPS \"295 (forced balance) / 237 (dropless)\" (\"Add "
      "--moe-router-force-load-balancing to test forced load balancing\"). Dropless = real "
      "(unforced) router load.";
  s = map(run);
  ASSERT_TRUE(s) << s.status().message();
  routing = assumption(*s, "routing");
  EXPECT_EQ(routing->reason.find("force-balances"), std::string::npos) << routing->reason;
  EXPECT_NE(routing->reason.find("not force-balanced"), std::string::npos) << routing->reason;
  EXPECT_DOUBLE_EQ(s->plan.parallel.moe_imbalance, 1.0);

  run.id = "mz_h100_mixtral_8x22b_128g_tokendrop_cf1";
  run.notes = "Token Drop training. Flags: --moe-expert-capacity-factor 1.5";
  s = map(run);
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_DOUBLE_EQ(s->plan.parallel.moe_capacity_factor, 1.5);
  EXPECT_FALSE(s->plan.parallel.moe_pad_to_capacity);

  run.precision = "FP8 blockwise (PR=fp8: \"block-wise FP8 training\")";
  s = map(run);
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_EQ(s->plan.training.precision, Precision::kFp8);
  EXPECT_NE(assumption(*s, "precision")->reason.find("blockwise FP8"), std::string::npos);
}

// Null ep is chosen like the other null fields; null etp is Megatron-core's default (tp); fields
// that contradict each other are skipped with the reason.
TEST(MapMoeRun, NullAndImpossibleExpertFields) {
  const auto runs = sample();
  PublishedRun run = by_id(runs, "mz_h100_mixtral_8x22b_128g_dropless");
  run.parallel.ep.reset();
  run.parallel.etp.reset();
  auto s = map(run);
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_TRUE(s->ep_null);
  EXPECT_EQ(s->expert_parallel, (std::vector<int>{1, 2, 4, 8}));  // tp 2 x dp 8 ranks, etp 2
  EXPECT_EQ(s->plan.parallel.etp, 2);
  EXPECT_EQ(assumption(*s, "/parallel/etp")->value, "2");
  std::vector<int> tried;
  for (const ParallelConfig& c : candidate_configs(*s))
    tried.push_back(c.ep);
  EXPECT_NE(std::find(tried.begin(), tried.end(), 8), tried.end());

  // No expert width but the FFN's: Mixtral's experts are whole FFNs.
  run = by_id(runs, "mz_h100_mixtral_8x22b_128g_dropless");
  run.model.ffn_hidden = *run.model.expert_ffn_hidden;
  run.model.expert_ffn_hidden.reset();
  auto whole = map(run);
  ASSERT_TRUE(whole) << whole.status().message();
  EXPECT_EQ(assumption(*whole, "model structure")->value, "mixtral-8x22b");
  EXPECT_EQ(assumption(*whole, "/model/expert_ffn_hidden")->value, "16384");

  // Llama 4 Maverick with its experts' width as ffn_hidden (its config's intermediate_size) and a
  // padded vocabulary: the preset's alternating dense and MoE layers, the record's vocabulary.
  run = by_id(runs, "mz_h100_mixtral_8x22b_128g_dropless");
  run.model.name = "Llama 4 Maverick";
  run.model.layers = 48;
  run.model.hidden = 5120;
  run.model.heads = 40;
  run.model.kv_heads = 8;
  run.model.ffn_hidden = 8192;
  run.model.experts = 128;
  run.model.top_k = 1;
  run.model.shared_experts = 1;
  run.model.expert_ffn_hidden = 8192;
  run.model.vocab = 202112;
  auto maverick = map(run);
  ASSERT_TRUE(maverick) << maverick.status().message();
  EXPECT_EQ(assumption(*maverick, "model structure")->value, "llama4-maverick");
  EXPECT_NE(assumption(*maverick, "model structure")->reason.find("ffn_hidden 8192"),
            std::string::npos);
  EXPECT_EQ(maverick->plan.model.moe->layer_freq, 2);
  EXPECT_EQ(maverick->plan.model.ffn_hidden, 16384);
  EXPECT_EQ(maverick->plan.model.vocab, 202112);

  // Qwen3-Next as its config counts layers (48: a mixer and an MoE each, planner's 96 blocks) is
  // its preset, Gated DeltaNet and all.
  run = by_id(runs, "mz_h100_mixtral_8x22b_128g_dropless");
  run.model.name = "Qwen3-Next-80B-A3B";
  run.model.layers = 48;
  run.model.hidden = 2048;
  run.model.heads = 16;
  run.model.kv_heads = 2;
  run.model.ffn_hidden = 5120;
  run.model.experts = 512;
  run.model.top_k = 10;
  run.model.shared_experts = 1;
  run.model.expert_ffn_hidden = 512;
  run.model.vocab = 151936;
  run.parallel.pp = 4;  // 24 blocks a stage
  run.parallel.dp = 16;
  run.parallel.virtual_stages.reset();
  auto next = map(run);
  ASSERT_TRUE(next) << next.status().message();
  EXPECT_EQ(assumption(*next, "model structure")->value, "qwen3-next-80b-a3b");
  EXPECT_EQ(next->plan.model.num_layers, 96);
  EXPECT_EQ(next->plan.model.mamba_layers(), 36);

  run = by_id(runs, "mb2509_gb200_deepseek_v3_fp8_256g");
  run.parallel.pp = 8;
  run.parallel.dp = 32;  // 32 ranks per stage cannot hold ep 64
  auto contradiction = map(run);
  ASSERT_FALSE(contradiction);
  EXPECT_NE(contradiction.status().message().find("etp × ep (1 × 64) does not divide the 32"),
            std::string::npos)
      << contradiction.status().message();

  // A shape no preset has is built from the record's fields and notes (moe_record_model.hpp):
  // DeepSeek-V3's MLA and dense first layers with 192 experts; without a vocabulary or a preset
  // of its family it is skipped, saying which field is missing.
  run = by_id(runs, "mb2509_gb200_deepseek_v3_fp8_256g");
  run.model.experts = 192;
  auto unknown = map(run);
  ASSERT_TRUE(unknown) << unknown.status().message();
  EXPECT_EQ(unknown->plan.model.moe->num_experts, 192);
  EXPECT_TRUE(unknown->plan.model.mla.has_value());
  EXPECT_EQ(unknown->plan.model.moe->first_dense_layers, 3);
  EXPECT_EQ(assumption(*unknown, "model structure")->value, "from the record");
  run.model.name = "Acme-MoE";
  run.model.vocab.reset();
  auto no_vocab = map(run);
  ASSERT_FALSE(no_vocab);
  EXPECT_NE(no_vocab.status().message().find("model.vocab is not published"), std::string::npos)
      << no_vocab.status().message();
}

// The all-to-all from the record's text: DeepEP, HybridEP or node-limited dispatch is hierarchical;
// the alltoall dispatcher, a table that names every dispatcher, or no word at all is NCCL's
// (Megatron-core's default).
TEST(MapMoeRun, DispatcherFromTheRecordsText) {
  const auto runs = sample();
  auto expect = [](const PublishedRun& run, MoeA2a a2a, const std::string& because) {
    auto s = map(run);
    ASSERT_TRUE(s) << s.status().message();
    EXPECT_EQ(s->plan.parallel.moe_a2a, a2a) << run.id;
    const ChosenField* a = assumption(*s, "/parallel/moe_a2a");
    ASSERT_NE(a, nullptr) << run.id;
    EXPECT_EQ(a->value, to_string(a2a)) << run.id;
    EXPECT_NE(a->reason.find(because), std::string::npos) << run.id << ": " << a->reason;
    for (const ParallelConfig& c : candidate_configs(*s))
      EXPECT_EQ(c.moe_a2a, a2a) << run.id;
  };
  expect(by_id(runs, "automodel_h100_bf16_gpt_oss_120b_64g"), MoeA2a::kHierarchical, "DeepEP");
  expect(by_id(runs, "mz_h100_mixtral_8x22b_128g_dropless"), MoeA2a::kNccl,
         "names the alltoall dispatcher");
  expect(by_id(runs, "mb2509_gb200_deepseek_v3_fp8_256g"), MoeA2a::kNccl,
         "several dispatchers without saying which one ran");
  PublishedRun run = by_id(runs, "mb2509_gb200_deepseek_v3_fp8_256g");
  run.notes = "DualPipe; node-limited routing M=4";
  expect(run, MoeA2a::kHierarchical, "node-limited dispatch");
  run.notes = "Command: DISPATCHER=hybridep A2A_OVERLAP=0";
  expect(run, MoeA2a::kHierarchical, "HybridEP");
  run.notes = "";
  expect(run, MoeA2a::kNccl, "not stated");
}

// Recompute modules: quoted in the record's text (Megatron-core's --recompute-modules) they are
// the selective candidate's; where the recompute is not published a Megatron-core MoE run also
// tries module sets (the fastest that fits is chosen); an FSDP run does not.
TEST(MapMoeRun, RecomputeModulesFromTheRecordsText) {
  using RM = RecomputeModule;
  const auto runs = sample();
  PublishedRun run = by_id(runs, "mb2509_gb200_deepseek_v3_fp8_256g");
  run.parallel.recompute = Recompute::kSelective;
  run.notes =
      "Command: --recompute-granularity selective --recompute-modules moe_act mla_up_proj "
      "--cuda-graph-impl transformer_engine";
  auto quoted = map(run);
  ASSERT_TRUE(quoted) << quoted.status().message();
  EXPECT_EQ(quoted->plan.parallel.recompute_modules,
            module_bit(RM::kMoeAct) | module_bit(RM::kMlaUpProj));
  const ChosenField* a = assumption(*quoted, "/parallel/recompute_modules");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->value, "moe_act,mla_up_proj");
  for (const ParallelConfig& c : candidate_configs(*quoted)) {
    EXPECT_EQ(c.recompute, Recompute::kSelective);
    EXPECT_EQ(c.recompute_modules, module_bit(RM::kMoeAct) | module_bit(RM::kMlaUpProj));
  }
  // Not published: none, selective with each module set, full.
  run.parallel.recompute.reset();
  run.notes = "";
  auto searched = map(run);
  ASSERT_TRUE(searched) << searched.status().message();
  EXPECT_EQ(assumption(*searched, "/parallel/recompute_modules"), nullptr);
  std::set<std::uint8_t> sets;
  for (const ParallelConfig& c : candidate_configs(*searched)) {
    if (c.recompute == Recompute::kSelective) sets.insert(c.recompute_modules);
  }
  EXPECT_EQ(sets.size(), 4u);
  EXPECT_TRUE(sets.count(kDefaultRecomputeModules));
  EXPECT_TRUE(sets.count(module_bit(RM::kMoeAct) | module_bit(RM::kLayernorm) |
                         module_bit(RM::kMlaUpProj)));
  // AutoModel (PyTorch FSDP2) checkpoints whole layers: no module sets.
  auto fsdp = map(by_id(runs, "automodel_h100_bf16_gpt_oss_120b_64g"));
  ASSERT_TRUE(fsdp) << fsdp.status().message();
  for (const ParallelConfig& c : candidate_configs(*fsdp))
    EXPECT_EQ(c.recompute_modules, kDefaultRecomputeModules) << short_label(c);
}

// A record naming DeepSeek's DualPipe runs in its cut-in-half form, saying so: dualpipev on pp / 2
// stages with twice the replicas, labelled as the record wrote it; a pp / 2 that does not divide
// the layers takes the V's balanced split (DeepSeek-V3's 61 on 8 stages: 5 + 6 x 8 + 8).
TEST(MapMoeRun, DualPipeRunsInItsCutInHalfForm) {
  const auto runs = sample();
  PublishedRun run = by_id(runs, "mb2509_gb200_deepseek_v3_fp8_256g");
  run.notes = "DualPipe bidirectional pipeline schedule; node-limited routing M=4";
  run.parallel.pp = 16;
  run.parallel.dp = 16;
  run.parallel.ep = 16;
  run.parallel.virtual_stages.reset();
  run.parallel.first_stage_layers.reset();
  run.parallel.last_stage_layers.reset();
  run.parallel.global_batch = 2048;
  auto s = map(run);
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_TRUE(s->dualpipe);
  const ChosenField* schedule = assumption(*s, "/parallel/schedule");
  ASSERT_NE(schedule, nullptr);
  EXPECT_EQ(schedule->value, "dualpipe");
  EXPECT_NE(schedule->reason.find("cut-in-half form: dualpipev on pp / 2 = 8 stages"),
            std::string::npos)
      << schedule->reason;
  const ChosenField* split = assumption(*s, "/parallel/first_stage_layers");
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->value, "5, last_stage_layers 8");
  const std::vector<ParallelConfig> configs = candidate_configs(*s);
  ASSERT_FALSE(configs.empty());
  for (const ParallelConfig& c : configs) {
    EXPECT_EQ(c.schedule, Schedule::kDualPipeV) << short_label(c);
    EXPECT_TRUE(c.dualpipe) << short_label(c);
    EXPECT_EQ(c.pp, 8) << short_label(c);
    EXPECT_EQ(c.dp, 32) << short_label(c);
    EXPECT_EQ(c.virtual_stages, 2) << short_label(c);
    EXPECT_EQ(c.first_stage_layers, 5) << short_label(c);
    EXPECT_EQ(c.last_stage_layers, 8) << short_label(c);
    EXPECT_NE(short_label(c).find("pp16 dp16"), std::string::npos) << short_label(c);
    EXPECT_NE(short_label(c).find("dualpipe first5"), std::string::npos) << short_label(c);
  }
  // DualPipe pairs its ranks: a record naming it on an odd pp contradicts itself.
  PublishedRun odd = run;
  odd.parallel.pp = 15;
  odd.hardware.num_gpus = 240;
  auto refused = map(odd);
  ASSERT_FALSE(refused);
  EXPECT_NE(
      refused.status().message().find("names DualPipe; the dualpipe schedule needs an even pp"),
      std::string::npos)
      << refused.status().message();
  run.notes = "1F1B";
  auto plain = map(run);
  ASSERT_TRUE(plain) << plain.status().message();
  EXPECT_FALSE(plain->dualpipe);
  for (const ParallelConfig& c : candidate_configs(*plain))
    EXPECT_NE(c.schedule, Schedule::kDualPipeV) << short_label(c);
}

// Every record of the sample is modelled (none skipped), each within a bound that a broken
// mapping (a dense model, experts not split, no all-to-all) exceeds.
TEST(MoeAccuracy, SampleIsModelled) {
  const auto runs = sample();
  ASSERT_FALSE(runs.empty());
  AccuracyOptions options;
  options.threads = 2;
  auto report = evaluate_accuracy(runs, options);
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->skipped, 0);
  EXPECT_EQ(report->modelled, static_cast<int>(runs.size()));
  for (const RunAccuracy& r : report->runs) {
    EXPECT_TRUE(r.modelled) << r.id << ": " << r.skip_reason;
    EXPECT_LT(std::abs(r.error_percent), 50.0) << r.id;
    EXPECT_TRUE(r.plan.model.is_moe()) << r.id;
  }
  EXPECT_LT(report->mape_percent, 35.0);
}

}  // namespace
}  // namespace planner::fit
