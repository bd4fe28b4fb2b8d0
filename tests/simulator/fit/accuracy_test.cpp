// Mapping published runs: software stated or inferred (and said which), the published step time
// from step time, tokens/s, TFLOP/s or MFU under a stated convention, and vTrain rows as plans.
#include "planner/fit/accuracy.hpp"

#include <gtest/gtest.h>

#include <string>

#include "planner/core/flops.hpp"
#include "planner/core/measured_runs.hpp"
#include "planner/core/model_partition.hpp"

namespace planner::fit {
namespace {

// The record of one row of a vTrain CSV (the columns below, in vTrain's order).
PublishedRun vtrain_row(const std::string& row) {
  auto runs = parse_vtrain_csv(
      "GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
      "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n" +
          row + "\n",
      "v.csv");
  EXPECT_TRUE(runs) << runs.status().message();
  return runs ? runs->at(0) : PublishedRun{};
}

const SoftwareField* field(const SoftwareSetup& s, const std::string& name) {
  for (const SoftwareField& f : s.fields) {
    if (f.field == name) return &f;
  }
  return nullptr;
}

TEST(ResolveSoftware, StatedFieldsWinAndAreMarkedStated) {
  PublishedRun run;
  run.source = "Narayanan et al., SC'21";  // would infer megatron-lm and fused-softmax
  run.stack = SoftwareStack::kFsdp;
  run.attention = AttentionImpl::kFlash2;
  run.overlap.grad_reduce = false;
  run.overlap.tp_comm = true;
  const SoftwareSetup s = resolve_software(run);
  EXPECT_EQ(s.stack, SoftwareStack::kFsdp);
  EXPECT_EQ(s.attention, AttentionImpl::kFlash2);
  EXPECT_EQ(s.overlap.grad_reduce, false);
  EXPECT_EQ(s.overlap.param_gather, true);  // not stated: fsdp overlaps it
  ASSERT_NE(field(s, "stack"), nullptr);
  EXPECT_TRUE(field(s, "stack")->stated);
  EXPECT_TRUE(field(s, "overlap/grad_reduce")->stated);
  EXPECT_FALSE(field(s, "overlap/param_gather")->stated);
  ASSERT_NE(field(s, "overlap/tp_comm"), nullptr);
  EXPECT_TRUE(field(s, "overlap/tp_comm")->stated);
  EXPECT_EQ(s.overlap.tp_comm, true);
  EXPECT_EQ(field(s, "overlap/p2p"), nullptr);  // not stated, not reported
  // Not stated: the stack's. NeMo's performance recipes overlap the tensor-parallel
  // communication; Megatron-core's default does not.
  PublishedRun nemo;
  nemo.stack = SoftwareStack::kNemo;
  const SoftwareSetup n = resolve_software(nemo);
  EXPECT_EQ(n.overlap.tp_comm, true);
  ASSERT_NE(field(n, "overlap/tp_comm"), nullptr);
  EXPECT_FALSE(field(n, "overlap/tp_comm")->stated);
  EXPECT_NE(field(n, "overlap/tp_comm")->reason.find("userbuffers"), std::string::npos);
  run.overlap.tp_comm.reset();
  run.stack = SoftwareStack::kMegatronCore;
  EXPECT_EQ(resolve_software(run).overlap.tp_comm, false);
}

TEST(ResolveSoftware, TwoDigitYearsDateASource) {
  // The bug of the date inference: "SC'21" has no four-digit year, and the run got FlashAttention
  // and overlapped gradients. Dated 2021 now: Megatron-LM, fused softmax, no overlap.
  PublishedRun run;
  run.source =
      "Narayanan et al., 'Efficient Large-Scale Language Model Training on GPU Clusters Using "
      "Megatron-LM', SC'21";
  const SoftwareSetup s = resolve_software(run);
  EXPECT_EQ(s.stack, SoftwareStack::kMegatronLm);
  EXPECT_EQ(s.attention, AttentionImpl::kFusedSoftmax);
  EXPECT_EQ(s.overlap.grad_reduce, false);
  EXPECT_FALSE(field(s, "stack")->stated);
  EXPECT_NE(field(s, "stack")->reason.find("2021"), std::string::npos) << field(s, "stack")->reason;

  PublishedRun other;
  other.source = "Some lab, ICML22 workshop";  // not Megatron: dated 2022, flash-style
  EXPECT_EQ(resolve_software(other).attention, AttentionImpl::kFlash);
  other.source = "Some lab, NeurIPS'21";
  EXPECT_EQ(resolve_software(other).attention, AttentionImpl::kUnfused);
  EXPECT_EQ(resolve_software(other).stack, SoftwareStack::kMegatronCore);  // the default
  other.notes = "trained with DeepSpeed ZeRO-3";
  EXPECT_EQ(resolve_software(other).stack, SoftwareStack::kDeepSpeed);
  other.notes = "Megatron-DeepSpeed fork";
  EXPECT_EQ(resolve_software(other).stack, SoftwareStack::kMegatronDeepSpeed);
  EXPECT_EQ(resolve_software(other).overlap.grad_reduce, false);
  // Megatron-LM before its fused softmax kernels (2019): PyTorch's softmax, unfused.
  PublishedRun v1;
  v1.source = "Shoeybi et al., Megatron-LM (arXiv:1909.08053), September 2019";
  EXPECT_EQ(resolve_software(v1).stack, SoftwareStack::kMegatronLm);
  EXPECT_EQ(resolve_software(v1).attention, AttentionImpl::kUnfused);
  // Both named apart (MT-NLG's "DeepSpeed and Megatron"): Megatron's model on DeepSpeed's engine;
  // DeepSpeed alone is its ZeRO engine.
  other.notes = "trained with DeepSpeed and Megatron-LM (3D parallelism)";
  EXPECT_EQ(resolve_software(other).stack, SoftwareStack::kMegatronDeepSpeed);
  other.notes = "DeepSpeed ZeRO-3";
  EXPECT_EQ(resolve_software(other).stack, SoftwareStack::kDeepSpeed);
}

TEST(ResolveSoftware, MegatronFsdpIsMegatronCore) {
  // A Megatron-core table with an "FSDP" column (Megatron-FSDP): the run is Megatron-core's, not
  // PyTorch FSDP's; a text naming only FSDP stays PyTorch FSDP.
  PublishedRun run;
  run.source = "Megatron-MoE-ModelZoo readme, Performance Results";
  run.notes =
      "dispatcher DeepEP, FSDP \"On\" (Megatron-FSDP). Megatron-Core (Megatron-LM) training.";
  EXPECT_EQ(resolve_software(run).stack, SoftwareStack::kMegatronCore);
  run.notes = "FSDP \"/\", Megatron Core training";
  EXPECT_EQ(resolve_software(run).stack, SoftwareStack::kMegatronCore);
  run.source = "A lab's blog";
  run.notes = "PyTorch FSDP2, bf16";
  EXPECT_EQ(resolve_software(run).stack, SoftwareStack::kFsdp);
  run.notes = "PyTorch Fully Sharded Data Parallel (OPT-175B)";
  EXPECT_EQ(resolve_software(run).stack, SoftwareStack::kFsdp);
}

Plan llama_like_plan() {
  Plan plan;
  plan.model = builtin_catalog().model("llama3-8b").value();
  plan.gpu = builtin_catalog().gpu("h100").value();
  plan.training.global_batch_size = 64;
  plan.training.seq_length = 8192;
  plan.parallel.tp = 2;
  plan.parallel.dp = 32;
  return plan;
}

TEST(PublishedStep, FromStepTimeTokensTflopsOrMfu) {
  const Plan plan = llama_like_plan();  // 64 GPUs, 524,288 tokens per step
  PublishedRun run;
  run.hardware.num_gpus = 64;
  run.measured.mfu = 0.4;
  run.derived.emplace_back("tflops_per_gpu", 400.0);
  run.measured.tokens_per_s_per_gpu = 1000;
  run.derived.emplace_back("step_time_s", 9.0);
  run.measured.step_time_s = 8.0;
  auto s = published_step(run, plan, FlopConvention::kPalm);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->basis, PublishedBasis::kStepTime);
  EXPECT_DOUBLE_EQ(s->seconds, 8.0);

