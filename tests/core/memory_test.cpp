#include "planner/core/memory.hpp"

#include <gtest/gtest.h>

#include "planner/core/catalog.hpp"
#include "planner/core/diagnostics.hpp"
#include "planner/core/model_partition.hpp"
#include "planner/core/plan.hpp"

namespace planner {
namespace {

const ModelSpec& gpt3() {
  return *builtin_catalog().find_model("gpt3-175b");
}

TrainingSpec gpt3_training() {
  TrainingSpec t;
  t.global_batch_size = 1536;
  t.seq_length = 2048;
  return t;
}

// Korthikanti et al. 2022, GPT-3 175B: s = 2048, b = 1, h = 12288, a = 96, t = 8.
constexpr double s = 2048, b = 1, h = 12288, a = 96, t = 8;

ParallelConfig gpt3_parallel() {
  ParallelConfig p;
  p.tp = 8;
  p.pp = 8;
  p.dp = 16;
  p.micro_batch_size = 1;
  p.sequence_parallel = true;
  p.recompute = Recompute::kSelective;
  return p;
}

// Megatron-core's --recompute-modules drop their parts' activations (GPT-3 175B layer, tp 8 with
// sequence parallelism, flash attention: s·b·h·34/t with core_attn alone).
TEST(Memory, RecomputeModulesDropTheirActivations) {
  using RM = RecomputeModule;
  ParallelConfig p = gpt3_parallel();
  auto layer = [&](const ParallelConfig& q, const MemoryOptions& o = {}) {
    return layer_activation_bytes(gpt3(), gpt3_training(), q, false, o).raw();
  };
  EXPECT_EQ(layer(p), static_cast<std::int64_t>(s * b * h * 34 / t));
  // layernorm: nothing on a dense GPT layer (Transformer Engine fuses both norms into the next
  // linear, which keeps the norm's output for its weight gradient).
  p.recompute_modules = module_bit(RM::kCoreAttn) | module_bit(RM::kLayernorm);
  EXPECT_EQ(layer(p), static_cast<std::int64_t>(s * b * h * 34 / t));
  // mlp: the MLP's two 4h-wide intermediates (16·s·b·h/t) of its 19.
  p.recompute_modules = module_bit(RM::kCoreAttn) | module_bit(RM::kMlp);
  EXPECT_EQ(layer(p), static_cast<std::int64_t>(s * b * h * 18 / t));
  // Without core_attn the s×s scores are stored again where the kernel keeps them.
  MemoryOptions korthikanti;
  korthikanti.flash_attention = false;
  p.recompute_modules = module_bit(RM::kMlp);
  EXPECT_EQ(layer(p, korthikanti), static_cast<std::int64_t>(s * b * h / t * (18 + 5 * a * s / h)));
  // Modules mean nothing without selective recompute.
  p.recompute = Recompute::kNone;
  EXPECT_EQ(layer(p), static_cast<std::int64_t>(s * b * h * 34 / t));

  // An MoE layer: moe keeps the block's input only, moe_act drops the experts' activation output,
  // shared_experts the shared experts'; the peak holds one layer's dropped parts while it is
  // recomputed.
  const ModelSpec& ds = *builtin_catalog().find_model("deepseek-v3");
  TrainingSpec tr;
  tr.seq_length = 4096;
  tr.global_batch_size = 64;
  ParallelConfig q;
  q.pp = 8;
  q.first_stage_layers = 5;  // 5 + 7 x 8 = 61
  q.dp = 8;
  q.ep = 8;
  q.recompute = Recompute::kSelective;
  auto moe_layer = [&](std::uint8_t modules) {
    q.recompute_modules = modules;
    return layer_activation_bytes(ds, tr, q, true).raw();
  };
  const std::int64_t core = moe_layer(kDefaultRecomputeModules);
  const std::int64_t act = moe_layer(module_bit(RM::kCoreAttn) | module_bit(RM::kMoeAct));
  const std::int64_t shared = moe_layer(module_bit(RM::kCoreAttn) | module_bit(RM::kSharedExperts));
  const std::int64_t whole = moe_layer(module_bit(RM::kCoreAttn) | module_bit(RM::kMoe));
  EXPECT_LT(act, core);
  EXPECT_LT(shared, core);
  EXPECT_LT(whole, act);
  EXPECT_LT(whole, shared);
  // DeepSeek-V3's shared expert (2048 wide, gated: 3 tensors, 2 bytes) on s·b tokens.
  EXPECT_EQ(core - shared, static_cast<std::int64_t>(2.0 * 4096 * 1 * 2048 * 3));
  // layernorm: MLA's norm and the MoE block's, standalone: 2 bytes of s·b·h each.
  EXPECT_EQ(core - moe_layer(module_bit(RM::kCoreAttn) | module_bit(RM::kLayernorm)),
            static_cast<std::int64_t>(2.0 * 2.0 * 4096 * 1 * 7168));
  MemoryEstimator estimator(ds, tr, GpuSpec{});
  q.recompute_modules = module_bit(RM::kCoreAttn) | module_bit(RM::kMoe);
  const auto peak_moe = estimator.peak(q);
  q.recompute_modules = kDefaultRecomputeModules;
  const auto peak_core = estimator.peak(q);
  ASSERT_TRUE(peak_moe) << peak_moe.status().message();
  ASSERT_TRUE(peak_core) << peak_core.status().message();
  EXPECT_LT(peak_moe->activations.raw(), peak_core->activations.raw());
}

// Gated attention keeps its gate (one more q-wide tensor); a Gated DeltaNet block keeps what a
// Mamba-2 block keeps, in_proj's wider output (beta) included (Qwen3-Next, tp 1, s = 4096).
TEST(Memory, GatedAttentionAndGatedDeltaNetActivations) {
  ModelSpec m = *builtin_catalog().find_model("qwen3-next-80b-a3b");
  TrainingSpec tr;
  tr.global_batch_size = 8;
  tr.seq_length = 4096;
  ParallelConfig p;
  p.dp = 8;
  const LayerKind attention{Mixer::kAttention, FfnKind::kNone};
  const double gated = layer_activation_bytes(m, tr, p, attention).raw();
  m.attention_output_gate = false;
  const double plain = layer_activation_bytes(m, tr, p, attention).raw();
  EXPECT_DOUBLE_EQ(gated - plain, 2.0 * 4096 * m.q_dim());  // bf16
  const LayerKind deltanet{Mixer::kMamba, FfnKind::kNone};
  const MambaSpec& g = *m.mamba;
  // The block norm's input and in_proj's | in_proj output (12352) | convolved q, k, v (8192) |
  // scan and norm outputs (2 × 4096), 2 bytes each; the fp32 chunk states (64 chunks of
  // 4096 × 128).
  EXPECT_EQ(g.in_proj_dim(), 12352);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, tr, p, deltanet).raw(),
                   2.0 * 4096 * (2 * 2048 + 12352 + 8192 + 2 * 4096) + 4.0 * 64 * 4096 * 128);
}

