// The step program: one training step as an ordered list of operations per rank.
//
// It is the contract between the simulator (which times it) and the executor (which runs it):
// both consume the same program, so predictions and measurements line up op by op and are joined
// on the stable OpId. core/src/lowering.cpp produces it (see lowering.hpp); check_program() below
// checks any program.
//
// Layout (compact; a GPT-3 175B step on 64 ranks is ~1.7 M ops):
//   StepProgram
//     descs()   OpDesc table: what an op computes or moves (kind, stream, precision, shapes,
//               FLOPs, bytes). Shared by every op with identical content, across ranks.
//     groups()  CommGroup table: the axes and member ranks of every collective group used.
//     ranks()   one RankProgram per lowered rank, ascending by rank.
//   RankProgram
//     ops       Op {id, desc, group, peer, tag}: 24 bytes each, in program order.
//     deps      explicit dependencies (CSR): indices of earlier ops of the same rank.
//
// Execution semantics (what the simulator models and the executor follows):
//   * Every op runs on one stream of its rank (OpDesc::stream). Streams are FIFO: an op starts
//     when the previous op of the same stream on that rank has finished and every op it depends
//     on has finished. Ops on different streams overlap (NCCL on its own CUDA streams): tp, ep
//     and dp collectives each have a stream, so bucketed gradient reduction overlaps backward.
//     Sends and receives use separate streams per axis (pp-send / pp-recv, cp-send / cp-recv,
//     ps-send / ps-recv), as NCCL group calls post both directions together.
//   * A collective (all-reduce, all-gather, reduce-scatter, all-to-all, broadcast) runs on the
//     group Op::group; it finishes for all members together, after each member has started it.
//     All members issue the same collectives on a group in the same order (same OpIds).
//   * A send (to Op::peer) matches the recv on the peer whose peer is the sender and whose tag
//     is equal; the pair finishes together after both have started (rendezvous). Pipeline and
//     context-parallel receives depend on nothing local: they are posted when their stream
//     reaches them; the data dependency is the matching send on the peer. (A parameter-server
//     pull waits for the rank's backward, since it overwrites the weights.)
//   * Dependencies are data dependencies within a rank (the consumer reads what the producer
//     wrote, or overwrites what it read); program order alone orders ops of one stream.
//
// Shapes (OpDesc::m, n, k, batch, aux; elements, not bytes):
//   kGemm            C[batch][m][n] (+)= op(A)[m][k] · op(B)[k][n], row-major. Weights are stored
//                    [out, in] (PyTorch nn.Linear): forward Y[T,out] = X[T,in]·Wᵀ (kTransB),
//                    input gradient dX[T,in] = dY[T,out]·W, weight gradient
//                    dW[out,in] += dY[T,out]ᵀ·X[T,in] (kTransA, kAccumulate: gradients
//                    accumulate over micro-batches). Expert GEMMs batch over local experts.
//                    aux = HBM bytes of quantizing the 16-bit activation-side operand to fp8
//                    in a kernel of its own before the GEMM (Transformer Engine; 0: none).
//   kAttention       batch = micro-batch × local query heads, m = query tokens, n = key/value
//                    tokens of this block, k = head_dim, aux = local kv heads (GQA). Flash-style:
//                    no s×s tensor is stored; kCausal marks a causal block. Context parallelism
//                    splits the sequence into 2·cp chunks, rank i holding chunks i and 2cp−1−i
//                    (load-balanced, as in Megatron-LM/Transformer Engine); ring step j uses the
//                    K/V of cp rank (i−j) mod cp: step 0 is causal over the own chunks, steps
//                    j > 0 (kHalfBlock) compute half of a full block (all local queries against
//                    the first source chunk when the source index is lower, else the second local
//                    query chunk against both source chunks).
//   kNorm, kActivation, kElementwise, kSoftmaxCrossEntropy, kRouter
//                    m = rows (tokens), n = columns (features, vocabulary shard, experts).
//   kEmbedding       m = tokens, n = hidden, aux = local vocabulary rows (vocab / tp).
//   kOptimizerStep   n = parameters updated by this rank.
//   collectives, kSend/kRecv, copies: comm_bytes is the nccl-tests "size": the buffer of an
//                    all-reduce or broadcast, the whole output of an all-gather, the whole input
//                    of a reduce-scatter, everything this rank sends in an all-to-all (its own
//                    share included), the message of a send/recv, the bytes of a copy.
//                    A ZeRO-3 parameter all-gather's aux is the number of parameter tensors
//                    it gathers (a framework may gather them one by one, host_model.hpp).
//                    An all-to-all of routed MoE tokens sent hierarchically (flag
//                    kTokenRouted, ParallelConfig::moe_a2a) states the routing that decides how
//                    many nodes a token reaches: m = experts, k = top-k, batch = expert groups,
//                    aux = groups a token may pick (group-limited routing; batch = aux = 1
//                    without it).
//
// FLOPs follow flops.hpp: GEMMs 2·m·n·k·batch; attention 4·batch·m·n·k (× 1/2 for causal or half
// blocks) forward and twice that backward; other kinds 0 (they are memory-bound; bytes_read and
// bytes_written give their HBM traffic). Summed over all ranks, the non-recompute ops of a
// program equal model_flops_per_step() and all ops hardware_flops_per_step() (for MoE with
// capacity_factor 1 and divisible token counts; padding to capacity adds expert FLOPs).
//
// Rank subsets: lowering may cover only some ranks (LowerOptions::ranks). Ranks of one pipeline
// stage run identical op lists (same OpIds and descriptors; groups and peers differ, and
// parameter-server ops carry the worker's rank in their id), so a simulator can time one rank
// per stage and treat collectives and messages with ranks that were not lowered as symmetric.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "planner/core/enums.hpp"
#include "planner/core/status.hpp"
#include "planner/core/units.hpp"

