#include "planner/core/lowering.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "planner/core/catalog.hpp"
#include "planner/core/flops.hpp"
#include "planner/core/model_partition.hpp"
#include "planner/core/plan.hpp"

namespace planner {
namespace {

// 4 layers, h = 64, 4 heads of 16, ffn 256, vocab 128, no biases: per layer 49,408 parameters
// (norms 2 × 128, QKV 64·192, out 64·64, up and down 64·256).
ModelSpec tiny() {
  ModelSpec m;
  m.name = "tiny";
  m.num_layers = 4;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 16;
  m.ffn_hidden = 256;
  m.vocab = 128;
  m.max_seq_len = 64;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position_embedding = PositionEmbedding::kRope;
  return m;
}

// The tiny model with 4 experts (top 2, expert ffn 128) in every layer.
ModelSpec tiny_moe() {
  ModelSpec m = tiny();
  m.name = "tiny-moe";
  m.moe = MoeSpec{4, 2, 128, 1.0, 1};
  return m;
}

TrainingSpec training(std::int64_t gbs = 8, std::int64_t seq = 32) {
  TrainingSpec t;
  t.global_batch_size = gbs;
  t.seq_length = seq;
  return t;
}

StepProgram lowered(const ModelSpec& m, const TrainingSpec& t, const ParallelConfig& p,
                    const LowerOptions& o = {}) {
  auto prog = lower(m, t, p, o);
  EXPECT_TRUE(prog) << prog.status().message();
  return std::move(prog).value();
}

struct Tally {
  int count = 0;
  std::int64_t bytes = 0;  // of the last op seen
  double flops = 0;
};

// Ops of one rank by (role, phase, kind).
std::map<std::tuple<OpRole, Phase, OpKind>, Tally> tally(const StepProgram& p, int rank) {
  std::map<std::tuple<OpRole, Phase, OpKind>, Tally> out;
  for (const Op& op : p.find(rank)->ops()) {
    const OpDesc& d = p.desc(op);
    Tally& t = out[{op.id.role(), op.id.phase(), d.kind}];
    ++t.count;
    t.bytes = d.comm_bytes.raw();
    t.flops += d.flops.raw();
  }
  return out;
}

Tally get(const std::map<std::tuple<OpRole, Phase, OpKind>, Tally>& t, OpRole r, Phase ph,
          OpKind k) {
  auto it = t.find({r, ph, k});
  return it == t.end() ? Tally{} : it->second;
}

constexpr Phase kF = Phase::kForward;
constexpr Phase kB = Phase::kBackwardInput;
constexpr Phase kW = Phase::kBackwardWeight;
constexpr Phase kS = Phase::kOptimizer;

TEST(OpId, PacksAndPrintsStably) {
  const OpId id = OpId::make(3, 2, Phase::kForward, OpRole::kAttnQkv);
  EXPECT_EQ(id.layer(), 3);
  EXPECT_EQ(id.microbatch(), 2);
  EXPECT_EQ(id.phase(), Phase::kForward);
  EXPECT_EQ(id.role(), OpRole::kAttnQkv);
  EXPECT_EQ(to_string(id), "L3.mb2.fwd.attn_qkv");
  EXPECT_EQ(to_string(OpId::make(OpId::kNone, 63, kW, OpRole::kDpGradReduce, 5)),
            "mb63.wgrad.dp_grad_reduce.5");
  EXPECT_EQ(to_string(OpId::make(OpId::kNone, OpId::kNone, kS, OpRole::kOptimizerStep)),
            "step.optimizer");
  EXPECT_EQ(to_string(OpId::make(OpId::kNone, 17, kW, OpRole::kPsPush, 4)), "w17.wgrad.ps_push.4");
  // The packed value is a pure function of the fields (it is stored in databases).
  EXPECT_EQ(id.raw(), (std::uint64_t{4} << 48) | (std::uint64_t{3} << 28) |
                          (std::uint64_t{static_cast<int>(OpRole::kAttnQkv)} << 16));
  for (const OpId x : {id, OpId::make(OpId::kNone, OpId::kNone, kS, OpRole::kGradNorm),
                       OpId::make(95, 1000, Phase::kRecompute, OpRole::kCpKvSend, 7),
                       OpId::make(OpId::kNone, 1023, kS, OpRole::kPsPull, 65535)}) {
    auto back = parse_op_id(to_string(x));
    ASSERT_TRUE(back) << to_string(x);
    EXPECT_EQ(*back, x);
  }
  EXPECT_FALSE(parse_op_id("L3.mb2.fwd.no_such_role"));
  EXPECT_FALSE(parse_op_id("L3.mb2.attn_qkv"));
  EXPECT_FALSE(parse_op_id("Lx.fwd.attn_qkv"));
  EXPECT_FALSE(parse_op_id("w3.fwd.attn_qkv"));
}

// Tensor parallel without SP (Megatron): two all-reduces per layer forward (after the output
// projection and the down projection) and two backward (after the QKV and up input gradients),
// each of the block activation b·s·h·2 bytes.
TEST(Lowering, TensorParallelOpsAndBytes) {
  ParallelConfig p;
  p.tp = 2;
  const StepProgram prog = lowered(tiny(), training(), p);
  ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
  const auto t = tally(prog, 1);
  const int L = 4, m = 8;
  const std::int64_t act = 1 * 32 * 64 * 2;
  for (OpRole role : {OpRole::kTpReduceAttn, OpRole::kTpReduceMlp}) {
    for (Phase ph : {kF, kB}) {
      EXPECT_EQ(get(t, role, ph, OpKind::kAllReduce).count, L * m);
      EXPECT_EQ(get(t, role, ph, OpKind::kAllReduce).bytes, act);
    }
  }
  EXPECT_EQ(get(t, OpRole::kEmbeddingReduce, kF, OpKind::kAllReduce).count, m);
  EXPECT_EQ(get(t, OpRole::kLmHeadReduce, kB, OpKind::kAllReduce).count, m);
  EXPECT_EQ(get(t, OpRole::kLossMax, kF, OpKind::kAllReduce).bytes, 32 * 4);
  EXPECT_EQ(get(t, OpRole::kLossSum, kF, OpKind::kAllReduce).bytes, 32 * 2 * 4);
  EXPECT_EQ(get(t, OpRole::kDataBroadcast, kF, OpKind::kBroadcast).count, 2 * m);
  // GEMMs: QKV, out, up, down forward; dgrad + wgrad each backward; LM head 1 + 2.
  int gemms = 0;
  for (const auto& [key, v] : t) {
    if (std::get<2>(key) == OpKind::kGemm) gemms += v.count;
  }
  EXPECT_EQ(gemms, L * m * 12 + m * 3);
  // Column-parallel QKV on one rank: T × (3·64/2) × 64.
  const OpDesc* qkv = nullptr;
  for (const Op& op : prog.find(0)->ops()) {
    if (op.id == OpId::make(2, 5, kF, OpRole::kAttnQkv)) qkv = &prog.desc(op);
  }
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->m, 32);
  EXPECT_EQ(qkv->n, 96);
  EXPECT_EQ(qkv->k, 64);
  EXPECT_EQ(qkv->flags, kTransB);
  EXPECT_DOUBLE_EQ(qkv->flops.raw(), 2.0 * 32 * 96 * 64);
  // Every collective is on the tp group {0, 1}.
  for (const Op& op : prog.find(0)->ops()) {
    if (is_collective(prog.desc(op).kind)) {
      EXPECT_EQ(prog.group(op.group).ranks, (std::vector<int>{0, 1}));
    }
  }
}

// The backward's tensor-parallel all-reduce of a layer's input gradient runs beside the layer's
// weight-gradient GEMM (async_tp_allreduce, Megatron-core) or after it (Megatron-LM before 2022,
// whose copy_to_tensor_model_parallel_region reduced after the layer's whole backward).
TEST(Lowering, TensorParallelGradientAllReduceWaitsForTheWeightGradientUnlessAsync) {
  for (bool async : {true, false}) {
    ParallelConfig p;
    p.tp = 2;
    p.async_tp_allreduce = async;
    const StepProgram prog = lowered(tiny(), training(), p);
    ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
    const RankProgram& r = *prog.find(0);
    int reduces = 0;
    for (std::size_t i = 0; i < r.size(); ++i) {
      const OpId id = r.op(i).id;
      if (id.phase() != kB ||
          (id.role() != OpRole::kTpReduceAttn && id.role() != OpRole::kTpReduceMlp)) {
        continue;
      }
      ++reduces;
      // The column-parallel layer whose input gradient this is: QKV or the MLP's up projection.
      const OpRole layer = id.role() == OpRole::kTpReduceAttn ? OpRole::kAttnQkv : OpRole::kMlpUp;
      bool after_dgrad = false, after_wgrad = false;
      for (std::uint32_t d : r.deps(i)) {
        after_dgrad |= r.op(d).id == OpId::make(id.layer(), id.microbatch(), kB, layer);
        after_wgrad |= r.op(d).id == OpId::make(id.layer(), id.microbatch(), kW, layer);
      }
      EXPECT_TRUE(after_dgrad) << to_string(id);
      EXPECT_EQ(after_wgrad, !async) << to_string(id);
    }
    EXPECT_EQ(reduces, 2 * 4 * 8);  // attention and MLP of 4 layers, 8 micro-batches
  }
}

// fp8 training: Transformer Engine quantizes each fp8 linear layer's 16-bit operand before its
// GEMM (the quantization's HBM bytes are the GEMM's aux): the input forward unless the layer's own
// fused norm produced it (QKV, the MLP's first layer), the output gradient backward; nothing for
// the weight gradient, the 16-bit output layer, or 16-bit training. Per element: a 2-byte read
// and two 1-byte copies; current scaling reads once more, MXFP8 adds a scale byte per 32.
TEST(Lowering, Fp8LinearLayersQuantizeTheirActivationOperand) {
  struct Case {
    Precision precision;
    Fp8Recipe recipe;
  };
  for (const Case c :
       {Case{Precision::kFp8, Fp8Recipe::kDelayed}, Case{Precision::kFp8, Fp8Recipe::kCurrent},
        Case{Precision::kFp8, Fp8Recipe::kMxfp8}, Case{Precision::kBf16, Fp8Recipe::kDelayed}}) {
    SCOPED_TRACE(to_string(c.recipe));
    ParallelConfig p;
    p.tp = 2;
    TrainingSpec t = training();
    t.precision = c.precision;
    t.fp8_recipe = c.recipe;
    const StepProgram prog = lowered(tiny(), t, p);
    std::map<std::pair<OpRole, Phase>, std::int64_t> aux;
    for (const Op& op : prog.find(0)->ops()) {
      const OpDesc& d = prog.desc(op);
      if (d.kind == OpKind::kGemm) aux[{op.id.role(), op.id.phase()}] = d.aux;
    }
    const auto bytes = [&](std::int64_t elements) -> std::int64_t {
      if (c.precision != Precision::kFp8) return 0;
      if (c.recipe == Fp8Recipe::kCurrent) return 6 * elements;
      if (c.recipe == Fp8Recipe::kMxfp8) return 4 * elements + 2 * ((elements + 31) / 32);
      return 4 * elements;
    };
    const std::int64_t T = 32;  // tokens of a micro-batch
    EXPECT_EQ((aux[{OpRole::kAttnQkv, kF}]), 0);
    EXPECT_EQ((aux[{OpRole::kMlpUp, kF}]), 0);
    EXPECT_EQ((aux[{OpRole::kAttnOut, kF}]), bytes(T * 64 / 2));
    EXPECT_EQ((aux[{OpRole::kMlpDown, kF}]), bytes(T * 256 / 2));
    EXPECT_EQ((aux[{OpRole::kAttnQkv, kB}]), bytes(T * 3 * 64 / 2));
    EXPECT_EQ((aux[{OpRole::kMlpUp, kB}]), bytes(T * 256 / 2));
    EXPECT_EQ((aux[{OpRole::kAttnOut, kB}]), bytes(T * 64));
    EXPECT_EQ((aux[{OpRole::kMlpDown, kB}]), bytes(T * 64));
    for (OpRole role : {OpRole::kAttnQkv, OpRole::kAttnOut, OpRole::kMlpUp, OpRole::kMlpDown}) {
      EXPECT_EQ((aux[{role, kW}]), 0);
    }
    for (Phase ph : {kF, kB, kW}) {
      EXPECT_EQ((aux[{OpRole::kLmHead, ph}]), 0);
    }
  }
}

// tp_comm_overlap (Transformer Engine's userbuffers): a sequence-parallel all-gather's first
// chunk (slot 0, 1/tp of the bytes) is all its GEMM waits for, the rest (slot 1) runs beside the
// GEMM; a reduce-scatter's first chunks (slot 1) run beside the GEMM that produces it (they wait
// for its input) and only the last chunk (slot 0) waits for the GEMM. The bytes add up to the
// collective's without overlap.
TEST(Lowering, TensorParallelOverlapChunksTheSequenceParallelCollectives) {
  ParallelConfig p;
  p.tp = 4;
  p.sequence_parallel = true;
  p.tp_comm_overlap = true;
  const StepProgram prog = lowered(tiny(), training(8, 32), p);
  ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
  const RankProgram& r = *prog.find(0);
  const std::int64_t full = 32 * 64 * 2, chunk = full / 4;
  auto find = [&](OpId id) {
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (r.op(i).id == id) return i;
    }
    ADD_FAILURE() << to_string(id);
    return std::size_t{0};
  };
  auto depends = [&](std::size_t op, std::size_t on) {
    const auto deps = r.deps(op);
    return std::find(deps.begin(), deps.end(), static_cast<std::uint32_t>(on)) != deps.end();
  };
  const int layer = 1, mb = 3;
  const std::size_t ag0 = find(OpId::make(layer, mb, kF, OpRole::kSpGatherAttn, 0));
  const std::size_t ag1 = find(OpId::make(layer, mb, kF, OpRole::kSpGatherAttn, 1));
  const std::size_t qkv = find(OpId::make(layer, mb, kF, OpRole::kAttnQkv));
  EXPECT_EQ(prog.desc(r.op(ag0)).comm_bytes.raw(), chunk);
  EXPECT_EQ(prog.desc(r.op(ag1)).comm_bytes.raw(), full - chunk);
  EXPECT_TRUE(depends(qkv, ag0));
  EXPECT_FALSE(depends(qkv, ag1));
  EXPECT_TRUE(depends(ag1, ag0));
  const std::size_t core = find(OpId::make(layer, mb, kF, OpRole::kAttnCore));
  const std::size_t out = find(OpId::make(layer, mb, kF, OpRole::kAttnOut));
  const std::size_t rs0 = find(OpId::make(layer, mb, kF, OpRole::kSpScatterAttn, 0));
  const std::size_t rs1 = find(OpId::make(layer, mb, kF, OpRole::kSpScatterAttn, 1));
  EXPECT_EQ(prog.desc(r.op(rs1)).comm_bytes.raw(), full - chunk);
  EXPECT_EQ(prog.desc(r.op(rs0)).comm_bytes.raw(), chunk);
  EXPECT_TRUE(depends(rs1, core));
  EXPECT_FALSE(depends(rs1, out));
  EXPECT_TRUE(depends(rs0, out));
  EXPECT_TRUE(depends(rs0, rs1));
  EXPECT_TRUE(depends(find(OpId::make(layer, mb, kF, OpRole::kAttnResidual)), rs0));
  // The backward's gather of the output gradient before the row-parallel input gradient.
  const std::size_t dg0 = find(OpId::make(layer, mb, kB, OpRole::kSpScatterMlp, 0));
  find(OpId::make(layer, mb, kB, OpRole::kSpScatterMlp, 1));
  EXPECT_TRUE(depends(find(OpId::make(layer, mb, kB, OpRole::kMlpDown)), dg0));
  // Without sequence parallelism there is nothing to overlap: the plan is refused.
  ParallelConfig no_sp = p;
  no_sp.sequence_parallel = false;
  Diagnostics diag;
  check_parallel(tiny(), training(8, 32), no_sp, diag);
  ASSERT_FALSE(diag.empty());
  EXPECT_EQ(diag.items().front().pointer, "/parallel/tp_comm_overlap");
}

