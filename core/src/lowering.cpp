#include "planner/core/lowering.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "planner/core/diagnostics.hpp"
#include "planner/core/memory.hpp"
#include "planner/core/model_partition.hpp"
#include "planner/core/moe_routing.hpp"
#include "planner/core/rank_grid.hpp"
#include "planner/core/schedule.hpp"

namespace planner {
namespace {

constexpr std::uint32_t kNoOp = 0xffffffffu;
// A dependency on a deferred weight-gradient op: its index in the pending list of the pass.
constexpr std::uint32_t kPendingBit = 0x80000000u;
constexpr int kVariants = 16;
constexpr int kRoles = static_cast<int>(EnumTraits<OpRole>::kNames.size());
constexpr int kPhases = static_cast<int>(EnumTraits<Phase>::kNames.size());

constexpr std::int64_t kMegatronBucketFloor = 40'000'000;
constexpr std::int64_t kMegatronBucketPerDpRank = 1'000'000;
constexpr std::int64_t kFp32 = 4;
constexpr std::int64_t kInt64 = 8;
// Megatron's get_batch broadcasts int64 tokens and position ids to the first stage, int64 labels
// and an fp32 loss mask to the last.
constexpr std::int64_t kFirstStageBatchBytesPerToken = kInt64 + kInt64;
constexpr std::int64_t kLastStageBatchBytesPerToken = kInt64 + kFp32;
// Vocab-parallel cross-entropy all-reduces per token: the row max; then sum-exp and target logit.
constexpr std::int64_t kLossMaxValues = 1;
constexpr std::int64_t kLossSumValues = 2;

// The chunked scan's matmuls per layer (Lowerer::scan_gemm): forward, and their input gradients
// in backward. Mamba-2's SSD: 4 and 8; Gated DeltaNet's delta rule: 8 and 16.
constexpr int kScanForwardGemms = 4;
constexpr int kDeltaForwardGemms = 8;
int scan_gemms(const MambaSpec& s, Phase ph) {
  const int forward = s.delta() ? kDeltaForwardGemms : kScanForwardGemms;
  return ph == Phase::kBackwardInput ? 2 * forward : forward;
}

// ZeRO-3 gather slots (see program.hpp, OpRole::kDpParamGather).
constexpr int kSlotLayerDense = 0;
constexpr int kSlotLayerExpert = 1;
constexpr int kSlotEmbedding = 2;
constexpr int kSlotLmHead = 3;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

struct Bucket {
  std::int64_t elements = 0;
  bool expert = false;
  int tensors = 0;
  std::uint32_t reduce_desc = kNoOp;
  std::uint32_t gather_desc = kNoOp;
  std::uint32_t d2h_desc = kNoOp;
  std::uint32_t h2d_desc = kNoOp;
  std::vector<std::uint32_t> push_desc;  // per server
  std::vector<std::uint32_t> pull_desc;
  std::vector<std::int64_t> parts;  // elements per server
};

// What every rank of one pipeline stage shares: its parameter tensors and gradient buckets.
struct StageLayout {
  std::vector<ParamTensor> tensors;
  std::vector<int> tensor_bucket;
  std::unordered_map<std::uint32_t, int> tensor_index;  // (layer + 1) << 8 | role
  std::vector<Bucket> buckets;
  RankParams params;
  std::int64_t optimizer_params = 0;  // updated by one rank (after ZeRO sharding)
  std::size_t ops_hint = 0;           // ops of the first lowered rank of the stage
};

// The ops one schedule item (a forward or backward pass) added to a rank's program.
struct PassRange {
  Pass pass = Pass::kForward;
  int microbatch = 0;
  std::uint32_t begin = 0, end = 0;
  bool fused = false;  // runs merged with the next pass (PipelineSchedule::fused)
};

// Megatron-core's expert-parallel all-to-all overlap (--overlap-moe-expert-parallel-comm, its
// combined 1F1B): a forward pass and the backward pass of another micro-batch next to it in the
// stage's order run as one, so that one's dispatch and combine all-to-alls run under the other's
// compute. Each pass is cut into segments after every EP all-to-all, and the pair's ops are put
// in the order forward segment 0, backward segment 0, forward segment 1, ...: the compute stream
// alternates between the two passes, and each all-to-all waits only for its own pass. The pairs
// are those the schedule marks fused (PipelineSchedule::fused: the steady state's F(k + w) with
// B(k), dualpipev's F&B chunks). A pair where an op would come before one it depends on keeps its
// order.
// The segments are callables the framework runs one after another on the compute stream
// (Megatron-core's combined 1F1B schedule_layer_1f1b, DualPipe's overlapped chunks), and their
// tensor- and context-parallel communication is part of them: Transformer Engine issues the tp
// collectives on the compute stream, and its ring attention waits for its own exchanges. So a
// segment starts when the segment before it, of the other pass, has finished: its first compute
// op waits for that segment's tp and cp communication, its first tp collective and cp send for
// that segment's compute. Only the all-to-alls, on their own stream, run under the other pass.
void merge_forward_backward(RankProgram& rp, const std::vector<PassRange>& passes,
                            const std::vector<OpDesc>& descs) {
  std::vector<std::uint32_t> order(rp.size());
  std::iota(order.begin(), order.end(), 0u);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> extra;  // (op, dependency)
  auto segments = [&](const PassRange& p) {
    std::vector<std::vector<std::uint32_t>> out(1);
    for (std::uint32_t k = p.begin; k < p.end; ++k) {
      out.back().push_back(k);
      const OpRole role = rp.op(k).id.role();
      if (role == OpRole::kEpDispatch || role == OpRole::kEpCombine) out.emplace_back();
    }
    return out;
  };
  bool merged = false;
  for (std::size_t i = 0; i + 1 < passes.size(); ++i) {
    const PassRange& a = passes[i];
    const PassRange& b = passes[i + 1];
    const bool pair = a.end == b.begin && a.microbatch != b.microbatch && a.fused &&
                      ((a.pass == Pass::kForward && b.pass == Pass::kBackward) ||
                       (a.pass == Pass::kBackward && b.pass == Pass::kForward));
    if (!pair) continue;
    const PassRange& f = a.pass == Pass::kForward ? a : b;
    const PassRange& g = a.pass == Pass::kForward ? b : a;
    const auto fs = segments(f);
    const auto gs = segments(g);
    std::uint32_t at = a.begin;
    // The last compute, tp, cp-send and cp-receive op of the segment placed last (streams are
    // FIFO: the last op on a stream finishes after the others).
    std::array<std::uint32_t, 4> last{kNoOp, kNoOp, kNoOp, kNoOp};
    const std::size_t pair_extra = extra.size();
    auto place = [&](const std::vector<std::uint32_t>& segment) {
      std::array<std::uint32_t, 4> mine{kNoOp, kNoOp, kNoOp, kNoOp};
      auto wait = [&](std::uint32_t op, std::uint32_t d) {
        if (d != kNoOp) extra.emplace_back(op, d);
      };
      for (std::uint32_t x : segment) {
        order[at++] = x;
        const int slot = merge_barrier_slot(descs[rp.op(x).desc].stream);
        if (slot < 0) continue;
        const bool first = mine[static_cast<std::size_t>(slot)] == kNoOp;
        mine[static_cast<std::size_t>(slot)] = x;
        if (!first) continue;
        if (slot == 0) {
          for (std::size_t c = 1; c < last.size(); ++c)
            wait(x, last[c]);
        } else if (slot != 3) {  // a receive is posted ahead; its send waits
          wait(x, last[0]);
        }
      }
      last = mine;
    };
    for (std::size_t k = 0; k < std::max(fs.size(), gs.size()); ++k) {
      if (k < fs.size()) place(fs[k]);
      if (k < gs.size()) place(gs[k]);
    }
    // Every dependency inside the pair must stay before its op.
    std::vector<std::uint32_t> where(b.end - a.begin);
    for (std::uint32_t k = a.begin; k < b.end; ++k)
      where[order[k] - a.begin] = k;
    bool ok = true;
    for (std::uint32_t k = a.begin; k < b.end && ok; ++k) {
      for (std::uint32_t d : rp.deps(order[k]))
        ok = ok && (d < a.begin || where[d - a.begin] < k);
    }
    if (!ok) {
      std::iota(order.begin() + a.begin, order.begin() + b.end, a.begin);
      extra.resize(pair_extra);
      continue;
    }
    merged = true;
    ++i;
  }
  if (merged) rp.reorder(order, extra);
}

// Under dualpipev a stage sends to and receives from both neighbours, in both directions (and
// under the interleaved schedule its chunks do too). Sends and receives are rendezvous on their
// stream in program order, so the stages must agree on one order per link: every pipeline send and
// receive is ordered by when its message's producing pass ends in the schedule's own run (unit pass
// times; the same run on every rank), ties by tag. A send moves down to after its producer and the
// sends before it; a receive moves up to before its first consumer and the receives after it
// (pre-posted, as DualPipe posts its receives ahead of the chunk that needs them).
void order_pipeline_messages(RankProgram& rp, const ScheduleRun& run) {
  struct Message {
    double at = 0;
    std::uint32_t tag = 0;
    std::uint32_t op = 0;
    std::uint32_t anchor = 0;  // send: the last op before it; receive: the first op after it
  };
  const auto n = static_cast<std::uint32_t>(rp.size());
  const auto vstages = static_cast<std::uint32_t>(run.virtual_stages);
  std::vector<Message> sends, recvs;
  std::vector<std::uint8_t> is_message(n, 0);
  std::vector<std::uint32_t> first_use(n, n);
  for (std::uint32_t k = 0; k < n; ++k) {
    for (std::uint32_t d : rp.deps(k))
      first_use[d] = std::min(first_use[d], k);
  }
  for (std::uint32_t k = 0; k < n; ++k) {
    const Op& op = rp.op(k);
    const OpRole role = op.id.role();
    const bool send = role == OpRole::kPpSendActivation || role == OpRole::kPpSendGrad;
    const bool recv = role == OpRole::kPpRecvActivation || role == OpRole::kPpRecvGrad;
    if (!send && !recv) continue;
    const std::uint32_t payload = op.tag & kMaxTagPayload;
    const int mb = static_cast<int>(payload / vstages);
    const int vs = static_cast<int>(payload % vstages);  // the receiving virtual stage
    const bool activation = (op.tag >> 28) == static_cast<std::uint32_t>(P2pChannel::kPpActivation);
    const double at =
        activation ? run.end(Pass::kForward, vs - 1, mb) : run.end(Pass::kBackward, vs + 1, mb);
    is_message[k] = 1;
    if (send) {
      std::uint32_t after = 0;
      for (std::uint32_t d : rp.deps(k))
        after = std::max(after, d);
      sends.push_back({at, op.tag, k, after});
    } else {
      recvs.push_back({at, op.tag, k, first_use[k]});
    }
  }
  auto by_time = [](const Message& a, const Message& b) {
    return a.at < b.at || (a.at == b.at && a.tag < b.tag);
  };
  std::sort(sends.begin(), sends.end(), by_time);
  std::sort(recvs.begin(), recvs.end(), by_time);
  for (std::size_t i = 1; i < sends.size(); ++i)
    sends[i].anchor = std::max(sends[i].anchor, sends[i - 1].anchor);
  for (std::size_t i = recvs.size(); i-- > 1;)
    recvs[i - 1].anchor = std::min(recvs[i - 1].anchor, recvs[i].anchor);
  std::vector<std::uint32_t> order;
  order.reserve(n);
  std::size_t si = 0, ri = 0;
  for (std::uint32_t k = 0; k <= n; ++k) {
    while (ri < recvs.size() && recvs[ri].anchor <= k)
      order.push_back(recvs[ri++].op);
    if (k == n) break;
    if (!is_message[k]) order.push_back(k);
    while (si < sends.size() && sends[si].anchor <= k)
      order.push_back(sends[si++].op);
  }
  while (si < sends.size())
    order.push_back(sends[si++].op);
  rp.reorder(order);
}

std::uint32_t tensor_key(int layer, OpRole role) {
  return (static_cast<std::uint32_t>(layer + 1) << 8) | static_cast<std::uint32_t>(role);
}

struct PendingOp {
  Op op;
  std::vector<std::uint32_t> deps;
  int tensor = -1;
};

// Per-rank lowering state.
struct RankState {
  RankProgram* rp = nullptr;
  int rank = 0;
  int stage = 0;
  const StageLayout* layout = nullptr;
  std::int32_t g_tp = -1, g_dp = -1, g_edp = -1, g_ep = -1, g_etp = -1, g_emb = -1, g_norm = -1;
  int pp_prev = -1, pp_next = -1, cp_prev = -1, cp_next = -1;
  std::vector<int> tensor_stamp, tensor_left;
  std::vector<int> bucket_stamp, bucket_left;
  std::vector<std::vector<std::uint32_t>> bucket_ready;
  std::vector<std::uint32_t> last_fwd;          // per micro-batch × chunks + chunk
  std::vector<std::vector<PendingOp>> pending;  // per micro-batch × chunks + chunk (split)
  std::vector<std::uint32_t> last_bwd_in;       // per micro-batch × chunks + chunk: input grad
  int chunk = 0;                                // the chunk of the pass being lowered
  std::vector<std::uint32_t> param_ready;       // per layer (+ 2 ends): ZeRO-1/2 overlapped gather
  std::vector<std::uint8_t> param_used;
  std::uint32_t last_bwd = kNoOp;
  std::uint32_t last_reduce = kNoOp;
  std::uint32_t emb_grad = kNoOp;       // last op producing the tied embedding / LM head gradient
  std::uint32_t labels = kNoOp;         // this micro-batch's labels broadcast (last stage, tp > 1)
  std::vector<std::uint32_t> mtp_loss;  // per micro-batch × MTP module: its loss op
  std::vector<std::uint32_t> mtp_in;    // per micro-batch × MTP module: its norm op
  std::uint32_t first_compute = kNoOp;  // first compute op of the last layer emitted (prefetch)
};

// The ops producing one layer's weight gradients (ZeRO-3 reduces them per layer).
struct LayerGrads {
  std::vector<std::uint32_t> dense;
  std::vector<std::uint32_t> expert;
};

struct AttentionGrad {
  std::uint32_t dq = kNoOp;   // last attention backward step (dQ complete)
  std::uint32_t dkv = kNoOp;  // the own block's complete dK/dV (context parallel), or kNoOp
};

class Lowerer {
 public:
  Lowerer(const ModelSpec& m, const TrainingSpec& t, const ParallelConfig& p, const LowerOptions& o,
          RankGrid dense, RankGrid expert, PipelineSchedule sched, ModelPartition part)
      : m_(m),
        t_(t),
        p_(p),
        o_(o),
        dense_(std::move(dense)),
        expert_(std::move(expert)),
        sched_(std::move(sched)),
        part_(std::move(part)),
        prog_(ProgramInfo{static_cast<int>(p.world_size()),
                          p.dp_sync == DpSync::kParameterServer ? p.param_servers : 0, p.pp,
                          p.virtual_stages, sched_.microbatches(), m.num_layers, p.schedule}) {
    desc_cache_.fill(kNoOp);
    setup_sizes();
  }

  Status lower_worker(int rank);
  void lower_server(int server);
  StepProgram take() { return std::move(prog_); }

 private:
  // ---- sizes
  void setup_sizes();
  // ---- descriptors
  // The descriptor for (role, phase, variant), made by `make` the first time.
  template <class Make>
  std::uint32_t cached(OpRole role, Phase ph, int variant, Make&& make) {
    const auto i =
        (static_cast<std::size_t>(role) * kPhases + static_cast<std::size_t>(ph)) * kVariants +
        static_cast<std::size_t>(variant);
    if (desc_cache_[i] == kNoOp) desc_cache_[i] = prog_.intern(make());
    return desc_cache_[i];
  }
  OpDesc gemm(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
              std::uint8_t flags) const {
    return gemm(m, n, k, batch, flags, gemm_prec_);
  }
  OpDesc gemm(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
              std::uint8_t flags, Precision precision) const;
  OpDesc misc(OpKind kind, Stream st, std::int64_t m, std::int64_t n, std::int64_t read,
              std::int64_t written) const;
  OpDesc comm(OpKind kind, Stream st, std::int64_t bytes, Precision prec,
              std::uint8_t flags = 0) const;
  // A dispatch or combine all-to-all of `bytes` over ep, with the routing the hierarchical form
  // needs (program.hpp, kTokenRouted).
  OpDesc ep_a2a(std::int64_t bytes, Precision prec) const;
  // The memory-bound work of an MoE block's experts beside their activation, in bytes read and
  // written; the expert activation op (kExpertAct) carries it (see expert_glue()).
  struct ExpertGlue {
    std::int64_t read = 0;
    std::int64_t written = 0;
  };
  ExpertGlue expert_glue(bool backward) const;
  // HBM traffic of Transformer Engine quantizing 16-bit elements to fp8 (fp8_quantize()).
  struct Fp8Traffic {
    std::int64_t read = 0;
    std::int64_t written = 0;
  };
  Fp8Traffic fp8_quantize(std::int64_t elements) const;
  OpDesc attention(Phase ph, std::uint8_t flags, int window = 0) const;
  std::uint32_t linear(OpRole role, Phase ph, std::int64_t tokens, std::int64_t in,
                       std::int64_t out, std::int64_t batch = 1);
  // Elements of a linear layer's 16-bit operand that Transformer Engine quantizes to fp8 in a
  // kernel of its own before the GEMM (their traffic is OpDesc::aux of the GEMM; 0 when none).
  std::int64_t fp8_cast_elements(OpRole role, Phase ph, std::int64_t tokens, std::int64_t in,
                                 std::int64_t out, std::int64_t batch, Precision prec) const;
  std::uint32_t tp_collective(OpRole role, Phase ph, OpKind kind, std::int64_t tokens_full);
  const StageLayout& layout(int stage);

  // ---- emission
  std::uint32_t add(RankState& r, OpId id, std::uint32_t desc,
                    std::initializer_list<std::uint32_t> deps, std::int32_t group = -1,
                    int peer = -1, std::uint32_t tag = 0);
  std::uint32_t add_w(RankState& r, int mb, OpId id, std::uint32_t desc,
                      std::initializer_list<std::uint32_t> deps, std::int32_t group = -1,
                      int tensor = -1);
  std::uint32_t add_w(RankState& r, int mb, const Op& op, std::vector<std::uint32_t> deps,
                      int tensor);
  void flush_w(RankState& r, int mb, int chunk);
  // The rank running virtual stage `vs` next to this rank's: -1 when it is this rank (the turn
  // of dualpipev's V on the last stage).
  int pp_peer(const RankState& r, int vs) const;
  void grad_ready(RankState& r, int tensor, std::uint32_t op, int mb);
  int tensor_of(const RankState& r, int layer, OpRole role) const;
  void emit_bucket(RankState& r, int bucket, int mb);
  std::uint32_t param_dep(RankState& r, int key);