TEST(Memory, PerLayerActivationsFollowKorthikanti) {
  MemoryOptions korthikanti;  // the paper stores the s×s softmax
  korthikanti.flash_attention = false;
  ParallelConfig p;
  // No parallelism: s·b·h·(34 + 5·a·s/h).
  EXPECT_EQ(layer_activation_bytes(gpt3(), gpt3_training(), p, false, korthikanti).raw(),
            static_cast<std::int64_t>(s * b * h * (34 + 5 * a * s / h)));
  // Tensor parallel: s·b·h·(10 + 24/t + 5·a·s/(h·t)).
  p.tp = 8;
  EXPECT_EQ(layer_activation_bytes(gpt3(), gpt3_training(), p, false, korthikanti).raw(),
            static_cast<std::int64_t>(s * b * h * (10 + 24 / t + 5 * a * s / (h * t))));
  // Tensor + sequence parallel: s·b·h/t·(34 + 5·a·s/h).
  p.sequence_parallel = true;
  EXPECT_EQ(layer_activation_bytes(gpt3(), gpt3_training(), p, false, korthikanti).raw(),
            static_cast<std::int64_t>(s * b * h / t * (34 + 5 * a * s / h)));
  // Selective recompute (and flash attention, with or without it): s·b·h·34/t.
  p.recompute = Recompute::kSelective;
  EXPECT_EQ(layer_activation_bytes(gpt3(), gpt3_training(), p, false, korthikanti).raw(),
            static_cast<std::int64_t>(s * b * h * 34 / t));
  p.recompute = Recompute::kNone;
  EXPECT_EQ(layer_activation_bytes(gpt3(), gpt3_training(), p, false).raw(),
            static_cast<std::int64_t>(s * b * h * 34 / t));
  // Full recompute keeps the layer input: 2·s·b·h/t with SP.
  p.recompute = Recompute::kFull;
  EXPECT_EQ(layer_activation_bytes(gpt3(), gpt3_training(), p, false).raw(),
            static_cast<std::int64_t>(2 * s * b * h / t));
}