namespace planner {

enum class OpKind : std::uint8_t {
  kGemm,
  kAttention,
  kNorm,
  kActivation,
  kElementwise,          // residual add (fused bias-dropout-add), parameter-server aggregation
  kEmbedding,            // vocab-parallel lookup (forward) / scatter-add (weight gradient)
  kSoftmaxCrossEntropy,  // vocab-parallel loss
  kRouter,               // MoE gating: softmax, top-k and token permutation / unpermutation
  kOptimizerStep,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kSend,
  kRecv,
  kHostToDevice,
  kDeviceToHost,
};

// Which tensor or weight an op works on. With the phase, layer, micro-batch and slot of its OpId
// it says exactly what the op is; the executor maps (kind, role, phase) to kernels and calls.
// A collective role names its forward collective; in the backward phase the op with that role is
// its transpose (all-gather ↔ reduce-scatter, all-to-all ↔ the reverse all-to-all), and in the
// weight-gradient phase an all-gather role gathers the same input again for dW (Megatron's
// sequence parallelism saves the sharded input, Korthikanti et al. 2022 §4.2.2).
enum class OpRole : std::uint8_t {
  // Transformer layer, attention block.
  kAttnNorm,      // input layer norm
  kAttnQkv,       // fused QKV projection (column parallel), n = (q_dim + 2·kv_dim) / tp
  kAttnCore,      // softmax(QKᵀ)V; slot = context-parallel ring step
  kAttnOut,       // output projection (row parallel)
  kAttnResidual,  // x + attention(x): forward bias-dropout-add; backward merges both grad paths
  // MLP block (dense).
  kMlpNorm,
  kMlpUp,    // column parallel, n = ffn / tp
  kMlpGate,  // gated MLPs (SwiGLU, GeGLU) only; column parallel
  kMlpAct,   // GeLU, or act(gate) ⊙ up
  kMlpDown,  // row parallel, k = ffn / tp
  kMlpResidual,
  // MoE block (replaces the dense MLP in MoE layers; the norm and residual roles are shared).
  kRouter,      // router GEMM hidden → experts (replicated weights)
  kRouterTopk,  // softmax, top-k, permutation of tokens by expert
  kExpertUp,    // batched over local experts
  kExpertGate,  // gated experts only
  kExpertAct,
  kExpertDown,
  kExpertCombine,  // unpermute and weight by router probabilities
  // Model ends.
  kEmbedding,  // word (+ learned position) embedding, first virtual stage
  kFinalNorm,  // last virtual stage
  kLmHead,     // logits GEMM (column parallel over the vocabulary)
  kLoss,       // vocab-parallel cross-entropy; with tp > 1: slot 0 local max, slot 1 sum of
               // exponentials and target logit, slot 2 the loss; with tp = 1 slot 0 does it all
  // Tensor and sequence parallelism (group: tp).
  kTpReduceAttn,   // no SP: all-reduce after the output projection (forward) and after
                   // the QKV input gradient (backward)
  kTpReduceMlp,    // no SP: the same around the MLP
  kSpGatherAttn,   // SP: all-gather of the norm output before QKV
  kSpScatterAttn,  // SP: reduce-scatter of the output projection
  kSpGatherMlp,
  kSpScatterMlp,
  kEmbeddingReduce,   // embedding output over tp (all-reduce, or reduce-scatter with SP)
  kLmHeadGather,      // SP: all-gather of the LM head input
  kLmHeadReduce,      // no SP: all-reduce of the LM head input gradient (backward only)
  kLossMax,           // all-reduce (max) of the logits' row maxima, fp32
  kLossSum,           // all-reduce (sum) of sum-exp and target logit, fp32
  kDataBroadcast,     // input tokens (first stage) / labels and loss mask (last stage), int64
  kSpNormGradReduce,  // all-reduce of norm and replicated-bias gradients over tp (SP)
  // Context parallelism (peers: cp ring neighbours).
  kCpKvSend,   // K/V block to the next cp rank; slot = ring step
  kCpKvRecv,   // K/V block from the previous cp rank
  kCpDkvSend,  // backward: accumulated dK/dV to the next cp rank
  kCpDkvRecv,
  // Expert parallelism (group: ep) and expert tensor parallelism (group: etp, or tp when equal).
  kEpDispatch,    // all-to-all of routed tokens to the experts' ranks
  kEpCombine,     // all-to-all of expert outputs back
  kMoeTpGather,   // all-gather of dispatched tokens over etp (experts are etp-split)
  kMoeTpScatter,  // reduce-scatter of expert outputs over etp
  // (MoE backward: kRouter's input-gradient GEMM accumulates onto the token path's gradient.)
  // Pipeline parallelism (peers: previous / next pipeline rank). Layer = boundary layer.
  kPpSendActivation,
  kPpRecvActivation,
  kPpSendGrad,
  kPpRecvGrad,
  // Data parallelism, ZeRO, optimizer.
  kDpGradReduce,         // gradient bucket (slot) or, with ZeRO-3, one layer's gradients:
                         // all-reduce (ZeRO-0) or reduce-scatter (ZeRO-1/2/3) over dp (dp-cp)
  kDpParamGather,        // all-gather of updated parameters: per bucket after the step (ZeRO-1/2),
                         // per layer before use (ZeRO-3: slot 0 a layer's dense weights, 1 its
                         // expert weights, 2 the embedding, 3 final norm and LM head)
  kEmbeddingGradReduce,  // tied embeddings with pp > 1: all-reduce first ↔ last stage
  kGradNorm,             // all-reduce of the squared gradient norm (clipping), fp32
  kOptimizerStep,
  kPsPush,        // gradients to a parameter server (slot = bucket × servers + server)
  kPsPull,        // updated parameters from a parameter server
  kPsAggregate,   // on a server: slot 2·bucket sums the workers' gradients, slot 2·bucket + 1
                  // updates (mb field: the shard's first worker)
  kOffloadGrad,   // device → host copy of gradients (optimizer offload)
  kOffloadParam,  // host → device copy of parameters (after a host step, or param offload)
  // (Roles below were added after the ones above; their values are appended so that op ids
  // recorded by earlier builds keep their meaning.)
  // Multi-head latent attention (replaces kAttnQkv; kAttnCore and kAttnOut are shared).
  kMlaQDown,  // q_a_proj hidden → q_lora_rank, weights replicated over tp (sequence-sharded rows)
  kMlaQNorm,  // RMSNorm of the query latent
  kMlaQUp,    // q_b_proj q_lora → heads × qk_head (column parallel); q_proj without a latent
  kMlaKvDown,        // kv_a_proj_with_mqa hidden → kv_lora_rank + qk_rope_head_dim (replicated)
  kMlaKvNorm,        // RMSNorm of the key/value latent
  kMlaKvUp,          // kv_b_proj kv_lora → heads × (qk_nope + v_head) (column parallel)
  kMlaLatentGather,  // SP: all-gather over tp of the latents (q | kv | rope key)
  // Mamba-2 mixer (heads split over tp; the block's norm is kAttnNorm).
  kMambaInProj,     // in_proj hidden → z | x | B | C | dt (column parallel)
  kMambaConv,       // depthwise causal conv1d over x | B | C, SiLU (weights and bias)
  kMambaScan,       // SSD chunked scan (GEMM-shaped chunks; slot = step); A_log, D, dt_bias
  kMambaNorm,       // gated RMSNorm y · silu(z)
  kMambaOut,        // out_proj d_inner → hidden (row parallel)
  kTpReduceMamba,   // no SP: all-reduce after out_proj (forward) / after in_proj's input grad
  kSpGatherMamba,   // SP: all-gather of the norm output before in_proj
  kSpScatterMamba,  // SP: reduce-scatter of out_proj
  // Shared experts of an MoE layer (tensor parallel like a dense MLP, on the MLP input).
  kSharedUp,
  kSharedGate,
  kSharedAct,
  kSharedDown,
  kSharedExpertGate,  // Qwen2-MoE: sigmoid(x · w) scaling the shared experts' output
  // Multi-token prediction (layer field: the module's block, num_layers + i).
  kMtpNorm,  // enorm and hnorm of [main-stream output; embedding of the next tokens]
  kMtpProj,  // eh_proj 2·hidden → hidden
  // Dropless MoE: device → host copy of the tokens each expert receives, which the framework
  // needs on the host before it dispatches them (the all-to-all's split sizes, the grouped GEMMs'
  // row counts); the host synchronises with the compute stream after it (host_model.hpp).
  kMoeTokenCounts,
};

enum class Phase : std::uint8_t {
  kForward,
  kBackwardInput,   // input gradients (and everything backward that is not a weight gradient)
  kBackwardWeight,  // weight gradients: separate pass in ZB-H1, inline otherwise
  kRecompute,       // forward work run again before backward (selective or full recompute)
  kOptimizer,       // once per step after the last micro-batch: gradient finalisation, update
};

enum class Stream : std::uint8_t {
  kCompute,
  kTpComm,
  kCpSend,
  kCpRecv,
  kEpComm,
  kDpComm,
  kPpSend,
  kPpRecv,
  kPsSend,
  kPsRecv,
  kHostToDevice,
  kDeviceToHost,
  kHost,  // host CPU work (offloaded optimizer, parameter-server aggregation)
};

// Bits of OpDesc::flags.
enum OpFlag : std::uint8_t {
  kTransA = 1u << 0,           // GEMM: A is stored transposed
  kTransB = 1u << 1,           // GEMM: B is stored transposed
  kAccumulate = 1u << 2,       // GEMM: C += (weight gradients accumulate over micro-batches)
  kCausal = 1u << 3,           // attention: causal mask within the block
  kHalfBlock = 1u << 4,        // attention: load-balanced context-parallel step (half a full block)
  kReduceMax = 1u << 5,        // all-reduce with max instead of sum
  kTokenRouted = 1u << 6,      // all-to-all: MoE tokens sent once per node, forwarded over NVLink
  kPerGroupKernels = 1u << 7,  // GEMM: each of the batch's groups (an MoE layer's local experts)
                               // runs as a GEMM kernel of its own (Transformer Engine's
                               // GroupedLinear), not as one batched kernel
};

template <>
struct EnumTraits<OpKind> {
  static constexpr std::string_view kWhat = "op kind";
  static constexpr std::array<std::pair<OpKind, std::string_view>, 18> kNames{{
      {OpKind::kGemm, "gemm"},
      {OpKind::kAttention, "attention"},
      {OpKind::kNorm, "norm"},
      {OpKind::kActivation, "activation"},
      {OpKind::kElementwise, "elementwise"},
      {OpKind::kEmbedding, "embedding"},
      {OpKind::kSoftmaxCrossEntropy, "softmax_ce"},
      {OpKind::kRouter, "router"},
      {OpKind::kOptimizerStep, "optimizer"},
      {OpKind::kAllReduce, "all_reduce"},
      {OpKind::kAllGather, "all_gather"},
      {OpKind::kReduceScatter, "reduce_scatter"},
      {OpKind::kAllToAll, "all_to_all"},
      {OpKind::kBroadcast, "broadcast"},
      {OpKind::kSend, "send"},
      {OpKind::kRecv, "recv"},
      {OpKind::kHostToDevice, "h2d"},
      {OpKind::kDeviceToHost, "d2h"},
  }};
};

template <>
struct EnumTraits<OpRole> {
  static constexpr std::string_view kWhat = "op role";
  static constexpr std::array<std::pair<OpRole, std::string_view>, 80> kNames{{
      {OpRole::kAttnNorm, "attn_norm"},
      {OpRole::kAttnQkv, "attn_qkv"},
      {OpRole::kAttnCore, "attn_core"},
      {OpRole::kAttnOut, "attn_out"},
      {OpRole::kAttnResidual, "attn_residual"},
      {OpRole::kMlpNorm, "mlp_norm"},
      {OpRole::kMlpUp, "mlp_up"},
      {OpRole::kMlpGate, "mlp_gate"},
      {OpRole::kMlpAct, "mlp_act"},
      {OpRole::kMlpDown, "mlp_down"},
      {OpRole::kMlpResidual, "mlp_residual"},
      {OpRole::kRouter, "moe_router"},
      {OpRole::kRouterTopk, "moe_topk"},
      {OpRole::kExpertUp, "expert_up"},
      {OpRole::kExpertGate, "expert_gate"},
      {OpRole::kExpertAct, "expert_act"},
      {OpRole::kExpertDown, "expert_down"},
      {OpRole::kExpertCombine, "moe_combine"},
      {OpRole::kEmbedding, "embedding"},
      {OpRole::kFinalNorm, "final_norm"},
      {OpRole::kLmHead, "lm_head"},
      {OpRole::kLoss, "loss"},
      {OpRole::kTpReduceAttn, "tp_reduce_attn"},
      {OpRole::kTpReduceMlp, "tp_reduce_mlp"},
      {OpRole::kSpGatherAttn, "sp_gather_attn"},
      {OpRole::kSpScatterAttn, "sp_scatter_attn"},
      {OpRole::kSpGatherMlp, "sp_gather_mlp"},
      {OpRole::kSpScatterMlp, "sp_scatter_mlp"},
      {OpRole::kEmbeddingReduce, "embedding_tp_reduce"},
      {OpRole::kLmHeadGather, "lm_head_sp_gather"},
      {OpRole::kLmHeadReduce, "lm_head_tp_reduce"},
      {OpRole::kLossMax, "loss_max"},
      {OpRole::kLossSum, "loss_sum"},
      {OpRole::kDataBroadcast, "data_broadcast"},
      {OpRole::kSpNormGradReduce, "sp_norm_grad_reduce"},
      {OpRole::kCpKvSend, "cp_kv_send"},
      {OpRole::kCpKvRecv, "cp_kv_recv"},
      {OpRole::kCpDkvSend, "cp_dkv_send"},
      {OpRole::kCpDkvRecv, "cp_dkv_recv"},
      {OpRole::kEpDispatch, "ep_dispatch"},
      {OpRole::kEpCombine, "ep_combine"},
      {OpRole::kMoeTpGather, "moe_tp_gather"},
      {OpRole::kMoeTpScatter, "moe_tp_scatter"},
      {OpRole::kPpSendActivation, "pp_send_act"},
      {OpRole::kPpRecvActivation, "pp_recv_act"},
      {OpRole::kPpSendGrad, "pp_send_grad"},
      {OpRole::kPpRecvGrad, "pp_recv_grad"},
      {OpRole::kDpGradReduce, "dp_grad_reduce"},
      {OpRole::kDpParamGather, "dp_param_gather"},
      {OpRole::kEmbeddingGradReduce, "embedding_grad_reduce"},
      {OpRole::kGradNorm, "grad_norm"},
      {OpRole::kOptimizerStep, "optimizer"},
      {OpRole::kPsPush, "ps_push"},
      {OpRole::kPsPull, "ps_pull"},
      {OpRole::kPsAggregate, "ps_aggregate"},
      {OpRole::kOffloadGrad, "offload_grad"},
      {OpRole::kOffloadParam, "offload_param"},
      {OpRole::kMlaQDown, "mla_q_down"},
      {OpRole::kMlaQNorm, "mla_q_norm"},
      {OpRole::kMlaQUp, "mla_q_up"},
      {OpRole::kMlaKvDown, "mla_kv_down"},
      {OpRole::kMlaKvNorm, "mla_kv_norm"},
      {OpRole::kMlaKvUp, "mla_kv_up"},
      {OpRole::kMlaLatentGather, "mla_sp_gather"},
      {OpRole::kMambaInProj, "mamba_in_proj"},
      {OpRole::kMambaConv, "mamba_conv"},
      {OpRole::kMambaScan, "mamba_scan"},
      {OpRole::kMambaNorm, "mamba_norm"},
      {OpRole::kMambaOut, "mamba_out_proj"},
      {OpRole::kTpReduceMamba, "tp_reduce_mamba"},
      {OpRole::kSpGatherMamba, "sp_gather_mamba"},
      {OpRole::kSpScatterMamba, "sp_scatter_mamba"},
      {OpRole::kSharedUp, "shared_up"},
      {OpRole::kSharedGate, "shared_gate"},
      {OpRole::kSharedAct, "shared_act"},
      {OpRole::kSharedDown, "shared_down"},
      {OpRole::kSharedExpertGate, "shared_expert_gate"},
      {OpRole::kMtpNorm, "mtp_norm"},
      {OpRole::kMtpProj, "mtp_proj"},
      {OpRole::kMoeTokenCounts, "moe_token_counts"},
  }};
};

template <>
struct EnumTraits<Phase> {
  static constexpr std::string_view kWhat = "phase";
  static constexpr std::array<std::pair<Phase, std::string_view>, 5> kNames{{
      {Phase::kForward, "fwd"},
      {Phase::kBackwardInput, "bwd"},
      {Phase::kBackwardWeight, "wgrad"},
      {Phase::kRecompute, "recompute"},
      {Phase::kOptimizer, "step"},
  }};
};

template <>
struct EnumTraits<Stream> {
  static constexpr std::string_view kWhat = "stream";
  static constexpr std::array<std::pair<Stream, std::string_view>, 13> kNames{{
      {Stream::kCompute, "compute"},
      {Stream::kTpComm, "tp-comm"},
      {Stream::kCpSend, "cp-send"},
      {Stream::kCpRecv, "cp-recv"},
      {Stream::kEpComm, "ep-comm"},
      {Stream::kDpComm, "dp-comm"},
      {Stream::kPpSend, "pp-send"},
      {Stream::kPpRecv, "pp-recv"},
      {Stream::kPsSend, "ps-send"},
      {Stream::kPsRecv, "ps-recv"},
      {Stream::kHostToDevice, "h2d"},
      {Stream::kDeviceToHost, "d2h"},
      {Stream::kHost, "host"},
  }};
};

inline constexpr int kNumStreams = 13;

bool is_collective(OpKind kind);
bool is_p2p(OpKind kind);
bool is_compute(OpKind kind);

// Stable identity of an op: the same op of the same plan gets the same id in every run, so
// predictions and measurements join on it. Packed into 64 bits:
//   bits 63..48 layer + 1        (0: not a layer op; layers are global, 0-based)
//   bits 47..28 micro-batch + 1  (0: not per micro-batch; parameter-server ops hold the worker
//                                 rank here)
//   bits 27..24 phase,  bits 23..16 role,  bits 15..0 slot (ring step, bucket, loss part, ...)
// The model chunk is not stored: it follows from the layer. Within one rank's program ids are
// unique; (rank, id) is unique in a step.
class OpId {
 public:
  static constexpr int kNone = -1;
  static constexpr int kMaxLayer = (1 << 16) - 2;
  static constexpr int kMaxMicrobatch = (1 << 20) - 2;
  static constexpr int kMaxSlot = (1 << 16) - 1;