  run.measured.step_time_s.reset();
  s = published_step(run, plan, FlopConvention::kPalm);
  EXPECT_EQ(s->basis, PublishedBasis::kDerivedStepTime);
  EXPECT_DOUBLE_EQ(s->seconds, 9.0);

  run.derived.erase(run.derived.begin() + 1);
  s = published_step(run, plan, FlopConvention::kPalm);
  EXPECT_EQ(s->basis, PublishedBasis::kTokensPerSecond);
  EXPECT_DOUBLE_EQ(s->seconds, 64.0 * 8192 / (1000.0 * 64));

  run.measured.tokens_per_s_per_gpu.reset();
  const double flops = published_step_flops(FlopConvention::kPalm, plan)->raw();
  // PaLM: 6N + 12·L·H·Q·T per token.
  const ModelSpec& m = plan.model;
  const double per_token = 6.0 * static_cast<double>(m.total_params()) +
                           12.0 * m.num_layers * static_cast<double>(m.hidden) * 8192;
  EXPECT_NEAR(flops, per_token * 64 * 8192, 1e-6 * flops);
  s = published_step(run, plan, FlopConvention::kPalm);
  EXPECT_EQ(s->basis, PublishedBasis::kTflopsPerGpu);
  EXPECT_NEAR(s->seconds, flops / (400e12 * 64), 1e-9);