// Sequence parallelism: all-gather before and reduce-scatter after each block in forward, their
// transposes in backward, and the input gathered again for the weight gradients.
TEST(Lowering, SequenceParallelOpsAndBytes) {
  ParallelConfig p;
  p.tp = 2;
  p.sequence_parallel = true;
  const StepProgram prog = lowered(tiny(), training(), p);
  ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
  const auto t = tally(prog, 0);
  const int L = 4, m = 8;
  const std::int64_t full = 32 * 64 * 2;  // the gathered activation (nccl-tests size)
  for (OpRole gather : {OpRole::kSpGatherAttn, OpRole::kSpGatherMlp}) {
    EXPECT_EQ(get(t, gather, kF, OpKind::kAllGather).count, L * m);
    EXPECT_EQ(get(t, gather, kB, OpKind::kReduceScatter).count, L * m);
    EXPECT_EQ(get(t, gather, kW, OpKind::kAllGather).count, L * m);
    EXPECT_EQ(get(t, gather, kF, OpKind::kAllGather).bytes, full);
  }
  for (OpRole scatter : {OpRole::kSpScatterAttn, OpRole::kSpScatterMlp}) {
    EXPECT_EQ(get(t, scatter, kF, OpKind::kReduceScatter).count, L * m);
    EXPECT_EQ(get(t, scatter, kB, OpKind::kAllGather).count, L * m);
    EXPECT_EQ(get(t, scatter, kF, OpKind::kReduceScatter).bytes, full);
  }
  EXPECT_EQ(get(t, OpRole::kTpReduceAttn, kF, OpKind::kAllReduce).count, 0);
  // Norms run on the sequence shard.
  for (const Op& op : prog.find(0)->ops()) {
    if (op.id.role() == OpRole::kAttnNorm) {
      EXPECT_EQ(prog.desc(op).m, 16);
    }
  }
  // Norm weights are replicated: their gradients are summed over tp once per step
  // (4 layers × 2 norms + final norm, 128 elements each, 2 bytes).
  EXPECT_EQ(get(t, OpRole::kSpNormGradReduce, kS, OpKind::kAllReduce).bytes, 9 * 128 * 2);
}

// Context parallelism over 2 ranks: per layer and micro-batch one K/V exchange forward, one K/V
// and two dK/dV exchanges backward, each 2·b·kv_heads·(s/cp)·head_dim·2 bytes; attention split
// into cp steps of equal (load-balanced causal) work.
TEST(Lowering, ContextParallelRing) {
  ParallelConfig p;
  p.cp = 2;
  const StepProgram prog = lowered(tiny(), training(), p);
  ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
  const auto t = tally(prog, 0);
  const int L = 4, m = 8;
  const std::int64_t kv = 2 * 1 * 4 * 16 * 16 * 2;
  EXPECT_EQ(get(t, OpRole::kCpKvSend, kF, OpKind::kSend).count, L * m);
  EXPECT_EQ(get(t, OpRole::kCpKvRecv, kF, OpKind::kRecv).count, L * m);
  EXPECT_EQ(get(t, OpRole::kCpKvSend, kB, OpKind::kSend).count, L * m);
  EXPECT_EQ(get(t, OpRole::kCpDkvSend, kB, OpKind::kSend).count, 2 * L * m);
  EXPECT_EQ(get(t, OpRole::kCpDkvRecv, kB, OpKind::kRecv).count, 2 * L * m);
  EXPECT_EQ(get(t, OpRole::kCpKvSend, kF, OpKind::kSend).bytes, kv);
  const Tally attn = get(t, OpRole::kAttnCore, kF, OpKind::kAttention);
  EXPECT_EQ(attn.count, 2 * L * m);
  // Each step: 4·b·heads·16·16·head_dim / 2.
  EXPECT_DOUBLE_EQ(attn.flops, 2.0 * L * m * 4.0 * 4 * 16 * 16 * 16 / 2);
  // Gradients are reduced over dp × cp.
  bool dp_cp = false;
  for (const CommGroup& g : prog.groups())
    dp_cp |= g.axes == "dp-cp" && g.ranks == std::vector<int>{0, 1};
  EXPECT_TRUE(dp_cp);
}

// Expert parallelism: router, all-to-all dispatch and combine over ep (and back in backward),
// expert GEMMs batched over the local experts with capacity_factor·tokens·top_k·ep/experts rows.
TEST(Lowering, ExpertParallelAllToAll) {
  ParallelConfig p;
  p.ep = 2;
  p.dp = 2;
  const StepProgram prog = lowered(tiny_moe(), training(), p);
  ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
  const auto t = tally(prog, 0);
  const int L = 4, m = 4;
  // 32 tokens × top 2 = 64 routed tokens of 64 × 2 bytes leave each rank.
  for (OpRole r : {OpRole::kEpDispatch, OpRole::kEpCombine}) {
    for (Phase ph : {kF, kB}) {
      EXPECT_EQ(get(t, r, ph, OpKind::kAllToAll).count, L * m);
      EXPECT_EQ(get(t, r, ph, OpKind::kAllToAll).bytes, 64 * 64 * 2);
    }
  }
  for (const Op& op : prog.find(0)->ops()) {
    if (op.id == OpId::make(0, 0, kF, OpRole::kExpertUp)) {
      const OpDesc& d = prog.desc(op);
      EXPECT_EQ(d.batch, 2);  // 4 experts / ep 2
      EXPECT_EQ(d.m, 32);     // 1.0 · 32 tokens · 2 · 2 / 4
      EXPECT_EQ(d.n, 128);
      EXPECT_EQ(d.k, 64);
    }
  }
  // Expert weights reduce over expert data parallel (dp·cp/ep = 1 rank: nothing to do); the dense
  // weights, one bucket, over dp.
  EXPECT_EQ(get(t, OpRole::kDpGradReduce, kW, OpKind::kAllReduce).count, 1);
  EXPECT_EQ(get(t, OpRole::kRouter, kF, OpKind::kGemm).count, L * m);
  // Capacity-factor routing pads every expert to a fixed size: no token counts for the host.
  EXPECT_EQ(get(t, OpRole::kMoeTokenCounts, kF, OpKind::kDeviceToHost).count, 0);
}