  std::uint32_t tp_op(RankState& r, OpId id, OpKind kind, std::uint32_t dep, std::int64_t tokens);
  // A sequence-parallel all-gather feeding a GEMM, and a reduce-scatter of a GEMM's output
  // (`gemm`, whose inputs are ready at `gemm_input`). Under tp_comm_overlap Transformer Engine's
  // userbuffers pipeline them with the GEMM in tp chunks: only the first chunk of the gather
  // (which the GEMM waits for) and the last chunk of the scatter (which waits for the GEMM) are
  // exposed; the rest runs beside the GEMM on the tp stream (slot 1).
  std::uint32_t sp_gather(RankState& r, OpId id, std::uint32_t dep);
  std::uint32_t sp_scatter(RankState& r, OpId id, std::uint32_t gemm, std::uint32_t gemm_input);
  std::uint32_t sp_chunks(OpId id, OpKind kind, std::int64_t chunks);
  std::uint32_t tp_grad_reduce(RankState& r, OpId id, std::uint32_t dgrad, std::uint32_t wgrad);
  std::uint32_t etp_op(RankState& r, OpId id, OpKind kind, std::uint32_t dep);
  // `qkv`: the op producing the keys and values (and queries); `q`: another producing the queries.
  std::uint32_t attention_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t qkv,
                              std::uint32_t q = kNoOp);
  AttentionGrad attention_bwd(RankState& r, int layer, int mb, std::uint32_t dout);
  // A ZeRO-3 all-gather of `elements` parameters held in `tensors` parameter tensors.
  std::uint32_t zero3_gather(RankState& r, int layer, int mb, Phase ph, int slot,
                             std::int64_t elements, bool expert, std::uint32_t after,
                             std::int64_t tensors = 1);
  // One layer's parameters held by a rank: elements and tensors, dense [0] and expert [1].
  struct LayerParams {
    std::array<std::int64_t, 2> elements{};
    std::array<std::int64_t, 2> tensors{};
  };
  static LayerParams layer_params(const RankState& r, int layer);
  // The ZeRO-3 gathers of one layer's dense and expert weights (kNoOp where it has none).
  std::pair<std::uint32_t, std::uint32_t> zero3_layer_gathers(RankState& r, int layer, int mb,
                                                              Phase ph, std::uint32_t after,
                                                              const LayerParams& lp);
  void zero3_reduce(RankState& r, int layer, int mb, int slot, std::int64_t elements, bool expert,
                    const std::vector<std::uint32_t>& grads);
  // Forward (or recompute) of one layer. ZeRO-3 gathers its weights in forward (prefetched after
  // `prefetch_after`); a recompute uses the backward's gathers `weights` / `expert_weights`.
  std::uint32_t layer_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t x,
                          std::uint32_t prefetch_after, std::uint32_t weights = kNoOp,
                          std::uint32_t expert_weights = kNoOp);
  // A block norm's forward (layer_fwd's norms, layernorm recompute's) and the experts'
  // activation (moe_fwd's, moe_act recompute's).
  std::uint32_t norm_fwd_desc(Phase ph);
  std::uint32_t expert_act_desc(Phase ph);
  std::uint32_t dense_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t n2,
                          std::uint32_t gather);
  std::uint32_t moe_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t n2,
                        std::uint32_t gather, std::uint32_t egather);
  std::uint32_t shared_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t n2,
                           std::uint32_t gather);
  std::uint32_t mla_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t n1,
                        std::uint32_t gather);
  std::uint32_t mamba_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t n1,
                          std::uint32_t gather);
  std::uint32_t layer_bwd(RankState& r, int layer, int mb, std::uint32_t dy, std::uint32_t saved,
                          std::uint32_t prefetch_after);
  std::uint32_t dense_bwd(RankState& r, int layer, int mb, std::uint32_t dy, std::uint32_t saved,
                          std::uint32_t gather, LayerGrads& grads);
  std::uint32_t moe_bwd(RankState& r, int layer, int mb, std::uint32_t dy, std::uint32_t saved,
                        std::uint32_t gather, std::uint32_t egather, LayerGrads& grads);
  std::uint32_t shared_bwd(RankState& r, int layer, int mb, std::uint32_t dy, LayerGrads& grads);
  std::uint32_t attention_block_bwd(RankState& r, int layer, int mb, std::uint32_t dres,
                                    std::uint32_t saved, std::uint32_t gather, bool first,
                                    LayerGrads& grads);
  std::uint32_t mla_bwd(RankState& r, int layer, int mb, std::uint32_t dres, std::uint32_t saved,
                        std::uint32_t gather, bool first, LayerGrads& grads);
  std::uint32_t mamba_bwd(RankState& r, int layer, int mb, std::uint32_t dres, std::uint32_t saved,
                          std::uint32_t gather, bool first, LayerGrads& grads);
  // MLA's all-gather (forward) or reduce-scatter (backward) of `width` latent columns over tp.
  std::uint32_t mla_gather(RankState& r, OpId id, std::int64_t width,
                           std::initializer_list<std::uint32_t> deps,
                           OpKind kind = OpKind::kAllGather);
  std::uint32_t mla_norm(OpRole role, Phase ph, std::int64_t width);
  std::uint32_t scan_gemm(Phase ph, int slot);
  std::uint32_t embedding_fwd(RankState& r, int mb);
  void embedding_bwd(RankState& r, int mb, std::uint32_t dy);
  // The final norm, LM head and loss of the model (layer kNone) or of an MTP module (its block's
  // layer), which shares the LM head.
  std::uint32_t lm_head_fwd(RankState& r, int mb, std::uint32_t x, int layer = OpId::kNone);
  std::uint32_t lm_head_bwd(RankState& r, int mb, std::uint32_t loss, int layer = OpId::kNone);
  // Multi-token prediction on the last virtual stage: module i from the previous depth's output
  // `x` (the main model's last layer for i = 0); returns its block's output (forward) or the
  // gradient it sends back to `x` (backward).
  std::uint32_t mtp_fwd(RankState& r, int mb, int i, std::uint32_t x);
  std::uint32_t mtp_bwd(RankState& r, int mb, int i, std::uint32_t loss);
  void forward_pass(RankState& r, int mb, int chunk);
  void backward_pass(RankState& r, int mb, int chunk);
  void step_tail(RankState& r);

  const ModelSpec& m_;
  const TrainingSpec& t_;
  const ParallelConfig& p_;
  const LowerOptions& o_;
  RankGrid dense_;
  RankGrid expert_;
  PipelineSchedule sched_;
  ScheduleRun unit_run_;  // the schedule run with unit pass times (message order)
  // The schedules whose pipeline messages follow the schedule's run (order_pipeline_messages).
  bool ordered_messages() const {
    return p_.pp > 1 &&
           (p_.schedule == Schedule::kDualPipeV || p_.schedule == Schedule::kInterleaved);
  }
  ModelPartition part_;
  StepProgram prog_;
  std::array<std::uint32_t, static_cast<std::size_t>(kRoles* kPhases* kVariants)> desc_cache_{};
  std::vector<StageLayout> layouts_;
  std::vector<bool> layout_ready_;

  // Sizes of one rank (elements).
  PrecisionBytes bytes_;
  Precision gemm_prec_ = Precision::kBf16;
  Precision act_prec_ = Precision::kBf16;
  std::int64_t b_ = 1, sl_ = 0, T_ = 0, Ts_ = 0, h_ = 0, hd_ = 0, heads_l_ = 0, kv_heads_l_ = 0;
  std::int64_t q_l_ = 0, kv_l_ = 0, f_l_ = 0, V_l_ = 0;
  std::int64_t qkv_l_ = 0;  // the QKV projection's output: queries (and their gate), keys, values
  std::int64_t experts_ = 0, experts_l_ = 0, fe_l_ = 0, per_expert_ = 0, routed_ = 0, fs_l_ = 0;
  std::int64_t v_l_ = 0, kv_up_l_ = 0, kv_ring_bytes_ = 0;
  std::int64_t mamba_in_l_ = 0, mamba_conv_l_ = 0, mamba_inner_l_ = 0;
  bool shared_ = false, fp8_dispatch_ = false, counts_to_host_ = false;
  int head_key_ = 0;  // param_ready key of the final norm and LM head (after the MTP blocks)
  int tp_ = 1, cp_ = 1, ep_ = 1, etp_ = 1, m_count_ = 0, vstages_ = 1, dp_shard_ = 1, edp_ = 1,
      servers_ = 0;
  bool sp_ = false, split_ = false, gated_ = false, buckets_on_ = false;
  std::int64_t bucket_size_ = 0;
};

void Lowerer::setup_sizes() {
  bytes_ = precision_bytes(t_, o_.fp32_grads);
  gemm_prec_ = t_.precision;
  act_prec_ = bytes_.activation == 4
                  ? Precision::kFp32
                  : (t_.precision == Precision::kFp16 ? Precision::kFp16 : Precision::kBf16);
  tp_ = p_.tp;
  cp_ = p_.cp;
  ep_ = p_.ep;
  sp_ = p_.sequence_parallel && p_.tp > 1;
  split_ = sched_.split_backward();
  gated_ = is_gated(m_.mlp);
  m_count_ = sched_.microbatches();
  vstages_ = part_.virtual_stages();
  if (ordered_messages()) {
    if (auto run = run_schedule(sched_, PassTimes{}); run) unit_run_ = std::move(*run);
  }
  b_ = p_.micro_batch_size;
  sl_ = t_.seq_length / cp_;
  T_ = b_ * sl_;
  Ts_ = sp_ ? T_ / tp_ : T_;
  h_ = m_.hidden;
  hd_ = m_.head_dim;
  heads_l_ = m_.heads / tp_;
  kv_heads_l_ = m_.kv_heads / tp_;
  q_l_ = heads_l_ * hd_;
  kv_l_ = kv_heads_l_ * hd_;
  // Gated attention's query projection also yields the gate; the gate's sigmoid and product, one
  // elementwise pass over the attention output, are not costed (under 1 % of the layer).
  qkv_l_ = (m_.attention_output_gate ? 2 : 1) * q_l_ + 2 * kv_l_;
  f_l_ = m_.ffn_hidden / tp_;
  V_l_ = m_.vocab / tp_;
  etp_ = p_.expert_tp();
  head_key_ = m_.num_layers + m_.mtp_layers;
  v_l_ = heads_l_ * m_.v_head_dim();
  kv_ring_bytes_ = 2 * b_ * kv_heads_l_ * sl_ * hd_ * bytes_.activation;
  if (m_.mla) {
    kv_up_l_ = heads_l_ * (m_.mla->qk_nope_head_dim + m_.mla->v_head_dim);
    kv_ring_bytes_ = b_ * heads_l_ * sl_ * (m_.qk_head_dim() + m_.v_head_dim()) * bytes_.activation;
  }
  if (m_.mamba) {
    mamba_in_l_ = m_.mamba->in_proj_dim() / tp_;
    mamba_conv_l_ = m_.mamba->conv_dim() / tp_;
    mamba_inner_l_ = m_.mamba->d_inner() / tp_;
  }
  if (m_.is_moe()) {
    experts_ = m_.moe->num_experts;
    experts_l_ = experts_ / ep_;
    fe_l_ = m_.moe->expert_ffn_hidden / etp_;
    shared_ = m_.moe->shared_ffn() > 0;
    fs_l_ = m_.moe->shared_ffn() / tp_;
    fp8_dispatch_ = p_.moe_fp8_dispatch;
    // Dropless routing sizes the dispatch and the grouped GEMMs by the tokens each expert got,
    // which the framework reads on the host; capacity-factor routing pads to a fixed size.
    counts_to_host_ = m_.moe->capacity_factor == 0 && (ep_ > 1 || experts_l_ > 1);
    // The busiest expert-parallel rank's tokens per local expert and tokens received
    // (moe_routing.hpp).
    const MoeRouting routing = moe_routing(m_, p_, t_.seq_length);
    per_expert_ = routing.per_expert;
    routed_ = routing.received;
  }
  dp_shard_ = p_.dp * p_.cp;
  edp_ = static_cast<int>(p_.expert_dp());
  servers_ = p_.dp_sync == DpSync::kParameterServer ? p_.param_servers : 0;
  bucket_size_ = o_.bucket_elements > 0 ? o_.bucket_elements : default_bucket_elements(p_.dp);
  buckets_on_ =
      p_.zero_stage < 3 && (dp_shard_ > 1 || servers_ > 0 || p_.offload != Offload::kNone);
}

// ---- descriptors

OpDesc Lowerer::gemm(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                     std::uint8_t flags, Precision precision) const {
  OpDesc d;
  d.kind = OpKind::kGemm;
  d.precision = precision;
  d.flags = flags;
  d.m = m;
  d.n = n;
  d.k = k;
  d.batch = batch;
  d.flops = Flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                  static_cast<double>(batch));
  const std::int64_t in = bytes_per_element(d.precision);
  const bool acc = (flags & kAccumulate) != 0;
  const std::int64_t out = acc ? bytes_.grad : bytes_.activation;
  d.bytes_read = Bytes(batch * (m * k + k * n) * in + (acc ? batch * m * n * out : 0));
  d.bytes_written = Bytes(batch * m * n * out);
  return d;
}

OpDesc Lowerer::misc(OpKind kind, Stream st, std::int64_t m, std::int64_t n, std::int64_t read,
                     std::int64_t written) const {
  OpDesc d;
  d.kind = kind;
  d.stream = st;
  d.precision = act_prec_;
  d.m = m;
  d.n = n;
  d.bytes_read = Bytes(read);
  d.bytes_written = Bytes(written);
  return d;
}

// What Megatron-core's all-to-all token dispatcher and Transformer Engine's grouped linear layers
// run around an MoE block's grouped GEMMs besides the activation, per micro-batch on the busiest
// rank (R rows received, rows = tokens per local expert × local experts after the etp gather):
//   - with more than one local expert and ep > 1, the received tokens are regrouped from
//     source-rank order to local-expert order after the dispatch and back before the combine
//     (token_dispatcher.py, sort_chunks_by_idxs): each a read and a write of R × hidden, and the
//     same two in the backward pass;
//   - with fp8 training, GroupedLinear quantizes each grouped GEMM's activation input, a separate
//     pass (split_quantize) writing a row-wise copy for the GEMM and a column-wise one for the
//     weight gradient (1 byte per element each): forward the fc1 input (rows × hidden) and the fc2
//     input (rows × expert ffn), backward the output gradients of fc2 (rows × hidden) and fc1
//     (rows × expert ffn, twice for a gated MLP).
// The permutation before the dispatch and the un-permutation after the combine are the router
// top-k and combine ops; the weights' casts happen once per step (not counted).
// The activation op carries these bytes: they lie on the same chain between the dispatch and the
// combine, so the block's time is the same as with separate ops.
Lowerer::ExpertGlue Lowerer::expert_glue(bool backward) const {
  ExpertGlue g;
  const std::int64_t e = bytes_.activation;
  if (ep_ > 1 && experts_l_ > 1) {
    g.read += 2 * routed_ * h_ * e;
    g.written += 2 * routed_ * h_ * e;
  }
  if (gemm_prec_ == Precision::kFp8) {
    const std::int64_t rows = per_expert_ * experts_l_;
    const std::int64_t ffn = backward && gated_ ? 2 * fe_l_ : fe_l_;
    const Fp8Traffic q = fp8_quantize(rows * (h_ + ffn));
    g.read += q.read;
    g.written += q.written;
  }
  return g;
}

// Quantizing `elements` 16-bit values to fp8 under the training's recipe: one read (two under
// current scaling, whose amax pass reads the tensor before the cast) and a row-wise and a
// column-wise fp8 copy, with their scales (MXFP8: one byte per 32 elements; blockwise: an fp32
// scale per 128).
Lowerer::Fp8Traffic Lowerer::fp8_quantize(std::int64_t elements) const {
  const std::int64_t e = bytes_.activation;
  Fp8Traffic q{elements * e, 2 * elements};
  switch (t_.fp8_recipe) {
    case Fp8Recipe::kCurrent:
      q.read += elements * e;
      break;
    case Fp8Recipe::kMxfp8:
      q.written += 2 * ceil_div(elements, 32);
      break;
    case Fp8Recipe::kBlockwise:
      q.written += 2 * 4 * ceil_div(elements, 128);
      break;
    case Fp8Recipe::kDelayed:
      break;
  }
  return q;
}

OpDesc Lowerer::comm(OpKind kind, Stream st, std::int64_t bytes, Precision prec,
                     std::uint8_t flags) const {
  OpDesc d;
  d.kind = kind;
  d.stream = st;
  d.precision = prec;
  d.flags = flags;
  d.comm_bytes = Bytes(bytes);
  return d;
}

OpDesc Lowerer::ep_a2a(std::int64_t bytes, Precision prec) const {
  OpDesc d = comm(OpKind::kAllToAll, Stream::kEpComm, bytes, prec);
  if (p_.moe_a2a == MoeA2a::kHierarchical) {
    d.flags = kTokenRouted;
    d.m = experts_;
    d.k = m_.moe->top_k;
    d.batch = m_.moe->expert_groups;
    d.aux = m_.moe->group_top_k;
  }
  return d;
}

OpDesc Lowerer::attention(Phase ph, std::uint8_t flags, int window) const {
  OpDesc d;
  d.kind = OpKind::kAttention;
  d.precision = act_prec_;
  d.flags = flags;
  d.batch = b_ * heads_l_;
  d.m = t_.seq_length / cp_;
  d.n = t_.seq_length / cp_;
  d.k = hd_;
  d.aux = kv_heads_l_;
  const bool backward = ph == Phase::kBackwardInput;
  const std::int64_t e = bytes_.activation;
  const std::int64_t lse = b_ * heads_l_ * d.m * kFp32;
  if (!m_.mla && window == 0) {
    const double fraction = (flags & (kCausal | kHalfBlock)) != 0 ? 0.5 : 1.0;
    const double forward = 4.0 * static_cast<double>(d.batch) * static_cast<double>(d.m) *
                           static_cast<double>(d.n) * static_cast<double>(d.k) * fraction;
    d.flops = Flops(backward ? 2.0 * forward : forward);
    const std::int64_t q = b_ * heads_l_ * d.m * hd_ * e;
    const std::int64_t kv = 2 * b_ * kv_heads_l_ * d.n * hd_ * e;
    d.bytes_read = Bytes(backward ? 3 * q + kv + lse : q + kv);  // + O and dO backward
    d.bytes_written = Bytes(backward ? q + kv : q + lse);
    return d;
  }
  // MLA (QKᵀ over qk_head_dim, PV over v_head_dim per head) and local attention (each query
  // attends to the last `window` keys: w − w²/(2m) on average, as flops.hpp counts).
  const double widths = static_cast<double>(m_.qk_head_dim() + m_.v_head_dim());
  const double m = static_cast<double>(d.m);
  double keys = static_cast<double>(d.n) * ((flags & (kCausal | kHalfBlock)) != 0 ? 0.5 : 1.0);
  if (window > 0) {
    const double w = window;
    keys = w - w * w / (2.0 * m);
  }
  const double forward = 2.0 * static_cast<double>(d.batch) * m * keys * widths;
  d.flops = Flops(backward ? 2.0 * forward : forward);
  const std::int64_t q = b_ * heads_l_ * d.m * m_.qk_head_dim() * e;
  const std::int64_t kv = b_ * kv_heads_l_ * d.n * (m_.qk_head_dim() + m_.v_head_dim()) * e;
  const std::int64_t o = b_ * heads_l_ * d.m * m_.v_head_dim() * e;
  d.bytes_read = Bytes(backward ? q + kv + 2 * o + lse : q + kv);
  d.bytes_written = Bytes(backward ? q + kv : o + lse);
  return d;
}

// A linear layer's GEMM in phase `ph`: forward Y = X·Wᵀ, input gradient dX = dY·W, weight
// gradient dW += dYᵀ·X.
std::uint32_t Lowerer::linear(OpRole role, Phase ph, std::int64_t tokens, std::int64_t in,
                              std::int64_t out, std::int64_t batch) {
  // fp8 training (Transformer Engine) runs fp8 GEMMs inside the transformer layers only; the
  // output layer stays in 16-bit (Megatron-LM / NeMo fp8 recipes), and so does an MoE router's
  // gate, a plain PyTorch linear layer (Megatron-core's router_gating_linear), not Transformer
  // Engine's.
  const bool sixteen_bit = role == OpRole::kLmHead || role == OpRole::kRouter;
  const Precision prec = sixteen_bit && gemm_prec_ == Precision::kFp8 ? act_prec_ : gemm_prec_;
  // Batched linear layers are an MoE layer's local experts: a GEMM kernel per expert.
  const std::uint8_t groups = batch > 1 ? kPerGroupKernels : 0;
  return cached(role, ph, 0, [&] {
    OpDesc d;
    switch (ph) {
      case Phase::kBackwardInput:
        d = gemm(tokens, in, out, batch, groups, prec);
        break;
      case Phase::kBackwardWeight:
        d = gemm(out, in, tokens, batch, kTransA | kAccumulate | groups, prec);
        break;
      default:
        d = gemm(tokens, out, in, batch, kTransB | groups, prec);
        break;
    }
    const Fp8Traffic q = fp8_quantize(fp8_cast_elements(role, ph, tokens, in, out, batch, prec));
    d.aux = q.read + q.written;
    return d;
  });
}