  run.derived.clear();
  s = published_step(run, plan, FlopConvention::kPalm);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->basis, PublishedBasis::kMfu);
  // MFU against the H100's dense bf16 peak (989.4 TFLOP/s in the GPU preset).
  const double peak = plan.gpu.peak_for(Precision::kBf16).raw();
  EXPECT_NEAR(s->seconds, flops / (0.4 * peak * 64), 1e-9);
  EXPECT_NE(s->how.find("MFU 0.4"), std::string::npos) << s->how;

  // MFU under no named convention is MFU as PaLM defined it, saying so; a bare TFLOP/s could
  // count recompute or not, and cannot be turned into a step time.
  auto unnamed = published_step(run, plan, FlopConvention::kUnknown);
  ASSERT_TRUE(unnamed) << unnamed.status().message();
  EXPECT_NEAR(unnamed->seconds, s->seconds, 1e-12);
  EXPECT_NE(unnamed->how.find("no convention named"), std::string::npos) << unnamed->how;
  run.measured.mfu.reset();
  run.measured.tflops_per_gpu = 400;
  auto unknown = published_step(run, plan, FlopConvention::kUnknown);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.status().message().find("unknown FLOP convention"), std::string::npos);
  run.measured.tflops_per_gpu.reset();
  EXPECT_FALSE(published_step(run, plan, FlopConvention::kPalm));
}