  constexpr OpId() = default;
  // layer and microbatch may be kNone. Out-of-range values are truncated; lowering checks them.
  static constexpr OpId make(int layer, int microbatch, Phase phase, OpRole role, int slot = 0) {
    const auto l = static_cast<std::uint64_t>(layer + 1) & 0xffffu;
    const auto mb = static_cast<std::uint64_t>(microbatch + 1) & 0xfffffu;
    return OpId((l << 48) | (mb << 28) | (static_cast<std::uint64_t>(phase) << 24) |
                (static_cast<std::uint64_t>(role) << 16) |
                (static_cast<std::uint64_t>(slot) & 0xffffu));
  }
  static constexpr OpId from_raw(std::uint64_t raw) { return OpId(raw); }

  constexpr std::uint64_t raw() const { return raw_; }
  constexpr int layer() const { return static_cast<int>(raw_ >> 48) - 1; }
  constexpr int microbatch() const { return static_cast<int>((raw_ >> 28) & 0xfffffu) - 1; }
  constexpr Phase phase() const { return static_cast<Phase>((raw_ >> 24) & 0xfu); }
  constexpr OpRole role() const { return static_cast<OpRole>((raw_ >> 16) & 0xffu); }
  constexpr int slot() const { return static_cast<int>(raw_ & 0xffffu); }