// Transformer Engine runs a linear layer's fp8 GEMM on fp8 copies of its operands: it quantizes
// the 16-bit activation-side operand (the input in the forward pass, the output gradient in the
// backward pass; the weight gradient reuses both) in a kernel of its own, writing a row-wise and
// a column-wise (transposed) fp8 copy, the second for the other GEMM that needs it. A layer whose
// input comes out of its own fused norm (LayerNormLinear: QKV, the MLP's first layer, Mamba's
// input projection, MLA's up-projections after their latent norms) gets the forward copies from
// the norm kernel. The weights' fp8 copies are made once per step (cached over micro-batches) and
// not counted; the experts' quantization is in their glue (expert_glue). The gated first layer of
// the shared experts is one linear of twice the width: its two ops share the input's copy.
std::int64_t Lowerer::fp8_cast_elements(OpRole role, Phase ph, std::int64_t tokens, std::int64_t in,
                                        std::int64_t out, std::int64_t batch,
                                        Precision prec) const {
  if (prec != Precision::kFp8 || batch > 1 || ph == Phase::kBackwardWeight) return 0;
  if (ph == Phase::kBackwardInput) return tokens * out;
  switch (role) {
    case OpRole::kAttnQkv:
    case OpRole::kMlpUp:
    case OpRole::kMlpGate:
    case OpRole::kMambaInProj:
    case OpRole::kMlaKvUp:
      return 0;
    case OpRole::kMlaQUp:
      return in == h_ ? tokens * in : 0;  // without a query latent: a plain linear layer
    case OpRole::kSharedUp:
      return gated_ ? tokens * in / 2 : tokens * in;
    default:
      return tokens * in;
  }
}

std::uint32_t Lowerer::tp_collective(OpRole role, Phase ph, OpKind kind, std::int64_t tokens) {
  return cached(role, ph, static_cast<int>(kind) % kVariants, [&] {
    return comm(kind, Stream::kTpComm, tokens * h_ * bytes_.activation, act_prec_);
  });
}

const StageLayout& Lowerer::layout(int stage) {
  if (layouts_.empty()) {
    layouts_.resize(static_cast<std::size_t>(p_.pp));
    layout_ready_.assign(static_cast<std::size_t>(p_.pp), false);
  }
  StageLayout& L = layouts_[static_cast<std::size_t>(stage)];
  if (layout_ready_[static_cast<std::size_t>(stage)]) return L;
  layout_ready_[static_cast<std::size_t>(stage)] = true;
  L.params = part_.rank_params(stage);
  StageParams sp = part_.stage_params(stage, bucket_size_);
  L.tensors = std::move(sp.tensors);
  L.tensor_bucket = std::move(sp.tensor_bucket);
  for (const GradBucket& gb : sp.buckets) {
    L.buckets.push_back({});
    L.buckets.back().expert = gb.expert;
    L.buckets.back().elements = gb.elements;
    L.buckets.back().tensors = static_cast<int>(gb.tensors.size());
  }
  for (std::size_t i = 0; i < L.tensors.size(); ++i) {
    L.tensor_index[tensor_key(L.tensors[i].layer, L.tensors[i].role)] = static_cast<int>(i);
  }
  const std::int64_t shard_dense = p_.zero_stage >= 1 ? dp_shard_ : 1;
  const std::int64_t shard_expert = p_.zero_stage >= 1 ? edp_ : 1;
  L.optimizer_params =
      ceil_div(L.params.dense, shard_dense) + ceil_div(L.params.expert, shard_expert);
  for (Bucket& b : L.buckets) {
    const std::int64_t shard = p_.zero_stage >= 1 ? (b.expert ? edp_ : dp_shard_) : 1;
    const OpKind kind = p_.zero_stage == 0 ? OpKind::kAllReduce : OpKind::kReduceScatter;
    b.reduce_desc = prog_.intern(comm(kind, Stream::kDpComm, b.elements * bytes_.grad,
                                      bytes_.grad == 4 ? Precision::kFp32 : act_prec_));
    b.gather_desc = prog_.intern(
        comm(OpKind::kAllGather, Stream::kDpComm, b.elements * bytes_.param, act_prec_));
    OpDesc d2h = comm(OpKind::kDeviceToHost, Stream::kDeviceToHost,
                      ceil_div(b.elements, shard) * bytes_.grad, act_prec_);
    b.d2h_desc = prog_.intern(d2h);
    OpDesc h2d = comm(OpKind::kHostToDevice, Stream::kHostToDevice,
                      ceil_div(b.elements, shard) * bytes_.param, act_prec_);
    b.h2d_desc = prog_.intern(h2d);
    for (int j = 0; j < servers_; ++j) {
      const std::int64_t part = b.elements / servers_ + (j < b.elements % servers_ ? 1 : 0);
      b.parts.push_back(part);
      b.push_desc.push_back(
          prog_.intern(comm(OpKind::kSend, Stream::kPsSend, part * bytes_.grad, act_prec_)));
      b.pull_desc.push_back(
          prog_.intern(comm(OpKind::kRecv, Stream::kPsRecv, part * bytes_.param, act_prec_)));
    }
  }
  return L;
}

// ---- emission

std::uint32_t Lowerer::add(RankState& r, OpId id, std::uint32_t desc,
                           std::initializer_list<std::uint32_t> deps, std::int32_t group, int peer,
                           std::uint32_t tag) {
  std::array<std::uint32_t, 8> buf{};
  std::size_t n = 0;
  for (std::uint32_t d : deps) {
    if (d != kNoOp) buf[n++] = d;
  }
  return r.rp->add(Op{id, desc, group, peer, tag}, std::span<const std::uint32_t>(buf.data(), n));
}

std::uint32_t Lowerer::add_w(RankState& r, int mb, OpId id, std::uint32_t desc,
                             std::initializer_list<std::uint32_t> deps, std::int32_t group,
                             int tensor) {
  std::vector<std::uint32_t> list;
  for (std::uint32_t d : deps) {
    if (d != kNoOp) list.push_back(d);
  }
  return add_w(r, mb, Op{id, desc, group, -1, 0}, std::move(list), tensor);
}

// Emits a weight-gradient op now, or defers it to the W pass of a split-backward schedule (its
// index is then kPendingBit | position in the pending list).
std::uint32_t Lowerer::add_w(RankState& r, int mb, const Op& op, std::vector<std::uint32_t> deps,
                             int tensor) {
  if (!split_) {
    const std::uint32_t i = r.rp->add(op, deps);
    r.last_bwd = i;
    if (op.id.role() == OpRole::kDpGradReduce || op.id.role() == OpRole::kOffloadGrad) {
      r.last_reduce = i;
    }
    if (tensor >= 0) grad_ready(r, tensor, i, mb);
    return i;
  }
  auto& list = r.pending[static_cast<std::size_t>(mb * part_.chunks() + r.chunk)];
  list.push_back(PendingOp{op, std::move(deps), tensor});
  return kPendingBit | static_cast<std::uint32_t>(list.size() - 1);
}

int Lowerer::pp_peer(const RankState& r, int vs) const {
  const int stage = stage_of_virtual(p_.schedule, p_.pp, vs);
  if (stage == r.stage) return -1;
  return stage == (r.stage + 1) % p_.pp ? r.pp_next : r.pp_prev;
}

void Lowerer::flush_w(RankState& r, int mb, int chunk) {
  auto& list = r.pending[static_cast<std::size_t>(mb * part_.chunks() + chunk)];
  std::vector<std::uint32_t> resolved;
  resolved.reserve(list.size());
  for (PendingOp& p : list) {
    for (std::uint32_t& d : p.deps) {
      if (d & kPendingBit) d = resolved[d & ~kPendingBit];
    }
    const std::uint32_t i = r.rp->add(p.op, p.deps);
    resolved.push_back(i);
    r.last_bwd = i;
    if (p.op.id.role() == OpRole::kDpGradReduce || p.op.id.role() == OpRole::kOffloadGrad) {
      r.last_reduce = i;
    }
    if (p.tensor >= 0) grad_ready(r, p.tensor, i, mb);
  }
  list.clear();
}

int Lowerer::tensor_of(const RankState& r, int layer, OpRole role) const {
  const auto& idx = r.layout->tensor_index;
  auto it = idx.find(tensor_key(layer, role));
  if (it != idx.end()) return it->second;
  if (layer >= m_.num_layers && layer != OpId::kNone) {
    // MTP modules share the LM head and the word embedding: the last stage's copy of it when
    // the model has several stages (tied: the LM head copy), the embedding itself on one stage.
    if (role == OpRole::kLmHead) return tensor_of(r, OpId::kNone, OpRole::kLmHead);
    if (role == OpRole::kEmbedding) {
      auto copy = idx.find(tensor_key(m_.num_layers, OpRole::kEmbedding));
      if (copy != idx.end()) return copy->second;
      auto own = idx.find(tensor_key(OpId::kNone, OpRole::kEmbedding));
      return own != idx.end() ? own->second : tensor_of(r, OpId::kNone, OpRole::kLmHead);
    }
  }
  if (role == OpRole::kLmHead) return tensor_of(r, OpId::kNone, OpRole::kEmbedding);  // tied
  return -1;
}

void Lowerer::grad_ready(RankState& r, int tensor, std::uint32_t op, int mb) {
  const ParamTensor& pt = r.layout->tensors[static_cast<std::size_t>(tensor)];
  if (pt.role == OpRole::kEmbedding || pt.role == OpRole::kLmHead) r.emb_grad = op;
  if (!buckets_on_) return;
  const bool every_mb = p_.zero_stage == 2;
  if (!every_mb && mb != m_count_ - 1) return;
  const auto ti = static_cast<std::size_t>(tensor);
  if (r.tensor_stamp[ti] != mb) {
    r.tensor_stamp[ti] = mb;
    r.tensor_left[ti] = pt.grad_producers;
  }
  const int b = r.layout->tensor_bucket[ti];
  const auto bi = static_cast<std::size_t>(b);
  if (r.bucket_stamp[bi] != mb) {
    r.bucket_stamp[bi] = mb;
    r.bucket_left[bi] = r.layout->buckets[bi].tensors;
    r.bucket_ready[bi].clear();
  }
  r.bucket_ready[bi].push_back(op);
  if (--r.tensor_left[ti] > 0) return;
  if (--r.bucket_left[bi] == 0 && (p_.overlap_grad_reduce || every_mb)) emit_bucket(r, b, mb);
}

void Lowerer::emit_bucket(RankState& r, int b, int mb) {
  const Bucket& bk = r.layout->buckets[static_cast<std::size_t>(b)];
  const auto& ready = r.bucket_ready[static_cast<std::size_t>(b)];
  std::uint32_t last = kNoOp;
  if (servers_ > 0) {
    for (int j = 0; j < servers_; ++j) {
      const int slot = b * servers_ + j;
      last = r.rp->add(
          Op{OpId::make(OpId::kNone, r.rank, Phase::kBackwardWeight, OpRole::kPsPush, slot),
             bk.push_desc[static_cast<std::size_t>(j)], -1, static_cast<int>(p_.world_size()) + j,
             p2p_tag(P2pChannel::kPsPush, static_cast<std::uint32_t>(slot))},
          ready);
    }
  } else {
    const std::int32_t group = bk.expert ? r.g_edp : r.g_dp;
    if (group >= 0) {
      last = r.rp->add(
          Op{OpId::make(OpId::kNone, mb, Phase::kBackwardWeight, OpRole::kDpGradReduce, b),
             bk.reduce_desc, group, -1, 0},
          ready);
    }
  }
  if (p_.offload != Offload::kNone) {
    const OpId id = OpId::make(OpId::kNone, mb, Phase::kBackwardWeight, OpRole::kOffloadGrad, b);
    last = last == kNoOp ? r.rp->add(Op{id, bk.d2h_desc, -1, -1, 0}, ready)
                         : add(r, id, bk.d2h_desc, {last});
  }
  if (last != kNoOp) r.last_reduce = last;
}

std::uint32_t Lowerer::param_dep(RankState& r, int key) {
  const auto k = static_cast<std::size_t>(key + 1);
  if (r.param_used.empty() || r.param_used[k]) return kNoOp;
  r.param_used[k] = 1;
  return r.param_ready[k];
}

// A tensor-parallel collective over `tokens` full-sequence tokens (T or the SP shard's T).
std::uint32_t Lowerer::tp_op(RankState& r, OpId id, OpKind kind, std::uint32_t dep,
                             std::int64_t tokens) {
  return add(r, id, tp_collective(id.role(), id.phase(), kind, tokens), {dep}, r.g_tp);
}

std::uint32_t Lowerer::sp_gather(RankState& r, OpId id, std::uint32_t dep) {
  if (!p_.tp_comm_overlap) return tp_op(r, id, OpKind::kAllGather, dep, T_);
  const std::uint32_t head = add(r, id, sp_chunks(id, OpKind::kAllGather, 1), {dep}, r.g_tp);
  add(r, OpId::make(id.layer(), id.microbatch(), id.phase(), id.role(), 1),
      sp_chunks(id, OpKind::kAllGather, tp_ - 1), {head}, r.g_tp);
  return head;
}

std::uint32_t Lowerer::sp_scatter(RankState& r, OpId id, std::uint32_t gemm,
                                  std::uint32_t gemm_input) {
  if (!p_.tp_comm_overlap) return tp_op(r, id, OpKind::kReduceScatter, gemm, T_);
  const std::uint32_t head =
      add(r, OpId::make(id.layer(), id.microbatch(), id.phase(), id.role(), 1),
          sp_chunks(id, OpKind::kReduceScatter, tp_ - 1), {gemm_input}, r.g_tp);
  return add(r, id, sp_chunks(id, OpKind::kReduceScatter, 1), {gemm, head}, r.g_tp);
}

// `chunks` of the tp chunks of `id`'s sequence-parallel collective over the micro-batch's tokens,
// cached per role and phase beside tp_collective()'s descriptors (variants 4-7).
std::uint32_t Lowerer::sp_chunks(OpId id, OpKind kind, std::int64_t chunks) {
  const int variant = 4 + (kind == OpKind::kReduceScatter ? 2 : 0) + (chunks == 1 ? 0 : 1);
  return cached(id.role(), id.phase(), variant, [&] {
    return comm(kind, Stream::kTpComm, T_ / tp_ * chunks * h_ * bytes_.activation, act_prec_);
  });
}

// The backward's all-reduce of a column-parallel layer's input gradient (`dgrad`): beside the
// layer's weight-gradient GEMM (`wgrad`) when async_tp_allreduce, else after it. A split backward
// (zero-bubble schedules) defers the weight gradients, so there it always runs beside them.
std::uint32_t Lowerer::tp_grad_reduce(RankState& r, OpId id, std::uint32_t dgrad,
                                      std::uint32_t wgrad) {
  if (p_.async_tp_allreduce || split_) return tp_op(r, id, OpKind::kAllReduce, dgrad, T_);
  return add(r, id, tp_collective(id.role(), id.phase(), OpKind::kAllReduce, T_), {dgrad, wgrad},
             r.g_tp);
}

// An expert-tensor-parallel collective over the tokens routed to this rank's experts.
std::uint32_t Lowerer::etp_op(RankState& r, OpId id, OpKind kind, std::uint32_t dep) {
  return add(r, id, tp_collective(id.role(), id.phase(), kind, routed_ * etp_), {dep}, r.g_etp);
}

std::uint32_t Lowerer::mla_gather(RankState& r, OpId id, std::int64_t width,
                                  std::initializer_list<std::uint32_t> deps, OpKind kind) {
  const std::uint32_t desc = cached(id.role(), id.phase(), static_cast<int>(kind) % kVariants, [&] {
    return comm(kind, Stream::kTpComm, T_ * width * bytes_.activation, act_prec_);
  });
  return add(r, id, desc, deps, r.g_tp);
}

std::uint32_t Lowerer::mla_norm(OpRole role, Phase ph, std::int64_t width) {
  const std::int64_t e = bytes_.activation;
  const bool backward = ph == Phase::kBackwardInput;
  return cached(role, ph, 0, [&] {
    return misc(OpKind::kNorm, Stream::kCompute, T_, width, (backward ? 2 : 1) * T_ * width * e,
                T_ * width * e);
  });
}

// The SSD scan's matmuls (Dao & Gu 2024 §6) over chunks of q = min(chunk, s/cp) tokens, per
// micro-batch, chunk and local head (or B/C group): forward C·Bᵀ (slot 0), its masked product
// with X (1), the chunk states Bᵀ·X (2) and their output C·state (3); backward the two input
// gradients of each, in reverse (slots 0-7).
// The chunked scan's matmuls run in the activations' 16-bit precision under fp8 training too:
// Transformer Engine's fp8 covers the linear layers, and mamba_ssm's SSD kernels (Triton, called
// by Megatron-core's MambaMixer) take the 16-bit activations and accumulate in fp32.
std::uint32_t Lowerer::scan_gemm(Phase ph, int slot) {
  return cached(OpRole::kMambaScan, ph, slot, [&] {
    const auto gemm = [&](std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                          std::uint8_t flags) {
      return this->gemm(m, n, k, batch, flags, act_prec_);
    };
    const MambaSpec& s = *m_.mamba;
    const std::int64_t q = std::min<std::int64_t>(s.chunk, sl_);
    const std::int64_t chunks = ceil_div(sl_, q);
    const std::int64_t n = s.state_dim, p = s.head_dim;
    const std::int64_t heads = b_ * chunks * (s.heads / tp_);
    const std::int64_t groups = b_ * chunks * (s.groups / tp_);
    if (s.delta()) {
      // The chunked gated delta rule per value head (flops.cpp, mamba_core_flops_per_token):
      // K·Kᵀ, T from the triangular solve, W = T·K, U = T·V, W·S, the state update Kᵀ·V', Q·Kᵀ
      // and the output [Q | Q·Kᵀ]·[S ; V'] as one product. Backward: both input gradients of
      // each, in reverse (dA = dC·Bᵀ, then dB = Aᵀ·dC).
      struct Shape {
        std::int64_t m, n, k;
        std::uint8_t flags;
      };
      const std::array<Shape, kDeltaForwardGemms> fwd{{{q, q, n, kTransB},
                                                       {q, q, q, 0},
                                                       {q, n, q, 0},
                                                       {q, p, q, 0},
                                                       {q, p, n, 0},
                                                       {n, p, q, kTransA},
                                                       {q, q, n, kTransB},
                                                       {q, p, n + q, 0}}};
      if (ph != Phase::kBackwardInput) {
        const Shape& f = fwd[static_cast<std::size_t>(slot)];
        return gemm(f.m, f.n, f.k, heads, f.flags);
      }
      const Shape& f = fwd[static_cast<std::size_t>(kDeltaForwardGemms - 1 - slot / 2)];
      return slot % 2 == 0 ? gemm(f.m, f.k, f.n, heads, kTransB)
                           : gemm(f.k, f.n, f.m, heads, kTransA);
    }
    if (ph != Phase::kBackwardInput) {
      switch (slot) {
        case 0:
          return gemm(q, q, n, groups, kTransB);
        case 1:
          return gemm(q, p, q, heads, 0);
        case 2:
          return gemm(n, p, q, heads, kTransA);
        default:
          return gemm(q, p, n, heads, 0);
      }
    }
    switch (slot) {
      case 0:
        return gemm(q, n, p, heads, kTransB);  // dC from the state output
      case 1:
        return gemm(n, p, q, heads, kTransA);  // d state
      case 2:
        return gemm(n, q, p, heads, kTransB);  // dB from the states
      case 3:
        return gemm(q, p, n, heads, 0);  // dX from the states
      case 4:
        return gemm(q, q, p, heads, kTransB);  // d scores
      case 5:
        return gemm(q, p, q, heads, kTransA);  // dX from the scores
      case 6:
        return gemm(q, n, q, groups, 0);  // dC from the scores
      default:
        return gemm(q, n, q, groups, kTransA);  // dB from the scores
    }
  });
}