TEST(MapPublishedRun, VtrainRowsBecomePlansInVtrainsSetting) {
  auto runs = parse_vtrain_csv(
      "# Source: VIA-Research/vTrain@f8dda84:data/ground_truth_single.csv (MIT licence)\n"
      "GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
      "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n"
      "8,8,2,2048,16,20,1024,4,1,2,160.6027\n",
      "v.csv");
  ASSERT_TRUE(runs) << runs.status().message();
  auto s = map_published_run(runs->at(0), builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_EQ(s->plan.parallel.tp, 4);
  EXPECT_EQ(s->plan.parallel.pp, 2);
  const std::vector<ParallelConfig> candidates = candidate_configs(*s);
  ASSERT_EQ(candidates.size(), 1u);  // every field stated
  EXPECT_EQ(candidates[0].recompute, Recompute::kFull);
  EXPECT_EQ(candidates[0].micro_batch_size, 2);
  EXPECT_EQ(candidates[0].schedule, Schedule::k1F1B);
  EXPECT_FALSE(s->plan.parallel.overlap_grad_reduce);
  EXPECT_EQ(s->plan.training.precision, Precision::kFp16);
  EXPECT_EQ(s->plan.model.vocab, 50688);  // 50257 padded to a multiple of 128 · tp (512)
  EXPECT_EQ(s->plan.model.mlp, MlpKind::kGelu);
  EXPECT_EQ(s->plan.model.position_embedding, PositionEmbedding::kLearned);
  EXPECT_EQ(s->attention, sim::AttentionKernel::kFusedSoftmax);
  EXPECT_EQ(s->software.stack, SoftwareStack::kMegatronDeepSpeed);
  EXPECT_EQ(s->nodes, 1);
  EXPECT_EQ(s->source, "VIA-Research/vTrain/data/ground_truth_single.csv");
  EXPECT_DOUBLE_EQ(s->published.seconds, 0.1606027);
}

TEST(MapPublishedRun, ClusterInNumbersBuildsItsOwnTopology) {
  // BLOOM-style nodes: 8 A100 80GB, NVLink 300 GB/s, 4 x 100 Gb/s per node: not a DGX preset's
  // 8 x 200 Gb/s.
  PublishedRun run = vtrain_row("8,16,2,1024,16,12,1024,1,8,1,100");
  run.hardware.gpu = "A100-SXM4-80GB";
  run.hardware.num_gpus = 16;
  run.parallel.dp = 16;
  run.parallel.global_batch = 32;
  run.hardware.nvlink_GBps = 300;
  run.hardware.nics_per_node = 4;
  run.hardware.nic_Gbps = 100;
  auto s = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_EQ(s->nodes, 2);
  EXPECT_EQ(s->topology.node.count(topo::DeviceKind::kNic), 4);
  EXPECT_EQ(s->topology.fabric.host_link.kind, topo::LinkKind::kIbEdr);  // by its rate
  EXPECT_NE(s->topology.name.find("4 x 100 Gb/s"), std::string::npos) << s->topology.name;

  // Two nodes need the NICs stated.
  run.hardware.nics_per_node.reset();
  run.hardware.nic_Gbps.reset();
  auto missing = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("nics_per_node"), std::string::npos)
      << missing.status().message();

  // The same network in the inter-node text only: the numbers win over the preset the GPU
  // picks; a text that agrees with the preset keeps it.
  run.hardware.nvlink_GBps.reset();
  run.hardware.gpus_per_node = 8;
  run.hardware.inter_node = "4 \u00d7 100 Gb/s Omni-Path per node";
  auto text = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(text) << text.status().message();
  EXPECT_EQ(text->topology.node.count(topo::DeviceKind::kNic), 4);
  EXPECT_NE(text->topology.name.find("4 x 100 Gb/s"), std::string::npos) << text->topology.name;
  run.hardware.inter_node = "4x 100G Omni-Path NICs";
  auto short_unit = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(short_unit) << short_unit.status().message();
  EXPECT_EQ(short_unit->topology.node.count(topo::DeviceKind::kNic), 4);
  run.hardware.inter_node = "InfiniBand 8x25 GB/s per node";  // bytes: 8 x 200 Gb/s
  auto bytes = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(bytes) << bytes.status().message();
  EXPECT_EQ(bytes->topology.name, "dgx-a100-superpod");
  run.hardware.inter_node = "8x 200Gb/s HDR InfiniBand per node";
  auto preset = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(preset) << preset.status().message();
  EXPECT_EQ(preset->topology.name, "dgx-a100-superpod");
}

