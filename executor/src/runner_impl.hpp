// Runner internals shared by runner.cpp (setup, scheduling, synchronisation, optimizer),
// runner_layer.cpp (transformer layers) and runner_ends.cpp (embedding, LM head and loss, pipeline
// transfers).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "planner/core/model_partition.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/program.hpp"
#include "planner/exec/backend.hpp"
#include "planner/exec/device_buffer.hpp"
#include "planner/exec/model_state.hpp"
#include "planner/exec/runner.hpp"
#include "planner/exec/synthetic_data.hpp"
#include "planner/kernels/cpu/loss_scale.hpp"

namespace planner::exec {

// True for the roles of MoE blocks (router, dispatch, experts, combine, shared experts).
bool is_moe_role(OpRole role);

// Norm epsilon: PyTorch's LayerNorm default and Megatron-LM's layernorm_epsilon (1e-5); Llama's
// RMSNorm uses the same (norm_eps 1e-5 in Llama 2's params.json).
inline constexpr float kNormEps = 1e-5f;
// RoPE base (RoFormer; Llama 2's rope_theta).
inline constexpr double kRopeTheta = 10000.0;

// Shapes of one rank (elements).
struct Shapes {
  std::int64_t b = 1;    // micro-batch size
  std::int64_t seq = 0;  // full sequence length
  std::int64_t sl = 0;   // tokens of a sequence on this rank (seq / cp)
  std::int64_t T = 0;    // rows of a micro-batch on this rank: b x sl
  std::int64_t Ts = 0;   // rows of the residual stream: T, or T / tp with sequence parallelism
  std::int64_t h = 0, hd = 0, heads = 0, kv_heads = 0;  // heads: local query heads
  std::int64_t q = 0, kv = 0, qkv = 0;                  // local widths
  std::int64_t f = 0;                                   // local ffn width
  std::int64_t vocab = 0, V = 0, vocab_start = 0;       // V: local vocabulary rows
  int chunks = 1;       // sequence chunks per rank: 1, or 2 with context parallelism
  std::int64_t sc = 0;  // tokens per chunk (sl / chunks)
  int tp = 1, tp_rank = 0, cp = 1, cp_rank = 0, dp_rank = 0, stage = 0;
  int microbatches = 0;
  int local_layers = 0;  // layers on this rank (all chunks)
  bool sp = false, gated = false, layer_norm = true, bias = false, learned = false, rope = false;
  std::int64_t global_tokens = 0;  // per step
  // Mixture of experts (runner_moe.cpp): experts, local experts, top-k, an expert's and the shared
  // experts' ffn width on this rank, the expert-parallel size and this rank's index in it and in
  // its expert data parallel group.
  std::int64_t experts = 0, experts_l = 0, topk = 0, fe = 0, fs = 0;
  int ep = 1, ep_rank = 0, edp_rank = 0;
  MoeRouteConfig route;
  // Activations, their gradients and the model weights the kernels read (device.hpp's "A"):
  // element type and bytes (fp32 training: kFloat32, 4; bf16 / fp16: 2).
  DType at = DType::kFloat32;
  std::int64_t es = 4;
};

// An MoE layer's routing and expert buffers for one micro-batch (runner_moe.cpp). "Position" order
// is the dispatched (token, k) pairs sorted by expert; "source" order the rows as received from
// the expert-parallel members; "expert" order the received rows grouped by local expert.
struct MoeActs {
  DeviceBuffer logits, scores, topk, weights;  // [Ts, E] A, [Ts, E] fp32, [Ts, k] int32 and fp32
  DeviceBuffer perm, pos;                      // int32: position -> token; (token, k) -> position
  DeviceBuffer x_perm;                         // dispatched rows, position order
  DeviceBuffer x_recv;                         // received rows, source order
  DeviceBuffer order, inverse;  // int32: expert-order row -> source-order row, and back
  DeviceBuffer x_exp, gate, up, act, y_exp;  // expert order
  DeviceBuffer y_back;                       // expert outputs back, position order
  // Backward.
  DeviceBuffer dw, g_perm, g_recv, g_exp, dact, dgate, dup, dx_exp, dx_perm, dlogits, dtok;
  std::vector<std::int64_t> counts;       // tokens routed to each expert (all E)
  std::vector<std::int64_t> send, recv;   // rows to / from each expert-parallel member
  std::vector<std::int64_t> expert_rows;  // rows of each local expert
  std::int64_t rows = 0;                  // rows this rank's experts process
};

// Activations of one layer and micro-batch (forward values kept for backward, backward
// temporaries). A buffer is empty when not (or no longer) held.
struct LayerActs {
  DeviceBuffer x;  // layer input [Ts, h]
  DeviceBuffer n1, mean1, rstd1, n1_full;
  DeviceBuffer qkv;     // fused projection [T, qkv] until split
  DeviceBuffer q, kv;   // q [T, q] and k | v [2][T, kv], rotated
  DeviceBuffer o, lse;  // attention output [T, q] and log-sum-exp [T, heads]
  DeviceBuffer y1, y1s, res1;
  DeviceBuffer n2, mean2, rstd2, n2_full;
  DeviceBuffer gate, up, act, y2, y2s;
  Ticket kv_send;                  // the own K/V block's send (forward or recompute)
  std::vector<DeviceBuffer> ring;  // context-parallel K/V blocks received (forward / recompute)
  std::vector<Ticket> ring_sends;  // the send of each held block (index 0: the own block)
  // Backward.
  DeviceBuffer dy;  // gradient of the layer output [Ts, h]
  DeviceBuffer g, dact, dgate, dup, dn2, dn2s, dnorm2, dres, g2, d_o, delta, dq, dkv, dqkv, dn1,
      dn1s, dnorm1;
  std::vector<DeviceBuffer> bring;     // K/V blocks received in backward
  std::vector<Ticket> bring_sends;     // index 0: the own block's send
  std::vector<DeviceBuffer> dacc;      // dK/dV sums of the block held at each ring step
  std::vector<DeviceBuffer> dpartial;  // dK/dV partial sums received (index: ring step)
  int open = 0;                        // backward ops still to run before the layer is freed
  MoeActs moe;
};

struct EmbeddingActs {
  DeviceBuffer batch;  // int64 tokens | positions, as broadcast
  DeviceBuffer ids, pos;
  DeviceBuffer out;  // [T, h] before the tensor-parallel reduction
  DeviceBuffer dy, g;
};

struct HeadActs {
  DeviceBuffer batch;   // int64 labels | fp32 loss mask, as broadcast
  DeviceBuffer labels;  // int32 [T]
  DeviceBuffer x, fn, mean, rstd, fn_full, logits, stats, loss, lse, dfn, dfns;
  int open = 0;  // backward ops still to run before the head is freed
};

struct ChunkIo {
  DeviceBuffer out;  // the chunk's output activation (to send, or to the final norm)
  DeviceBuffer din;  // the gradient of the chunk's input (to send, or to the embedding)
};

// What an op is, decoded once.
struct OpCtx {
  std::size_t index = 0;
  const Op* op = nullptr;
  const OpDesc* d = nullptr;
  OpRole role = OpRole::kAttnNorm;
  Phase phase = Phase::kForward;
  int layer = OpId::kNone;
  int mb = OpId::kNone;
  int slot = 0;
  const std::string* name = nullptr;  // the op id as text
};

struct Runner::Impl {
  // ---- set-up (runner.cpp)
  Impl(const Plan& plan, Backend& backend, const RunnerOptions& options, StepProgram program,
       ModelPartition partition);
  Status init();
  Status init_communicators();
  Status init_layout();