// Dropless routing: the tokens per expert (one int64 per expert) go to the host before each
// forward (and recomputed forward) dispatch or, without ep, before the grouped GEMMs of several
// local experts; the backward pass reuses them. With one expert and no ep nothing needs them.
TEST(Lowering, DroplessRoutingReadsTheTokenCountsOnTheHost) {
  ModelSpec model = tiny_moe();
  model.moe->capacity_factor = 0.0;
  ParallelConfig p;
  p.ep = 2;
  p.dp = 2;
  p.recompute = Recompute::kFull;
  const StepProgram prog = lowered(model, training(), p);
  ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
  const auto t = tally(prog, 0);
  const int L = 4, m = 4;
  for (Phase ph : {kF, Phase::kRecompute}) {
    EXPECT_EQ(get(t, OpRole::kMoeTokenCounts, ph, OpKind::kDeviceToHost).count, L * m);
    EXPECT_EQ(get(t, OpRole::kMoeTokenCounts, ph, OpKind::kDeviceToHost).bytes, 4 * 8);
  }
  EXPECT_EQ(get(t, OpRole::kMoeTokenCounts, kB, OpKind::kDeviceToHost).count, 0);
  // The counts follow the router's top-k on their own stream; the dispatch does not wait for them
  // on the GPU (the host does).
  const RankProgram& r = *prog.find(0);
  bool found = false;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r.op(i).id != OpId::make(0, 0, kF, OpRole::kMoeTokenCounts)) continue;
    found = true;
    EXPECT_EQ(prog.desc(r.op(i)).stream, Stream::kDeviceToHost);
    ASSERT_EQ(r.deps(i).size(), 1u);
    EXPECT_EQ(r.op(r.deps(i)[0]).id.role(), OpRole::kRouterTopk);
    EXPECT_EQ(r.op(i + 1).id.role(), OpRole::kEpDispatch);
  }
  EXPECT_TRUE(found);
  p.ep = 1;  // no dispatch, but the grouped GEMMs of the two local experts need their rows
  model.moe->num_experts = 2;
  EXPECT_EQ(get(tally(lowered(model, training(), p), 0), OpRole::kMoeTokenCounts, kF,
                OpKind::kDeviceToHost)
                .count,
            L * m);
  model.moe->num_experts = 1;  // one expert and no dispatch: nothing to size
  model.moe->top_k = 1;
  EXPECT_EQ(get(tally(lowered(model, training(), p), 0), OpRole::kMoeTokenCounts, kF,
                OpKind::kDeviceToHost)
                .count,
            0);
}

// Pipeline parallelism: stage 0 sends an activation and receives a gradient per micro-batch (and
// per chunk with interleaving), b·s·h·2 bytes each, for every schedule.
TEST(Lowering, PipelineSendsAndReceivesPerSchedule) {
  for (Schedule s :
       {Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved, Schedule::kZeroBubbleH1}) {
    ParallelConfig p;
    p.pp = 2;
    p.schedule = s;
    p.virtual_stages = s == Schedule::kInterleaved ? 2 : 1;
    const StepProgram prog = lowered(tiny(), training(), p);
    ASSERT_TRUE(check_program(prog).is_ok())
        << to_string(s) << ": " << check_program(prog).message();
    const int m = 8;
    const int v = p.virtual_stages;
    const auto t0 = tally(prog, 0);
    const auto t1 = tally(prog, 1);
    // Virtual stages 0..2v−1 alternate between the two ranks; every boundary carries m messages.
    EXPECT_EQ(get(t0, OpRole::kPpSendActivation, kF, OpKind::kSend).count, v * m) << to_string(s);
    EXPECT_EQ(get(t1, OpRole::kPpRecvActivation, kF, OpKind::kRecv).count, v * m);
    EXPECT_EQ(get(t0, OpRole::kPpRecvActivation, kF, OpKind::kRecv).count, (v - 1) * m);
    EXPECT_EQ(get(t0, OpRole::kPpRecvGrad, kB, OpKind::kRecv).count, v * m);
    EXPECT_EQ(get(t0, OpRole::kPpSendActivation, kF, OpKind::kSend).bytes, 32 * 64 * 2);
    // Embedding on stage 0, LM head on stage 1.
    EXPECT_EQ(get(t0, OpRole::kEmbedding, kF, OpKind::kEmbedding).count, m);
    EXPECT_EQ(get(t1, OpRole::kLmHead, kF, OpKind::kGemm).count, m);
    // Layers of each chunk run on the rank ModelPartition places them on.
    auto part = ModelPartition::create(tiny(), p);
    ASSERT_TRUE(part);
    for (const RankProgram& r : prog.ranks()) {
      for (const Op& op : r.ops()) {
        if (op.id.layer() != OpId::kNone && prog.desc(op).kind == OpKind::kGemm) {
          EXPECT_EQ(part->stage_of_layer(op.id.layer()), r.stage());
        }
      }
    }
    EXPECT_EQ(get(t0, OpRole::kLmHead, kF, OpKind::kGemm).count, 0);
    if (s == Schedule::kZeroBubbleH1) {
      // Weight gradients run in their own pass: on stage 1 some come after later input gradients.
      const RankProgram& r = *prog.find(1);
      std::size_t last_b0 = 0, first_w0 = r.size();
      for (std::size_t i = 0; i < r.size(); ++i) {
        const OpId id = r.op(i).id;
        if (id.microbatch() == 0 && id.phase() == kB) last_b0 = i;
        if (id.microbatch() == 0 && id.phase() == kW && first_w0 == r.size()) first_w0 = i;
      }
      EXPECT_GT(first_w0, last_b0);
    }
  }
}

// Data parallelism with one bucket per tensor (bucket_elements = 1): 27 tensors per rank
// (embedding, 4 × 6 layer tensors, final norm, LM head).
TEST(Lowering, DataParallelZeroStages) {
  const int m = 4;  // 8 sequences over dp 2
  const int tensors = 27;
  const std::int64_t qkv_bytes = 64 * 192 * 2;
  const std::int64_t layer_bytes = 49408 * 2;
  LowerOptions o;
  o.bucket_elements = 1;
  for (int zero = 0; zero <= 3; ++zero) {
    ParallelConfig p;
    p.dp = 2;
    p.zero_stage = zero;
    const StepProgram prog = lowered(tiny(), training(), p, o);
    ASSERT_TRUE(check_program(prog).is_ok())
        << "zero " << zero << ": " << check_program(prog).message();
    const auto t = tally(prog, 0);
    const Tally ar = get(t, OpRole::kDpGradReduce, kW, OpKind::kAllReduce);
    const Tally rs = get(t, OpRole::kDpGradReduce, kW, OpKind::kReduceScatter);
    const Tally ag_step = get(t, OpRole::kDpParamGather, kS, OpKind::kAllGather);
    switch (zero) {
      case 0:
        EXPECT_EQ(ar.count, tensors);
        EXPECT_EQ(rs.count, 0);
        EXPECT_EQ(ag_step.count, 0);
        break;
      case 1:
        EXPECT_EQ(rs.count, tensors);
        EXPECT_EQ(ag_step.count, tensors);
        break;
      case 2:
        EXPECT_EQ(rs.count, tensors * m);  // gradients are sharded: reduced every micro-batch
        EXPECT_EQ(ag_step.count, tensors);
        break;
      case 3:
        // Per layer and micro-batch: gather forward and backward, reduce-scatter the gradients;
        // the embedding and the LM head (with the final norm) likewise, except that the
        // embedding's backward (a scatter-add) needs no weights.
        EXPECT_EQ(get(t, OpRole::kDpParamGather, kF, OpKind::kAllGather).count, (4 + 2) * m);
        EXPECT_EQ(get(t, OpRole::kDpParamGather, kB, OpKind::kAllGather).count, (4 + 1) * m);
        EXPECT_EQ(rs.count, (4 + 2) * m);
        break;
    }
    // Bytes: the QKV bucket (zero 0-2) or one layer's weights (zero 3).
    bool found = false;
    for (const Op& op : prog.find(0)->ops()) {
      const OpDesc& d = prog.desc(op);
      if (zero < 3 && op.id.role() == OpRole::kDpGradReduce && d.comm_bytes.raw() == qkv_bytes)
        found = true;
      if (zero == 3 && op.id == OpId::make(1, 0, kF, OpRole::kDpParamGather)) {
        EXPECT_EQ(d.comm_bytes.raw(), layer_bytes);
        found = true;
      }
    }
    EXPECT_TRUE(found) << "zero " << zero;
    // The optimizer updates the rank's shard: 4 layers × 49,408 + embedding 8,192 + final norm 128
    // + LM head 8,192 parameters, halved from ZeRO-1 on.
    std::int64_t params = 0;
    for (const Op& op : prog.find(0)->ops()) {
      if (op.id.role() == OpRole::kOptimizerStep) params = prog.desc(op).n;
    }
    const std::int64_t total = 4 * 49408 + 128 * 64 + 128 + 128 * 64;
    EXPECT_EQ(params, zero == 0 ? total : total / 2) << "zero " << zero;
  }
}

// Megatron's overlap flags: with overlap_grad_reduce a bucket is reduced as soon as its last
// micro-batch gradients exist (inside the backward); with overlap_param_gather the updated
// parameters are gathered at the start of the step and each layer's first forward waits for them.
TEST(Lowering, GradReduceAndParamGatherPlacement) {
  LowerOptions o;
  o.bucket_elements = 1;
  for (bool overlap : {true, false}) {
    ParallelConfig p;
    p.dp = 2;
    p.zero_stage = 1;
    p.overlap_grad_reduce = overlap;
    p.overlap_param_gather = overlap;
    const StepProgram prog = lowered(tiny(), training(), p, o);
    ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
    const RankProgram& r = *prog.find(0);
    std::size_t first_reduce = r.size(), last_backward = 0, first_forward = r.size();
    std::size_t optimizer = 0, first_gather = r.size(), last_gather = 0;
    for (std::size_t i = 0; i < r.size(); ++i) {
      const OpId id = r.op(i).id;
      const bool compute = is_compute(prog.desc(r.op(i)).kind);
      if (id.role() == OpRole::kDpGradReduce) first_reduce = std::min(first_reduce, i);
      if (compute && (id.phase() == kB || id.phase() == kW)) last_backward = i;
      if (compute && id.phase() == kF) first_forward = std::min(first_forward, i);
      if (id.role() == OpRole::kOptimizerStep) optimizer = i;
      if (id.role() == OpRole::kDpParamGather) {
        first_gather = std::min(first_gather, i);
        last_gather = i;
      }
    }
    if (overlap) {
      EXPECT_LT(first_reduce, last_backward);
      EXPECT_LT(last_gather, first_forward);
      // The first layer's first forward op waits for the bucket holding its norm weights.
      for (std::size_t i = 0; i < r.size(); ++i) {
        if (r.op(i).id == OpId::make(0, 0, kF, OpRole::kAttnNorm)) {
          bool waits = false;
          for (std::uint32_t d : r.deps(i))
            waits |= r.op(d).id.role() == OpRole::kDpParamGather;
          EXPECT_TRUE(waits);
        }
      }
    } else {
      EXPECT_GT(first_reduce, last_backward);
      EXPECT_GT(first_gather, optimizer);
      // Every reduction waits for the end of the backward pass, not only for its own gradients.
      for (std::size_t i = 0; i < r.size(); ++i) {
        if (r.op(i).id.role() != OpRole::kDpGradReduce) continue;
        bool after_backward = false;
        for (std::uint32_t d : r.deps(i))
          after_backward |= d >= last_backward;
        EXPECT_TRUE(after_backward) << to_string(r.op(i).id);
      }
    }
  }
}