// "V100-SXM3-32GB (DGX-2H)": the remark names the DGX-2H's higher-clocked module, which runs on
// its own preset, profile and topology; without the remark the DGX-2's module stays.
TEST(MapPublishedRun, ARemarkNamingAGpuVariantSelectsIt) {
  PublishedRun run = vtrain_row("8,8,8,1024,16,12,1024,8,1,1,100");
  run.hardware.gpu = "V100-SXM3-32GB (DGX-2H)";
  run.hardware.num_gpus = 16;
  run.parallel.dp = 2;
  run.parallel.global_batch = 16;
  run.hardware.gpus_per_node = 16;
  run.attention = AttentionImpl::kUnfused;
  auto s = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_EQ(s->plan.gpu.name, "V100-SXM3-32GB-H");
  EXPECT_EQ(s->topology.name, "dgx2h-v100");
  EXPECT_EQ(s->attention, sim::AttentionKernel::kUnfused);
  ASSERT_NE(s->profile, nullptr);
  EXPECT_EQ(s->profile->name, "v100-sxm3-32gb-h");
  EXPECT_NEAR(to_tflops_per_s(s->plan.gpu.peak_for(Precision::kFp16)), 130, 1e-9);

  run.hardware.gpu = "V100-SXM3-32GB (DGX-2)";
  auto plain = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(plain) << plain.status().message();
  EXPECT_EQ(plain->plan.gpu.name, "V100-SXM3-32GB");
  EXPECT_EQ(plain->topology.name, "dgx2-v100");
  // "A100" is an alias of A100-SXM4-80GB, but the part's own name holds it.
  run.hardware.gpu = "A100-SXM4 (DGX A100; 40GB vs 80GB not stated)";
  run.hardware.gpus_per_node = 8;
  auto a100 = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(a100) << a100.status().message();
  EXPECT_EQ(a100->plan.gpu.name, "A100-SXM4-40GB");
}

// A GPU named in free text: vendor words dropped, a preset's name, alias or the start of its name
// among the words, a memory size picking the variant; words naming two parts are refused.
TEST(MapPublishedRun, GpuNamedInFreeText) {
  PublishedRun run = vtrain_row("8,8,8,1024,16,12,1024,8,1,1,100");
  const std::pair<const char*, const char*> cases[] = {
      {"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"},
      {"NVIDIA A100 40GB", "A100-SXM4-40GB"},
      {"A100 (80 GB)", "A100-SXM4-80GB"},
      {"NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"},
      {"AMD Instinct MI300X", "MI300X"},
      {"NVIDIA Tesla V100-SXM2-32GB", "V100-SXM2-32GB"},
  };
  for (const auto& [text, want] : cases) {
    run.hardware.gpu = text;
    auto s = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
    ASSERT_TRUE(s) << text << ": " << s.status().message();
    EXPECT_EQ(s->plan.gpu.name, want) << text;
  }
  run.hardware.gpu = "H100 or A100";
  auto two = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_FALSE(two);
  EXPECT_NE(two.status().message().find("more than one GPU preset"), std::string::npos)
      << two.status().message();
  run.hardware.gpu = "NVIDIA H100 PCIe";
  auto pcie = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_FALSE(pcie);
  EXPECT_NE(pcie.status().message().find("PCIe card"), std::string::npos)
      << pcie.status().message();
  run.hardware.gpu = "Acme X1000";
  auto none = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("no GPU preset matches"), std::string::npos)
      << none.status().message();
}

// A dense model no preset has takes its family's structure from a word of its name: DeepSeek LLM
// and InternLM are Llama's layout (SwiGLU: three FFN matrices), BLOOM and Falcon GeLU models,
// Nemotron-4 squared ReLU; a short keyword only as a word ("OPT-175B", not "Adopted GPT").
TEST(MapPublishedRun, DenseFamiliesFromTheName) {
  PublishedRun run = vtrain_row("8,8,8,1024,16,12,1024,8,1,1,100");
  const std::pair<const char*, MlpKind> cases[] = {
      {"DeepSeek LLM 67B", MlpKind::kSwiglu},
      {"InternLM-20B", MlpKind::kSwiglu},
      {"BLOOM", MlpKind::kGelu},
      {"Falcon-180B", MlpKind::kGelu},
      {"Nemotron-4 15B", MlpKind::kSquaredRelu},
      {"OPT-175B", MlpKind::kGelu},
      {"Adopted GPT", MlpKind::kGelu},
  };
  for (const auto& [name, mlp] : cases) {
    run.model.name = name;
    auto s = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
    ASSERT_TRUE(s) << name << ": " << s.status().message();
    EXPECT_EQ(s->plan.model.mlp, mlp) << name;
  }
  run.model.name = "BLOOM";
  auto bloom = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(bloom);
  EXPECT_EQ(bloom->plan.model.position_embedding, PositionEmbedding::kAlibi);
  run.model.name = "Adopted GPT";
  auto gpt = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(gpt);
  EXPECT_EQ(gpt->plan.model.position_embedding, PositionEmbedding::kLearned);
  EXPECT_TRUE(gpt->plan.model.bias);

  // Heads of another width than hidden / heads, as the notes quote it (Qwen3-32B: 64 heads of 128
  // on a hidden of 5120); without the notes such a shape is refused.
  run.model.name = "Qwen3-32B";
  run.model.hidden = 5120;
  run.model.heads = 64;
  run.model.kv_heads = 8;
  run.model.ffn_hidden = 25600;
  run.model.arch_notes = "head_dim 128; tie_word_embeddings false";
  auto qwen = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(qwen) << qwen.status().message();
  EXPECT_EQ(qwen->plan.model.head_dim, 128);
  run.model.heads = 48;
  run.model.kv_heads = 8;
  run.model.arch_notes.clear();
  auto refused = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("give no head_dim"), std::string::npos)
      << refused.status().message();
}