std::uint32_t Lowerer::attention_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t qkv,
                                     std::uint32_t q) {
  const int window = layer < m_.num_layers ? m_.attention_window(layer) : 0;
  if (window > 0 && window < sl_) {
    // Local attention: every key a query needs is within its own context-parallel chunks (the
    // halo of the previous chunk is not modelled).
    return add(r, OpId::make(layer, mb, ph, OpRole::kAttnCore),
               cached(OpRole::kAttnCore, ph, 2, [&] { return attention(ph, kCausal, window); }),
               {qkv, q});
  }
  if (cp_ == 1) {
    return add(r, OpId::make(layer, mb, ph, OpRole::kAttnCore),
               cached(OpRole::kAttnCore, ph, 0, [&] { return attention(ph, kCausal); }), {qkv, q});
  }
  const std::int64_t kv_bytes = kv_ring_bytes_;
  const std::uint32_t send_d = cached(OpRole::kCpKvSend, ph, 0, [&] {
    return comm(OpKind::kSend, Stream::kCpSend, kv_bytes, act_prec_);
  });
  const std::uint32_t recv_d = cached(OpRole::kCpKvRecv, ph, 0, [&] {
    return comm(OpKind::kRecv, Stream::kCpRecv, kv_bytes, act_prec_);
  });
  const P2pChannel ch =
      ph == Phase::kRecompute ? P2pChannel::kCpKvRecompute : P2pChannel::kCpKvForward;
  std::uint32_t held = qkv;  // the K/V block this rank holds at the current step
  std::uint32_t out = kNoOp;
  for (int j = 0; j < cp_; ++j) {
    std::uint32_t recv = kNoOp;
    if (j < cp_ - 1) {
      const auto payload =
          static_cast<std::uint32_t>((static_cast<std::int64_t>(mb) * head_key_ + layer) * cp_ + j);
      add(r, OpId::make(layer, mb, ph, OpRole::kCpKvSend, j), send_d, {held}, -1, r.cp_next,
          p2p_tag(ch, payload));
      recv = add(r, OpId::make(layer, mb, ph, OpRole::kCpKvRecv, j), recv_d, {}, -1, r.cp_prev,
                 p2p_tag(ch, payload));
    }
    const std::uint8_t flags = j == 0 ? kCausal : kHalfBlock;
    out = add(r, OpId::make(layer, mb, ph, OpRole::kAttnCore, j),
              cached(OpRole::kAttnCore, ph, j == 0 ? 0 : 1, [&] { return attention(ph, flags); }),
              {held, out, j == 0 ? q : kNoOp});
    held = recv;
  }
  return out;
}

AttentionGrad Lowerer::attention_bwd(RankState& r, int layer, int mb, std::uint32_t dout) {
  const Phase ph = Phase::kBackwardInput;
  const int window = layer < m_.num_layers ? m_.attention_window(layer) : 0;
  if (window > 0 && window < sl_) {
    return {add(r, OpId::make(layer, mb, ph, OpRole::kAttnCore),
                cached(OpRole::kAttnCore, ph, 2, [&] { return attention(ph, kCausal, window); }),
                {dout}),
            kNoOp};
  }
  if (cp_ == 1) {
    return {add(r, OpId::make(layer, mb, ph, OpRole::kAttnCore),
                cached(OpRole::kAttnCore, ph, 0, [&] { return attention(ph, kCausal); }), {dout}),
            kNoOp};
  }
  const std::int64_t kv_bytes = kv_ring_bytes_;
  const std::uint32_t send_d = cached(OpRole::kCpKvSend, ph, 0, [&] {
    return comm(OpKind::kSend, Stream::kCpSend, kv_bytes, act_prec_);
  });
  const std::uint32_t recv_d = cached(OpRole::kCpKvRecv, ph, 0, [&] {
    return comm(OpKind::kRecv, Stream::kCpRecv, kv_bytes, act_prec_);
  });
  const std::uint32_t dsend_d = cached(OpRole::kCpDkvSend, ph, 0, [&] {
    return comm(OpKind::kSend, Stream::kCpSend, kv_bytes, act_prec_);
  });
  const std::uint32_t drecv_d = cached(OpRole::kCpDkvRecv, ph, 0, [&] {
    return comm(OpKind::kRecv, Stream::kCpRecv, kv_bytes, act_prec_);
  });
  std::uint32_t held = dout;
  std::uint32_t partial = kNoOp;  // the received partial dK/dV of the block held
  std::uint32_t out = kNoOp;
  for (int j = 0; j < cp_; ++j) {
    const auto payload =
        static_cast<std::uint32_t>((static_cast<std::int64_t>(mb) * head_key_ + layer) * cp_ + j);
    std::uint32_t recv = kNoOp;
    if (j < cp_ - 1) {
      add(r, OpId::make(layer, mb, ph, OpRole::kCpKvSend, j), send_d, {held}, -1, r.cp_next,
          p2p_tag(P2pChannel::kCpKvBackward, payload));
      recv = add(r, OpId::make(layer, mb, ph, OpRole::kCpKvRecv, j), recv_d, {}, -1, r.cp_prev,
                 p2p_tag(P2pChannel::kCpKvBackward, payload));
    }
    const std::uint8_t flags = j == 0 ? kCausal : kHalfBlock;
    out = add(r, OpId::make(layer, mb, ph, OpRole::kAttnCore, j),
              cached(OpRole::kAttnCore, ph, j == 0 ? 0 : 1, [&] { return attention(ph, flags); }),
              {held, out, partial, dout});
    // The block's dK/dV (accumulated along the ring) moves on with it; after cp steps every
    // block's gradient is back at its owner.
    add(r, OpId::make(layer, mb, ph, OpRole::kCpDkvSend, j), dsend_d, {out}, -1, r.cp_next,
        p2p_tag(P2pChannel::kCpDkvBackward, payload));
    partial = add(r, OpId::make(layer, mb, ph, OpRole::kCpDkvRecv, j), drecv_d, {}, -1, r.cp_prev,
                  p2p_tag(P2pChannel::kCpDkvBackward, payload));
    held = recv;
  }
  // The own block's complete dK/dV arrives with the last receive.
  return {out, partial};
}

std::uint32_t Lowerer::zero3_gather(RankState& r, int layer, int mb, Phase ph, int slot,
                                    std::int64_t elements, bool expert, std::uint32_t after,
                                    std::int64_t tensors) {
  const std::int32_t group = expert ? r.g_edp : r.g_dp;
  if (group < 0 || elements == 0) return kNoOp;
  std::uint32_t dep = after;
  if (p_.offload == Offload::kOptimizerAndParams) {
    const std::int64_t shard = ceil_div(elements, expert ? edp_ : dp_shard_);
    dep = add(r, OpId::make(layer, mb, ph, OpRole::kOffloadParam, slot),
              prog_.intern(comm(OpKind::kHostToDevice, Stream::kHostToDevice, shard * bytes_.param,
                                act_prec_)),
              {after});
  }
  OpDesc d = comm(OpKind::kAllGather, Stream::kDpComm, elements * bytes_.param, act_prec_);
  d.aux = tensors;
  return add(r, OpId::make(layer, mb, ph, OpRole::kDpParamGather, slot), prog_.intern(d), {dep},
             group);
}

Lowerer::LayerParams Lowerer::layer_params(const RankState& r, int layer) {
  LayerParams lp;
  for (const ParamTensor& pt : r.layout->tensors) {
    if (pt.layer != layer) continue;
    lp.elements[pt.expert ? 1 : 0] += pt.elements;
    lp.tensors[pt.expert ? 1 : 0] += 1;
  }
  return lp;
}

std::pair<std::uint32_t, std::uint32_t> Lowerer::zero3_layer_gathers(RankState& r, int layer,
                                                                     int mb, Phase ph,
                                                                     std::uint32_t after,
                                                                     const LayerParams& lp) {
  return {
      zero3_gather(r, layer, mb, ph, kSlotLayerDense, lp.elements[0], false, after, lp.tensors[0]),
      zero3_gather(r, layer, mb, ph, kSlotLayerExpert, lp.elements[1], true, after, lp.tensors[1])};
}

void Lowerer::zero3_reduce(RankState& r, int layer, int mb, int slot, std::int64_t elements,
                           bool expert, const std::vector<std::uint32_t>& grads) {
  const std::int32_t group = expert ? r.g_edp : r.g_dp;
  if (elements == 0) return;
  const Phase ph = Phase::kBackwardWeight;
  std::vector<std::uint32_t> deps = grads;
  if (group >= 0) {
    const std::uint32_t desc = prog_.intern(
        comm(OpKind::kReduceScatter, Stream::kDpComm, elements * bytes_.grad, act_prec_));
    deps = {add_w(r, mb,
                  Op{OpId::make(layer, mb, ph, OpRole::kDpGradReduce, slot), desc, group, -1, 0},
                  std::move(deps), -1)};
  }
  if (p_.offload != Offload::kNone) {
    const std::int64_t shard = ceil_div(elements, expert ? edp_ : dp_shard_);
    const std::uint32_t d2h = prog_.intern(
        comm(OpKind::kDeviceToHost, Stream::kDeviceToHost, shard * bytes_.grad, act_prec_));
    add_w(r, mb, Op{OpId::make(layer, mb, ph, OpRole::kOffloadGrad, slot), d2h, -1, -1, 0},
          std::move(deps), -1);
  }
}

// ---- the transformer layer

// Forward (or recompute) of one layer: a mixer block (attention, MLA or Mamba-2; norm → mixer →
// residual) and an MLP block (dense or MoE; norm → MLP → residual), either of which a hybrid
// model's single-block layers leave out.
std::uint32_t Lowerer::layer_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t x,
                                 std::uint32_t prefetch_after, std::uint32_t weights,
                                 std::uint32_t expert_weights) {
  const LayerKind kind = m_.layer_kind(layer);
  std::uint32_t gather = weights, egather = expert_weights;
  if (p_.zero_stage == 3 && ph == Phase::kForward) {
    std::tie(gather, egather) =
        zero3_layer_gathers(r, layer, mb, ph, prefetch_after, layer_params(r, layer));
  }
  const std::uint32_t ready = ph == Phase::kForward ? param_dep(r, layer) : kNoOp;
  auto id = [&](OpRole role, int slot = 0) { return OpId::make(layer, mb, ph, role, slot); };
  const std::int64_t e = bytes_.activation;
  const std::uint32_t norm_d = norm_fwd_desc(ph);
  const std::uint32_t res_d = cached(OpRole::kAttnResidual, ph, 0, [&] {
    return misc(OpKind::kElementwise, Stream::kCompute, Ts_, h_, 2 * Ts_ * h_ * e, Ts_ * h_ * e);
  });
  std::uint32_t res1 = x;
  if (kind.mixer != Mixer::kNone) {
    const std::uint32_t n1 = add(r, id(OpRole::kAttnNorm), norm_d, {x, ready, gather});
    r.first_compute = n1;
    std::uint32_t out = kNoOp;
    if (kind.mixer == Mixer::kMamba) {
      out = mamba_fwd(r, layer, mb, ph, n1, gather);
    } else if (m_.mla) {
      out = mla_fwd(r, layer, mb, ph, n1, gather);
    } else {
      std::uint32_t in = n1;
      if (sp_) in = sp_gather(r, id(OpRole::kSpGatherAttn), n1);
      const std::uint32_t qkv =
          add(r, id(OpRole::kAttnQkv), linear(OpRole::kAttnQkv, ph, T_, h_, qkv_l_), {in, gather});
      const std::uint32_t attn = attention_fwd(r, layer, mb, ph, qkv);
      out = add(r, id(OpRole::kAttnOut), linear(OpRole::kAttnOut, ph, T_, q_l_, h_), {attn});
      if (sp_) {
        out = sp_scatter(r, id(OpRole::kSpScatterAttn), out, attn);
      } else if (tp_ > 1) {
        out = tp_op(r, id(OpRole::kTpReduceAttn), OpKind::kAllReduce, out, T_);
      }
    }
    res1 = add(r, id(OpRole::kAttnResidual), res_d, {out, x});
  }
  if (kind.ffn == FfnKind::kNone) return res1;
  const bool first = kind.mixer == Mixer::kNone;
  const std::uint32_t n2 = first ? add(r, id(OpRole::kMlpNorm), norm_d, {res1, ready, gather})
                                 : add(r, id(OpRole::kMlpNorm), norm_d, {res1});
  if (first) r.first_compute = n2;
  const std::uint32_t y = kind.ffn == FfnKind::kDense
                              ? dense_fwd(r, layer, mb, ph, n2, first ? gather : kNoOp)
                              : moe_fwd(r, layer, mb, ph, n2, first ? gather : kNoOp, egather);
  return add(r, id(OpRole::kMlpResidual), res_d, {y, res1});
}

std::uint32_t Lowerer::norm_fwd_desc(Phase ph) {
  const std::int64_t e = bytes_.activation;
  return cached(OpRole::kAttnNorm, ph, 0, [&] {
    return misc(OpKind::kNorm, Stream::kCompute, Ts_, h_, Ts_ * h_ * e, Ts_ * h_ * e);
  });
}

std::uint32_t Lowerer::expert_act_desc(Phase ph) {
  return cached(OpRole::kExpertAct, ph, 0, [&] {
    const std::int64_t e = bytes_.activation;
    const std::int64_t rows = per_expert_ * experts_l_;
    const std::int64_t in_tensors = gated_ ? 2 : 1;
    const ExpertGlue glue = expert_glue(false);
    return misc(OpKind::kActivation, Stream::kCompute, rows, fe_l_,
                in_tensors * rows * fe_l_ * e + glue.read, rows * fe_l_ * e + glue.written);
  });
}

// The dense MLP after its norm `n2`: (gate and) up projection, activation, down projection and
// the tensor-parallel reduction. `gather` is the ZeRO-3 gather its GEMMs wait for.
std::uint32_t Lowerer::dense_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t n2,
                                 std::uint32_t gather) {
  auto id = [&](OpRole role, int slot = 0) { return OpId::make(layer, mb, ph, role, slot); };
  const std::int64_t e = bytes_.activation;
  std::uint32_t mi = n2;
  if (sp_) mi = sp_gather(r, id(OpRole::kSpGatherMlp), n2);
  const std::uint32_t up_d = linear(OpRole::kMlpUp, ph, T_, h_, f_l_);
  std::uint32_t gate = kNoOp;
  if (gated_) gate = add(r, id(OpRole::kMlpGate), up_d, {mi, gather});
  const std::uint32_t up = add(r, id(OpRole::kMlpUp), up_d, {mi, gather});
  const std::uint32_t act =
      add(r, id(OpRole::kMlpAct),
          cached(OpRole::kMlpAct, ph, 0,
                 [&] {
                   const std::int64_t in_tensors = gated_ ? 2 : 1;
                   return misc(OpKind::kActivation, Stream::kCompute, T_, f_l_,
                               in_tensors * T_ * f_l_ * e, T_ * f_l_ * e);
                 }),
          {up, gate});
  std::uint32_t y = add(r, id(OpRole::kMlpDown), linear(OpRole::kMlpDown, ph, T_, f_l_, h_), {act});
  if (sp_) {
    y = sp_scatter(r, id(OpRole::kSpScatterMlp), y, act);
  } else if (tp_ > 1) {
    y = tp_op(r, id(OpRole::kTpReduceMlp), OpKind::kAllReduce, y, T_);
  }
  return y;
}

// The MoE block after its norm `n2`: router, top-k and permutation, dispatch over ep, gather over
// etp, the local experts' grouped GEMMs, and back; the shared experts run on the compute stream
// while the dispatch is in flight.
std::uint32_t Lowerer::moe_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t n2,
                               std::uint32_t gather, std::uint32_t egather) {
  auto id = [&](OpRole role, int slot = 0) { return OpId::make(layer, mb, ph, role, slot); };
  const std::int64_t e = bytes_.activation;
  const std::uint32_t router =
      add(r, id(OpRole::kRouter), linear(OpRole::kRouter, ph, Ts_, h_, experts_), {n2, gather});
  const std::int64_t k = m_.moe->top_k;
  std::uint32_t tok =
      add(r, id(OpRole::kRouterTopk),
          cached(OpRole::kRouterTopk, ph, 0,
                 [&] {
                   return misc(OpKind::kRouter, Stream::kCompute, Ts_, experts_,
                               Ts_ * (experts_ + h_) * e, routed_ * h_ * e + Ts_ * k * kFp32);
                 }),
          {router, n2});
  // Dropless: the tokens per expert go to the host, which waits for them (Megatron-core's
  // MoEAlltoAllTokenDispatcher.preprocess: tokens_per_expert.to("cpu"), then a synchronisation
  // of the compute stream before the dispatch) and only then issues the dispatch and the experts.
  if (counts_to_host_) {
    add(r, id(OpRole::kMoeTokenCounts),
        cached(OpRole::kMoeTokenCounts, ph, 0,
               [&] {
                 return comm(OpKind::kDeviceToHost, Stream::kDeviceToHost, experts_ * kInt64,
                             act_prec_);
               }),
        {tok});
  }
  const std::uint32_t a2a_d = cached(OpRole::kEpDispatch, ph, 0, [&] {
    return fp8_dispatch_ ? ep_a2a(routed_ * h_, Precision::kFp8)
                         : ep_a2a(routed_ * h_ * e, act_prec_);
  });
  if (ep_ > 1) tok = add(r, id(OpRole::kEpDispatch), a2a_d, {tok}, r.g_ep);
  const std::uint32_t shared = shared_fwd(r, layer, mb, ph, n2, gather);
  if (etp_ > 1) tok = etp_op(r, id(OpRole::kMoeTpGather), OpKind::kAllGather, tok);
  const std::uint32_t eup_d = linear(OpRole::kExpertUp, ph, per_expert_, h_, fe_l_, experts_l_);
  std::uint32_t gate = kNoOp;
  if (gated_) gate = add(r, id(OpRole::kExpertGate), eup_d, {tok, egather});
  const std::uint32_t up = add(r, id(OpRole::kExpertUp), eup_d, {tok, egather});
  const std::uint32_t act = add(r, id(OpRole::kExpertAct), expert_act_desc(ph), {up, gate});
  std::uint32_t y = add(r, id(OpRole::kExpertDown),
                        linear(OpRole::kExpertDown, ph, per_expert_, fe_l_, h_, experts_l_), {act});
  if (etp_ > 1) y = etp_op(r, id(OpRole::kMoeTpScatter), OpKind::kReduceScatter, y);
  if (ep_ > 1) {
    y = add(r, id(OpRole::kEpCombine),
            cached(OpRole::kEpCombine, ph, 0, [&] { return ep_a2a(routed_ * h_ * e, act_prec_); }),
            {y}, r.g_ep);
  }
  return add(r, id(OpRole::kExpertCombine),
             cached(OpRole::kExpertCombine, ph, 0,
                    [&] {
                      return misc(OpKind::kRouter, Stream::kCompute, Ts_, h_,
                                  routed_ * h_ * e + (shared_ ? Ts_ * h_ * e : 0), Ts_ * h_ * e);
                    }),
             {y, tok, shared});
}