TEST(Lowering, MegatronBucketsByDefault) {
  EXPECT_EQ(default_bucket_elements(16), 40'000'000);
  EXPECT_EQ(default_bucket_elements(128), 128'000'000);
  // A GPT-3 layer on tp 8 holds ~226 M parameters per rank: every big weight fills its own bucket.
  ParallelConfig p;
  p.tp = 8;
  p.pp = 8;
  p.dp = 2;
  p.sequence_parallel = true;
  LowerOptions o;
  o.ranks = {0};
  const StepProgram prog =
      lowered(*builtin_catalog().find_model("gpt3-175b"), training(16, 2048), p, o);
  int buckets = 0;
  for (const Op& op : prog.find(0)->ops()) {
    if (op.id.role() == OpRole::kDpGradReduce) {
      ++buckets;
      EXPECT_GE(prog.desc(op).comm_bytes.raw(), 40'000'000 * 2);
    }
  }
  EXPECT_GT(buckets, 12);
}

// Summed over every rank, the GEMM and attention FLOPs of the non-recompute ops are the model
// FLOPs of the step, and with recompute ops the hardware FLOPs.
TEST(Lowering, FlopsAddUpToTheStep) {
  struct Case {
    ModelSpec model;
    ParallelConfig p;
  };
  std::vector<Case> cases;
  ParallelConfig p;
  cases.push_back({tiny(), p});
  p.tp = 2;
  p.sequence_parallel = true;
  p.pp = 2;
  p.recompute = Recompute::kSelective;
  cases.push_back({tiny(), p});
  p.cp = 2;
  p.recompute = Recompute::kFull;
  p.schedule = Schedule::kInterleaved;
  p.virtual_stages = 2;
  cases.push_back({tiny(), p});
  ParallelConfig q;
  q.tp = 2;
  q.sequence_parallel = true;
  q.dp = 2;
  q.ep = 2;
  cases.push_back({tiny_moe(), q});
  for (const Case& c : cases) {
    const TrainingSpec t = training();
    const StepProgram prog = lowered(c.model, t, c.p);
    ASSERT_TRUE(check_program(prog).is_ok())
        << short_label(c.p) << ": " << check_program(prog).message();
    double model = 0, hardware = 0;
    for (const RankProgram& r : prog.ranks()) {
      for (const Op& op : r.ops()) {
        const double f = prog.desc(op).flops.raw();
        hardware += f;
        if (op.id.phase() != Phase::kRecompute) model += f;
      }
    }
    EXPECT_NEAR(model / model_flops_per_step(c.model, t).raw(), 1.0, 1e-12) << short_label(c.p);
    EXPECT_NEAR(hardware / hardware_flops_per_step(c.model, t, c.p.recompute).raw(), 1.0, 1e-12)
        << short_label(c.p);
  }
}

TEST(Lowering, EveryAxisTogetherPassesTheChecker) {
  const Catalog& cat = builtin_catalog();
  struct Case {
    std::string model;
    ParallelConfig p;
    std::int64_t gbs;
    std::int64_t seq;
  };
  std::vector<Case> cases;
  ParallelConfig p;
  p.tp = 2;
  p.sequence_parallel = true;
  p.pp = 2;
  p.dp = 2;
  p.cp = 2;
  for (int zero = 0; zero <= 3; ++zero) {
    p.zero_stage = zero;
    for (Schedule s : {Schedule::kGpipe, Schedule::k1F1B, Schedule::kZeroBubbleH1}) {
      p.schedule = s;
      cases.push_back({"gpt-tiny", p, 8, 64});
    }
  }
  p.zero_stage = 1;
  p.schedule = Schedule::kInterleaved;
  p.virtual_stages = 2;
  p.recompute = Recompute::kFull;
  cases.push_back({"gpt-tiny", p, 16, 64});
  ParallelConfig moe;
  moe.tp = 2;
  moe.sequence_parallel = true;
  moe.pp = 2;
  moe.dp = 2;
  moe.ep = 2;
  moe.zero_stage = 1;
  moe.schedule = Schedule::kZeroBubbleH1;
  cases.push_back({"mixtral-8x7b", moe, 4, 128});
  ParallelConfig ps;
  ps.dp = 4;
  ps.pp = 2;
  ps.dp_sync = DpSync::kParameterServer;
  ps.param_servers = 2;
  cases.push_back({"gpt-tiny", ps, 8, 64});
  ParallelConfig off;
  off.dp = 2;
  off.pp = 2;
  off.zero_stage = 3;
  off.offload = Offload::kOptimizerAndParams;
  cases.push_back({"gpt-tiny", off, 8, 64});
  off.zero_stage = 2;
  off.offload = Offload::kOptimizer;
  cases.push_back({"gpt-tiny", off, 8, 64});
  for (const Case& c : cases) {
    TrainingSpec t = training(c.gbs, c.seq);
    const StepProgram prog = lowered(*cat.find_model(c.model), t, c.p);
    ASSERT_TRUE(prog.complete());
    EXPECT_TRUE(check_program(prog).is_ok())
        << c.model << " " << short_label(c.p) << ": " << check_program(prog).message();
  }
}

TEST(Lowering, ParameterServers) {
  ParallelConfig p;
  p.dp = 4;
  p.dp_sync = DpSync::kParameterServer;
  p.param_servers = 2;
  LowerOptions o;
  o.bucket_elements = 1;
  const StepProgram prog = lowered(tiny(), training(), p, o);
  ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
  EXPECT_EQ(prog.total_ranks(), 6);
  EXPECT_EQ(prog.find(4)->kind(), RankKind::kParameterServer);
  const auto w = tally(prog, 0);
  // 27 buckets, each split over 2 servers: 54 pushes and 54 pulls, no optimizer on the worker.
  EXPECT_EQ(get(w, OpRole::kPsPush, kW, OpKind::kSend).count, 54);
  EXPECT_EQ(get(w, OpRole::kPsPull, kS, OpKind::kRecv).count, 54);
  EXPECT_EQ(get(w, OpRole::kOptimizerStep, kS, OpKind::kOptimizerStep).count, 0);
  const auto s = tally(prog, 5);
  EXPECT_EQ(get(s, OpRole::kPsPush, kW, OpKind::kRecv).count, 27 * 4);
  EXPECT_EQ(get(s, OpRole::kPsPull, kS, OpKind::kSend).count, 27 * 4);
  EXPECT_EQ(get(s, OpRole::kPsAggregate, kS, OpKind::kOptimizerStep).count, 27);
}

TEST(Lowering, OffloadMovesOptimizerWorkToTheHost) {
  ParallelConfig p;
  p.dp = 2;
  p.zero_stage = 1;
  p.offload = Offload::kOptimizer;
  LowerOptions o;
  o.bucket_elements = 1;
  const StepProgram prog = lowered(tiny(), training(), p, o);
  ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
  const auto t = tally(prog, 0);
  EXPECT_EQ(get(t, OpRole::kOffloadGrad, kW, OpKind::kDeviceToHost).count, 27);
  EXPECT_EQ(get(t, OpRole::kOffloadParam, kS, OpKind::kHostToDevice).count, 27);
  for (const Op& op : prog.find(0)->ops()) {
    if (op.id.role() == OpRole::kOptimizerStep) {
      EXPECT_EQ(prog.desc(op).stream, Stream::kHost);
    }
    if (op.id == OpId::make(OpId::kNone, 3, kW, OpRole::kOffloadGrad, 1)) {
      // A ZeRO-1 shard of the second bucket (final norm, 128 elements) in 16-bit.
      EXPECT_EQ(prog.desc(op).comm_bytes.raw(), 64 * 2);
    }
  }
}

// Lowering a subset gives the ranks exactly the program they have in the full lowering.
TEST(Lowering, SubsetsMatchTheFullProgram) {
  ParallelConfig p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.sequence_parallel = true;
  const StepProgram full = lowered(tiny(), training(), p);
  for (RankSubset subset : {RankSubset::kOnePerStage, RankSubset::kDataParallelReplica}) {
    LowerOptions o;
    o.ranks = representative_ranks(p, subset);
    const StepProgram part = lowered(tiny(), training(), p, o);
    EXPECT_FALSE(part.complete());
    EXPECT_TRUE(check_program(part).is_ok()) << check_program(part).message();
    for (const RankProgram& r : part.ranks()) {
      const RankProgram& f = *full.find(r.rank());
      ASSERT_EQ(r.size(), f.size());
      for (std::size_t i = 0; i < r.size(); ++i) {
        EXPECT_EQ(r.op(i).id, f.op(i).id);
        EXPECT_EQ(part.desc(r.op(i)), full.desc(f.op(i)));
        if (r.op(i).group >= 0) {
          EXPECT_EQ(part.group(r.op(i).group).ranks, full.group(f.op(i).group).ranks);
        }
      }
    }
  }
  EXPECT_EQ(representative_ranks(p, RankSubset::kOnePerStage), (std::vector<int>{0, 4}));
  EXPECT_EQ(representative_ranks(p, RankSubset::kDataParallelReplica),
            (std::vector<int>{0, 1, 4, 5}));
}

TEST(Lowering, ImpossibleCombinationsAreErrorsWithReasons) {
  auto reason = [](const ModelSpec& m, const ParallelConfig& p, const TrainingSpec& t) {
    auto prog = lower(m, t, p);
    EXPECT_FALSE(prog);
    return prog.status().message();
  };
  ParallelConfig p;
  p.tp = 3;
  EXPECT_NE(reason(tiny(), p, training()).find("/parallel/tp: must divide heads (4), got 3"),
            std::string::npos);
  p = {};
  p.pp = 3;
  EXPECT_NE(reason(tiny(), p, training()).find("must divide layers (4)"), std::string::npos);
  p = {};
  p.dp = 3;
  EXPECT_NE(reason(tiny(), p, training()).find("multiple of dp x micro_batch_size"),
            std::string::npos);
  p = {};
  p.ep = 2;
  EXPECT_NE(reason(tiny(), p, training()).find("needs an MoE model"), std::string::npos);
  p = {};
  p.tp = 2;
  p.ep = 2;
  p.dp = 2;
  EXPECT_NE(reason(tiny_moe(), p, training()).find("needs sequence parallelism"),
            std::string::npos);
  p = {};
  p.offload = Offload::kOptimizerAndParams;
  EXPECT_NE(reason(tiny(), p, training()).find("needs zero_stage 3"), std::string::npos);
  p = {};
  LowerOptions o;
  o.ranks = {7};
  auto bad_rank = lower(tiny(), training(), p, o);
  EXPECT_FALSE(bad_rank);
  EXPECT_NE(bad_rank.status().message().find("ranks are 0..0"), std::string::npos);
}