  // ---- the step (runner.cpp)
  Result<StepStats> run_step(std::int64_t step);
  Status issue(std::size_t i);
  Status await(Ticket t);
  Status collect_retired();
  // Frees `buffer` once the communication reading or writing it has completed.
  void retire(DeviceBuffer buffer, Ticket t, Ticket also = {});
  Status finish_step();
  Status dispatch(const OpCtx& c);

  // ---- hazards on parameter and gradient groups (runner.cpp)
  Status touch_grads(int group);
  Status touch_params(int group);
  Status touch_all();
  Status unpack_replicated();

  // ---- data-parallel, optimizer and other step-phase ops (runner.cpp)
  Status grad_reduce(const OpCtx& c);
  Status param_gather(const OpCtx& c);
  Status sp_norm_grad_reduce(const OpCtx& c);
  Status embedding_grad_reduce(const OpCtx& c);
  Status grad_norm(const OpCtx& c);
  Status optimizer_step(const OpCtx& c);
  Result<double> local_grad_square_sum();
  // fp16 loss scaling: unscales this rank's gradient shards and reports whether one of them held
  // inf or NaN (false without loss scaling).
  Result<bool> unscale_gradients();

  // ---- transformer layers (runner_layer.cpp)
  Status layer_forward(const OpCtx& c);
  Status layer_backward(const OpCtx& c);
  Status attention_forward(const OpCtx& c, LayerActs& a);
  Status attention_backward(const OpCtx& c, LayerActs& a);
  Status norm_forward(const void* x, int tensor, std::int64_t rows, DeviceBuffer& y,
                      DeviceBuffer& mean, DeviceBuffer& rstd);
  Status norm_backward(const void* dy, const void* x, int tensor, const DeviceBuffer& mean,
                       const DeviceBuffer& rstd, std::int64_t rows, DeviceBuffer& dx);
  void layer_done(int mb, int layer);