// A record that publishes only a rate and no global batch (a paper's single-GPU baseline) is
// simulated with 8 sequences per data-parallel replica where pp is 1, and says so; a step time
// without its batch, or a rate with pp > 1 (the bubble depends on the micro-batch count), is not
// modelled.
TEST(MapPublishedRun, ARateWithoutABatchTakesEightSequencesPerReplica) {
  PublishedRun run = vtrain_row("2,16,8,1024,16,12,1024,1,2,1,100");
  run.parallel.global_batch.reset();
  run.parallel.micro_batch.reset();
  run.measured.step_time_s.reset();
  run.measured.tflops_per_gpu = 100;
  run.flops_convention = "Megatron eq. (3)";
  auto s = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_EQ(s->plan.training.global_batch_size, 16);  // 8 on each of dp 2
  EXPECT_EQ(s->micro_batches, (std::vector<std::int64_t>{1, 2, 4, 8}));
  bool said = false;
  for (const auto& a : s->assumptions)
    said = said || a.field == "/parallel/global_batch";
  EXPECT_TRUE(said);
  // The published step follows the batch: FLOPs of 16 sequences at 100 TFLOP/s on 2 GPUs.
  EXPECT_GT(s->published.seconds, 0);

  PublishedRun piped = run;
  piped.parallel.pp = 2;
  piped.parallel.dp = 1;
  auto refused = map_published_run(piped, builtin_catalog(), topo::builtin_topologies());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("global_batch is not published (needed with pp > 1)"),
            std::string::npos)
      << refused.status().message();

  PublishedRun timed = run;
  timed.measured.tflops_per_gpu.reset();
  timed.measured.step_time_s = 0.1;
  auto untimed = map_published_run(timed, builtin_catalog(), topo::builtin_topologies());
  ASSERT_FALSE(untimed);
  EXPECT_EQ(untimed.status().message(), "parallel.global_batch is not published");
}

// A pp that does not divide the layers (126 layers, Llama 3 405B's depth, on pp 8) is modelled
// with the balanced uneven split, said in the assumptions; a stated split is kept.
TEST(MapPublishedRun, UnevenStagesTakeTheBalancedSplit) {
  PublishedRun run = vtrain_row("8,32,1,1024,16,126,1024,1,1,8,1000");
  auto s = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_TRUE(s->balanced_split);
  bool said = false;
  for (const ChosenField& a : s->assumptions)
    said = said ||
           (a.field == "/parallel/first_stage_layers" && a.value == "15, last_stage_layers 15");
  EXPECT_TRUE(said);
  const std::vector<ParallelConfig> configs = candidate_configs(*s);
  ASSERT_FALSE(configs.empty());
  for (const ParallelConfig& c : configs) {
    if (c.virtual_stages == 1) {
      EXPECT_EQ(c.first_stage_layers, 15);  // 15 + 6 x 16 + 15
      EXPECT_EQ(c.last_stage_layers, 15);
    }
    EXPECT_TRUE(stage_layer_counts(126, c)) << short_label(c);
  }
  // A stated split is the record's.
  run.parallel.first_stage_layers = 14;
  run.parallel.last_stage_layers = 16;
  run.parallel.virtual_stages = 1;
  auto stated = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(stated) << stated.status().message();
  EXPECT_FALSE(stated->balanced_split);
  const std::vector<ParallelConfig> kept = candidate_configs(*stated);
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept.front().first_stage_layers, 14);
  EXPECT_EQ(kept.front().last_stage_layers, 16);
}