  constexpr auto operator<=>(const OpId&) const = default;

 private:
  constexpr explicit OpId(std::uint64_t raw) : raw_(raw) {}
  std::uint64_t raw_ = 0;
};

// "L3.mb2.fwd.attn_qkv", "mb63.wgrad.dp_grad_reduce.5", "step.optimizer", "w17.step.ps_push.4":
// [L<layer>.][mb<micro-batch>. | w<worker>.]<phase>.<role>[.<slot>] (slot omitted when 0).
std::string to_string(OpId id);
// Inverse of to_string(); nullopt for text that is not an op id.
std::optional<OpId> parse_op_id(std::string_view text);

// What an op computes or moves. Shared by all ops with identical content (see StepProgram).
struct OpDesc {
  OpKind kind = OpKind::kGemm;
  Stream stream = Stream::kCompute;
  Precision precision = Precision::kBf16;  // element type of the inputs / payload
  std::uint8_t flags = 0;                  // OpFlag bits
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
  std::int64_t aux = 0;
  Flops flops;
  Bytes bytes_read;     // compute: HBM bytes read (estimate)
  Bytes bytes_written;  // compute: HBM bytes written (estimate)
  Bytes comm_bytes;     // collectives, send/recv, copies: the nccl-tests size (see above)

  bool operator==(const OpDesc&) const = default;
};

// One op in a rank's program (24 bytes).
struct Op {
  OpId id;
  std::uint32_t desc = 0;   // index into StepProgram::descs()
  std::int32_t group = -1;  // collectives: index into StepProgram::groups()
  std::int32_t peer = -1;   // send/recv: the other global rank
  std::uint32_t tag = 0;    // send/recv: matching tag (see p2p_tag)
};

// A collective group: the axes it spans ("tp", "dp-cp", "ep", "edp" for expert data parallel,
// "etp" for expert tensor parallel when etp differs from tp, "embedding" for the first and last
// pipeline stage, "tp-cp-pp", "tp-cp-dp-pp") and its members in rank-grid order.
struct CommGroup {
  std::string axes;
  std::vector<int> ranks;
};

// Send/recv tags: channel in bits 31..28, a payload unique within the channel below.
enum class P2pChannel : std::uint32_t {
  kPpActivation = 1,  // payload micro-batch × virtual stages + receiving virtual stage
  kPpGradient = 2,
  kCpKvForward = 3,  // payload ((micro-batch × (layers + MTP modules)) + layer) × cp + ring step
  kCpKvRecompute = 4,
  kCpKvBackward = 5,
  kCpDkvBackward = 6,
  kPsPush = 7,  // payload bucket × servers + server
  kPsPull = 8,
};
inline constexpr std::uint32_t kMaxTagPayload = (1u << 28) - 1;
constexpr std::uint32_t p2p_tag(P2pChannel channel, std::uint32_t payload) {
  return (static_cast<std::uint32_t>(channel) << 28) | (payload & kMaxTagPayload);
}

enum class RankKind : std::uint8_t { kWorker, kParameterServer };

// The program of one rank.
class RankProgram {
 public:
  RankProgram(int rank, RankKind kind, int stage) : rank_(rank), stage_(stage), kind_(kind) {}