// The done-when case: GPT-3 175B, tp 8, pp 8, micro-batch 1, seq 2048, selective recompute with
// SP, 1F1B. The first stage holds p = 8 micro-batches of L/p = 12 layers, so its layer activations
// are Korthikanti's s·b·h·L·34/t.
TEST(Memory, Gpt3FirstStageActivationsAndBreakdown) {
  auto report = estimate_memory(gpt3(), gpt3_training(), gpt3_parallel(),
                                *builtin_catalog().find_gpu("A100-SXM4-80GB"));
  ASSERT_TRUE(report) << report.status().message();
  ASSERT_EQ(report->stages.size(), 8u);
  const StageMemory& first = report->stages[0];
  const double L = 96;
  EXPECT_EQ(first.layer_activations.raw(), static_cast<std::int64_t>(s * b * h * L * 34 / t));
  EXPECT_EQ(first.layers_in_flight, 96);
  EXPECT_EQ(first.microbatches_in_flight, 8);
  // Korthikanti §4.3: the embedding dropout mask, s·b·h/t bytes per micro-batch in flight.
  EXPECT_EQ(first.extra_activations.raw(), static_cast<std::int64_t>(s * b * h / t * 8));
  // The last stage holds one micro-batch of 12 layers plus the LM head's inputs and fp32 logits.
  const StageMemory& last = report->stages[7];
  EXPECT_EQ(last.layer_activations.raw(), static_cast<std::int64_t>(s * b * h * 12 * 34 / t));
  EXPECT_EQ(last.extra_activations.raw(),
            static_cast<std::int64_t>(2 * 2 * s * b * h / t + 4 * s * b * 51200 / t));
  for (const StageMemory& st : report->stages) {
    EXPECT_EQ(st.activations, st.layer_activations + st.extra_activations);
    EXPECT_EQ(st.total(), st.weights + st.gradients + st.optimizer + st.activations +
                              st.comm_buffers + st.overhead);
    // Mixed-precision Adam without ZeRO: 2 + 2 + 12 bytes per parameter.
    EXPECT_EQ(st.weights.raw(), 2 * st.params);
    EXPECT_EQ(st.gradients.raw(), 2 * st.params);
    EXPECT_EQ(st.optimizer.raw(), 12 * st.params);
  }
  EXPECT_EQ(report->peak_stage, 0);
  EXPECT_EQ(report->peak, first.total());
  EXPECT_TRUE(report->fits);
  auto small = estimate_memory(gpt3(), gpt3_training(), gpt3_parallel(),
                               *builtin_catalog().find_gpu("A100-SXM4-40GB"));
  ASSERT_TRUE(small);
  EXPECT_FALSE(small->fits);
}

// Parameters per rank of a middle stage: 12 layers of 12·h²/t + biases and norms.
TEST(Memory, ParametersPerStage) {
  auto part = ModelPartition::create(gpt3(), gpt3_parallel());
  ASSERT_TRUE(part);
  const std::int64_t H = 12288;
  const std::int64_t per_layer = H * 3 * H / 8 + 3 * H / 8    // QKV + bias
                                 + H * H / 8 + H              // out + replicated bias
                                 + H * 4 * H / 8 + 4 * H / 8  // up + bias
                                 + 4 * H * H / 8 + H          // down + replicated bias
                                 + 2 * 2 * H;                 // two layer norms
  EXPECT_EQ(part->rank_params(3).total(), 12 * per_layer);
  EXPECT_EQ(part->stage_of_layer(40), 3);  // layers 36..47
  EXPECT_EQ(part->chunk_of_layer(40), 0);
  EXPECT_EQ(part->rank_params(3).embedding, 0);
  // First stage: word embedding shard + learned positions; last: final norm + tied LM head copy.
  EXPECT_EQ(part->rank_params(0).embedding, 51200 / 8 * H + 2048 * H);
  EXPECT_EQ(part->rank_params(7).embedding, 2 * H + 51200 / 8 * H);
  // Summed over stages and tp ranks (replicated parts once), a replica holds the whole model
  // plus the last stage's tied copy of the word embedding.
  std::int64_t sum = 0;
  for (int st = 0; st < 8; ++st) {
    const RankParams rp = part->rank_params(st);
    sum += (rp.total() - rp.tp_replicated) * 8 + rp.tp_replicated;
  }
  EXPECT_EQ(sum, gpt3().total_params() + 51200 * H);
}