// The shared experts of an MoE layer on its normalised input `n2` (tensor parallel like a dense
// MLP, with Qwen2-MoE's sigmoid gate), or kNoOp when the model has none.
std::uint32_t Lowerer::shared_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t n2,
                                  std::uint32_t gather) {
  if (!shared_) return kNoOp;
  auto id = [&](OpRole role, int slot = 0) { return OpId::make(layer, mb, ph, role, slot); };
  const std::int64_t e = bytes_.activation;
  std::uint32_t mi = n2;
  if (sp_) mi = tp_op(r, id(OpRole::kSpGatherMlp), OpKind::kAllGather, n2, T_);
  const std::uint32_t up_d = linear(OpRole::kSharedUp, ph, T_, h_, fs_l_);
  std::uint32_t gate = kNoOp;
  if (gated_) gate = add(r, id(OpRole::kSharedGate), up_d, {mi, gather});
  const std::uint32_t up = add(r, id(OpRole::kSharedUp), up_d, {mi, gather});
  const std::uint32_t act =
      add(r, id(OpRole::kSharedAct),
          cached(OpRole::kSharedAct, ph, 0,
                 [&] {
                   const std::int64_t in_tensors = gated_ ? 2 : 1;
                   return misc(OpKind::kActivation, Stream::kCompute, T_, fs_l_,
                               in_tensors * T_ * fs_l_ * e, T_ * fs_l_ * e);
                 }),
          {up, gate});
  std::uint32_t y =
      add(r, id(OpRole::kSharedDown), linear(OpRole::kSharedDown, ph, T_, fs_l_, h_), {act});
  if (sp_) {
    y = tp_op(r, id(OpRole::kSpScatterMlp), OpKind::kReduceScatter, y, T_);
  } else if (tp_ > 1) {
    y = tp_op(r, id(OpRole::kTpReduceMlp), OpKind::kAllReduce, y, T_);
  }
  if (m_.moe->shared_expert_gate) {
    y = add(r, id(OpRole::kSharedExpertGate),
            cached(OpRole::kSharedExpertGate, ph, 0,
                   [&] {
                     OpDesc d = gemm(Ts_, 1, h_, 1, kTransB);
                     d.bytes_written = d.bytes_written + Bytes(Ts_ * h_ * e);  // the scaling
                     return d;
                   }),
            {y, n2});
  }
  return y;
}

// Multi-head latent attention after the block's norm `n1`: down-projections of the
// sequence-sharded tokens (replicated weights), an all-gather of the small latents over tp, their
// norms, the column-parallel up-projections, attention over qk_head_dim / v_head_dim heads and the
// row-parallel output projection. Without a query latent the queries come from the gathered hidden
// state.
std::uint32_t Lowerer::mla_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t n1,
                               std::uint32_t gather) {
  auto id = [&](OpRole role, int slot = 0) { return OpId::make(layer, mb, ph, role, slot); };
  const MlaSpec& a = *m_.mla;
  const std::int64_t ql = a.q_lora_rank, kvl = a.kv_lora_rank, rope = a.qk_rope_head_dim;
  std::uint32_t q_in = kNoOp;  // the query up-projection's input
  const std::uint32_t kvd = add(r, id(OpRole::kMlaKvDown),
                                linear(OpRole::kMlaKvDown, ph, Ts_, h_, kvl + rope), {n1, gather});
  std::uint32_t kv_latent = kvd;
  if (ql > 0) {
    const std::uint32_t qd =
        add(r, id(OpRole::kMlaQDown), linear(OpRole::kMlaQDown, ph, Ts_, h_, ql), {n1, gather});
    std::uint32_t q_latent = qd;
    if (sp_) {
      q_latent = kv_latent =
          mla_gather(r, id(OpRole::kMlaLatentGather), ql + kvl + rope, {qd, kvd});
    }
    q_in = add(r, id(OpRole::kMlaQNorm), mla_norm(OpRole::kMlaQNorm, ph, ql), {q_latent});
  } else {
    q_in = n1;
    if (sp_) q_in = tp_op(r, id(OpRole::kSpGatherAttn), OpKind::kAllGather, n1, T_);
    if (sp_) kv_latent = mla_gather(r, id(OpRole::kMlaLatentGather), kvl + rope, {kvd});
  }
  const std::uint32_t kvn =
      add(r, id(OpRole::kMlaKvNorm), mla_norm(OpRole::kMlaKvNorm, ph, kvl), {kv_latent});
  const std::uint32_t qu =
      add(r, id(OpRole::kMlaQUp), linear(OpRole::kMlaQUp, ph, T_, ql > 0 ? ql : h_, q_l_), {q_in});
  const std::uint32_t kvu =
      add(r, id(OpRole::kMlaKvUp), linear(OpRole::kMlaKvUp, ph, T_, kvl, kv_up_l_), {kvn});
  const std::uint32_t attn = attention_fwd(r, layer, mb, ph, kvu, qu);
  std::uint32_t out =
      add(r, id(OpRole::kAttnOut), linear(OpRole::kAttnOut, ph, T_, v_l_, h_), {attn});
  if (sp_) {
    out = tp_op(r, id(OpRole::kSpScatterAttn), OpKind::kReduceScatter, out, T_);
  } else if (tp_ > 1) {
    out = tp_op(r, id(OpRole::kTpReduceAttn), OpKind::kAllReduce, out, T_);
  }
  return out;
}

// The Mamba-2 mixer after the block's norm `n1`: in_proj (column parallel over the heads), the
// causal depthwise convolution, the SSD scan as its chunked matmuls, the gated norm and the
// row-parallel out_proj.
std::uint32_t Lowerer::mamba_fwd(RankState& r, int layer, int mb, Phase ph, std::uint32_t n1,
                                 std::uint32_t gather) {
  auto id = [&](OpRole role, int slot = 0) { return OpId::make(layer, mb, ph, role, slot); };
  const std::int64_t e = bytes_.activation;
  std::uint32_t in = n1;
  if (sp_) in = tp_op(r, id(OpRole::kSpGatherMamba), OpKind::kAllGather, n1, T_);
  const std::uint32_t proj =
      add(r, id(OpRole::kMambaInProj), linear(OpRole::kMambaInProj, ph, T_, h_, mamba_in_l_),
          {in, gather});
  const std::uint32_t conv =
      add(r, id(OpRole::kMambaConv),
          cached(OpRole::kMambaConv, ph, 0,
                 [&] {
                   return misc(OpKind::kActivation, Stream::kCompute, T_, mamba_conv_l_,
                               T_ * mamba_conv_l_ * e, T_ * mamba_conv_l_ * e);
                 }),
          {proj});
  std::uint32_t scan = conv;
  for (int slot = 0; slot < scan_gemms(*m_.mamba, ph); ++slot) {
    scan = add(r, id(OpRole::kMambaScan, slot), scan_gemm(ph, slot), {scan, conv});
  }
  const std::uint32_t norm =
      add(r, id(OpRole::kMambaNorm),
          cached(OpRole::kMambaNorm, ph, 0,
                 [&] {
                   return misc(OpKind::kNorm, Stream::kCompute, T_, mamba_inner_l_,
                               2 * T_ * mamba_inner_l_ * e, T_ * mamba_inner_l_ * e);
                 }),
          {scan, proj});
  std::uint32_t out =
      add(r, id(OpRole::kMambaOut), linear(OpRole::kMambaOut, ph, T_, mamba_inner_l_, h_), {norm});
  if (sp_) {
    out = tp_op(r, id(OpRole::kSpScatterMamba), OpKind::kReduceScatter, out, T_);
  } else if (tp_ > 1) {
    out = tp_op(r, id(OpRole::kTpReduceMamba), OpKind::kAllReduce, out, T_);
  }
  return out;
}

std::uint32_t Lowerer::layer_bwd(RankState& r, int layer, int mb, std::uint32_t dy,
                                 std::uint32_t saved, std::uint32_t prefetch_after) {
  const LayerKind kind = m_.layer_kind(layer);
  const Phase B = Phase::kBackwardInput;
  std::uint32_t gather = kNoOp, egather = kNoOp;
  LayerParams lp;
  if (p_.zero_stage == 3) {
    lp = layer_params(r, layer);
    std::tie(gather, egather) = zero3_layer_gathers(r, layer, mb, B, prefetch_after, lp);
  }
  if (p_.recompute == Recompute::kFull) {
    // The layer forward again from its stored input, once its output gradient has arrived.
    saved = layer_fwd(r, layer, mb, Phase::kRecompute, dy, kNoOp, gather, egather);
  }
  LayerGrads grads;  // ops producing this layer's weight gradients
  auto id = [&](OpRole role, Phase ph, int slot = 0) {
    return OpId::make(layer, mb, ph, role, slot);
  };
  auto tensor = [&](OpRole role) { return tensor_of(r, layer, role); };
  const std::int64_t e = bytes_.activation;
  const std::uint32_t res_d = cached(OpRole::kAttnResidual, B, 0, [&] {
    return misc(OpKind::kElementwise, Stream::kCompute, Ts_, h_, 2 * Ts_ * h_ * e, Ts_ * h_ * e);
  });
  const std::uint32_t norm_d = cached(OpRole::kAttnNorm, B, 0, [&] {
    return misc(OpKind::kNorm, Stream::kCompute, Ts_, h_, 2 * Ts_ * h_ * e, Ts_ * h_ * e);
  });
  // layernorm recompute: a standalone norm's output again from its stored input before its
  // block's backward (Megatron-core's output-discarding checkpoint): MLA's and an MoE block's;
  // Transformer Engine fuses the others into the next linear, which keeps its input.
  const bool renorm = recomputes(p_, RecomputeModule::kLayernorm);
  const Phase R = Phase::kRecompute;
  // ---- MLP block
  std::uint32_t dres = dy;  // gradient at the mixer block's output
  if (kind.ffn != FfnKind::kNone) {
    if (renorm && kind.ffn == FfnKind::kMoe) {
      saved = add(r, id(OpRole::kMlpNorm, R), norm_fwd_desc(R), {dy, saved, gather});
    }
    std::uint32_t d_in = kNoOp;  // gradient at the block input, before the norm
    if (kind.ffn == FfnKind::kDense) {
      d_in = dense_bwd(r, layer, mb, dy, saved, gather, grads);
    } else {
      d_in = moe_bwd(r, layer, mb, dy, saved, gather, egather, grads);
    }
    const std::uint32_t n2 = add(r, id(OpRole::kMlpNorm, B), norm_d, {d_in});
    grad_ready(r, tensor(OpRole::kMlpNorm), n2, mb);
    grads.dense.push_back(n2);
    dres = add(r, id(OpRole::kMlpResidual, B), res_d, {n2, dy});
    saved = kNoOp;  // consumed by the MLP block's first op
  }
  const bool mixer_first = kind.ffn == FfnKind::kNone;
  // ---- mixer block
  std::uint32_t out = dres;
  if (kind.mixer != Mixer::kNone) {
    if (renorm && kind.mixer == Mixer::kAttention && m_.mla) {
      saved = add(r, id(OpRole::kAttnNorm, R), norm_fwd_desc(R), {dres, saved, gather});
    }
    std::uint32_t dx = kNoOp;
    if (kind.mixer == Mixer::kMamba) {
      dx = mamba_bwd(r, layer, mb, dres, saved, gather, mixer_first, grads);
    } else if (m_.mla) {
      dx = mla_bwd(r, layer, mb, dres, saved, gather, mixer_first, grads);
    } else {
      dx = attention_block_bwd(r, layer, mb, dres, saved, gather, mixer_first, grads);
    }
    const std::uint32_t n1 = add(r, id(OpRole::kAttnNorm, B), norm_d, {dx});
    grad_ready(r, tensor(OpRole::kAttnNorm), n1, mb);
    grads.dense.push_back(n1);
    out = add(r, id(OpRole::kAttnResidual, B), res_d, {n1, dres});
  }
  r.last_bwd = out;
  if (p_.zero_stage == 3) {
    zero3_reduce(r, layer, mb, kSlotLayerDense, lp.elements[0], false, grads.dense);
    zero3_reduce(r, layer, mb, kSlotLayerExpert, lp.elements[1], true, grads.expert);
  }
  return out;
}

// A dense MLP's backward from the layer output's gradient `dy`; returns the gradient at the MLP
// input (before the norm's backward).
std::uint32_t Lowerer::dense_bwd(RankState& r, int layer, int mb, std::uint32_t dy,
                                 std::uint32_t saved, std::uint32_t gather, LayerGrads& grads) {
  const Phase B = Phase::kBackwardInput;
  const Phase W = Phase::kBackwardWeight;
  auto id = [&](OpRole role, Phase ph, int slot = 0) {
    return OpId::make(layer, mb, ph, role, slot);
  };
  auto tensor = [&](OpRole role) { return tensor_of(r, layer, role); };
  const std::int64_t e = bytes_.activation;
  // mlp recompute: the MLP's forward again from its stored input.
  if (recomputes(p_, RecomputeModule::kMlp)) {
    saved = dense_fwd(r, layer, mb, Phase::kRecompute, saved != kNoOp ? saved : dy, gather);
  }
  std::uint32_t g = dy;
  if (sp_) g = sp_gather(r, id(OpRole::kSpScatterMlp, B), dy);
  const std::uint32_t dd = add(r, id(OpRole::kMlpDown, B),
                               linear(OpRole::kMlpDown, B, T_, f_l_, h_), {g, saved, gather});
  r.first_compute = dd;
  grads.dense.push_back(add_w(r, mb, id(OpRole::kMlpDown, W),
                              linear(OpRole::kMlpDown, W, T_, f_l_, h_), {g, saved}, -1,
                              tensor(OpRole::kMlpDown)));
  const std::uint32_t act =
      add(r, id(OpRole::kMlpAct, B),
          cached(OpRole::kMlpAct, B, 0,
                 [&] {
                   const std::int64_t tensors = gated_ ? 3 : 2;
                   return misc(OpKind::kActivation, Stream::kCompute, T_, f_l_,
                               tensors * T_ * f_l_ * e, (tensors - 1) * T_ * f_l_ * e);
                 }),
          {dd});
  std::uint32_t x_full = kNoOp;  // the MLP input again for the weight gradients (SP)
  if (sp_) {
    x_full = add_w(r, mb, id(OpRole::kSpGatherMlp, W),
                   tp_collective(OpRole::kSpGatherMlp, W, OpKind::kAllGather, T_), {dy}, r.g_tp);
  }
  const std::uint32_t up_b = linear(OpRole::kMlpUp, B, T_, h_, f_l_);
  const std::uint32_t up_w = linear(OpRole::kMlpUp, W, T_, h_, f_l_);
  std::uint32_t dg = kNoOp;
  if (gated_) {
    dg = add(r, id(OpRole::kMlpGate, B), up_b, {act});
    grads.dense.push_back(
        add_w(r, mb, id(OpRole::kMlpGate, W), up_w, {act, x_full}, -1, tensor(OpRole::kMlpGate)));
  }
  const std::uint32_t du = add(r, id(OpRole::kMlpUp, B), up_b, {act, dg});
  const std::uint32_t dw =
      add_w(r, mb, id(OpRole::kMlpUp, W), up_w, {act, x_full}, -1, tensor(OpRole::kMlpUp));
  grads.dense.push_back(dw);
  if (sp_) return tp_op(r, id(OpRole::kSpGatherMlp, B), OpKind::kReduceScatter, du, T_);
  if (tp_ > 1) return tp_grad_reduce(r, id(OpRole::kTpReduceMlp, B), du, dw);
  return du;
}

// An MoE block's backward: combine, the reverse all-to-all, the experts' input and weight
// gradients, the dispatch's reverse, the permutation and the router; the shared experts'
// backward overlaps the all-to-alls. Returns the gradient at the block input.
std::uint32_t Lowerer::moe_bwd(RankState& r, int layer, int mb, std::uint32_t dy,
                               std::uint32_t saved, std::uint32_t gather, std::uint32_t egather,
                               LayerGrads& grads) {
  const Phase B = Phase::kBackwardInput;
  const Phase W = Phase::kBackwardWeight;
  auto id = [&](OpRole role, Phase ph, int slot = 0) {
    return OpId::make(layer, mb, ph, role, slot);
  };
  auto tensor = [&](OpRole role) { return tensor_of(r, layer, role); };
  const std::int64_t e = bytes_.activation;
  const std::int64_t k = m_.moe->top_k;
  const Phase R = Phase::kRecompute;
  // moe recompute: the whole block's forward again from its stored input (its all-to-alls too);
  // shared_experts recompute: the shared experts' forward.
  const std::uint32_t input = saved != kNoOp ? saved : dy;  // what a recompute waits for
  if (recomputes(p_, RecomputeModule::kMoe)) {
    saved = moe_fwd(r, layer, mb, R, input, gather, egather);
  } else if (recomputes(p_, RecomputeModule::kSharedExperts)) {
    shared_fwd(r, layer, mb, R, input, gather);
  }
  std::uint32_t g =
      add(r, id(OpRole::kExpertCombine, B),
          cached(OpRole::kExpertCombine, B, 0,
                 [&] {
                   return misc(OpKind::kRouter, Stream::kCompute, Ts_, h_,
                               Ts_ * h_ * e + routed_ * h_ * e, routed_ * h_ * e + Ts_ * k * kFp32);
                 }),
          {dy, saved});
  r.first_compute = g;
  if (ep_ > 1) {
    g = add(r, id(OpRole::kEpCombine, B),
            cached(OpRole::kEpCombine, B, 0, [&] { return ep_a2a(routed_ * h_ * e, act_prec_); }),
            {g}, r.g_ep);
  }
  const std::uint32_t shared = shared_bwd(r, layer, mb, dy, grads);
  if (etp_ > 1) g = etp_op(r, id(OpRole::kMoeTpScatter, B), OpKind::kAllGather, g);
  // moe_act recompute: the activation output the down projection's weight gradient reads.
  if (recomputes(p_, RecomputeModule::kMoeAct) && !recomputes(p_, RecomputeModule::kMoe)) {
    g = add(r, id(OpRole::kExpertAct, R), expert_act_desc(R), {g, egather});
  }
  const std::uint32_t dd =
      add(r, id(OpRole::kExpertDown, B),
          linear(OpRole::kExpertDown, B, per_expert_, fe_l_, h_, experts_l_), {g, egather});
  grads.expert.push_back(add_w(r, mb, id(OpRole::kExpertDown, W),
                               linear(OpRole::kExpertDown, W, per_expert_, fe_l_, h_, experts_l_),
                               {g}, -1, tensor(OpRole::kExpertDown)));
  const std::uint32_t act =
      add(r, id(OpRole::kExpertAct, B),
          cached(OpRole::kExpertAct, B, 0,
                 [&] {
                   const std::int64_t rows = per_expert_ * experts_l_;
                   const std::int64_t tensors = gated_ ? 3 : 2;
                   const ExpertGlue glue = expert_glue(true);
                   return misc(OpKind::kActivation, Stream::kCompute, rows, fe_l_,
                               tensors * rows * fe_l_ * e + glue.read,
                               (tensors - 1) * rows * fe_l_ * e + glue.written);
                 }),
          {dd});
  const std::uint32_t up_b = linear(OpRole::kExpertUp, B, per_expert_, h_, fe_l_, experts_l_);
  const std::uint32_t up_w = linear(OpRole::kExpertUp, W, per_expert_, h_, fe_l_, experts_l_);
  std::uint32_t dg = kNoOp;
  if (gated_) {
    dg = add(r, id(OpRole::kExpertGate, B), up_b, {act});
    grads.expert.push_back(
        add_w(r, mb, id(OpRole::kExpertGate, W), up_w, {act}, -1, tensor(OpRole::kExpertGate)));
  }
  std::uint32_t dx = add(r, id(OpRole::kExpertUp, B), up_b, {act, dg});
  grads.expert.push_back(
      add_w(r, mb, id(OpRole::kExpertUp, W), up_w, {act}, -1, tensor(OpRole::kExpertUp)));
  if (etp_ > 1) dx = etp_op(r, id(OpRole::kMoeTpGather, B), OpKind::kReduceScatter, dx);
  if (ep_ > 1) {
    dx = add(r, id(OpRole::kEpDispatch, B),
             cached(OpRole::kEpDispatch, B, 0, [&] { return ep_a2a(routed_ * h_ * e, act_prec_); }),
             {dx}, r.g_ep);
  }
  const std::uint32_t topk =
      add(r, id(OpRole::kRouterTopk, B),
          cached(OpRole::kRouterTopk, B, 0,
                 [&] {
                   return misc(OpKind::kRouter, Stream::kCompute, Ts_, experts_,
                               routed_ * h_ * e + Ts_ * experts_ * e, Ts_ * (experts_ + h_) * e);
                 }),
          {dx, g, shared});
  // The router's input gradient accumulates onto the token path's (both reach the norm output),
  // as does the shared experts'.
  const std::uint32_t rd =
      add(r, id(OpRole::kRouter, B),
          cached(OpRole::kRouter, B, 0, [&] { return gemm(Ts_, h_, experts_, 1, kAccumulate); }),
          {topk, gather});
  grads.dense.push_back(add_w(r, mb, id(OpRole::kRouter, W),
                              linear(OpRole::kRouter, W, Ts_, h_, experts_), {topk}, -1,
                              tensor(OpRole::kRouter)));
  return rd;
}