// check_program catches what a broken lowering would produce.
TEST(ProgramCheck, FindsUnmatchedSendsMismatchedCollectivesAndDeadlocks) {
  OpDesc send;
  send.kind = OpKind::kSend;
  send.stream = Stream::kPpSend;
  send.comm_bytes = Bytes(8);
  OpDesc recv = send;
  recv.kind = OpKind::kRecv;
  recv.stream = Stream::kPpRecv;
  OpDesc ar;
  ar.kind = OpKind::kAllReduce;
  ar.stream = Stream::kTpComm;
  ar.comm_bytes = Bytes(8);
  auto id = [](OpRole r, int mb) { return OpId::make(0, mb, Phase::kForward, r); };
  ProgramInfo info;
  info.world_size = 2;
  {
    StepProgram p(info);
    const auto s = p.intern(send);
    p.add_rank(0, RankKind::kWorker, 0).add(Op{id(OpRole::kPpSendActivation, 0), s, -1, 1, 5}, {});
    p.add_rank(1, RankKind::kWorker, 1);
    EXPECT_NE(check_program(p).message().find("1 send(s) and 0 recv(s)"), std::string::npos)
        << check_program(p).message();
  }
  {
    StepProgram p(info);
    const auto a = p.intern(ar);
    const auto g = p.intern_group("tp", {0, 1});
    RankProgram& r0 = p.add_rank(0, RankKind::kWorker, 0);
    r0.add(Op{id(OpRole::kTpReduceAttn, 0), a, g, -1, 0}, {});
    r0.add(Op{id(OpRole::kTpReduceMlp, 0), a, g, -1, 0}, {});
    RankProgram& r1 = p.add_rank(1, RankKind::kWorker, 0);
    r1.add(Op{id(OpRole::kTpReduceMlp, 0), a, g, -1, 0}, {});
    r1.add(Op{id(OpRole::kTpReduceAttn, 0), a, g, -1, 0}, {});
    EXPECT_NE(check_program(p).message().find("issue different collectives"), std::string::npos)
        << check_program(p).message();
  }
  {
    // Each rank sends only after receiving what the other sends only after receiving.
    StepProgram p(info);
    const auto s = p.intern(send);
    const auto r = p.intern(recv);
    for (int rank : {0, 1}) {
      RankProgram& rp = p.add_rank(rank, RankKind::kWorker, 0);
      const auto in = rp.add(Op{id(OpRole::kPpRecvActivation, 0), r, -1, 1 - rank,
                                static_cast<std::uint32_t>(1 - rank)},
                             {});
      rp.add(
          Op{id(OpRole::kPpSendActivation, 0), s, -1, 1 - rank, static_cast<std::uint32_t>(rank)},
          {in});
    }
    const Status st = check_program(p);
    EXPECT_NE(st.message().find("deadlock"), std::string::npos) << st.message();
  }
}

// Expert tensor parallelism below tp (Qwen3-235B's tp 2, etp 1 recipes): the ep group takes the
// tensor-parallel partners, the tokens dispatched are the rank's sequence-parallel shard, and no
// expert-tensor-parallel gather runs; with etp = tp the gather runs on the tp group.
// Reordering renumbers the dependencies and adds the extra ones (given in the old numbering),
// and refuses, changing nothing, an extra dependency on an op that would come later.
TEST(RankProgram, ReorderAddsDependencies) {
  RankProgram rp(0, RankKind::kWorker, 0);
  auto op = [](OpRole r) { return Op{OpId::make(0, 0, Phase::kForward, r), 0, -1, -1, 0}; };
  const auto a = rp.add(op(OpRole::kAttnQkv), {});
  const auto b = rp.add(op(OpRole::kTpReduceAttn), {});
  rp.add(op(OpRole::kAttnOut), {a});
  const std::vector<std::uint32_t> order{b, a, 2};
  const std::pair<std::uint32_t, std::uint32_t> late[] = {{b, 2}};
  EXPECT_FALSE(rp.reorder(order, late));
  EXPECT_EQ(rp.op(0).id.role(), OpRole::kAttnQkv);
  const std::pair<std::uint32_t, std::uint32_t> extra[] = {{a, b}, {2, b}};
  ASSERT_TRUE(rp.reorder(order, extra));
  EXPECT_EQ(rp.op(0).id.role(), OpRole::kTpReduceAttn);
  EXPECT_EQ(rp.op(1).id.role(), OpRole::kAttnQkv);
  EXPECT_EQ(std::vector<std::uint32_t>(rp.deps(0).begin(), rp.deps(0).end()),
            std::vector<std::uint32_t>{});
  EXPECT_EQ(std::vector<std::uint32_t>(rp.deps(1).begin(), rp.deps(1).end()),
            std::vector<std::uint32_t>{0});
  EXPECT_EQ(std::vector<std::uint32_t>(rp.deps(2).begin(), rp.deps(2).end()),
            (std::vector<std::uint32_t>{1, 0}));
}