// Unpublished virtual stages are searched where the record's stack runs the interleaved schedule:
// never under DeepSpeed's PipelineEngine (vTrain's Megatron-DeepSpeed); under Megatron-core every
// count whose chunks split the layers, and 2 and 4 chunks a stage of unequal size where only the
// balanced layout holds them (126 layers on pp 16, Llama 3 405B's: 1, 2 and 7 split, 4 needs
// layout 1,2x62,1).
TEST(MapPublishedRun, UnpublishedVirtualStagesFollowTheStack) {
  PublishedRun run = vtrain_row("16,64,1,1024,16,126,1024,1,1,16,1000");
  run.parallel.virtual_stages.reset();
  auto deepspeed = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(deepspeed) << deepspeed.status().message();
  EXPECT_EQ(deepspeed->virtual_stages, (std::vector<int>{1}));
  for (const ParallelConfig& c : candidate_configs(*deepspeed))
    EXPECT_EQ(c.schedule, Schedule::k1F1B) << short_label(c);

  run.stack = SoftwareStack::kMegatronCore;
  auto core = map_published_run(run, builtin_catalog(), topo::builtin_topologies());
  ASSERT_TRUE(core) << core.status().message();
  EXPECT_EQ(core->virtual_stages, (std::vector<int>{1, 2, 4, 7}));
  bool four = false;
  for (const ParallelConfig& c : candidate_configs(*core)) {
    EXPECT_TRUE(stage_layer_counts(126, c)) << short_label(c);
    if (c.virtual_stages != 4) continue;
    four = true;
    EXPECT_EQ(c.schedule, Schedule::kInterleaved);
    EXPECT_EQ(layout_text(c.layout), "1,2x62,1");
  }
  EXPECT_TRUE(four);
}

// Records of one configuration measured more than once (a benchmark row in several releases):
// the best single time for them and how far planner is from it on the same records.
TEST(RepeatedConfigurations, FloorIsTheBestSingleTimePerConfiguration) {
  std::vector<RunAccuracy> runs;
  auto add = [&](const std::string& id, int tp, double measured, double predicted,
                 bool modelled = true) {
    RunAccuracy a;
    a.id = id;
    a.source = "table " + id;  // the source does not enter the configuration
    a.modelled = modelled;
    a.published = measured;
    a.predicted = predicted;
    a.error_percent = 100 * (predicted - measured) / measured;
    a.plan.name = id;
    a.plan.parallel.tp = tp;
    a.topology = "dgx-a100";
    runs.push_back(a);
  };
  add("r25.09", 2, 1.0, 1.0);
  add("r25.11", 2, 1.2, 1.0);
  add("r26.02", 2, 2.0, 1.0);
  add("other-layout", 4, 1.0, 1.5);
  add("not-modelled", 4, 3.0, 1.5, false);
  RepeatedConfigurations r = repeated_configurations(runs);
  EXPECT_EQ(r.configurations, 1);
  EXPECT_EQ(r.runs, 3);
  // Sum of |t / measured - 1| at t = 1.0, 1.2, 2.0: 0.667, 0.6, 1.667; the floor is 0.6 / 3.
  EXPECT_NEAR(r.floor_mape_percent, 20.0, 1e-9);
  EXPECT_NEAR(r.model_mape_percent, (0 + 100.0 / 6 + 50) / 3, 1e-9);
  EXPECT_NEAR(r.widest_ratio, 2.0, 1e-12);
  EXPECT_EQ(r.widest_id, "r25.09");

  // Another topology is another configuration: nothing is repeated then.
  runs[2].topology = "dgx-a100-superpod";
  runs[1].plan.parallel.micro_batch_size = 2;
  r = repeated_configurations(runs);
  EXPECT_EQ(r.configurations, 0);
  EXPECT_EQ(r.runs, 0);
  EXPECT_EQ(r.floor_mape_percent, 0);
}

}  // namespace
}  // namespace planner::fit