  // ---- mixture-of-experts layers (runner_moe.cpp)
  Status moe_forward(const OpCtx& c, LayerActs& a);
  Status moe_backward(const OpCtx& c, LayerActs& a);
  Status moe_permute(MoeActs& m);
  Status moe_layout(MoeActs& m, const std::vector<std::int32_t>& received);
  Result<DeviceBuffer> regroup(const DeviceBuffer& src, const DeviceBuffer& index,
                               std::int64_t rows, const char* what);
  Result<Ticket> exchange(const OpCtx& c, DeviceBuffer& send, DeviceBuffer& recv,
                          const std::vector<std::int64_t>& rows_out,
                          const std::vector<std::int64_t>& rows_in, const char* what);
  void expert_forward(const MoeActs& m, int w, const void* x, std::int64_t in, std::int64_t out,
                      void* y);
  void expert_input_grad(const MoeActs& m, int w, const void* dy, std::int64_t in, std::int64_t out,
                         float beta, void* dx);
  Status expert_weight_grad(const MoeActs& m, int w, const void* dy, const void* x, std::int64_t in,
                            std::int64_t out);

  // ---- model ends and pipeline transfers (runner_ends.cpp)
  Status embedding_op(const OpCtx& c);
  Status head_op(const OpCtx& c);
  Status loss_op(const OpCtx& c);
  Status pipeline_op(const OpCtx& c);
  Status data_broadcast(const OpCtx& c);
  void head_done(int mb);

  // ---- helpers
  Result<DeviceBuffer> alloc(std::int64_t floats, const char* what);
  Status ensure(DeviceBuffer& b, std::int64_t floats, const char* what);
  // The same for `elements` values of `bytes` each.
  Status ensure_bytes(DeviceBuffer& b, std::int64_t elements, std::int64_t bytes, const char* what);
  // The same for arrays of `elements` activation-typed (A) values.
  Result<DeviceBuffer> alloc_act(std::int64_t elements, const char* what);
  Status ensure_act(DeviceBuffer& b, std::int64_t elements, const char* what);
  // Element `i` of an A array, and of tensor `tensor`'s model weights (A).
  void* at(const DeviceBuffer& b, std::int64_t i = 0) const {
    return static_cast<std::byte*>(b.data()) + i * s.es;
  }
  void* weight(int tensor, std::int64_t i = 0) const {
    return static_cast<std::byte*>(state->weight(tensor)) + i * s.es;
  }
  LayerActs& acts(int mb, int layer);
  int local_layer(int layer) const;
  int chunk_of(int layer) const { return part.chunk_of_layer(layer); }
  bool first_in_chunk(int layer) const;
  bool last_in_chunk(int layer) const;
  // The layer after (before) `layer` runs on this stage in another chunk: dualpipev's turn on the
  // last stage hands the activation (the gradient) over without a message.
  bool next_chunk_here(int layer) const;
  bool previous_chunk_here(int layer) const;
  ChunkIo& io(int mb, int chunk);
  int tensor(int layer, OpRole role) const;
  Communicator* group_comm(const OpCtx& c) const;
  Status check_gemm(const OpCtx& c, std::int64_t m, std::int64_t n, std::int64_t k) const;
  Status check_rows(const OpCtx& c, std::int64_t m, std::int64_t n) const;
  Status mismatch(const OpCtx& c, const std::string& what) const;
  // Linear layer products (program.hpp): forward Y = X W^T, input gradient dX (+)= dY W, weight
  // gradient dW += dY^T X.
  // Activations and weights are A arrays (device.hpp); dW is the fp32 main grad.
  Status linear_forward(const OpCtx& c, const void* x, const void* w, std::int64_t rows,
                        std::int64_t in, std::int64_t out, void* y);
  Status linear_input_grad(const OpCtx& c, const void* dy, const void* w, std::int64_t rows,
                           std::int64_t in, std::int64_t out, float beta, void* dx);
  Status linear_weight_grad(const OpCtx& c, const void* dy, const void* x, std::int64_t rows,
                            std::int64_t in, std::int64_t out, float* dw);
  // A column-parallel projection with its bias: y[T, out] = x W^T (+ b) for weight tensor w.
  Status column_forward(const OpCtx& c, int w, const void* x, std::int64_t in, std::int64_t out,
                        void* y);
  // Weight tensor w's gradient dW += dy^T x over the T rows, and, when the model has biases, its
  // bias gradient += the column sums of `bias_dy` over `bias_rows` rows.
  Status weight_grad(const OpCtx& c, int w, const void* dy, const void* x, std::int64_t in,
                     std::int64_t out, const void* bias_dy, std::int64_t bias_rows);
  // The parameter group a dp_grad_reduce / dp_param_gather op works on, after checking its size.
  Result<int> dp_group(const OpCtx& c);
  // Started communication of op `c` (recorded for its dependants and timing).
  void started(const OpCtx& c, Ticket t) { op_ticket[c.index] = t; }
  Deadline deadline() const { return Deadline::after(options.timeout_s); }