TEST(Lowering, ExpertTensorParallelGroupsAndSizes) {
  ModelSpec m = tiny_moe();
  m.moe->num_experts = 8;
  ParallelConfig p;
  p.tp = 2;
  p.dp = 4;
  p.ep = 8;  // 8 > dp: only possible with etp < tp
  p.etp = 1;
  p.sequence_parallel = true;
  const StepProgram prog = lowered(m, training(16, 32), p);
  ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
  std::map<std::string, std::vector<int>> groups;
  for (const Op& op : prog.find(0)->ops()) {
    if (op.group >= 0) groups[prog.group(op.group).axes] = prog.group(op.group).ranks;
  }
  EXPECT_EQ(groups["ep"], (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(groups.count("edp"), 0u);  // edp = 2·4 / (1·8) = 1
  EXPECT_EQ(groups.count("etp"), 0u);
  const auto t = tally(prog, 0);
  EXPECT_EQ(get(t, OpRole::kMoeTpGather, kF, OpKind::kAllGather).count, 0);
  // 16 sequence-parallel tokens × top 2 of 64 × 2 bytes.
  EXPECT_EQ(get(t, OpRole::kEpDispatch, kF, OpKind::kAllToAll).bytes, 16 * 2 * 64 * 2);
  for (const Op& op : prog.find(0)->ops()) {
    if (op.id == OpId::make(0, 0, kF, OpRole::kExpertUp)) {
      EXPECT_EQ(prog.desc(op).batch, 1);  // 8 experts / ep 8
      EXPECT_EQ(prog.desc(op).m, 32);     // 16 tokens · 1 · 2 · 8 / 8
      EXPECT_EQ(prog.desc(op).n, 128);    // the whole expert ffn (etp 1)
    }
  }
  p.ep = 4;
  p.etp = 2;
  p.dp = 4;
  const StepProgram prog2 = lowered(m, training(16, 32), p);
  ASSERT_TRUE(check_program(prog2).is_ok()) << check_program(prog2).message();
  const auto t2 = tally(prog2, 0);
  EXPECT_EQ(get(t2, OpRole::kMoeTpGather, kF, OpKind::kAllGather).count, 4 * 4);
  for (const Op& op : prog2.find(0)->ops()) {
    if (op.id == OpId::make(0, 0, kF, OpRole::kMoeTpGather)) {
      EXPECT_EQ(prog2.group(op.group).axes, "tp");
      EXPECT_EQ(prog2.group(op.group).ranks, (std::vector<int>{0, 1}));
    }
    if (op.id == OpId::make(0, 0, kF, OpRole::kEpDispatch)) {
      EXPECT_EQ(prog2.group(op.group).ranks, (std::vector<int>{0, 2, 4, 6}));
    }
  }
}

TEST(Lowering, ExpertParallelChecks) {
  ParallelConfig p;
  p.tp = 2;
  p.dp = 2;
  p.ep = 4;
  p.etp = 3;
  p.sequence_parallel = true;
  auto bad = lower(tiny_moe(), training(8, 32), p);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("/parallel/etp: etp x ep (3 x 4) must divide tp x cp x dp "
                                        "(4)"),
            std::string::npos)
      << bad.status().message();
  ParallelConfig d;
  d.tp = 2;
  d.etp = 1;
  auto dense = lower(tiny(), training(8, 32), d);
  ASSERT_FALSE(dense);
  EXPECT_NE(dense.status().message().find("expert tensor parallelism needs an MoE model"),
            std::string::npos);
}

// DeepSeek-V3's layer in miniature: MLA, a first dense layer, fine-grained experts with a shared
// one, sigmoid group-limited routing and an MTP module; 16 experts of ffn 32.
ModelSpec tiny_deepseek() {
  ModelSpec m = tiny();
  m.name = "tiny-deepseek";
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.mla = MlaSpec{32, 16, 16, 8, 16};
  m.head_dim = 24;
  m.moe = MoeSpec{16, 4, 32, 0.0, 1};
  m.moe->first_dense_layers = 1;
  m.moe->shared_experts = 1;
  m.moe->shared_expert_ffn_hidden = 32;
  m.moe->scoring = RouterScoring::kSigmoid;
  m.moe->expert_groups = 4;
  m.moe->group_top_k = 2;
  m.mtp_layers = 1;
  return m;
}

// Nemotron-H in miniature: Mamba-2, attention, dense and MoE blocks with a shared expert.
ModelSpec tiny_hybrid() {
  ModelSpec m = tiny();
  m.name = "tiny-hybrid";
  m.mlp = MlpKind::kSquaredRelu;
  m.norm = NormKind::kRmsNorm;
  m.layer_pattern = "ME*-";
  m.mamba = MambaSpec{8, 8, 16, 2, 4, 16};
  m.moe = MoeSpec{8, 2, 64, 0.0, 1};
  m.moe->shared_experts = 1;
  m.moe->shared_expert_ffn_hidden = 64;
  return m;
}

// Qwen3-Next in miniature: Gated DeltaNet and gated attention blocks, each before an MoE.
ModelSpec tiny_deltanet() {
  ModelSpec m = tiny_hybrid();
  m.name = "tiny-deltanet";
  m.mlp = MlpKind::kSwiglu;
  m.layer_pattern = "GE*E";
  m.mamba->kind = RecurrentMixer::kGatedDeltaNet;
  m.attention_output_gate = true;
  m.moe->shared_expert_gate = true;
  return m;
}

// Every new layer part lowers into programs that pass the checker and whose FLOPs add up to the
// step's (planner's convention, flops.hpp): MLA, shared experts, the first dense layers, MTP (with
// its own LM head), Mamba-2 and Gated DeltaNet scans, gated attention, sliding windows, under tp
// with sequence parallelism, pp, ep and etp, with and without recompute.
TEST(Lowering, MoeMlaMambaAndMtpFlopsAddUpToTheStep) {
  struct Case {
    ModelSpec model;
    ParallelConfig p;
  };
  std::vector<Case> cases;
  ParallelConfig p;
  cases.push_back({tiny_deepseek(), p});
  p.tp = 2;
  p.sequence_parallel = true;
  p.pp = 2;
  p.dp = 2;
  p.ep = 4;
  p.etp = 1;
  p.recompute = Recompute::kSelective;
  cases.push_back({tiny_deepseek(), p});
  // Megatron-core's recompute modules: each part's forward again before its backward.
  using RM = RecomputeModule;
  p.recompute_modules = module_bit(RM::kCoreAttn) | module_bit(RM::kMlaUpProj) |
                        module_bit(RM::kLayernorm) | module_bit(RM::kMoeAct) |
                        module_bit(RM::kMlp) | module_bit(RM::kSharedExperts);
  cases.push_back({tiny_deepseek(), p});
  p.recompute_modules = module_bit(RM::kMoe) | module_bit(RM::kMlp) | module_bit(RM::kLayernorm);
  cases.push_back({tiny_deepseek(), p});
  p.recompute_modules = kDefaultRecomputeModules;
  p.recompute = Recompute::kFull;
  p.zero_stage = 1;
  cases.push_back({tiny_deepseek(), p});
  ModelSpec no_q_latent = tiny_deepseek();
  no_q_latent.mla->q_lora_rank = 0;
  no_q_latent.tied_embeddings = true;
  cases.push_back({no_q_latent, p});
  ParallelConfig h;
  cases.push_back({tiny_hybrid(), h});
  h.tp = 2;
  h.sequence_parallel = true;
  h.dp = 2;
  h.ep = 2;
  h.etp = 2;
  cases.push_back({tiny_hybrid(), h});
  h.recompute = Recompute::kSelective;
  h.recompute_modules = module_bit(RM::kMoe) | module_bit(RM::kLayernorm);
  cases.push_back({tiny_hybrid(), h});
  h.recompute_modules = module_bit(RM::kSharedExperts) | module_bit(RM::kMoeAct);
  cases.push_back({tiny_hybrid(), h});
  h.recompute = Recompute::kNone;
  cases.push_back({tiny_deltanet(), ParallelConfig{}});
  cases.push_back({tiny_deltanet(), h});
  ModelSpec window = tiny_moe();
  window.sliding_window = 8;
  window.full_attention_every = 2;
  ParallelConfig w;
  w.dp = 2;
  w.ep = 2;
  cases.push_back({window, w});
  for (const Case& c : cases) {
    const TrainingSpec t = training(8, 64);
    const StepProgram prog = lowered(c.model, t, c.p);
    ASSERT_TRUE(check_program(prog).is_ok())
        << c.model.name << " " << short_label(c.p) << ": " << check_program(prog).message();
    double model = 0, hardware = 0;
    for (const RankProgram& r : prog.ranks()) {
      for (const Op& op : r.ops()) {
        const double f = prog.desc(op).flops.raw();
        hardware += f;
        if (op.id.phase() != Phase::kRecompute) model += f;
      }
    }
    EXPECT_NEAR(model / model_flops_per_step(c.model, t).raw(), 1.0, 1e-12)
        << c.model.name << " " << short_label(c.p);
    EXPECT_NEAR(hardware / hardware_flops_per_step(c.model, t, c.p).raw(), 1.0, 1e-12)
        << c.model.name << " " << short_label(c.p);
  }
}

// The parameters the lowered program's tensors hold add up to the model (MTP included, with the
// last stage's copy of the word embedding for the MTP module's lookups).
TEST(Lowering, PartitionHoldsEveryParameter) {
  for (const ModelSpec& m : {tiny_deepseek(), tiny_hybrid(), tiny_deltanet()}) {
    for (int pp : {1, 2}) {
      ParallelConfig p;
      p.tp = 2;
      p.pp = pp;
      p.ep = 2;
      p.dp = 2;
      p.etp = 1;
      p.sequence_parallel = true;
      auto part = ModelPartition::create(m, p);
      ASSERT_TRUE(part) << part.status().message();
      std::int64_t dense = 0, expert = 0;
      for (int s = 0; s < pp; ++s) {
        const RankParams rp = part->rank_params(s);
        dense += (rp.dense - rp.tp_replicated) * 2 + rp.tp_replicated;
        expert += rp.expert * 2;  // ep 2 ranks hold different experts, etp 1
      }
      const std::int64_t copy = pp > 1 && m.mtp_layers > 0 ? m.vocab * m.hidden : 0;
      EXPECT_EQ(dense + expert, m.total_params() + copy) << m.name << " pp" << pp;
    }
  }
}

// DualPipeV's V: chunk 1 of stage s is virtual stage 2p − 1 − s, so every layer runs on the rank
// the partition places it on, the embedding and the LM head both on stage 0, and the turn on the
// last stage hands the activation and the gradient over without a message (the V's ends, stage 0
// and the last, send and receive m activations, the others 2m). The programs pass the checker
// (matched sends, no deadlock) on 2 to 4 stages, with data parallelism and ZeRO-1, tied embeddings
// (one copy: no embedding group), and a DeepSeek-shaped MoE with MTP on ep 2.
TEST(Lowering, DualPipeVRunsAVWithBothEndsOnStageZero) {
  for (int pp : {2, 3, 4}) {
    for (bool tied : {false, true}) {
      ModelSpec m = tiny();
      m.num_layers = 4 * pp;
      m.tied_embeddings = tied;
      ParallelConfig p;
      p.pp = pp;
      p.dp = 2;
      p.zero_stage = 1;
      p.schedule = Schedule::kDualPipeV;
      p.virtual_stages = 2;
      const int mbs = 2 * pp + 1;
      const StepProgram prog = lowered(m, training(2 * mbs), p);
      const std::string what = "pp " + std::to_string(pp) + (tied ? " tied" : "");
      ASSERT_TRUE(check_program(prog).is_ok()) << what << ": " << check_program(prog).message();
      for (const CommGroup& g : prog.groups())
        EXPECT_NE(g.axes, "embedding") << what;
      auto part = ModelPartition::create(m, p);
      ASSERT_TRUE(part);
      for (const RankProgram& r : prog.ranks()) {
        const auto t = tally(prog, r.rank());
        const bool first = r.stage() == 0, last = r.stage() == pp - 1;
        EXPECT_EQ(get(t, OpRole::kEmbedding, kF, OpKind::kEmbedding).count, first ? mbs : 0);
        EXPECT_EQ(get(t, OpRole::kLmHead, kF, OpKind::kGemm).count, first ? mbs : 0) << what;
        const int messages = first || last ? mbs : 2 * mbs;
        EXPECT_EQ(get(t, OpRole::kPpSendActivation, kF, OpKind::kSend).count, messages) << what;
        EXPECT_EQ(get(t, OpRole::kPpRecvActivation, kF, OpKind::kRecv).count, messages) << what;
        EXPECT_EQ(get(t, OpRole::kPpSendGrad, kB, OpKind::kSend).count, messages) << what;
        EXPECT_EQ(get(t, OpRole::kPpRecvGrad, kB, OpKind::kRecv).count, messages) << what;
        for (const Op& op : r.ops()) {
          if (op.id.layer() != OpId::kNone && prog.desc(op).kind == OpKind::kGemm) {
            EXPECT_EQ(part->stage_of_layer(op.id.layer()), r.stage()) << what;
          }
        }
      }
    }
  }
  ParallelConfig moe;
  moe.pp = 2;
  moe.dp = 2;
  moe.ep = 2;
  moe.schedule = Schedule::kDualPipeV;
  moe.virtual_stages = 2;
  const StepProgram prog = lowered(tiny_deepseek(), training(8), moe);
  EXPECT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
}

// DualPipeV with stages whose layers do not split in two: DeepSeek-V3's 61 layers on pp 16 take
// 2 + 14 × 4 + 3 (stage 0 also runs the embedding and the LM head), chunk 0 of a stage the odd
// layer; the virtual stages hold consecutive layers in the V's order, every layer once; odd layer
// counts lower into programs that pass the checker.
TEST(ModelPartition, DualPipeVSplitsOddStagesUnevenly) {
  EXPECT_EQ(balanced_v_split(61, 16), (std::pair{2, 3}));
  EXPECT_EQ(balanced_v_split(64, 16), (std::pair{0, 0}));
  EXPECT_EQ(balanced_v_split(31, 16), std::nullopt);
  ModelSpec m = tiny();
  for (int layers : {7, 9, 12, 15, 61}) {
    for (int pp : {2, 3, 4, 16}) {
      const auto split = balanced_v_split(layers, pp);
      if (!split) continue;
      m.num_layers = layers;
      ParallelConfig p;
      p.pp = pp;
      p.schedule = Schedule::kDualPipeV;
      p.virtual_stages = 2;
      p.first_stage_layers = split->first;
      p.last_stage_layers = split->second;
      const std::string what = std::to_string(layers) + " layers on pp " + std::to_string(pp);
      auto part = ModelPartition::create(m, p);
      ASSERT_TRUE(part) << what << ": " << part.status().message();
      std::vector<int> held(static_cast<std::size_t>(layers), 0);
      int next = 0;
      for (int vs = 0; vs < 2 * pp; ++vs) {
        const int s = vs < pp ? vs : 2 * pp - 1 - vs, c = vs < pp ? 0 : 1;
        EXPECT_EQ(part->first_layer(s, c), next) << what << " vs " << vs;
        EXPECT_GE(part->layers_per_chunk(s, c), 1) << what;
        EXPECT_LE(part->layers_per_chunk(s, 1), part->layers_per_chunk(s, 0)) << what;
        for (int l = next; l < next + part->layers_per_chunk(s, c); ++l) {
          ++held[static_cast<std::size_t>(l)];
          EXPECT_EQ(part->stage_of_layer(l), s) << what << " layer " << l;
          EXPECT_EQ(part->chunk_of_layer(l), c) << what << " layer " << l;
        }
        next += part->layers_per_chunk(s, c);
      }
      EXPECT_EQ(held, std::vector<int>(static_cast<std::size_t>(layers), 1)) << what;
      if (pp > 4 || layers > 15) continue;
      const StepProgram prog = lowered(m, training(2 * pp + 1 + 1, 32), p);
      EXPECT_TRUE(check_program(prog).is_ok()) << what << ": " << check_program(prog).message();
    }
  }
  // DeepSeek-V3's split: stage 0 one layer a chunk, the middle stages two, the last 2 + 1.
  m.num_layers = 61;
  ParallelConfig ds;
  ds.pp = 16;
  ds.schedule = Schedule::kDualPipeV;
  ds.virtual_stages = 2;
  ds.first_stage_layers = 2;
  ds.last_stage_layers = 3;
  auto part = ModelPartition::create(m, ds);
  ASSERT_TRUE(part) << part.status().message();
  EXPECT_EQ(part->layers_per_chunk(0, 0), 1);
  EXPECT_EQ(part->layers_per_chunk(0, 1), 1);
  EXPECT_EQ(part->layers_per_chunk(7, 0), 2);
  EXPECT_EQ(part->layers_per_chunk(15, 0), 2);
  EXPECT_EQ(part->layers_per_chunk(15, 1), 1);
  EXPECT_EQ(part->first_layer(0, 1), 60);
}

// Uneven pipeline stages (Megatron-core's --decoder-first/last-pipeline-num-layers): the first and
// last stage's layers as given, the others sharing the rest; each stage's layers split into its
// chunks; every layer on exactly one stage; the balanced split the sweep and accuracy propose.
TEST(ModelPartition, UnevenStages) {
  ModelSpec m = tiny();
  m.num_layers = 30;
  ParallelConfig p;
  p.pp = 4;
  p.virtual_stages = 2;
  p.first_stage_layers = 8;
  p.last_stage_layers = 6;
  auto counts = stage_layer_counts(m.num_layers, p);
  ASSERT_TRUE(counts) << counts.status().message();
  EXPECT_EQ(*counts, (std::vector<int>{8, 8, 8, 6}));
  auto part = ModelPartition::create(m, p);
  ASSERT_TRUE(part) << part.status().message();
  EXPECT_EQ(part->layers_per_chunk(0, 1), 4);
  EXPECT_EQ(part->layers_per_chunk(3, 0), 3);
  // A pass over the virtual stages holds 15 layers: stage 0 [0, 4), 1 [4, 8), 2 [8, 12), 3
  // [12, 15); the second chunks follow from 15.
  EXPECT_EQ(part->first_layer(3, 0), 12);
  EXPECT_EQ(part->first_layer(0, 1), 15);
  EXPECT_EQ(part->first_layer(3, 1), 27);
  std::vector<int> held(30, 0);
  for (int s = 0; s < 4; ++s) {
    for (int c = 0; c < 2; ++c) {
      for (int l = part->first_layer(s, c);
           l < part->first_layer(s, c) + part->layers_per_chunk(s, c); ++l) {
        ++held[static_cast<std::size_t>(l)];
        EXPECT_EQ(part->stage_of_layer(l), s) << l;
        EXPECT_EQ(part->chunk_of_layer(l), c) << l;
      }
    }
  }
  EXPECT_EQ(held, std::vector<int>(30, 1));
  // The model's parameters, once each, over the stages.
  std::int64_t params = 0;
  for (int s = 0; s < 4; ++s)
    params += part->rank_params(s).total();
  EXPECT_EQ(params, m.total_params());
  // The program lowers and checks.
  TrainingSpec t = training(8, 32);
  p.schedule = Schedule::kInterleaved;
  const StepProgram prog = lowered(m, t, p);
  EXPECT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();

  // What does not add up is refused, saying why.
  ParallelConfig odd = p;
  odd.first_stage_layers = 6;
  odd.last_stage_layers = 6;  // 18 left for 2 stages: 9 each, not 2 chunks
  auto bad = stage_layer_counts(m.num_layers, odd);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("do not split into virtual_stages 2"), std::string::npos)
      << bad.status().message();
  odd.virtual_stages = 1;
  odd.first_stage_layers = 20;
  odd.last_stage_layers = 9;  // 1 left for 2 stages
  EXPECT_FALSE(stage_layer_counts(m.num_layers, odd));
  ParallelConfig even;
  even.pp = 4;
  EXPECT_FALSE(stage_layer_counts(m.num_layers, even));  // 4 does not divide 30

  // Balanced splits: Llama 3 405B's 126 layers on pp 16, BLOOM's 70 on pp 12; none needed when pp
  // divides the layers; none possible with fewer layers than stages.
  EXPECT_EQ(balanced_stage_split(126, 16, 1), (std::pair{7, 7}));
  EXPECT_EQ(balanced_stage_split(70, 12, 1), (std::pair{5, 5}));
  EXPECT_EQ(balanced_stage_split(32, 8, 1), (std::pair{0, 0}));
  EXPECT_EQ(balanced_stage_split(33, 2, 1), (std::pair{17, 16}));
  EXPECT_EQ(balanced_stage_split(5, 8, 1), std::nullopt);
  // Qwen3-235B's 94 layers on pp 32: 2 + 30 × 3 + 2 in one chunk a stage; in two chunks only
  // 18 + 30 × 2 + 16 exists, which is not balanced (its first stage holds six times the share).
  EXPECT_EQ(balanced_stage_split(94, 32, 1), (std::pair{2, 2}));
  EXPECT_EQ(balanced_stage_split(94, 32, 2), std::nullopt);
  EXPECT_EQ(balanced_stage_split(126, 16, 2), (std::pair{8, 6}));
  // DeepSeek-V3's 61 layers on pp 16: 3 + 14 × 4 + 2 by Megatron's count; with its MTP module on
  // the LM head's stage counted too (lm_head_units 3: the head, the module's layer and its own
  // head), 4 + 14 × 4 + 1. The V's split keeps 2 + 14 × 4 + 3 either way.
  ModelSpec deepseek = builtin_catalog().model("deepseek-v3").value();
  EXPECT_EQ(deepseek.mtp_layers, 1);
  EXPECT_EQ(lm_head_units(deepseek), 3);
  EXPECT_EQ(balanced_stage_split(61, 16, 1), (std::pair{3, 2}));
  EXPECT_EQ(balanced_stage_split(61, 16, 1, lm_head_units(deepseek)), (std::pair{4, 1}));
  EXPECT_EQ(balanced_v_split(61, 16, lm_head_units(deepseek)), (std::pair{2, 3}));
  for (int layers : {30, 61, 70, 94, 105, 126}) {
    for (int pp : {2, 3, 4, 8, 12, 16, 32}) {
      for (int v : {1, 2, 3}) {
        const auto split = balanced_stage_split(layers, pp, v);
        if (!split || split->first == 0) continue;
        ParallelConfig q;
        q.pp = pp;
        q.virtual_stages = v;
        q.first_stage_layers = split->first;
        q.last_stage_layers = split->second;
        EXPECT_TRUE(stage_layer_counts(layers, q)) << layers << " layers, pp " << pp << " v " << v
                                                   << ": " << split->first << "/" << split->second;
        // No stage more than one layer a chunk above the even share, embedding and loss counted.
        const int share = (layers + 2 + pp - 1) / pp;
        EXPECT_LE(std::max(split->first, split->second) + 1, share + v) << layers << " " << pp;
      }
    }
  }
}