// The shared experts' backward from the MoE block output's gradient `dy` (kNoOp without shared
// experts): its input gradient is left for the router's accumulation.
std::uint32_t Lowerer::shared_bwd(RankState& r, int layer, int mb, std::uint32_t dy,
                                  LayerGrads& grads) {
  if (!shared_) return kNoOp;
  const Phase B = Phase::kBackwardInput;
  const Phase W = Phase::kBackwardWeight;
  auto id = [&](OpRole role, Phase ph, int slot = 0) {
    return OpId::make(layer, mb, ph, role, slot);
  };
  auto tensor = [&](OpRole role) { return tensor_of(r, layer, role); };
  const std::int64_t e = bytes_.activation;
  std::uint32_t g = dy;
  if (m_.moe->shared_expert_gate) {
    g = add(r, id(OpRole::kSharedExpertGate, B),
            cached(OpRole::kSharedExpertGate, B, 0,
                   [&] {
                     OpDesc d = gemm(Ts_, h_, 1, 1, kAccumulate);
                     d.bytes_read = d.bytes_read + Bytes(2 * Ts_ * h_ * e);
                     return d;
                   }),
            {dy});
    grads.dense.push_back(add_w(r, mb, id(OpRole::kSharedExpertGate, W),
                                cached(OpRole::kSharedExpertGate, W, 0,
                                       [&] { return gemm(1, h_, Ts_, 1, kTransA | kAccumulate); }),
                                {g}, -1, tensor(OpRole::kSharedExpertGate)));
  }
  if (sp_) g = tp_op(r, id(OpRole::kSpScatterMlp, B), OpKind::kAllGather, g, T_);
  const std::uint32_t dd =
      add(r, id(OpRole::kSharedDown, B), linear(OpRole::kSharedDown, B, T_, fs_l_, h_), {g});
  grads.dense.push_back(add_w(r, mb, id(OpRole::kSharedDown, W),
                              linear(OpRole::kSharedDown, W, T_, fs_l_, h_), {g}, -1,
                              tensor(OpRole::kSharedDown)));
  const std::uint32_t act =
      add(r, id(OpRole::kSharedAct, B),
          cached(OpRole::kSharedAct, B, 0,
                 [&] {
                   const std::int64_t tensors = gated_ ? 3 : 2;
                   return misc(OpKind::kActivation, Stream::kCompute, T_, fs_l_,
                               tensors * T_ * fs_l_ * e, (tensors - 1) * T_ * fs_l_ * e);
                 }),
          {dd});
  std::uint32_t x_full = kNoOp;
  if (sp_) {
    x_full = add_w(r, mb, id(OpRole::kSpGatherMlp, W),
                   tp_collective(OpRole::kSpGatherMlp, W, OpKind::kAllGather, T_), {dy}, r.g_tp);
  }
  const std::uint32_t up_b = linear(OpRole::kSharedUp, B, T_, h_, fs_l_);
  const std::uint32_t up_w = linear(OpRole::kSharedUp, W, T_, h_, fs_l_);
  std::uint32_t dg = kNoOp;
  if (gated_) {
    dg = add(r, id(OpRole::kSharedGate, B), up_b, {act});
    grads.dense.push_back(add_w(r, mb, id(OpRole::kSharedGate, W), up_w, {act, x_full}, -1,
                                tensor(OpRole::kSharedGate)));
  }
  const std::uint32_t du = add(r, id(OpRole::kSharedUp, B), up_b, {act, dg});
  grads.dense.push_back(
      add_w(r, mb, id(OpRole::kSharedUp, W), up_w, {act, x_full}, -1, tensor(OpRole::kSharedUp)));
  if (sp_) return tp_op(r, id(OpRole::kSpGatherMlp, B), OpKind::kReduceScatter, du, T_);
  if (tp_ > 1) return tp_op(r, id(OpRole::kTpReduceMlp, B), OpKind::kAllReduce, du, T_);
  return du;
}

// Standard attention's backward from the block output's gradient `dres`; returns the gradient at
// the block input (before the norm's backward).
std::uint32_t Lowerer::attention_block_bwd(RankState& r, int layer, int mb, std::uint32_t dres,
                                           std::uint32_t saved, std::uint32_t gather, bool first,
                                           LayerGrads& grads) {
  const Phase B = Phase::kBackwardInput;
  const Phase W = Phase::kBackwardWeight;
  auto id = [&](OpRole role, Phase ph, int slot = 0) {
    return OpId::make(layer, mb, ph, role, slot);
  };
  auto tensor = [&](OpRole role) { return tensor_of(r, layer, role); };
  std::uint32_t g = dres;
  if (sp_) g = sp_gather(r, id(OpRole::kSpScatterAttn, B), dres);
  const std::uint32_t od = add(r, id(OpRole::kAttnOut, B),
                               linear(OpRole::kAttnOut, B, T_, q_l_, h_), {g, gather, saved});
  if (first) r.first_compute = od;
  grads.dense.push_back(add_w(r, mb, id(OpRole::kAttnOut, W),
                              linear(OpRole::kAttnOut, W, T_, q_l_, h_), {g}, -1,
                              tensor(OpRole::kAttnOut)));
  if (recomputes(p_, RecomputeModule::kCoreAttn)) {
    attention_fwd(r, layer, mb, Phase::kRecompute, od);
  }
  const AttentionGrad attn = attention_bwd(r, layer, mb, od);
  std::uint32_t x_full = kNoOp;
  if (sp_) {
    x_full = add_w(r, mb, id(OpRole::kSpGatherAttn, W),
                   tp_collective(OpRole::kSpGatherAttn, W, OpKind::kAllGather, T_), {dres}, r.g_tp);
  }
  const std::int64_t qkv_out = qkv_l_;
  const std::uint32_t qd = add(r, id(OpRole::kAttnQkv, B),
                               linear(OpRole::kAttnQkv, B, T_, h_, qkv_out), {attn.dq, attn.dkv});
  const std::uint32_t dw =
      add_w(r, mb, id(OpRole::kAttnQkv, W), linear(OpRole::kAttnQkv, W, T_, h_, qkv_out),
            {attn.dq, attn.dkv, x_full}, -1, tensor(OpRole::kAttnQkv));
  grads.dense.push_back(dw);
  if (sp_) return tp_op(r, id(OpRole::kSpGatherAttn, B), OpKind::kReduceScatter, qd, T_);
  if (tp_ > 1) return tp_grad_reduce(r, id(OpRole::kTpReduceAttn, B), qd, dw);
  return qd;
}

// MLA's backward from the block output's gradient `dres`: output projection, attention, the
// up-projections, the latent norms, the reverse of the latent gather and the down-projections,
// whose input gradients accumulate. Returns the gradient at the block input.
std::uint32_t Lowerer::mla_bwd(RankState& r, int layer, int mb, std::uint32_t dres,
                               std::uint32_t saved, std::uint32_t gather, bool first,
                               LayerGrads& grads) {
  const Phase B = Phase::kBackwardInput;
  const Phase W = Phase::kBackwardWeight;
  auto id = [&](OpRole role, Phase ph, int slot = 0) {
    return OpId::make(layer, mb, ph, role, slot);
  };
  auto tensor = [&](OpRole role) { return tensor_of(r, layer, role); };
  const MlaSpec& a = *m_.mla;
  const std::int64_t ql = a.q_lora_rank, kvl = a.kv_lora_rank, rope = a.qk_rope_head_dim;
  std::uint32_t g = dres;
  if (sp_) g = tp_op(r, id(OpRole::kSpScatterAttn, B), OpKind::kAllGather, dres, T_);
  const std::uint32_t od = add(r, id(OpRole::kAttnOut, B),
                               linear(OpRole::kAttnOut, B, T_, v_l_, h_), {g, gather, saved});
  if (first) r.first_compute = od;
  grads.dense.push_back(add_w(r, mb, id(OpRole::kAttnOut, W),
                              linear(OpRole::kAttnOut, W, T_, v_l_, h_), {g}, -1,
                              tensor(OpRole::kAttnOut)));
  const std::int64_t q_in = ql > 0 ? ql : h_;
  std::uint32_t qkv = od;  // what the attention's backward waits for
  if (recomputes(p_, RecomputeModule::kMlaUpProj)) {
    // mla_up_proj recompute: Q, K and V again from the stored latents.
    const Phase R = Phase::kRecompute;
    const std::uint32_t q = add(r, id(OpRole::kMlaQUp, R),
                                linear(OpRole::kMlaQUp, R, T_, q_in, q_l_), {od, saved, gather});
    qkv = add(r, id(OpRole::kMlaKvUp, R), linear(OpRole::kMlaKvUp, R, T_, kvl, kv_up_l_), {q});
  }
  if (recomputes(p_, RecomputeModule::kCoreAttn)) {
    attention_fwd(r, layer, mb, Phase::kRecompute, qkv);
  }
  const AttentionGrad attn = attention_bwd(r, layer, mb, qkv);
  // Up-projections: input and weight gradients (their inputs, the normalised latents, are kept).
  const std::uint32_t kvu =
      add(r, id(OpRole::kMlaKvUp, B), linear(OpRole::kMlaKvUp, B, T_, kvl, kv_up_l_),
          {attn.dq, attn.dkv});
  grads.dense.push_back(add_w(r, mb, id(OpRole::kMlaKvUp, W),
                              linear(OpRole::kMlaKvUp, W, T_, kvl, kv_up_l_), {attn.dq, attn.dkv},
                              -1, tensor(OpRole::kMlaKvUp)));
  const std::uint32_t qu =
      add(r, id(OpRole::kMlaQUp, B), linear(OpRole::kMlaQUp, B, T_, q_in, q_l_), {attn.dq});
  std::uint32_t x_full = kNoOp;
  if (ql == 0 && sp_) {
    x_full = add_w(r, mb, id(OpRole::kSpGatherAttn, W),
                   tp_collective(OpRole::kSpGatherAttn, W, OpKind::kAllGather, T_), {dres}, r.g_tp);
  }
  grads.dense.push_back(add_w(r, mb, id(OpRole::kMlaQUp, W),
                              linear(OpRole::kMlaQUp, W, T_, q_in, q_l_), {attn.dq, x_full}, -1,
                              tensor(OpRole::kMlaQUp)));
  const std::uint32_t kvn =
      add(r, id(OpRole::kMlaKvNorm, B), mla_norm(OpRole::kMlaKvNorm, B, kvl), {kvu});
  grad_ready(r, tensor(OpRole::kMlaKvNorm), kvn, mb);
  grads.dense.push_back(kvn);
  std::uint32_t dkv_latent = kvn;  // gradients of the latents on this rank's rows
  std::uint32_t dq_latent = kNoOp;
  std::uint32_t dq_in = qu;  // gradient at the queries' input (no query latent)
  if (ql > 0) {
    const std::uint32_t qn =
        add(r, id(OpRole::kMlaQNorm, B), mla_norm(OpRole::kMlaQNorm, B, ql), {qu});
    grad_ready(r, tensor(OpRole::kMlaQNorm), qn, mb);
    grads.dense.push_back(qn);
    dq_latent = qn;
    if (sp_) {
      dq_latent = dkv_latent = mla_gather(r, id(OpRole::kMlaLatentGather, B), ql + kvl + rope,
                                          {qn, kvn}, OpKind::kReduceScatter);
    }
    dq_in = kNoOp;
  } else if (sp_) {
    dkv_latent =
        mla_gather(r, id(OpRole::kMlaLatentGather, B), kvl + rope, {kvn}, OpKind::kReduceScatter);
    dq_in = tp_op(r, id(OpRole::kSpGatherAttn, B), OpKind::kReduceScatter, qu, T_);
  }
  // Down-projections on the sequence-sharded rows; the second accumulates onto the first's input
  // gradient (and onto the queries' without a latent).
  std::uint32_t dx = kNoOp;
  if (ql > 0) {
    dx = add(r, id(OpRole::kMlaQDown, B), linear(OpRole::kMlaQDown, B, Ts_, h_, ql), {dq_latent});
    grads.dense.push_back(add_w(r, mb, id(OpRole::kMlaQDown, W),
                                linear(OpRole::kMlaQDown, W, Ts_, h_, ql), {dq_latent}, -1,
                                tensor(OpRole::kMlaQDown)));
  }
  dx = add(
      r, id(OpRole::kMlaKvDown, B),
      cached(OpRole::kMlaKvDown, B, 0, [&] { return gemm(Ts_, h_, kvl + rope, 1, kAccumulate); }),
      {dkv_latent, dx, dq_in});
  grads.dense.push_back(add_w(r, mb, id(OpRole::kMlaKvDown, W),
                              linear(OpRole::kMlaKvDown, W, Ts_, h_, kvl + rope), {dkv_latent}, -1,
                              tensor(OpRole::kMlaKvDown)));
  return dx;
}

// The Mamba-2 mixer's backward: out_proj, the gated norm, the scan's matmuls in reverse, the
// convolution and in_proj. Returns the gradient at the block input.
std::uint32_t Lowerer::mamba_bwd(RankState& r, int layer, int mb, std::uint32_t dres,
                                 std::uint32_t saved, std::uint32_t gather, bool first,
                                 LayerGrads& grads) {
  const Phase B = Phase::kBackwardInput;
  const Phase W = Phase::kBackwardWeight;
  auto id = [&](OpRole role, Phase ph, int slot = 0) {
    return OpId::make(layer, mb, ph, role, slot);
  };
  auto tensor = [&](OpRole role) { return tensor_of(r, layer, role); };
  const std::int64_t e = bytes_.activation;
  std::uint32_t g = dres;
  if (sp_) g = tp_op(r, id(OpRole::kSpScatterMamba, B), OpKind::kAllGather, dres, T_);
  const std::uint32_t od =
      add(r, id(OpRole::kMambaOut, B), linear(OpRole::kMambaOut, B, T_, mamba_inner_l_, h_),
          {g, gather, saved});
  if (first) r.first_compute = od;
  grads.dense.push_back(add_w(r, mb, id(OpRole::kMambaOut, W),
                              linear(OpRole::kMambaOut, W, T_, mamba_inner_l_, h_), {g}, -1,
                              tensor(OpRole::kMambaOut)));
  const std::uint32_t norm =
      add(r, id(OpRole::kMambaNorm, B),
          cached(OpRole::kMambaNorm, B, 0,
                 [&] {
                   return misc(OpKind::kNorm, Stream::kCompute, T_, mamba_inner_l_,
                               3 * T_ * mamba_inner_l_ * e, 2 * T_ * mamba_inner_l_ * e);
                 }),
          {od});
  grad_ready(r, tensor(OpRole::kMambaNorm), norm, mb);
  grads.dense.push_back(norm);
  std::uint32_t scan = norm;
  for (int slot = 0; slot < scan_gemms(*m_.mamba, B); ++slot) {
    scan = add(r, id(OpRole::kMambaScan, B, slot), scan_gemm(B, slot), {scan});
  }
  grad_ready(r, tensor(OpRole::kMambaScan), scan, mb);  // A_log, D and dt_bias
  grads.dense.push_back(scan);
  const std::uint32_t conv_d = cached(OpRole::kMambaConv, B, 0, [&] {
    return misc(OpKind::kActivation, Stream::kCompute, T_, mamba_conv_l_,
                2 * T_ * mamba_conv_l_ * e, T_ * mamba_conv_l_ * e);
  });
  const std::uint32_t conv = add(r, id(OpRole::kMambaConv, B), conv_d, {scan});
  grads.dense.push_back(add_w(r, mb, id(OpRole::kMambaConv, W),
                              cached(OpRole::kMambaConv, W, 0,
                                     [&] {
                                       return misc(OpKind::kActivation, Stream::kCompute, T_,
                                                   mamba_conv_l_, 2 * T_ * mamba_conv_l_ * e,
                                                   mamba_conv_l_ * m_.mamba->conv_kernel * kFp32);
                                     }),
                              {scan}, -1, tensor(OpRole::kMambaConv)));
  std::uint32_t x_full = kNoOp;
  if (sp_) {
    x_full =
        add_w(r, mb, id(OpRole::kSpGatherMamba, W),
              tp_collective(OpRole::kSpGatherMamba, W, OpKind::kAllGather, T_), {dres}, r.g_tp);
  }
  const std::uint32_t in = add(r, id(OpRole::kMambaInProj, B),
                               linear(OpRole::kMambaInProj, B, T_, h_, mamba_in_l_), {conv, norm});
  grads.dense.push_back(add_w(r, mb, id(OpRole::kMambaInProj, W),
                              linear(OpRole::kMambaInProj, W, T_, h_, mamba_in_l_),
                              {conv, norm, x_full}, -1, tensor(OpRole::kMambaInProj)));
  if (sp_) return tp_op(r, id(OpRole::kSpGatherMamba, B), OpKind::kReduceScatter, in, T_);
  if (tp_ > 1) return tp_op(r, id(OpRole::kTpReduceMamba, B), OpKind::kAllReduce, in, T_);
  return in;
}

// ---- model ends

std::uint32_t Lowerer::embedding_fwd(RankState& r, int mb) {
  const Phase ph = Phase::kForward;
  std::uint32_t batch = kNoOp;
  if (tp_ > 1) {
    batch = add(r, OpId::make(OpId::kNone, mb, ph, OpRole::kDataBroadcast, 0),
                cached(OpRole::kDataBroadcast, ph, 0,
                       [&] {
                         return comm(OpKind::kBroadcast, Stream::kTpComm,
                                     T_ * kFirstStageBatchBytesPerToken, Precision::kFp32);
                       }),
                {}, r.g_tp);
  }
  std::uint32_t gather = kNoOp;
  if (p_.zero_stage == 3) {
    const ParamTensor& pt =
        r.layout->tensors[static_cast<std::size_t>(tensor_of(r, OpId::kNone, OpRole::kEmbedding))];
    gather = zero3_gather(r, OpId::kNone, mb, ph, kSlotEmbedding, pt.elements, false, kNoOp);
  }
  const std::int64_t e = bytes_.activation;
  const std::uint32_t emb = add(r, OpId::make(OpId::kNone, mb, ph, OpRole::kEmbedding),
                                cached(OpRole::kEmbedding, ph, 0,
                                       [&] {
                                         OpDesc d =
                                             misc(OpKind::kEmbedding, Stream::kCompute, T_, h_,
                                                  T_ * h_ * e + T_ * kInt64, T_ * h_ * e);
                                         d.aux = V_l_;
                                         return d;
                                       }),
                                {batch, gather, param_dep(r, OpId::kNone)});
  if (sp_)
    return tp_op(r, OpId::make(OpId::kNone, mb, ph, OpRole::kEmbeddingReduce),
                 OpKind::kReduceScatter, emb, T_);
  if (tp_ > 1)
    return tp_op(r, OpId::make(OpId::kNone, mb, ph, OpRole::kEmbeddingReduce), OpKind::kAllReduce,
                 emb, T_);
  return emb;
}