  int rank() const { return rank_; }
  RankKind kind() const { return kind_; }
  int stage() const { return stage_; }  // pipeline stage; -1 for a parameter server
  std::size_t size() const { return ops_.size(); }
  const Op& op(std::size_t i) const { return ops_[i]; }
  std::span<const Op> ops() const { return ops_; }
  // Indices of the earlier ops that op i depends on.
  std::span<const std::uint32_t> deps(std::size_t i) const {
    return {deps_.data() + dep_offsets_[i], deps_.data() + dep_offsets_[i + 1]};
  }
  std::size_t num_deps() const { return deps_.size(); }
  // Heap bytes held by this program (its vectors' capacity).
  std::size_t memory_bytes() const;

  // Appends an op; every dependency must be an index below size(). Returns the op's index.
  std::uint32_t add(const Op& op, std::span<const std::uint32_t> deps);
  std::uint32_t add(const Op& op, std::initializer_list<std::uint32_t> deps) {
    return add(op, std::span<const std::uint32_t>(deps.begin(), deps.size()));
  }
  void reserve(std::size_t ops, std::size_t deps);
  // Reorders the ops: op k becomes the old op order[k], dependencies renumbered, and each pair
  // (op, dependency) of `extra` (old indices) added to the op's dependencies. Returns false and
  // changes nothing unless `order` is a permutation that keeps every op after the ops it depends
  // on, the extra ones included.
  bool reorder(std::span<const std::uint32_t> order,
               std::span<const std::pair<std::uint32_t, std::uint32_t>> extra = {});