  // ---- state
  const Plan& plan;
  const ModelSpec& model;
  Backend& backend;
  Device& dev;
  RunnerOptions options;
  StepProgram program;
  const RankProgram* rp = nullptr;
  ModelPartition part;
  Shapes s;
  std::unique_ptr<ModelState> state;
  SyntheticTokens data;

  std::vector<std::unique_ptr<Communicator>> comms;  // this rank's groups
  std::vector<Communicator*> group_comms;            // by program group id
  Communicator* tp_comm = nullptr;
  Communicator* dp_comm = nullptr;
  Communicator* edp_comm = nullptr;
  Communicator* p2p = nullptr;

  std::vector<std::string> names;       // op id text per op
  std::vector<Ticket> op_ticket;        // per op: its communication, if any
  std::vector<Event> op_start, op_end;  // per op (compute: kernel events)
  std::vector<std::uint8_t> op_comm;    // per op: 1 when its end is its ticket's completion

  std::vector<LayerActs> layer_acts;  // [mb][local layer]
  std::vector<EmbeddingActs> emb;     // per micro-batch
  std::vector<HeadActs> head;         // per micro-batch
  std::vector<ChunkIo> chunk_io;      // [mb][chunk]
  struct Retired {
    Ticket a, b;
    DeviceBuffer buffer;
  };
  std::vector<Retired> retired;

  // Per-group hazards: communication still reading or writing the group's buffers.
  struct GroupHazard {
    Ticket grads;
    Ticket params;
    bool zero_outside_shard = false;  // after a ZeRO reduce-scatter: clear the rest of the buffer
    bool replicated = false;          // waits for the tp-replicated gradients' unpack
  };
  std::vector<GroupHazard> hazards;
  DeviceBuffer replicated_staging;  // packed tp-replicated gradients (sequence parallelism)
  Ticket replicated_ticket;

  DeviceBuffer row_positions;  // int32 [T]: global position of each local row
  DeviceBuffer rope_table;     // [T, head_dim]
  std::vector<std::int32_t> host_positions;
  DeviceBuffer loss_acc;  // float per micro-batch
  DeviceBuffer norm_buf;  // float: the squared gradient norm (reduced by grad_norm)
  DeviceBuffer norm_acc;  // double accumulator
  bool have_grad_norm_op = false;
  std::int64_t step_index = 0;
  std::vector<std::int32_t> host_tokens;  // scratch: one sequence
  bool broken = false;
  // fp16 loss scaling (RunnerOptions::loss_scale): the dynamic scale, the device flag the
  // unscaling sets on inf/NaN, and whether this step's update was skipped.
  bool scaling = false;
  kernels::cpu::DynamicLossScale loss_scale;
  DeviceBuffer found_nonfinite;
  bool step_skipped = false;
};

}  // namespace planner::exec