TEST(Memory, ZeroStagesShardModelStates) {
  const GpuSpec& gpu = *builtin_catalog().find_gpu("H100-SXM5-80GB");
  std::array<StageMemory, 4> middle;
  for (int zero = 0; zero <= 3; ++zero) {
    ParallelConfig p = gpt3_parallel();
    p.zero_stage = zero;
    auto r = estimate_memory(gpt3(), gpt3_training(), p, gpu);
    ASSERT_TRUE(r) << r.status().message();
    middle[static_cast<std::size_t>(zero)] = r->stages[3];
  }
  const std::int64_t P = middle[0].params;
  const std::int64_t shard = (P + 15) / 16;  // dp 16
  EXPECT_EQ(middle[1].optimizer.raw(), 12 * shard);
  EXPECT_EQ(middle[1].gradients.raw(), 2 * P);
  EXPECT_EQ(middle[2].gradients.raw(), 2 * shard);
  EXPECT_EQ(middle[2].weights.raw(), 2 * P);
  // ZeRO-3: the weight shard plus two gathered layers (in use and prefetched).
  const std::int64_t layer = P / 12;
  EXPECT_EQ(middle[3].weights.raw(), 2 * shard + 2 * 2 * layer);
  EXPECT_LT(middle[3].total(), middle[2].total());
  EXPECT_LT(middle[2].total(), middle[1].total());
  EXPECT_LT(middle[1].total(), middle[0].total());
}

TEST(Memory, SchedulesSetTheMicroBatchesInFlight) {
  const GpuSpec& gpu = *builtin_catalog().find_gpu("H100-SXM5-80GB");
  ParallelConfig p = gpt3_parallel();
  p.schedule = Schedule::kInterleaved;
  p.virtual_stages = 2;
  auto il = estimate_memory(gpt3(), gpt3_training(), p, gpu);
  ASSERT_TRUE(il) << il.status().message();
  // Korthikanti §4.2.3: interleaving multiplies the first stage's activations by 1 + (p−1)/(p·v).
  EXPECT_DOUBLE_EQ(il->stages[0].layers_in_flight, 96 * (1 + 7.0 / 16));
  p.schedule = Schedule::kGpipe;
  p.virtual_stages = 1;
  TrainingSpec small_batch = gpt3_training();
  small_batch.global_batch_size = 16 * 32;  // 32 micro-batches
  auto gpipe = estimate_memory(gpt3(), small_batch, p, gpu);
  ASSERT_TRUE(gpipe);
  for (const StageMemory& st : gpipe->stages)
    EXPECT_EQ(st.layers_in_flight, 32 * 12);
}

// DualPipeV: every stage holds 2p + 1 chunks of L / 2p layers at its peak, and stage 0 holds the
// embedding and the LM head (its V's two ends), the last stage neither.
TEST(Memory, DualPipeVHoldsTwoPPlusOneChunksAndBothEndsOnStageZero) {
  const GpuSpec& gpu = *builtin_catalog().find_gpu("H100-SXM5-80GB");
  ParallelConfig p = gpt3_parallel();
  p.schedule = Schedule::kDualPipeV;
  p.virtual_stages = 2;
  auto v = estimate_memory(gpt3(), gpt3_training(), p, gpu);
  ASSERT_TRUE(v) << v.status().message();
  for (const StageMemory& st : v->stages)
    EXPECT_DOUBLE_EQ(st.layers_in_flight, 17 * 96 / 16.0) << "stage " << st.stage;
  p.schedule = Schedule::k1F1B;
  p.virtual_stages = 1;
  auto ofob = estimate_memory(gpt3(), gpt3_training(), p, gpu);
  ASSERT_TRUE(ofob);
  // 1F1B: the embedding on stage 0, the final norm and the LM head (or its tied copy) on stage 7.
  EXPECT_GT(ofob->stages[7].embedding_params, 0);
  EXPECT_EQ(v->stages[7].embedding_params, 0);
  EXPECT_GT(v->stages[0].embedding_params, ofob->stages[0].embedding_params);
  EXPECT_EQ(v->stages[3].params, ofob->stages[3].params);
}