// Chunks of unequal size (Megatron-core's --pipeline-model-parallel-layout): the string's
// virtual stages in order, each with its own layers; the partition, parameters and program follow.
TEST(ModelPartition, LayoutOfUnequalChunks) {
  auto parsed = parse_pipeline_layout("Et*3|(tt|)*2,t*4 | t*3 L");
  ASSERT_TRUE(parsed) << parsed.status().message();
  EXPECT_EQ(parsed->layers, (std::vector<int>{3, 2, 2, 4, 3}));
  EXPECT_EQ(parsed->mtp, 0);
  auto mtp = parse_pipeline_layout("E(tt|)*3tmL");
  ASSERT_TRUE(mtp) << mtp.status().message();
  EXPECT_EQ(mtp->layers, (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(mtp->mtp, 1);
  EXPECT_EQ(layout_text({2, 3, 3, 3, 2}), "2,3x3,2");
  // Written back as Megatron-core writes it, and read again.
  for (const auto& [layers, modules, text] :
       std::vector<std::tuple<std::vector<int>, int, std::string>>{
           {{2, 3, 3, 3, 2}, 0, "Et*2|(t*3|)*3t*2L"},
           {{1, 2, 2, 1, 1}, 1, "Et|(t*2|)*2t|tmL"},
           {{4, 4}, 0, "Et*4|t*4L"}}) {
    EXPECT_EQ(pipeline_layout_text(layers, modules), text);
    auto back = parse_pipeline_layout(text);
    ASSERT_TRUE(back) << back.status().message();
    EXPECT_EQ(back->layers, layers);
    EXPECT_EQ(back->mtp, modules);
  }
  // What Megatron-core refuses is refused, saying what and where.
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"t|Et|L", "'E' (the embedding) belongs once in the first"},
           {"Et|tL|t", "'L' (the loss) belongs once in the last"},
           {"Etm|tL", "'m' (an MTP module) belongs in the last"},
           {"Et|tx", "'x' is not E"},
           {"E(tt|tL", "without its ')'"},
           {"Et)|tL", "unmatched ')'"},
           {"Et*0|tL", "a count of 1 or more"},
           {"EttL", "a layout needs '|'"},
           {"(((t*1000)*1000)*1000)|L", "more than 1000000 symbols"},
           {"E(tt)*9223372036854775808|L", "more than 1000000 symbols"},
           {"E()*99999999999|tL", "more than 1000000 symbols"}}) {
    auto bad = parse_pipeline_layout(text);
    ASSERT_FALSE(bad) << text;
    EXPECT_NE(bad.status().message().find(says), std::string::npos) << bad.status().message();
  }

  ModelSpec m = tiny();
  m.num_layers = 14;
  ParallelConfig p;
  p.pp = 2;
  p.virtual_stages = 3;
  p.schedule = Schedule::kInterleaved;
  p.layout = {2, 3, 2, 3, 2, 2};  // stage 0: 2 + 2 + 2, stage 1: 3 + 3 + 2
  auto counts = stage_layer_counts(m.num_layers, p);
  ASSERT_TRUE(counts) << counts.status().message();
  EXPECT_EQ(*counts, (std::vector<int>{6, 8}));
  auto part = ModelPartition::create(m, p);
  ASSERT_TRUE(part) << part.status().message();
  EXPECT_EQ(part->layers_per_chunk(0, 0), 2);
  EXPECT_EQ(part->layers_per_chunk(1, 0), 3);
  EXPECT_EQ(part->layers_per_chunk(1, 2), 2);
  EXPECT_EQ(part->first_layer(1, 0), 2);
  EXPECT_EQ(part->first_layer(0, 1), 5);
  EXPECT_EQ(part->first_layer(1, 2), 12);
  std::int64_t params = 0;
  for (int s = 0; s < 2; ++s)
    params += part->rank_params(s).total();
  EXPECT_EQ(params, m.total_params());
  const StepProgram prog = lowered(m, training(8, 32), p);
  EXPECT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();

  // A layout that does not fit the plan names what is wrong.
  ParallelConfig wrong = p;
  wrong.layout = {2, 3, 2, 3, 2};
  EXPECT_NE(stage_layer_counts(14, wrong).status().message().find("5 virtual stages"),
            std::string::npos);
  wrong.layout = {2, 3, 2, 3, 2, 3};
  EXPECT_NE(stage_layer_counts(14, wrong).status().message().find("15 decoder layers"),
            std::string::npos);
  wrong.layout = {2, 3, 0, 3, 4, 2};
  EXPECT_NE(stage_layer_counts(14, wrong).status().message().find("holds no decoder layer"),
            std::string::npos);
  wrong = p;
  wrong.first_stage_layers = 6;
  EXPECT_FALSE(stage_layer_counts(14, wrong));

  // The balanced layout: the layers, the embedding and the LM head with the loss shared evenly.
  // Qwen3-235B's 94 layers on pp 8 with 4 chunks (Megatron-core's account-for-embedding and
  // -loss split): 2 + 30 × 3 + 2; DeepSeek-V3's 61 on pp 8 with 4: 1 + 29 × 2 + 1 + 1, on pp 4
  // with 4: 3 + 13 × 4 + 3 + 3.
  auto qwen = balanced_layout(94, 8, 4);
  ASSERT_TRUE(qwen);
  EXPECT_EQ(layout_text(*qwen), "2,3x30,2");
  auto deepseek = balanced_layout(61, 8, 4);
  ASSERT_TRUE(deepseek);
  EXPECT_EQ(layout_text(*deepseek), "1,2x29,1x2");
  deepseek = balanced_layout(61, 4, 4);
  ASSERT_TRUE(deepseek);
  EXPECT_EQ(layout_text(*deepseek), "3,4x13,3x2");
  for (const auto& [layers, pp, v] : std::vector<std::tuple<int, int, int>>{
           {61, 8, 4}, {61, 2, 8}, {94, 4, 12}, {94, 32, 2}, {61, 8, 2}, {126, 16, 2}}) {
    auto l = balanced_layout(layers, pp, v);
    ASSERT_TRUE(l) << layers << " " << pp << " " << v;
    ParallelConfig c;
    c.pp = pp;
    c.virtual_stages = v;
    c.layout = *l;
    auto per_stage = stage_layer_counts(layers, c);
    ASSERT_TRUE(per_stage) << per_stage.status().message();
    EXPECT_LE(*std::max_element(l->begin(), l->end()) - *std::min_element(l->begin(), l->end()), 2)
        << layout_text(*l);
  }
  EXPECT_EQ(balanced_layout(94, 32, 3), std::nullopt);  // 96 chunks for 94 layers
}