void Lowerer::embedding_bwd(RankState& r, int mb, std::uint32_t dy) {
  std::uint32_t g = dy;
  if (sp_) {
    g = tp_op(r, OpId::make(OpId::kNone, mb, Phase::kBackwardInput, OpRole::kEmbeddingReduce),
              OpKind::kAllGather, dy, T_);
  }
  const std::int64_t e = bytes_.activation;
  const int t = tensor_of(r, OpId::kNone, OpRole::kEmbedding);
  const std::uint32_t w =
      add_w(r, mb, OpId::make(OpId::kNone, mb, Phase::kBackwardWeight, OpRole::kEmbedding),
            cached(OpRole::kEmbedding, Phase::kBackwardWeight, 0,
                   [&] {
                     OpDesc d = misc(OpKind::kEmbedding, Stream::kCompute, T_, h_,
                                     T_ * h_ * e + T_ * kInt64, T_ * h_ * bytes_.grad);
                     d.aux = V_l_;
                     return d;
                   }),
            {g}, -1, t);
  if (p_.zero_stage == 3) {
    zero3_reduce(r, OpId::kNone, mb, kSlotEmbedding,
                 r.layout->tensors[static_cast<std::size_t>(t)].elements, false, {w});
  }
}

std::uint32_t Lowerer::lm_head_fwd(RankState& r, int mb, std::uint32_t x, int layer) {
  const Phase ph = Phase::kForward;
  auto id = [&](OpRole role, int slot = 0) { return OpId::make(layer, mb, ph, role, slot); };
  const std::int64_t e = bytes_.activation;
  const bool mtp = layer != OpId::kNone;
  std::uint32_t labels = r.labels;
  if (tp_ > 1 && !mtp) {
    labels = add(r, id(OpRole::kDataBroadcast, 1),
                 cached(OpRole::kDataBroadcast, ph, 1,
                        [&] {
                          return comm(OpKind::kBroadcast, Stream::kTpComm,
                                      T_ * kLastStageBatchBytesPerToken, Precision::kFp32);
                        }),
                 {}, r.g_tp);
    r.labels = labels;
  }
  std::uint32_t gather = kNoOp;
  if (p_.zero_stage == 3 && !mtp) {
    std::int64_t elems = 0;
    for (const ParamTensor& pt : r.layout->tensors) {
      if ((pt.role == OpRole::kFinalNorm || pt.role == OpRole::kLmHead) &&
          pt.layer == OpId::kNone) {
        elems += pt.elements;
      }
    }
    gather = zero3_gather(r, OpId::kNone, mb, ph, kSlotLmHead, elems, false, kNoOp);
  }
  const std::uint32_t fn = add(r, id(OpRole::kFinalNorm),
                               cached(OpRole::kFinalNorm, ph, 0,
                                      [&] {
                                        return misc(OpKind::kNorm, Stream::kCompute, Ts_, h_,
                                                    Ts_ * h_ * e, Ts_ * h_ * e);
                                      }),
                               {x, gather, mtp ? kNoOp : param_dep(r, head_key_)});
  std::uint32_t in = fn;
  if (sp_) in = tp_op(r, id(OpRole::kLmHeadGather), OpKind::kAllGather, fn, T_);
  const std::uint32_t logits =
      add(r, id(OpRole::kLmHead), linear(OpRole::kLmHead, ph, T_, h_, V_l_), {in});
  if (tp_ == 1) {
    return add(r, id(OpRole::kLoss),
               cached(OpRole::kLoss, ph, 0,
                      [&] {
                        return misc(OpKind::kSoftmaxCrossEntropy, Stream::kCompute, T_, V_l_,
                                    T_ * V_l_ * e + T_ * kInt64, T_ * kFp32);
                      }),
               {logits});
  }
  const std::uint32_t l0 = add(r, id(OpRole::kLoss, 0),
                               cached(OpRole::kLoss, ph, 0,
                                      [&] {
                                        return misc(OpKind::kSoftmaxCrossEntropy, Stream::kCompute,
                                                    T_, V_l_, T_ * V_l_ * e, T_ * kFp32);
                                      }),
                               {logits});
  const std::uint32_t mx =
      add(r, id(OpRole::kLossMax),
          cached(OpRole::kLossMax, ph, 0,
                 [&] {
                   return comm(OpKind::kAllReduce, Stream::kTpComm, T_ * kLossMaxValues * kFp32,
                               Precision::kFp32, kReduceMax);
                 }),
          {l0}, r.g_tp);
  const std::uint32_t l1 =
      add(r, id(OpRole::kLoss, 1),
          cached(OpRole::kLoss, ph, 1,
                 [&] {
                   return misc(OpKind::kSoftmaxCrossEntropy, Stream::kCompute, T_, V_l_,
                               T_ * V_l_ * e + T_ * (kFp32 + kInt64), T_ * kLossSumValues * kFp32);
                 }),
          {mx, labels});
  const std::uint32_t sum = add(r, id(OpRole::kLossSum),
                                cached(OpRole::kLossSum, ph, 0,
                                       [&] {
                                         return comm(OpKind::kAllReduce, Stream::kTpComm,
                                                     T_ * kLossSumValues * kFp32, Precision::kFp32);
                                       }),
                                {l1}, r.g_tp);
  return add(r, id(OpRole::kLoss, 2),
             cached(OpRole::kLoss, ph, 2,
                    [&] {
                      return misc(OpKind::kSoftmaxCrossEntropy, Stream::kCompute, T_, 1,
                                  T_ * (kLossSumValues + kLossMaxValues) * kFp32, T_ * kFp32);
                    }),
             {sum});
}

std::uint32_t Lowerer::lm_head_bwd(RankState& r, int mb, std::uint32_t loss, int layer) {
  const Phase B = Phase::kBackwardInput;
  const Phase W = Phase::kBackwardWeight;
  auto id = [&](OpRole role, Phase ph) { return OpId::make(layer, mb, ph, role); };
  const std::int64_t e = bytes_.activation;
  const bool mtp = layer != OpId::kNone;
  std::uint32_t gather = kNoOp;
  std::int64_t elems = 0;
  if (p_.zero_stage == 3 && !mtp) {
    for (const ParamTensor& pt : r.layout->tensors) {
      if ((pt.role == OpRole::kFinalNorm || pt.role == OpRole::kLmHead) &&
          pt.layer == OpId::kNone) {
        elems += pt.elements;
      }
    }
    gather = zero3_gather(r, OpId::kNone, mb, B, kSlotLmHead, elems, false, kNoOp);
  }
  const std::uint32_t lb = add(r, id(OpRole::kLoss, B),
                               cached(OpRole::kLoss, B, 0,
                                      [&] {
                                        return misc(OpKind::kSoftmaxCrossEntropy, Stream::kCompute,
                                                    T_, V_l_, T_ * V_l_ * e, T_ * V_l_ * e);
                                      }),
                               {loss});
  const std::uint32_t dh =
      add(r, id(OpRole::kLmHead, B), linear(OpRole::kLmHead, B, T_, h_, V_l_), {lb, gather});
  std::uint32_t x_full = kNoOp;
  if (sp_) {
    x_full = add_w(r, mb, id(OpRole::kLmHeadGather, W),
                   tp_collective(OpRole::kLmHeadGather, W, OpKind::kAllGather, T_), {lb}, r.g_tp);
  }
  std::vector<std::uint32_t> grads;
  grads.push_back(add_w(r, mb, id(OpRole::kLmHead, W), linear(OpRole::kLmHead, W, T_, h_, V_l_),
                        {lb, x_full}, -1, tensor_of(r, OpId::kNone, OpRole::kLmHead)));
  std::uint32_t d = dh;
  if (sp_) {
    d = tp_op(r, id(OpRole::kLmHeadGather, B), OpKind::kReduceScatter, dh, T_);
  } else if (tp_ > 1) {
    d = tp_op(r, id(OpRole::kLmHeadReduce, B), OpKind::kAllReduce, dh, T_);
  }
  const std::uint32_t fn = add(r, id(OpRole::kFinalNorm, B),
                               cached(OpRole::kFinalNorm, B, 0,
                                      [&] {
                                        return misc(OpKind::kNorm, Stream::kCompute, Ts_, h_,
                                                    2 * Ts_ * h_ * e, Ts_ * h_ * e);
                                      }),
                               {d});
  grad_ready(r, tensor_of(r, layer, OpRole::kFinalNorm), fn, mb);
  grads.push_back(fn);
  r.last_bwd = fn;
  if (p_.zero_stage == 3 && !mtp) {
    zero3_reduce(r, OpId::kNone, mb, kSlotLmHead, elems, false, grads);
  }
  return fn;
}

// ---- multi-token prediction (DeepSeek-V3 §2.2; Megatron-core's MultiTokenPredictionLayer)

std::uint32_t Lowerer::mtp_fwd(RankState& r, int mb, int i, std::uint32_t x) {
  const Phase ph = Phase::kForward;
  const int layer = m_.num_layers + i;
  auto id = [&](OpRole role, int slot = 0) { return OpId::make(layer, mb, ph, role, slot); };
  const std::int64_t e = bytes_.activation;
  // The embedding of the tokens one further ahead (the labels this stage already holds).
  std::uint32_t emb = add(r, id(OpRole::kEmbedding),
                          cached(OpRole::kEmbedding, ph, 0,
                                 [&] {
                                   OpDesc d = misc(OpKind::kEmbedding, Stream::kCompute, T_, h_,
                                                   T_ * h_ * e + T_ * kInt64, T_ * h_ * e);
                                   d.aux = V_l_;
                                   return d;
                                 }),
                          {r.labels, param_dep(r, layer)});
  if (sp_) {
    emb = tp_op(r, id(OpRole::kEmbeddingReduce), OpKind::kReduceScatter, emb, T_);
  } else if (tp_ > 1) {
    emb = tp_op(r, id(OpRole::kEmbeddingReduce), OpKind::kAllReduce, emb, T_);
  }
  // enorm and hnorm, then eh_proj of the concatenation (2·hidden → hidden, column parallel),
  // gathered back to the full hidden (Megatron's gather_output) and split along the sequence.
  const std::uint32_t norms = add(r, id(OpRole::kMtpNorm),
                                  cached(OpRole::kMtpNorm, ph, 0,
                                         [&] {
                                           return misc(OpKind::kNorm, Stream::kCompute, 2 * Ts_, h_,
                                                       2 * Ts_ * h_ * e, 2 * Ts_ * h_ * e);
                                         }),
                                  {x, emb});
  r.mtp_in[static_cast<std::size_t>(mb * m_.mtp_layers + i)] = norms;
  std::uint32_t in = norms;
  if (sp_) in = mla_gather(r, id(OpRole::kMtpProj, 1), 2 * h_, {norms});
  std::uint32_t proj =
      add(r, id(OpRole::kMtpProj), linear(OpRole::kMtpProj, ph, T_, 2 * h_, h_ / tp_), {in});
  if (tp_ > 1) proj = mla_gather(r, id(OpRole::kMtpProj, 2), h_ / tp_ * tp_, {proj});
  const std::uint32_t block = layer_fwd(r, layer, mb, ph, proj, kNoOp);
  r.mtp_loss[static_cast<std::size_t>(mb * m_.mtp_layers + i)] = lm_head_fwd(r, mb, block, layer);
  return block;
}

std::uint32_t Lowerer::mtp_bwd(RankState& r, int mb, int i, std::uint32_t from_deeper) {
  const Phase B = Phase::kBackwardInput;
  const Phase W = Phase::kBackwardWeight;
  const int layer = m_.num_layers + i;
  auto id = [&](OpRole role, Phase ph, int slot = 0) {
    return OpId::make(layer, mb, ph, role, slot);
  };
  const std::int64_t e = bytes_.activation;
  const std::size_t at = static_cast<std::size_t>(mb * m_.mtp_layers + i);
  std::uint32_t d = lm_head_bwd(r, mb, r.mtp_loss[at], layer);
  if (from_deeper != kNoOp) {
    // The deeper module's gradient for this module's output adds to its own head's.
    d = add(r, id(OpRole::kMtpNorm, B, 1),
            cached(OpRole::kMtpNorm, B, 1,
                   [&] {
                     return misc(OpKind::kElementwise, Stream::kCompute, Ts_, h_, 2 * Ts_ * h_ * e,
                                 Ts_ * h_ * e);
                   }),
            {d, from_deeper});
  }
  d = layer_bwd(r, layer, mb, d, kNoOp, kNoOp);
  // eh_proj: the gradient of its gathered output is this rank's rows, gathered back over the
  // sequence; its input gradient is reduced over tp (to the sequence shard with SP).
  std::uint32_t g = d;
  if (tp_ > 1) g = mla_gather(r, id(OpRole::kMtpProj, B, 2), h_ / tp_ * tp_, {d});
  const std::uint32_t pd =
      add(r, id(OpRole::kMtpProj, B), linear(OpRole::kMtpProj, B, T_, 2 * h_, h_ / tp_), {g});
  std::uint32_t x_full = kNoOp;
  if (sp_) {
    x_full = add_w(
        r, mb, id(OpRole::kMtpProj, W, 1),
        cached(
            OpRole::kMtpProj, W, 1,
            [&] { return comm(OpKind::kAllGather, Stream::kTpComm, T_ * 2 * h_ * e, act_prec_); }),
        {d}, r.g_tp);
  }
  add_w(r, mb, id(OpRole::kMtpProj, W), linear(OpRole::kMtpProj, W, T_, 2 * h_, h_ / tp_),
        {g, x_full}, -1, tensor_of(r, layer, OpRole::kMtpProj));
  std::uint32_t dn = pd;
  if (sp_) {
    dn = mla_gather(r, id(OpRole::kMtpProj, B, 1), 2 * h_, {pd}, OpKind::kReduceScatter);
  } else if (tp_ > 1) {
    dn = add(r, id(OpRole::kMtpProj, B, 1),
             cached(OpRole::kMtpProj, B, 3,
                    [&] {
                      return comm(OpKind::kAllReduce, Stream::kTpComm, T_ * 2 * h_ * e, act_prec_);
                    }),
             {pd}, r.g_tp);
  }
  const std::uint32_t norms = add(r, id(OpRole::kMtpNorm, B),
                                  cached(OpRole::kMtpNorm, B, 0,
                                         [&] {
                                           return misc(OpKind::kNorm, Stream::kCompute, 2 * Ts_, h_,
                                                       4 * Ts_ * h_ * e, 2 * Ts_ * h_ * e);
                                         }),
                                  {dn});
  grad_ready(r, tensor_of(r, layer, OpRole::kMtpNorm), norms, mb);
  // The embedding's part: back over tp and scattered into the embedding's rows.
  std::uint32_t g_emb = norms;
  if (sp_) {
    g_emb = tp_op(r, id(OpRole::kEmbeddingReduce, B), OpKind::kAllGather, norms, T_);
  }
  add_w(r, mb, id(OpRole::kEmbedding, W),
        cached(OpRole::kEmbedding, W, 0,
               [&] {
                 OpDesc desc = misc(OpKind::kEmbedding, Stream::kCompute, T_, h_,
                                    T_ * h_ * e + T_ * kInt64, T_ * h_ * bytes_.grad);
                 desc.aux = V_l_;
                 return desc;
               }),
        {g_emb}, -1, tensor_of(r, layer, OpRole::kEmbedding));
  return norms;
}

// ---- passes

void Lowerer::forward_pass(RankState& r, int mb, int chunk) {
  const int s = r.stage;
  const int vs = sched_.virtual_stage(s, chunk);
  const int first = part_.first_layer(s, chunk);
  const int last = first + part_.layers_per_chunk(s, chunk) - 1;
  const std::int64_t act_bytes = Ts_ * h_ * bytes_.activation;
  std::uint32_t x = kNoOp;
  if (vs == 0) {
    x = embedding_fwd(r, mb);
  } else if (const int peer = pp_peer(r, vs - 1); peer < 0) {
    x = r.last_fwd[static_cast<std::size_t>(mb * part_.chunks() +
                                            chunk_of_virtual(p_.schedule, p_.pp, vs - 1))];
  } else {
    x = add(r, OpId::make(first, mb, Phase::kForward, OpRole::kPpRecvActivation),
            cached(OpRole::kPpRecvActivation, Phase::kForward, 0,
                   [&] { return comm(OpKind::kRecv, Stream::kPpRecv, act_bytes, act_prec_); }),
            {}, -1, peer,
            p2p_tag(P2pChannel::kPpActivation, static_cast<std::uint32_t>(mb * vstages_ + vs)));
  }
  std::uint32_t prev_first = kNoOp;
  for (int layer = first; layer <= last; ++layer) {
    x = layer_fwd(r, layer, mb, Phase::kForward, x, prev_first);
    prev_first = r.first_compute;
  }
  if (vs == vstages_ - 1) {
    const std::uint32_t hidden = x;
    x = lm_head_fwd(r, mb, x);
    std::uint32_t depth = hidden;
    for (int i = 0; i < m_.mtp_layers; ++i)
      depth = mtp_fwd(r, mb, i, depth);
  } else if (const int peer = pp_peer(r, vs + 1); peer >= 0) {
    add(r, OpId::make(last, mb, Phase::kForward, OpRole::kPpSendActivation),
        cached(OpRole::kPpSendActivation, Phase::kForward, 0,
               [&] { return comm(OpKind::kSend, Stream::kPpSend, act_bytes, act_prec_); }),
        {x}, -1, peer,
        p2p_tag(P2pChannel::kPpActivation, static_cast<std::uint32_t>(mb * vstages_ + vs + 1)));
  }
  r.last_fwd[static_cast<std::size_t>(mb * part_.chunks() + chunk)] = x;
}

void Lowerer::backward_pass(RankState& r, int mb, int chunk) {
  const int s = r.stage;
  const int vs = sched_.virtual_stage(s, chunk);
  r.chunk = chunk;
  const int first = part_.first_layer(s, chunk);
  const int last = first + part_.layers_per_chunk(s, chunk) - 1;
  const std::int64_t act_bytes = Ts_ * h_ * bytes_.activation;
  const std::uint32_t saved = r.last_fwd[static_cast<std::size_t>(mb * part_.chunks() + chunk)];
  std::uint32_t dy = kNoOp;
  if (vs == vstages_ - 1) {
    // The MTP modules' backward (deepest first) sends a gradient to the main model's output,
    // which adds to the one through the final norm.
    std::uint32_t to_main = kNoOp;
    for (int i = m_.mtp_layers - 1; i >= 0; --i)
      to_main = mtp_bwd(r, mb, i, to_main);
    dy = lm_head_bwd(r, mb, saved);
    if (to_main != kNoOp) {
      const std::int64_t e = bytes_.activation;
      dy = add(r, OpId::make(m_.num_layers, mb, Phase::kBackwardInput, OpRole::kMtpNorm, 1),
               cached(OpRole::kMtpNorm, Phase::kBackwardInput, 1,
                      [&] {
                        return misc(OpKind::kElementwise, Stream::kCompute, Ts_, h_,
                                    2 * Ts_ * h_ * e, Ts_ * h_ * e);
                      }),
               {dy, to_main});
    }
  } else if (const int peer = pp_peer(r, vs + 1); peer < 0) {
    dy = r.last_bwd_in[static_cast<std::size_t>(mb * part_.chunks() +
                                                chunk_of_virtual(p_.schedule, p_.pp, vs + 1))];
  } else {
    dy = add(r, OpId::make(last, mb, Phase::kBackwardInput, OpRole::kPpRecvGrad),
             cached(OpRole::kPpRecvGrad, Phase::kBackwardInput, 0,
                    [&] { return comm(OpKind::kRecv, Stream::kPpRecv, act_bytes, act_prec_); }),
             {}, -1, peer,
             p2p_tag(P2pChannel::kPpGradient, static_cast<std::uint32_t>(mb * vstages_ + vs)));
  }
  std::uint32_t prev_first = kNoOp;
  for (int layer = last; layer >= first; --layer) {
    dy = layer_bwd(r, layer, mb, dy, layer == last ? saved : kNoOp, prev_first);
    prev_first = r.first_compute;
  }
  if (vs == 0) {
    embedding_bwd(r, mb, dy);
  } else if (const int peer = pp_peer(r, vs - 1); peer < 0) {
    r.last_bwd_in[static_cast<std::size_t>(mb * part_.chunks() + chunk)] = dy;
  } else {
    add(r, OpId::make(first, mb, Phase::kBackwardInput, OpRole::kPpSendGrad),
        cached(OpRole::kPpSendGrad, Phase::kBackwardInput, 0,
               [&] { return comm(OpKind::kSend, Stream::kPpSend, act_bytes, act_prec_); }),
        {dy}, -1, peer,
        p2p_tag(P2pChannel::kPpGradient, static_cast<std::uint32_t>(mb * vstages_ + vs - 1)));
  }
}