TEST(Memory, OffloadAndParameterServersMoveOptimizerState) {
  const GpuSpec& gpu = *builtin_catalog().find_gpu("H100-SXM5-80GB");
  ParallelConfig p = gpt3_parallel();
  p.zero_stage = 1;
  p.offload = Offload::kOptimizer;
  auto off = estimate_memory(gpt3(), gpt3_training(), p, gpu);
  ASSERT_TRUE(off);
  EXPECT_EQ(off->stages[3].optimizer.raw(), 0);
  EXPECT_EQ(off->stages[3].host.raw(), 12 * ((off->stages[3].params + 15) / 16));
  p.zero_stage = 0;
  p.offload = Offload::kNone;
  p.dp_sync = DpSync::kParameterServer;
  p.param_servers = 4;
  auto ps = estimate_memory(gpt3(), gpt3_training(), p, gpu);
  ASSERT_TRUE(ps);
  EXPECT_EQ(ps->stages[3].optimizer.raw(), 0);
}

TEST(Memory, ImpossibleConfigurationsAreErrors) {
  ParallelConfig p = gpt3_parallel();
  p.tp = 5;
  auto r = estimate_memory(gpt3(), gpt3_training(), p, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("/parallel/tp"), std::string::npos);
}

// The estimator's peak (stage, bytes, fits) against estimate_memory()'s for `p`; false when `p` is
// not a valid config (nothing checked).
bool estimator_matches(MemoryEstimator& estimator, const ModelSpec& model,
                       const TrainingSpec& training, const ParallelConfig& p, const GpuSpec& gpu,
                       const std::string& what) {
  Diagnostics diag("grid");
  check_parallel(model, training, p, diag);
  if (!diag.empty()) return false;
  auto report = estimate_memory(model, training, p, gpu);
  EXPECT_TRUE(report) << what << ": " << report.status().message();
  auto peak = estimator.peak(p);
  EXPECT_TRUE(peak) << what << ": " << peak.status().message();
  if (!report || !peak) return true;
  EXPECT_EQ(peak->stage, report->peak_stage) << what;
  EXPECT_NEAR(static_cast<double>(peak->bytes.raw()), static_cast<double>(report->peak.raw()), 1.0)
      << what;
  EXPECT_EQ(peak->fits, report->fits) << what;
  return true;
}

// The sweep's cached estimator equals estimate_memory() on every valid config of a grid (all
// schedules, virtual stages, recompute, ZeRO, sequence parallelism; micro-batch counts past the
// in-flight saturation point), on one estimator reused across them.
TEST(Memory, EstimatorEqualsEstimateMemory) {
  const ModelSpec& model = *builtin_catalog().find_model("llama3-8b");
  const GpuSpec& gpu = *builtin_catalog().find_gpu("H100");
  TrainingSpec training;
  training.global_batch_size = 64;
  training.seq_length = 4096;
  MemoryEstimator estimator(model, training, gpu);
  int checked = 0;
  for (int tp : {1, 2, 8})
    for (int pp : {1, 2, 4})
      for (int dp : {1, 4})
        for (std::int64_t mbs : {1, 2})
          for (Schedule sched : {Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved,
                                 Schedule::kZeroBubbleH1, Schedule::kDualPipeV})
            for (int v : {1, 2, 4})
              for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
                for (int zero : {0, 1, 3})
                  for (bool sp : {false, true}) {
                    ParallelConfig p;
                    p.tp = tp;
                    p.pp = pp;
                    p.dp = dp;
                    p.micro_batch_size = mbs;
                    p.schedule = sched;
                    p.virtual_stages = v;
                    p.recompute = rc;
                    p.zero_stage = zero;
                    p.sequence_parallel = sp;
                    if (estimator_matches(estimator, model, training, p, gpu, short_label(p))) {
                      ++checked;
                    }
                  }
  EXPECT_GT(checked, 500);
}