 private:
  int rank_ = 0;
  int stage_ = 0;
  RankKind kind_ = RankKind::kWorker;
  std::vector<Op> ops_;
  std::vector<std::uint32_t> dep_offsets_{0};
  std::vector<std::uint32_t> deps_;
};

// What a program was lowered from, for consumers that need the shape of the step.
struct ProgramInfo {
  int world_size = 0;     // worker ranks (tp × cp × dp × pp)
  int param_servers = 0;  // server ranks world_size .. world_size + param_servers − 1
  int stages = 1;
  int chunks = 1;  // model chunks per stage (virtual stages)
  int microbatches = 0;
  int layers = 0;
  Schedule schedule = Schedule::k1F1B;
};

class StepProgram {
 public:
  explicit StepProgram(ProgramInfo info) : info_(info) {}

  const ProgramInfo& info() const { return info_; }
  const std::vector<OpDesc>& descs() const { return descs_; }
  const OpDesc& desc(const Op& op) const { return descs_[op.desc]; }
  const std::vector<CommGroup>& groups() const { return groups_; }
  const CommGroup& group(std::int32_t id) const { return groups_[static_cast<std::size_t>(id)]; }
  // Lowered ranks, ascending by rank.
  const std::vector<RankProgram>& ranks() const { return ranks_; }
  // The program of `rank`, or nullptr when it was not lowered.
  const RankProgram* find(int rank) const;
  // Workers plus parameter servers.
  int total_ranks() const { return info_.world_size + info_.param_servers; }
  // True when every rank was lowered.
  bool complete() const { return static_cast<int>(ranks_.size()) == total_ranks(); }
  std::size_t total_ops() const;
  // Heap bytes held by the program: ops, dependencies, descriptors and groups.
  std::size_t memory_bytes() const;

  // Construction (used by lowering).
  std::uint32_t intern(const OpDesc& desc);
  std::int32_t intern_group(std::string_view axes, std::vector<int> ranks);
  // Ranks must be added in ascending order.
  RankProgram& add_rank(int rank, RankKind kind, int stage);

 private:
  ProgramInfo info_;
  std::vector<OpDesc> descs_;
  std::vector<CommGroup> groups_;
  std::vector<RankProgram> ranks_;
  std::vector<std::int32_t> rank_index_;  // global rank -> index in ranks_ or -1
};

// Checks a program: dependencies point to earlier ops of the same rank; op ids are unique per
// rank; every send has exactly one matching recv (peer, tag, bytes) and vice versa; members of a
// group issue identical collective sequences (ids, kinds, bytes); and, when the program is
// complete, that it runs to the end under the execution semantics above (no deadlock). Checks
// that need a rank that was not lowered are skipped for that rank. The error lists the first
// problems found, naming ranks and op ids.
Status check_program(const StepProgram& program);

}  // namespace planner