// Token routing (moe_routing.hpp): the busiest rank's grouped GEMMs and all-to-all bytes under
// balanced and skewed routing, token dropping and padding, and FP8 dispatch.
TEST(Lowering, RoutingImbalanceDroppingAndFp8Dispatch) {
  ModelSpec m = tiny_moe();
  m.moe->num_experts = 8;
  m.moe->capacity_factor = 0.0;  // dropless
  struct Case {
    double imbalance;
    double capacity;  // < 0: the model's (dropless)
    bool pad;
    std::int64_t per_expert;  // tokens per local expert on the busiest rank
  };
  // 32 tokens · top 2 · ep 2 / 8 experts = mean 16 tokens per expert; 4 local experts.
  for (const Case& c :
       {Case{1.0, -1, false, 16}, Case{2.0, -1, false, 20}, Case{3.0, 1.5, false, 18},
        Case{1.0, 1.5, true, 24}, Case{1.2, 1.25, false, 17}}) {
    ParallelConfig p;
    p.dp = 2;
    p.ep = 2;
    p.moe_imbalance = c.imbalance;
    p.moe_capacity_factor = c.capacity;
    p.moe_pad_to_capacity = c.pad;
    const StepProgram prog = lowered(m, training(8, 32), p);
    ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
    for (const Op& op : prog.find(1)->ops()) {
      const OpDesc& d = prog.desc(op);
      if (op.id == OpId::make(0, 0, kF, OpRole::kExpertUp)) {
        EXPECT_EQ(d.m, c.per_expert) << c.imbalance << " " << c.capacity;
        EXPECT_EQ(d.batch, 4);
      }
      if (op.id == OpId::make(0, 0, kF, OpRole::kEpDispatch)) {
        // The busiest rank receives per_expert × 4 tokens of 64 × 2 bytes.
        EXPECT_EQ(d.comm_bytes.raw(), c.per_expert * 4 * 64 * 2);
      }
    }
  }
  // FP8 dispatch: the forward dispatch moves one byte per element, the combine and the backward
  // stay 16-bit.
  ParallelConfig p;
  p.dp = 2;
  p.ep = 2;
  p.moe_fp8_dispatch = true;
  const StepProgram prog = lowered(m, training(8, 32), p);
  const auto t = tally(prog, 0);
  EXPECT_EQ(get(t, OpRole::kEpDispatch, kF, OpKind::kAllToAll).bytes, 64 * 64);
  EXPECT_EQ(get(t, OpRole::kEpCombine, kF, OpKind::kAllToAll).bytes, 64 * 64 * 2);
  EXPECT_EQ(get(t, OpRole::kEpDispatch, kB, OpKind::kAllToAll).bytes, 64 * 64 * 2);
}

// MTP on the last stage: its embedding lookup, projection, block and LM head; with pp > 1 the
// embedding group all-reduces the first stage's embedding gradient with the last stage's copy.
TEST(Lowering, MtpModuleOnTheLastStage) {
  ParallelConfig p;
  p.pp = 2;
  p.tp = 2;
  p.sequence_parallel = true;
  const StepProgram prog = lowered(tiny_deepseek(), training(8, 32), p);
  ASSERT_TRUE(check_program(prog).is_ok()) << check_program(prog).message();
  const int last = 2;  // tp 2 × stage 1
  const auto t = tally(prog, last);
  const int m = 8;
  EXPECT_EQ(get(t, OpRole::kMtpProj, kF, OpKind::kGemm).count, m);
  EXPECT_EQ(get(t, OpRole::kLmHead, kF, OpKind::kGemm).count, 2 * m);  // the model's and MTP's
  EXPECT_EQ(get(t, OpRole::kEmbedding, kF, OpKind::kEmbedding).count, m);
  EXPECT_EQ(get(t, OpRole::kEmbeddingGradReduce, kS, OpKind::kAllReduce).count, 1);
  EXPECT_EQ(get(tally(prog, 0), OpRole::kEmbeddingGradReduce, kS, OpKind::kAllReduce).count, 1);
  EXPECT_EQ(get(tally(prog, 0), OpRole::kMtpProj, kF, OpKind::kGemm).count, 0);
}

// The hierarchical all-to-all: every dispatch and combine, forward and backward, carries the
// routing that decides how many nodes a token reaches (program.hpp, kTokenRouted); NCCL's carries
// none. The bytes stay those of every token copy.
TEST(Lowering, HierarchicalAllToAllStatesTheRouting) {
  ParallelConfig p;
  p.dp = 4;
  p.ep = 4;
  const ModelSpec m = tiny_deepseek();
  const StepProgram flat = lowered(m, training(8, 32), p);
  p.moe_a2a = MoeA2a::kHierarchical;
  const StepProgram hier = lowered(m, training(8, 32), p);
  int routed = 0;
  std::vector<std::int64_t> flat_bytes, hier_bytes;
  for (const auto& [prog, bytes] : {std::pair{&flat, &flat_bytes}, std::pair{&hier, &hier_bytes}}) {
    const RankProgram& r = prog->ranks()[0];
    for (std::size_t i = 0; i < r.size(); ++i) {
      const OpDesc& d = prog->desc(r.op(i));
      if (d.kind != OpKind::kAllToAll) continue;
      bytes->push_back(d.comm_bytes.raw());
      if (prog == &flat) {
        EXPECT_EQ(d.flags & kTokenRouted, 0);
        continue;
      }
      ++routed;
      EXPECT_NE(d.flags & kTokenRouted, 0);
      EXPECT_EQ(d.m, 16);
      EXPECT_EQ(d.k, 4);
      EXPECT_EQ(d.batch, 4);
      EXPECT_EQ(d.aux, 2);
    }
  }
  // Three MoE layers (the first of four is dense) and the MTP block's, 8 / 4 = 2 micro-batches,
  // 4 all-to-alls each.
  EXPECT_EQ(routed, 4 * 2 * 4);
  EXPECT_EQ(flat_bytes, hier_bytes);
  // A dense model has no all-to-all to route.
  ParallelConfig dense;
  dense.moe_a2a = MoeA2a::kHierarchical;
  auto r = lower(tiny(), training(), dense);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("moe_a2a"), std::string::npos) << r.status().message();
}

TEST(Lowering, RoutingFieldsNeedAnMoeModel) {
  ParallelConfig p;
  p.moe_imbalance = 1.5;
  p.moe_fp8_dispatch = true;
  auto r = lower(tiny(), training(), p);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("/parallel/moe_imbalance"), std::string::npos)
      << r.status().message();
  ParallelConfig q;
  q.moe_pad_to_capacity = true;
  q.moe_capacity_factor = 0;
  auto pad = lower(tiny_moe(), training(), q);
  ASSERT_FALSE(pad);
  EXPECT_NE(pad.status().message().find("/parallel/moe_pad_to_capacity"), std::string::npos)
      << pad.status().message();
}

// Every valid plan's step program runs to the end (check_program's deadlock check): random plans
// of a 12-layer model, dense and MoE (two dense layers first, as DeepSeek-V3 and GLM-4.5 open),
// over every schedule, 1-4 chunks, cp, ep, ZeRO, recompute, sequence parallelism, the EP
// all-to-all overlap and uneven stages, with micro-batch counts that are and are not multiples
// of pp. It found the interleaved schedule's messages with m mod pp != 0 and the overlap's merged
// pairs waiting on each other forever.
TEST(Lowering, RandomValidPlansNeverDeadlock) {
  ModelSpec dense = tiny();
  dense.num_layers = 12;
  ModelSpec moe = tiny_moe();
  moe.num_layers = 12;
  moe.moe->first_dense_layers = 2;
  std::mt19937 rng(20261127);
  auto pick = [&](std::initializer_list<int> values) {
    std::vector<int> v(values);
    return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
  };
  const Schedule schedules[] = {Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved,
                                Schedule::kZeroBubbleH1, Schedule::kDualPipeV};
  int checked = 0;
  for (int trial = 0; trial < 3000 && checked < 250; ++trial) {
    const bool is_moe = pick({0, 1}) == 1;
    const ModelSpec& m = is_moe ? moe : dense;
    ParallelConfig p;
    p.tp = pick({1, 2});
    p.pp = pick({1, 2, 3, 4});
    p.dp = pick({1, 2});
    p.cp = pick({1, 1, 2});
    p.schedule = schedules[pick({0, 1, 2, 3, 4})];
    p.virtual_stages = p.schedule == Schedule::kInterleaved ? pick({2, 3})
                       : p.schedule == Schedule::kDualPipeV ? 2
                                                            : 1;
    p.micro_batch_size = 1;
    p.sequence_parallel = p.tp > 1 && (is_moe || pick({0, 1}) == 1);
    p.zero_stage = pick({0, 1, 3});
    p.recompute = pick({0, 1}) == 1 ? Recompute::kFull : Recompute::kNone;
    if (is_moe) {
      p.ep = pick({1, 2, 4});
      p.moe_a2a_overlap = p.ep > 1 && pick({0, 1}) == 1;
    }
    if (p.pp > 1 && p.schedule != Schedule::kDualPipeV && pick({0, 0, 1}) == 1) {
      p.first_stage_layers = 12 / p.pp / p.virtual_stages - 1;
      p.last_stage_layers = p.first_stage_layers;
    }
    const int microbatches = pick({1, 2, 3, 4, 5, 6, 7, 8, 9, 12});
    const TrainingSpec t = training(static_cast<std::int64_t>(microbatches) * p.dp, 32);
    Diagnostics diag("random plan");
    check_parallel(m, t, p, diag);
    if (!diag.empty()) continue;
    auto prog = lower(m, t, p);
    ASSERT_TRUE(prog) << short_label(p) << " m " << microbatches << ": " << prog.status().message();
    const Status ok = check_program(*prog);
    EXPECT_TRUE(ok.is_ok()) << (is_moe ? "moe " : "dense ") << short_label(p) << " m "
                            << microbatches << ": " << ok.message();
    ++checked;
  }
  EXPECT_GE(checked, 250);
}

}  // namespace
}  // namespace planner