// The interleaved schedule with a number of micro-batches that is not a multiple of pp: its last
// group holds p + m mod p micro-batches and lengthens every stage's warm-up by (v − 1)(m mod p)
// chunks, however many micro-batches come before it. The estimator caps m for its in-flight
// profile and must keep m mod p (Llama 3 70B, pp 5, 16 chunks of one layer: 128 micro-batches
// hold more in flight than 20 do).
TEST(Memory, EstimatorKeepsTheInterleavedLastGroup) {
  const ModelSpec& model = *builtin_catalog().find_model("llama3-70b");
  const GpuSpec& gpu = *builtin_catalog().find_gpu("GB200");
  int checked = 0;
  for (int pp : {2, 3, 5}) {
    for (std::int64_t m : {7, 13, 22, 61, 128}) {
      TrainingSpec training;
      training.global_batch_size = 8 * m;
      training.seq_length = 8192;
      MemoryEstimator estimator(model, training, gpu);
      for (int v : {2, 4, 8, 16}) {
        ParallelConfig p;
        p.pp = pp;
        p.dp = 8;
        p.schedule = Schedule::kInterleaved;
        p.virtual_stages = v;
        if (estimator_matches(estimator, model, training, p, gpu,
                              short_label(p) + " m " + std::to_string(m))) {
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 20);
}

// Expert weights: experts / ep per rank, each split over etp; ZeRO shards their gradients,
// optimizer states and weights over expert data parallelism (tp·cp·dp / (etp·ep)), the dense
// weights over dp·cp.
TEST(Memory, ExpertStatesShardByEpEtpAndExpertDataParallel) {
  ModelSpec m;
  m.name = "moe";
  m.num_layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 16;
  m.ffn_hidden = 256;
  m.vocab = 128;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kRmsNorm;
  m.position_embedding = PositionEmbedding::kRope;
  m.moe = MoeSpec{16, 2, 128, 1.0, 1};
  TrainingSpec train;
  train.global_batch_size = 16;
  train.seq_length = 32;
  const GpuSpec& gpu = *builtin_catalog().find_gpu("H100-SXM5-80GB");
  for (int etp : {1, 2}) {
    for (int zero = 0; zero <= 3; ++zero) {
      ParallelConfig p;
      p.tp = 2;
      p.dp = 8;
      p.ep = etp == 1 ? 8 : 4;  // etp·ep = 8 divides tp·dp = 16: expert data parallel 2
      p.etp = etp;
      p.sequence_parallel = true;
      p.zero_stage = zero;
      auto r = estimate_memory(m, train, p, gpu);
      ASSERT_TRUE(r) << r.status().message();
      const StageMemory& sm = r->stages[0];
      const std::int64_t local = 16 / p.ep;
      const std::int64_t expert = 2 * local * (2 * 64 * 128 / etp);  // two layers, up + down
      auto part = ModelPartition::create(m, p);
      ASSERT_TRUE(part);
      EXPECT_EQ(part->rank_params(0).expert, expert) << etp;
      const std::int64_t dense = part->rank_params(0).dense;
      const std::int64_t edp = 16 / (etp * p.ep);
      EXPECT_EQ(p.expert_dp(), edp);
      const std::int64_t shard = (dense + 7) / 8 + (expert + edp - 1) / edp;
      EXPECT_EQ(sm.optimizer.raw(), 12 * (zero >= 1 ? shard : dense + expert)) << etp << zero;
      EXPECT_EQ(sm.gradients.raw(), 2 * (zero >= 2 ? shard : dense + expert)) << etp << zero;
      if (zero < 3) {
        EXPECT_EQ(sm.weights.raw(), 2 * (dense + expert)) << etp << zero;
      }
    }
  }
}

// MoE activations follow the busiest rank's routing: its dispatched tokens (after the etp gather)
// and its experts' intermediates, here 2 layers' worth with a 4-expert rank whose hottest expert
// holds twice the mean.
TEST(Memory, MoeActivationsFollowTheBusiestRank) {
  ModelSpec m;
  m.name = "moe";
  m.num_layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 16;
  m.ffn_hidden = 256;
  m.vocab = 128;
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.position_embedding = PositionEmbedding::kRope;
  m.moe = MoeSpec{8, 2, 128, 0.0, 1};
  TrainingSpec train;
  train.global_batch_size = 4;
  train.seq_length = 32;
  ParallelConfig p;
  p.dp = 2;
  p.ep = 2;
  const Bytes balanced = layer_activation_bytes(m, train, p, true);
  p.moe_imbalance = 2.0;
  const Bytes skewed = layer_activation_bytes(m, train, p, true);
  // mean 32·2·2/8 = 16 tokens per expert; the busiest rank: 3 experts at 16 and one at 32, 80
  // rows instead of 64, each of 64 (dispatched) + 3 × 128 (gate, up, activation) 2-byte values.
  EXPECT_EQ((skewed - balanced).raw(), 16 * (64 + 3 * 128) * 2);
}

}  // namespace
}  // namespace planner