void Lowerer::step_tail(RankState& r) {
  const Phase S = Phase::kOptimizer;
  auto id = [&](OpRole role, int slot = 0) {
    return OpId::make(OpId::kNone, OpId::kNone, S, role, slot);
  };
  const StageLayout& L = *r.layout;
  const int last_mb = m_count_ - 1;
  if (buckets_on_ && !p_.overlap_grad_reduce && p_.zero_stage != 2) {
    // Without overlap the reduction starts once the whole backward pass has finished, not as
    // each bucket's gradients become ready.
    for (std::size_t b = 0; b < L.buckets.size(); ++b) {
      if (r.last_bwd != kNoOp) r.bucket_ready[b].push_back(r.last_bwd);
      emit_bucket(r, static_cast<int>(b), last_mb);
    }
  }
  std::uint32_t after_grads = r.last_reduce != kNoOp ? r.last_reduce : r.last_bwd;
  if (sp_ && L.params.tp_replicated > 0) {
    after_grads = add(r, id(OpRole::kSpNormGradReduce),
                      prog_.intern(comm(OpKind::kAllReduce, Stream::kTpComm,
                                        L.params.tp_replicated * bytes_.grad, act_prec_)),
                      {r.last_bwd}, r.g_tp);
  }
  std::uint32_t emb = kNoOp;
  if (r.g_emb >= 0) {
    emb = add(
        r, id(OpRole::kEmbeddingGradReduce),
        prog_.intern(comm(OpKind::kAllReduce, Stream::kDpComm, V_l_ * h_ * bytes_.grad, act_prec_)),
        {r.emb_grad, r.last_reduce}, r.g_emb);
  }
  std::uint32_t norm = kNoOp;
  if (o_.clip_gradients && r.g_norm >= 0) {
    norm = add(r, id(OpRole::kGradNorm),
               prog_.intern(comm(OpKind::kAllReduce, Stream::kDpComm, kFp32, Precision::kFp32)),
               {after_grads, emb, r.last_reduce}, r.g_norm);
  }
  if (servers_ > 0) {
    for (std::size_t b = 0; b < L.buckets.size(); ++b) {
      for (int j = 0; j < servers_; ++j) {
        const int slot = static_cast<int>(b) * servers_ + j;
        add(r, OpId::make(OpId::kNone, r.rank, S, OpRole::kPsPull, slot),
            L.buckets[b].pull_desc[static_cast<std::size_t>(j)], {r.last_bwd}, -1,
            static_cast<int>(p_.world_size()) + j,
            p2p_tag(P2pChannel::kPsPull, static_cast<std::uint32_t>(slot)));
      }
    }
    return;
  }
  const bool host = p_.offload != Offload::kNone;
  OpDesc opt = misc(OpKind::kOptimizerStep, host ? Stream::kHost : Stream::kCompute, 1,
                    L.optimizer_params, L.optimizer_params * (bytes_.optimizer + bytes_.grad),
                    L.optimizer_params * (bytes_.optimizer + bytes_.param));
  opt.precision = Precision::kFp32;
  const std::uint32_t step = add(r, id(OpRole::kOptimizerStep), prog_.intern(opt),
                                 {after_grads, emb, norm, r.last_reduce});
  std::vector<std::uint32_t> h2d(L.buckets.size(), step);
  if (host && p_.zero_stage < 3) {
    for (std::size_t b = 0; b < L.buckets.size(); ++b) {
      h2d[b] =
          add(r, id(OpRole::kOffloadParam, static_cast<int>(b)), L.buckets[b].h2d_desc, {step});
    }
  } else if (p_.offload == Offload::kOptimizer) {
    // ZeRO-3: the updated shard goes back to the device in one copy.
    add(r, id(OpRole::kOffloadParam),
        prog_.intern(comm(OpKind::kHostToDevice, Stream::kHostToDevice,
                          L.optimizer_params * bytes_.param, act_prec_)),
        {step});
  }
  const bool gathers = (p_.zero_stage == 1 || p_.zero_stage == 2) && !p_.overlap_param_gather;
  if (gathers) {
    for (std::size_t b = 0; b < L.buckets.size(); ++b) {
      const std::int32_t group = L.buckets[b].expert ? r.g_edp : r.g_dp;
      if (group < 0) continue;
      add(r, id(OpRole::kDpParamGather, static_cast<int>(b)), L.buckets[b].gather_desc, {h2d[b]},
          group);
    }
  }
}

Status Lowerer::lower_worker(int rank) {
  const int s = dense_.coordinate(rank, Axis::kPp);
  const StageLayout& L = layout(s);
  RankState r;
  r.rank = rank;
  r.stage = s;
  r.layout = &L;
  r.rp = &prog_.add_rank(rank, RankKind::kWorker, s);
  if (L.ops_hint > 0) r.rp->reserve(L.ops_hint, L.ops_hint * 2);
  auto group = [&](const RankGrid& grid, std::string_view axes,
                   std::string_view name) -> Result<std::int32_t> {
    PLANNER_ASSIGN_OR_RETURN(std::vector<int> members, grid.group_of(rank, axes));
    if (members.size() < 2) return std::int32_t{-1};
    return prog_.intern_group(name, std::move(members));
  };
  PLANNER_ASSIGN_OR_RETURN(r.g_tp, group(dense_, "tp", "tp"));
  PLANNER_ASSIGN_OR_RETURN(r.g_dp,
                           group(dense_, cp_ > 1 ? "dp-cp" : "dp", cp_ > 1 ? "dp-cp" : "dp"));
  if (m_.is_moe()) {
    PLANNER_ASSIGN_OR_RETURN(r.g_ep, group(expert_, "ep", "ep"));
    PLANNER_ASSIGN_OR_RETURN(r.g_etp, group(expert_, "tp", etp_ == tp_ ? "tp" : "etp"));
    PLANNER_ASSIGN_OR_RETURN(r.g_edp, group(expert_, "dp", "edp"));
  }
  if (o_.clip_gradients) {
    // The gradient norm spans every distinct gradient: the data-parallel ranks too when they hold
    // different shards (ZeRO) or different experts (expert parallelism).
    const bool over_dp = p_.zero_stage >= 1 || (m_.is_moe() && ep_ > 1);
    PLANNER_ASSIGN_OR_RETURN(r.g_norm, group(dense_, over_dp ? "tp-cp-dp-pp" : "tp-cp-pp",
                                             over_dp ? "tp-cp-dp-pp" : "tp-cp-pp"));
  }
  AxisSizes coord;
  for (int a = 0; a < kNumAxes; ++a)
    coord[static_cast<Axis>(a)] = dense_.coordinate(rank, static_cast<Axis>(a));
  if (p_.pp > 1) {
    AxisSizes c = coord;
    c.pp = (s + p_.pp - 1) % p_.pp;
    r.pp_prev = dense_.rank_at(c);
    c.pp = (s + 1) % p_.pp;
    r.pp_next = dense_.rank_at(c);
    if ((m_.tied_embeddings || m_.mtp_layers > 0) && p_.lm_head_stage() != 0 &&
        (s == 0 || s == p_.pp - 1)) {
      c.pp = 0;
      const int a = dense_.rank_at(c);
      c.pp = p_.pp - 1;
      r.g_emb = prog_.intern_group("embedding", {a, dense_.rank_at(c)});
    }
  }
  if (cp_ > 1) {
    AxisSizes c = coord;
    c.cp = (coord.cp + cp_ - 1) % cp_;
    r.cp_prev = dense_.rank_at(c);
    c.cp = (coord.cp + 1) % cp_;
    r.cp_next = dense_.rank_at(c);
  }
  r.tensor_stamp.assign(L.tensors.size(), -1);
  r.tensor_left.assign(L.tensors.size(), 0);
  r.bucket_stamp.assign(L.buckets.size(), -1);
  r.bucket_left.assign(L.buckets.size(), 0);
  r.bucket_ready.assign(L.buckets.size(), {});
  r.last_fwd.assign(static_cast<std::size_t>(m_count_ * part_.chunks()), kNoOp);
  r.mtp_loss.assign(static_cast<std::size_t>(m_count_ * m_.mtp_layers), kNoOp);
  r.mtp_in.assign(static_cast<std::size_t>(m_count_ * m_.mtp_layers), kNoOp);
  if (split_) r.pending.assign(static_cast<std::size_t>(m_count_ * part_.chunks()), {});
  r.last_bwd_in.assign(static_cast<std::size_t>(m_count_ * part_.chunks()), kNoOp);

  // ZeRO-1/2 with overlap_param_gather: the previous step's parameter all-gathers run at the start
  // of this step, in the order the forward needs them; each layer's first use waits for its bucket.
  if ((p_.zero_stage == 1 || p_.zero_stage == 2) && p_.overlap_param_gather) {
    r.param_ready.assign(static_cast<std::size_t>(m_.num_layers + m_.mtp_layers + 2), kNoOp);
    r.param_used.assign(static_cast<std::size_t>(m_.num_layers + m_.mtp_layers + 2), 0);
    for (std::size_t b = L.buckets.size(); b-- > 0;) {
      const std::int32_t g = L.buckets[b].expert ? r.g_edp : r.g_dp;
      if (g < 0) continue;
      const std::uint32_t op = add(r,
                                   OpId::make(OpId::kNone, OpId::kNone, Phase::kOptimizer,
                                              OpRole::kDpParamGather, static_cast<int>(b)),
                                   L.buckets[b].gather_desc, {}, g);
      for (std::size_t t = 0; t < L.tensors.size(); ++t) {
        if (L.tensor_bucket[t] != static_cast<int>(b)) continue;
        const ParamTensor& pt = L.tensors[t];
        const bool head = pt.role == OpRole::kFinalNorm || pt.role == OpRole::kLmHead;
        const int key = pt.layer != OpId::kNone ? pt.layer : (head ? head_key_ : OpId::kNone);
        auto& slot = r.param_ready[static_cast<std::size_t>(key + 1)];
        slot = slot == kNoOp ? op : std::max(slot, op);
      }
    }
  }

  std::vector<PassRange> passes;
  const std::vector<PassItem>& order = sched_.stage(s);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const PassItem& it = order[k];
    const auto begin = static_cast<std::uint32_t>(r.rp->size());
    switch (it.pass) {
      case Pass::kForward:
        forward_pass(r, it.microbatch, it.chunk);
        break;
      case Pass::kBackward:
        backward_pass(r, it.microbatch, it.chunk);
        break;
      case Pass::kWeight:
        flush_w(r, it.microbatch, it.chunk);
        break;
    }
    passes.push_back({it.pass, it.microbatch, begin, static_cast<std::uint32_t>(r.rp->size()),
                      sched_.fused(s, k)});
  }
  step_tail(r);
  // Merged pairs (dualpipev's chunks; the EP all-to-all overlap's steady state) interleave their
  // passes' segments and move their sends and receives with them; the interleaved schedule with
  // m mod p != 0 sends in an order its neighbour does not receive in. Under both the stages would
  // wait on each other forever, so their messages are ordered by the schedule's own run.
  if (p_.schedule == Schedule::kDualPipeV || (p_.moe_a2a_overlap && ep_ > 1)) {
    merge_forward_backward(*r.rp, passes, prog_.descs());
  }
  if (ordered_messages()) order_pipeline_messages(*r.rp, unit_run_);
  if (layouts_[static_cast<std::size_t>(s)].ops_hint == 0) {
    layouts_[static_cast<std::size_t>(s)].ops_hint = r.rp->size();
  }
  return Status::ok();
}

// A parameter server holds part `server` of every worker's buckets: it receives the part from
// every worker, sums over the dp workers of each model shard, updates, and sends the result back.
void Lowerer::lower_server(int server) {
  const int world = static_cast<int>(p_.world_size());
  const int rank = world + server;
  RankProgram& rp = prog_.add_rank(rank, RankKind::kParameterServer, -1);
  RankState r;
  r.rp = &rp;
  r.rank = rank;
  std::size_t max_buckets = 0;
  for (int s = 0; s < p_.pp; ++s)
    max_buckets = std::max(max_buckets, layout(s).buckets.size());
  // Workers of one model shard: the dp group (dp-cp) of each rank.
  std::vector<int> shard_leader(static_cast<std::size_t>(world), -1);
  std::vector<std::vector<int>> shards;
  for (int w = 0; w < world; ++w) {
    if (shard_leader[static_cast<std::size_t>(w)] >= 0) continue;
    auto members = dense_.group_of(w, cp_ > 1 ? "dp-cp" : "dp");
    for (int x : *members)
      shard_leader[static_cast<std::size_t>(x)] = static_cast<int>(shards.size());
    shards.push_back(*members);
  }
  const Phase W = Phase::kBackwardWeight;
  const Phase S = Phase::kOptimizer;
  for (std::size_t b = 0; b < max_buckets; ++b) {
    const int slot = static_cast<int>(b) * servers_ + server;
    for (const std::vector<int>& shard : shards) {
      const StageLayout& L = layout(dense_.coordinate(shard.front(), Axis::kPp));
      if (b >= L.buckets.size()) continue;
      const Bucket& bk = L.buckets[b];
      const std::int64_t part = bk.parts[static_cast<std::size_t>(server)];
      std::vector<std::uint32_t> received;
      const std::uint32_t recv_d =
          prog_.intern(comm(OpKind::kRecv, Stream::kPsRecv, part * bytes_.grad, act_prec_));
      for (int w : shard) {
        received.push_back(add(r, OpId::make(OpId::kNone, w, W, OpRole::kPsPush, slot), recv_d, {},
                               -1, w,
                               p2p_tag(P2pChannel::kPsPush, static_cast<std::uint32_t>(slot))));
      }
      const std::int64_t n = static_cast<std::int64_t>(shard.size());
      OpDesc sum = misc(OpKind::kElementwise, Stream::kHost, n, part, n * part * bytes_.grad,
                        part * bytes_.grad);
      const std::uint32_t agg = rp.add(Op{OpId::make(OpId::kNone, shard.front(), S,
                                                     OpRole::kPsAggregate, 2 * static_cast<int>(b)),
                                          prog_.intern(sum), -1, -1, 0},
                                       received);
      OpDesc opt =
          misc(OpKind::kOptimizerStep, Stream::kHost, 1, part,
               part * (bytes_.optimizer + bytes_.grad), part * (bytes_.optimizer + bytes_.param));
      opt.precision = Precision::kFp32;
      const std::uint32_t upd = add(r,
                                    OpId::make(OpId::kNone, shard.front(), S, OpRole::kPsAggregate,
                                               2 * static_cast<int>(b) + 1),
                                    prog_.intern(opt), {agg});
      const std::uint32_t send_d =
          prog_.intern(comm(OpKind::kSend, Stream::kPsSend, part * bytes_.param, act_prec_));
      for (int w : shard) {
        add(r, OpId::make(OpId::kNone, w, S, OpRole::kPsPull, slot), send_d, {upd}, -1, w,
            p2p_tag(P2pChannel::kPsPull, static_cast<std::uint32_t>(slot)));
      }
    }
  }
}

}  // namespace

std::int64_t default_bucket_elements(int dp) {
  return std::max(kMegatronBucketFloor, kMegatronBucketPerDpRank * dp);
}

std::vector<int> representative_ranks(const ParallelConfig& p, RankSubset subset) {
  auto grid = RankGrid::dense(p);
  if (!grid) return {};
  std::vector<int> out;
  for (int r = 0; r < grid->world_size(); ++r) {
    const bool dp0 = grid->coordinate(r, Axis::kDp) == 0;
    const bool one =
        dp0 && grid->coordinate(r, Axis::kTp) == 0 && grid->coordinate(r, Axis::kCp) == 0;
    if (subset == RankSubset::kAll || (subset == RankSubset::kDataParallelReplica && dp0) ||
        (subset == RankSubset::kOnePerStage && one)) {
      out.push_back(r);
    }
  }
  if (subset == RankSubset::kAll) {
    for (int s : parameter_server_ranks(p))
      out.push_back(s);
  }
  return out;
}

std::vector<int> parameter_server_ranks(const ParallelConfig& p) {
  std::vector<int> out;
  if (p.dp_sync != DpSync::kParameterServer) return out;
  for (int j = 0; j < p.param_servers; ++j)
    out.push_back(static_cast<int>(p.world_size()) + j);
  return out;
}

Result<StepProgram> lower(const ModelSpec& model, const TrainingSpec& training,
                          const ParallelConfig& parallel, const LowerOptions& options) {
  Diagnostics diag("cannot lower " + (model.name.empty() ? std::string("model") : model.name));
  check_parallel(model, training, parallel, diag);
  if (!diag.empty()) return diag.to_status();
  PLANNER_ASSIGN_OR_RETURN(RankGrid dense, RankGrid::dense(parallel));
  PLANNER_ASSIGN_OR_RETURN(RankGrid expert, RankGrid::expert(parallel));
  const std::int64_t mb = training.global_batch_size /
                          (static_cast<std::int64_t>(parallel.dp) * parallel.micro_batch_size);
  if (mb > OpId::kMaxMicrobatch || model.num_layers + model.mtp_layers > OpId::kMaxLayer) {
    return Status::invalid_input("cannot lower: " + std::to_string(mb) + " micro-batches and " +
                                 std::to_string(model.num_layers) +
                                 " layers exceed what op ids hold (2^20 - 2 and 65534)");
  }
  const std::int64_t vstages = static_cast<std::int64_t>(parallel.pp) * parallel.virtual_stages;
  const std::int64_t cp_tags = mb * (model.num_layers + model.mtp_layers) * parallel.cp;
  if (mb * vstages > kMaxTagPayload || cp_tags > kMaxTagPayload) {
    return Status::invalid_input("cannot lower: micro-batches x virtual stages (" +
                                 std::to_string(mb * vstages) +
                                 ") or micro-batches x layers x cp (" + std::to_string(cp_tags) +
                                 ") exceed the 2^28 send/recv tags");
  }
  PLANNER_ASSIGN_OR_RETURN(
      PipelineSchedule sched,
      PipelineSchedule::create(parallel.schedule, parallel.pp, static_cast<int>(mb),
                               parallel.virtual_stages, parallel.extra_warmup()));
  PLANNER_ASSIGN_OR_RETURN(ModelPartition part, ModelPartition::create(model, parallel));
  std::vector<int> ranks =
      options.ranks.empty() ? representative_ranks(parallel, RankSubset::kAll) : options.ranks;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  const int world = static_cast<int>(parallel.world_size());
  const int total = world + static_cast<int>(parameter_server_ranks(parallel).size());
  for (int r : ranks) {
    if (r < 0 || r >= total) {
      return Status::invalid_input("cannot lower rank " + std::to_string(r) + ": ranks are 0.." +
                                   std::to_string(total - 1));
    }
  }
  Lowerer lowerer(model, training, parallel, options, std::move(dense), std::move(expert),
                  std::move(sched), std::move(part));
  for (int r : ranks) {
    if (r < world) {
      PLANNER_RETURN_IF_ERROR(lowerer.lower_worker(r));
    } else {
      lowerer.lower_server(r - world);
    }
  }
  return lowerer.take();
}

Result<StepProgram> lower(const Plan& plan, const LowerOptions& options) {
  Diagnostics diag(plan.name.empty() ? "plan" : plan.name);
  check_plan(plan, diag);
  if (!diag.empty()) return diag.to_status();
  return lower(plan.model, plan.training, plan.parallel, options);
}

}  // namespace planner
