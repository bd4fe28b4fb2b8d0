// The runner: set-up, the op loop, synchronisation, and the step-phase ops (data-parallel
// reductions, ZeRO gathers, gradient norm, optimizer).
//
// How ops map to kernels and communication (T rows of a micro-batch on this rank, Ts rows of the
// residual stream: T / tp with sequence parallelism; see runner_layer.cpp and runner_ends.cpp):
//   attn_norm, mlp_norm, final_norm   layernorm/rmsnorm forward; backward writes dx and accumulates
//                                     the norm's gradients
//   attn_qkv, attn_out, mlp_gate/up/down, lm_head
//                                     one GEMM each (fwd Y = X·Wᵀ, bwd dX = dY·W, wgrad
//                                     dW += dYᵀ·X); column-parallel biases are added in the forward
//                                     GEMM's op and reduced in its wgrad op; row-parallel biases
//                                     are added in the residual op and reduced in the wgrad op from
//                                     this rank's rows of the residual stream
//   attn_core                         flash attention (kernels/cpu/attention.hpp); slot 0 also
//                                     splits the fused QKV and applies RoPE; with context
//                                     parallelism one call per (query chunk, key chunk) pair of the
//                                     ring step, merged with attention_combine; backward: delta,
//                                     dQ and the travelling dK/dV partial sums; attn_qkv's bwd op
//                                     joins dQ, dK, dV (RoPE reversed) into the fused gradient
//   mlp_act                           GeLU or SwiGLU
//   attn_residual, mlp_residual       x + y (+ bias); backward adds the two gradient paths
//   tp_reduce_*, sp_*, embedding_tp_reduce, lm_head_*   all-reduce, all-gather or reduce-scatter
//                                     over tp, as the op's kind says (wgrad all-gathers re-gather
//                                     the sequence-parallel input for the weight gradient)
//   cp_kv_*, cp_dkv_*, pp_*           sends and receives to the op's peer with the op's tag
//   embedding                         vocab-parallel lookup (+ learned positions on tp rank 0);
//                                     wgrad scatters into the word rows and position rows
//   loss, loss_max, loss_sum          vocab-parallel cross-entropy (steps of cross_entropy.hpp)
//   data_broadcast                    tokens and positions (first stage), labels and loss mask
//                                     (last stage) as int64 from tp rank 0
//   dp_grad_reduce, dp_param_gather   all-reduce / reduce-scatter / all-gather of a parameter
//                                     group's flat buffer (model_state.hpp)
//   sp_norm_grad_reduce               all-reduce over tp of every tp-replicated gradient, packed
//   embedding_grad_reduce             all-reduce of the tied embedding / LM head gradient
//   grad_norm                         local sum of squares, all-reduced
//   optimizer                         clip coefficient, Adam/AdamW/SGD on this rank's shard, zero
//                                     the gradients
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "planner/core/diagnostics.hpp"
#include "planner/core/lowering.hpp"
#include "planner/core/rank_grid.hpp"
#include "planner/kernels/cpu/adam.hpp"
#include "planner/kernels/cpu/rope.hpp"
#include "runner_impl.hpp"

namespace planner::exec {
namespace {

// Every group axes name the lowering produces (program.hpp, CommGroup). Communicators are created
// for them in this order on every rank (MPI_Comm_split is collective).
constexpr std::string_view kGroupAxes[] = {"tp",          "dp", "dp-cp", "embedding", "tp-cp-pp",
                                           "tp-cp-dp-pp", "ep", "edp",   "etp"};

bool is_layer_role(OpRole role) {
  switch (role) {
    case OpRole::kAttnNorm:
    case OpRole::kAttnQkv:
    case OpRole::kAttnCore:
    case OpRole::kAttnOut:
    case OpRole::kAttnResidual:
    case OpRole::kMlpNorm:
    case OpRole::kMlpUp:
    case OpRole::kMlpGate:
    case OpRole::kMlpAct:
    case OpRole::kMlpDown:
    case OpRole::kMlpResidual:
    case OpRole::kTpReduceAttn:
    case OpRole::kTpReduceMlp:
    case OpRole::kSpGatherAttn:
    case OpRole::kSpScatterAttn:
    case OpRole::kSpGatherMlp:
    case OpRole::kSpScatterMlp:
    case OpRole::kCpKvSend:
    case OpRole::kCpKvRecv:
    case OpRole::kCpDkvSend:
    case OpRole::kCpDkvRecv:
      return true;
    default:
      return false;
  }
}

// Elements at the end of a tensor that take no weight decay (biases, norm parameters).
std::int64_t no_decay_tail(const ModelSpec& m, int tp, const ParamTensor& pt) {
  switch (pt.role) {
    case OpRole::kAttnNorm:
    case OpRole::kMlpNorm:
    case OpRole::kFinalNorm:
      return pt.elements;
    case OpRole::kAttnQkv:
      return m.bias ? (m.q_dim() + 2 * m.kv_dim()) / tp : 0;
    case OpRole::kAttnOut:
    case OpRole::kMlpDown:
      return m.bias ? m.hidden : 0;
    case OpRole::kMlpGate:
    case OpRole::kMlpUp:
      return m.bias ? m.ffn_hidden / tp : 0;
    default:
      return 0;
  }
}

}  // namespace

Status check_runnable(const Plan& plan) {
  Diagnostics diag(plan.name.empty() ? "plan" : plan.name);
  const ModelSpec& m = plan.model;
  const ParallelConfig& p = plan.parallel;
  const std::string not_yet = "the executor does not run ";
  if (m.is_moe()) {
    if (p.expert_tp() != 1) {
      diag.add("/parallel/etp", not_yet +
                                    "expert tensor parallelism: set etp 1 (experts whole on "
                                    "each rank), got " +
                                    std::to_string(p.expert_tp()));
    }
    if (m.moe->shared_expert_gate) {
      diag.add("/model/moe/shared_expert_gate", not_yet + "the shared experts' sigmoid gate yet");
    }
    const double cf = p.moe_capacity_factor >= 0 ? p.moe_capacity_factor : m.moe->capacity_factor;
    if (cf > 0) {
      diag.add(p.moe_capacity_factor >= 0 ? "/parallel/moe_capacity_factor"
                                          : "/model/moe/capacity_factor",
               "the executor routes dropless (it never drops tokens); set \"dropless\"");
    }
    if (p.moe_fp8_dispatch) {
      diag.add("/parallel/moe_fp8_dispatch", not_yet + "FP8 dispatch (no FP8 kernels)");
    }
    if (p.moe_a2a != MoeA2a::kNccl) {
      diag.add("/parallel/moe_a2a", not_yet +
                                        "the hierarchical all-to-all (it sends every token "
                                        "copy with the communicator's all-to-all); set "
                                        "\"nccl\"");
    }
    if (p.zero_stage == 3) {
      diag.add("/parallel/zero_stage", not_yet + "ZeRO-3 with mixture-of-experts models yet");
    }
  }
  if (m.mlp == MlpKind::kGeglu) diag.add("/model/mlp", not_yet + "GeGLU MLPs (no GeGLU kernel)");
  if (m.mlp == MlpKind::kSquaredRelu) {
    diag.add("/model/mlp", not_yet + "squared-ReLU MLPs (no relu2 kernel)");
  }
  if (m.mla) diag.add("/model/mla", not_yet + "multi-head latent attention yet");
  if (m.mamba && m.mamba->delta()) {
    diag.add("/model/gated_deltanet", not_yet + "Gated DeltaNet mixers yet");
  } else if (m.mamba || m.is_hybrid()) {
    diag.add("/model/mamba", not_yet + "Mamba-2 mixers yet");
  }
  if (m.attention_output_gate) {
    diag.add("/model/attention_output_gate", not_yet + "gated attention yet");
  }
  if (m.sliding_window > 0) {
    diag.add("/model/sliding_window", not_yet + "local attention (no windowed attention kernel)");
  }
  if (m.mtp_layers > 0) diag.add("/model/mtp_layers", not_yet + "multi-token prediction yet");
  if (m.position_embedding == PositionEmbedding::kAlibi) {
    diag.add("/model/position_embedding", not_yet + "ALiBi (no ALiBi attention kernel)");
  }
  if (m.position_embedding == PositionEmbedding::kRope && m.head_dim % 2 != 0) {
    diag.add("/model/head_dim", "RoPE needs an even head_dim, got " + std::to_string(m.head_dim));
  }
  if (p.dp_sync == DpSync::kParameterServer) {
    diag.add("/parallel/dp_sync", not_yet + "parameter servers");
  }
  if (p.offload != Offload::kNone) diag.add("/parallel/offload", not_yet + "offloading");
  if (m.tied_embeddings && p.pp > 1 && p.zero_stage >= 1 && p.dp * p.cp > 1) {
    diag.add("/parallel/zero_stage",
             "with tied embeddings on several pipeline stages the executor needs zero_stage 0: "
             "the first and last stage's ZeRO shards of the embedding gradient do not line up "
             "(Megatron-LM keeps the shared embedding in a bucket of its own); untie the "
             "embeddings or use zero_stage 0");
  }
  return diag.empty() ? Status::ok() : diag.to_status();
}

LowerOptions runner_lower_options(const RunnerOptions& options, Precision precision) {
  LowerOptions lower_options;
  lower_options.bucket_elements = options.bucket_elements;
  lower_options.fp32_grads = true;
  // fp16's overflow check rides on the gradient-norm all-reduce (see unscale_gradients), so loss
  // scaling keeps that op even without clipping.
  lower_options.clip_gradients = options.optimizer.clip_grad > 0 || precision == Precision::kFp16;
  return lower_options;
}

// ---- Runner

Runner::Runner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runner::~Runner() = default;

Result<std::unique_ptr<Runner>> Runner::create(const Plan& plan, Backend& backend,
                                               const RunnerOptions& options) {
  PLANNER_RETURN_IF_ERROR(check_runnable(plan));
  const Precision precision = plan.training.precision;
  if (!backend.device().supports(precision)) {
    return Status::invalid_input("/training/precision: the " + std::string(backend.name()) +
                                 " backend's device (" + backend.device().description() +
                                 ") does not train in " + std::string(to_string(precision)) +
                                 (backend.device().supports(Precision::kFp32)
                                      ? " (set \"precision\": \"fp32\" in the plan's training)"
                                      : ""));
  }
  PLANNER_RETURN_IF_ERROR(backend.device().set_precision(precision));
  const int rank = backend.world().rank();
  if (backend.world().size() != plan.parallel.world_size()) {
    return Status::invalid_input("the plan needs " + std::to_string(plan.parallel.world_size()) +
                                 " ranks, the job has " + std::to_string(backend.world().size()));
  }
  LowerOptions lower_options = runner_lower_options(options, precision);
  lower_options.ranks = {rank};
  PLANNER_ASSIGN_OR_RETURN(StepProgram program, lower(plan, lower_options));
  PLANNER_ASSIGN_OR_RETURN(ModelPartition part, ModelPartition::create(plan.model, plan.parallel));
  auto impl = std::make_unique<Impl>(plan, backend, options, std::move(program), std::move(part));
  PLANNER_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<Runner>(new Runner(std::move(impl)));
}

Result<StepStats> Runner::run_step(std::int64_t step) {
  return impl_->run_step(step);
}
const StepProgram& Runner::program() const {
  return impl_->program;
}
const RankProgram& Runner::rank_program() const {
  return *impl_->rp;
}
ModelState& Runner::state() {
  return *impl_->state;
}

// ---- set-up

Runner::Impl::Impl(const Plan& p, Backend& b, const RunnerOptions& o, StepProgram prog,
                   ModelPartition partition)
    : plan(p),
      model(p.model),
      backend(b),
      dev(b.device()),
      options(o),
      program(std::move(prog)),
      part(std::move(partition)),
      data(static_cast<std::uint64_t>(p.training.seed), p.model.vocab, p.training.seq_length) {}

Status Runner::Impl::init() {
  const int rank = backend.world().rank();
  rp = program.find(rank);
  if (rp == nullptr)
    return Status::internal("the lowering did not produce rank " + std::to_string(rank));
  const ParallelConfig& par = plan.parallel;
  PLANNER_ASSIGN_OR_RETURN(RankGrid grid, RankGrid::dense(par));
  s.b = par.micro_batch_size;
  s.seq = plan.training.seq_length;
  s.cp = par.cp;
  s.sl = s.seq / s.cp;
  s.T = s.b * s.sl;
  s.tp = par.tp;
  s.sp = par.sequence_parallel && par.tp > 1;
  s.Ts = s.sp ? s.T / s.tp : s.T;
  s.h = model.hidden;
  s.hd = model.head_dim;
  s.heads = model.heads / s.tp;
  s.kv_heads = model.kv_heads / s.tp;
  s.q = s.heads * s.hd;
  s.kv = s.kv_heads * s.hd;
  s.qkv = s.q + 2 * s.kv;
  s.f = model.ffn_hidden / s.tp;
  s.vocab = model.vocab;
  s.V = model.vocab / s.tp;
  s.tp_rank = grid.coordinate(rank, Axis::kTp);
  s.cp_rank = grid.coordinate(rank, Axis::kCp);
  s.dp_rank = grid.coordinate(rank, Axis::kDp);
  s.stage = grid.coordinate(rank, Axis::kPp);
  s.vocab_start = s.tp_rank * s.V;
  s.chunks = s.cp > 1 ? 2 : 1;
  s.sc = s.sl / s.chunks;
  s.microbatches = program.info().microbatches;
  s.local_layers = part.stage_layers(s.stage);
  s.gated = model.mlp == MlpKind::kSwiglu;
  s.layer_norm = model.norm == NormKind::kLayerNorm;
  s.bias = model.bias;
  s.learned = model.position_embedding == PositionEmbedding::kLearned;
  s.rope = model.position_embedding == PositionEmbedding::kRope;
  s.global_tokens = plan.training.global_batch_size * plan.training.seq_length;
  if (model.is_moe()) {
    PLANNER_ASSIGN_OR_RETURN(RankGrid expert_grid, RankGrid::expert(par));
    s.experts = model.moe->num_experts;
    s.ep = par.ep;
    s.experts_l = s.experts / s.ep;
    s.topk = model.moe->top_k;
    s.fe = model.moe->expert_ffn_hidden / par.expert_tp();
    s.fs = model.moe->shared_ffn() / par.tp;
    s.ep_rank = expert_grid.coordinate(rank, Axis::kEp);
    s.edp_rank = expert_grid.coordinate(rank, Axis::kDp);
    s.route.experts = static_cast<int>(s.experts);
    s.route.top_k = static_cast<int>(s.topk);
    s.route.groups = model.moe->expert_groups;
    s.route.group_top_k = model.moe->group_top_k;
    s.route.sigmoid = model.moe->scoring == RouterScoring::kSigmoid;
  }
  s.at = dev.activation_type();
  s.es = dtype_bytes(s.at);
  scaling = plan.training.precision == Precision::kFp16;
  const LossScaleOptions& ls = options.loss_scale;
  loss_scale = kernels::cpu::DynamicLossScale(ls.initial_scale, ls.growth_factor, ls.backoff_factor,
                                              ls.growth_interval);

  PLANNER_RETURN_IF_ERROR(init_communicators());
  ModelState::Config mc;
  mc.model = model;
  mc.parallel = par;
  mc.stage = s.stage;
  mc.tp_rank = s.tp_rank;
  mc.bucket_elements =
      options.bucket_elements > 0 ? options.bucket_elements : default_bucket_elements(par.dp);
  mc.seed = static_cast<std::uint64_t>(plan.training.seed);
  mc.dp = dp_comm;
  mc.edp = edp_comm;
  mc.ep_rank = s.ep_rank;
  mc.adam = plan.training.optimizer != Optimizer::kSgd;
  mc.weight_type = s.at;
  PLANNER_ASSIGN_OR_RETURN(state, ModelState::create(dev, mc));
  hazards.assign(state->groups().size(), {});
  PLANNER_RETURN_IF_ERROR(init_layout());

  const std::size_t n = rp->size();
  names.resize(n);
  op_ticket.assign(n, {});
  op_start.assign(n, {});
  op_end.assign(n, {});
  op_comm.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = rp->op(i);
    names[i] = to_string(op.id);
    const OpRole role = op.id.role();
    const bool known =
        is_layer_role(role) || is_moe_role(role) || role == OpRole::kEmbedding ||
        role == OpRole::kEmbeddingReduce || role == OpRole::kFinalNorm || role == OpRole::kLmHead ||
        role == OpRole::kLmHeadGather || role == OpRole::kLmHeadReduce || role == OpRole::kLoss ||
        role == OpRole::kLossMax || role == OpRole::kLossSum || role == OpRole::kDataBroadcast ||
        role == OpRole::kPpSendActivation || role == OpRole::kPpRecvActivation ||
        role == OpRole::kPpSendGrad || role == OpRole::kPpRecvGrad ||
        role == OpRole::kDpGradReduce || role == OpRole::kDpParamGather ||
        role == OpRole::kSpNormGradReduce || role == OpRole::kEmbeddingGradReduce ||
        role == OpRole::kGradNorm || role == OpRole::kOptimizerStep;
    if (!known) {
      return Status::invalid_input("the executor does not run op " + names[i] + " (role " +
                                   std::string(to_string(role)) + ")");
    }
    if (role == OpRole::kGradNorm) have_grad_norm_op = true;
  }
  layer_acts.resize(static_cast<std::size_t>(s.microbatches * s.local_layers));
  emb.resize(static_cast<std::size_t>(s.microbatches));
  head.resize(static_cast<std::size_t>(s.microbatches));
  chunk_io.resize(static_cast<std::size_t>(s.microbatches * part.chunks()));
  PLANNER_ASSIGN_OR_RETURN(loss_acc, alloc(std::max(1, s.microbatches), "loss sums"));
  PLANNER_ASSIGN_OR_RETURN(norm_buf, alloc(1, "gradient norm"));
  PLANNER_ASSIGN_OR_RETURN(norm_acc, DeviceBuffer::allocate(dev, sizeof(double), "gradient norm"));
  if (scaling) {
    PLANNER_ASSIGN_OR_RETURN(found_nonfinite,
                             DeviceBuffer::allocate(dev, sizeof(std::int32_t), "overflow flag"));
  }
  return Status::ok();
}

Status Runner::Impl::init_communicators() {
  const int rank = backend.world().rank();
  group_comms.assign(program.groups().size(), nullptr);
  for (const CommGroup& g : program.groups()) {
    if (std::find(std::begin(kGroupAxes), std::end(kGroupAxes), g.axes) == std::end(kGroupAxes)) {
      return Status::internal("the program has a group along \"" + g.axes +
                              "\", which the executor does not know");
    }
  }
  for (std::string_view axes : kGroupAxes) {
    GroupRequest req;
    req.axes = std::string(axes);
    std::int32_t id = -1;
    for (std::size_t g = 0; g < program.groups().size(); ++g) {
      const CommGroup& cg = program.groups()[g];
      if (cg.axes == axes && std::find(cg.ranks.begin(), cg.ranks.end(), rank) != cg.ranks.end()) {
        req.ranks = cg.ranks;
        id = static_cast<std::int32_t>(g);
        break;
      }
    }
    PLANNER_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, backend.create_communicator(req));
    if (!comm) continue;
    Communicator* c = comm.get();
    comms.push_back(std::move(comm));
    for (std::size_t g = 0; g < program.groups().size(); ++g) {
      if (program.groups()[g].axes == axes && program.groups()[g].ranks == req.ranks) {
        group_comms[g] = c;
      }
    }
    if (axes == "tp") tp_comm = c;
    if (axes == "dp" || axes == "dp-cp") dp_comm = c;
    if (axes == "edp") edp_comm = c;
    (void)id;
  }
  p2p = &backend.world_communicator();
  return Status::ok();
}

Status Runner::Impl::init_layout() {
  // Local rows: [chunk][sample][token of the chunk]; chunk 0 is global chunk cp_rank, chunk 1
  // (context parallelism) global chunk 2·cp − 1 − cp_rank.
  host_positions.resize(static_cast<std::size_t>(s.T));
  for (int q = 0; q < s.chunks; ++q) {
    const std::int64_t gc = s.chunks == 1 ? 0 : (q == 0 ? s.cp_rank : 2 * s.cp - 1 - s.cp_rank);
    for (std::int64_t i = 0; i < s.b; ++i) {
      for (std::int64_t p = 0; p < s.sc; ++p) {
        host_positions[static_cast<std::size_t>((q * s.b + i) * s.sc + p)] =
            static_cast<std::int32_t>(gc * s.sc + p);
      }
    }
  }
  PLANNER_ASSIGN_OR_RETURN(row_positions, DeviceBuffer::allocate(dev, s.T * 4, "row positions"));
  PLANNER_RETURN_IF_ERROR(dev.copy_from_host(row_positions.data(), host_positions.data(), s.T * 4));
  if (s.rope) {
    std::vector<float> table(static_cast<std::size_t>(s.T * s.hd));
    kernels::cpu::rope_table(host_positions.data(), s.T, s.hd, kRopeTheta, table.data());
    PLANNER_ASSIGN_OR_RETURN(rope_table, alloc(s.T * s.hd, "rope table"));
    PLANNER_RETURN_IF_ERROR(dev.copy_from_host(rope_table.data(), table.data(), s.T * s.hd * 4));
  }
  host_tokens.resize(static_cast<std::size_t>(data.sequence_tokens()));
  return Status::ok();
}

// ---- helpers

Result<DeviceBuffer> Runner::Impl::alloc(std::int64_t floats, const char* what) {
  return DeviceBuffer::floats(dev, floats, what);
}

// Allocates `b` with `elements` values of `bytes` each unless it holds exactly that already.
Status Runner::Impl::ensure_bytes(DeviceBuffer& b, std::int64_t elements, std::int64_t bytes,
                                  const char* what) {
  if (!b.empty()) {
    if (b.bytes() != elements * bytes) {
      return Status::internal(std::string("buffer ") + what + " holds " +
                              std::to_string(b.bytes() / bytes) + " elements, expected " +
                              std::to_string(elements));
    }
    return Status::ok();
  }
  PLANNER_ASSIGN_OR_RETURN(b, DeviceBuffer::allocate(dev, elements * bytes, what));
  return Status::ok();
}

Status Runner::Impl::ensure(DeviceBuffer& b, std::int64_t floats, const char* what) {
  return ensure_bytes(b, floats, 4, what);
}

Result<DeviceBuffer> Runner::Impl::alloc_act(std::int64_t elements, const char* what) {
  return DeviceBuffer::allocate(dev, elements * s.es, what);
}

Status Runner::Impl::ensure_act(DeviceBuffer& b, std::int64_t elements, const char* what) {
  return ensure_bytes(b, elements, s.es, what);
}

int Runner::Impl::local_layer(int layer) const {
  const int chunk = part.chunk_of_layer(layer);
  return part.local_first(s.stage, chunk) + (layer - part.first_layer(s.stage, chunk));
}

LayerActs& Runner::Impl::acts(int mb, int layer) {
  return layer_acts[static_cast<std::size_t>(mb * s.local_layers + local_layer(layer))];
}

bool Runner::Impl::first_in_chunk(int layer) const {
  return layer == part.first_layer(s.stage, part.chunk_of_layer(layer));
}

bool Runner::Impl::next_chunk_here(int layer) const {
  return layer + 1 < model.num_layers && part.stage_of_layer(layer + 1) == s.stage;
}

bool Runner::Impl::previous_chunk_here(int layer) const {
  return layer > 0 && part.stage_of_layer(layer - 1) == s.stage;
}

bool Runner::Impl::last_in_chunk(int layer) const {
  const int chunk = part.chunk_of_layer(layer);
  return layer == part.first_layer(s.stage, chunk) + part.layers_per_chunk(s.stage, chunk) - 1;
}

ChunkIo& Runner::Impl::io(int mb, int chunk) {
  return chunk_io[static_cast<std::size_t>(mb * part.chunks() + chunk)];
}

int Runner::Impl::tensor(int layer, OpRole role) const {
  return state->find(layer, role);
}

Communicator* Runner::Impl::group_comm(const OpCtx& c) const {
  if (c.op->group < 0) return nullptr;
  return group_comms[static_cast<std::size_t>(c.op->group)];
}

Status Runner::Impl::mismatch(const OpCtx& c, const std::string& what) const {
  return Status::internal("op " + *c.name + ": " + what);
}

Status Runner::Impl::check_gemm(const OpCtx& c, std::int64_t m, std::int64_t n,
                                std::int64_t k) const {
  if (c.d->kind != OpKind::kGemm || c.d->m != m || c.d->n != n || c.d->k != k) {
    return mismatch(c, "the program describes a " + std::string(to_string(c.d->kind)) + " " +
                           std::to_string(c.d->m) + "x" + std::to_string(c.d->n) + "x" +
                           std::to_string(c.d->k) + ", the executor runs a GEMM " +
                           std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
  }
  return Status::ok();
}

Status Runner::Impl::check_rows(const OpCtx& c, std::int64_t m, std::int64_t n) const {
  if (c.d->m != m || c.d->n != n) {
    return mismatch(c, "the program describes " + std::to_string(c.d->m) + " x " +
                           std::to_string(c.d->n) + ", the executor holds " + std::to_string(m) +
                           " x " + std::to_string(n));
  }
  return Status::ok();
}

Status Runner::Impl::linear_forward(const OpCtx& c, const void* x, const void* w, std::int64_t rows,
                                    std::int64_t in, std::int64_t out, void* y) {
  PLANNER_RETURN_IF_ERROR(check_gemm(c, rows, out, in));
  dev.gemm(Transpose::kNo, Transpose::kYes, rows, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
  return Status::ok();
}

Status Runner::Impl::linear_input_grad(const OpCtx& c, const void* dy, const void* w,
                                       std::int64_t rows, std::int64_t in, std::int64_t out,
                                       float beta, void* dx) {
  PLANNER_RETURN_IF_ERROR(check_gemm(c, rows, in, out));
  dev.gemm(Transpose::kNo, Transpose::kNo, rows, in, out, 1.0f, dy, out, w, in, beta, dx, in);
  return Status::ok();
}

Status Runner::Impl::linear_weight_grad(const OpCtx& c, const void* dy, const void* x,
                                        std::int64_t rows, std::int64_t in, std::int64_t out,
                                        float* dw) {
  PLANNER_RETURN_IF_ERROR(check_gemm(c, out, in, rows));
  dev.gemm_fp32_out(Transpose::kYes, Transpose::kNo, out, in, rows, 1.0f, dy, out, x, in, 1.0f, dw,
                    in);
  return Status::ok();
}

Status Runner::Impl::column_forward(const OpCtx& c, int w, const void* x, std::int64_t in,
                                    std::int64_t out, void* y) {
  PLANNER_RETURN_IF_ERROR(linear_forward(c, x, weight(w), s.T, in, out, y));
  if (s.bias) dev.bias_add(y, weight(w, out * in), s.T, out);
  return Status::ok();
}

Status Runner::Impl::weight_grad(const OpCtx& c, int w, const void* dy, const void* x,
                                 std::int64_t in, std::int64_t out, const void* bias_dy,
                                 std::int64_t bias_rows) {
  PLANNER_RETURN_IF_ERROR(touch_grads(state->group_of(w)));
  PLANNER_RETURN_IF_ERROR(linear_weight_grad(c, dy, x, s.T, in, out, state->grad(w)));
  if (s.bias) dev.bias_backward(bias_dy, bias_rows, out, state->grad(w) + out * in);
  return Status::ok();
}

// ---- the step

Status Runner::Impl::await(Ticket t) {
  return backend.stream_wait(t, deadline());
}

void Runner::Impl::retire(DeviceBuffer buffer, Ticket t, Ticket also) {
  if (buffer.empty()) return;
  if (!t.valid() && !also.valid()) return;  // nothing uses it any more: freed here
  retired.push_back({t, also, std::move(buffer)});
}

Status Runner::Impl::collect_retired() {
  for (std::size_t i = 0; i < retired.size();) {
    bool done = true;
    for (Ticket t : {retired[i].a, retired[i].b}) {
      if (!t.valid()) continue;
      PLANNER_ASSIGN_OR_RETURN(bool d, backend.test(t));
      done = done && d;
    }
    if (done) {
      retired[i] = std::move(retired.back());
      retired.pop_back();
    } else {
      ++i;
    }
  }
  return Status::ok();
}

Result<StepStats> Runner::Impl::run_step(std::int64_t step) {
  if (broken) return Status::internal("the runner failed in an earlier step");
  broken = true;  // until this step completes
  step_index = step;
  step_skipped = false;
  const float used_scale = loss_scale.scale();
  dev.reset_events();
  dev.reset_peak();
  dev.set_stream(Stream::kCompute);
  const Event begin = dev.record();
  dev.zero(loss_acc.data(), loss_acc.bytes());
  std::fill(op_ticket.begin(), op_ticket.end(), Ticket{});
  for (std::size_t i = 0; i < rp->size(); ++i) {
    const Status st = issue(i);
    if (!st.is_ok())
      return st.with_context("rank " + std::to_string(backend.world().rank()) + ", step " +
                             std::to_string(step) + ", op " + names[i]);
  }
  PLANNER_RETURN_IF_ERROR(finish_step());
  dev.set_stream(Stream::kCompute);
  const Event end = dev.record();
  PLANNER_RETURN_IF_ERROR(dev.synchronize());

  StepStats out;
  out.step = step;
  const double t0 = dev.seconds(begin);
  out.wall_s = dev.seconds(end) - t0;
  out.peak_memory = dev.memory().peak;
  out.ops.resize(rp->size());
  for (std::size_t i = 0; i < rp->size(); ++i) {
    const double start = dev.seconds(op_start[i]);
    const double stop =
        op_comm[i] ? dev.seconds(backend.events(op_ticket[i]).second) : dev.seconds(op_end[i]);
    out.ops[i] = {static_cast<std::uint32_t>(i), start - t0, std::max(0.0, stop - start)};
  }
  std::vector<float> losses(static_cast<std::size_t>(s.microbatches));
  PLANNER_RETURN_IF_ERROR(dev.copy_to_host(losses.data(), loss_acc.data(), s.microbatches * 4));
  const bool counts_loss = s.stage == part.stages() - 1 && s.tp_rank == 0;
  for (float l : losses)
    out.loss_sum += l;
  out.loss_tokens = counts_loss ? s.T * s.microbatches : 0;
  out.loss_scale = scaling ? used_scale : 0.0f;
  out.skipped = step_skipped;
  PLANNER_RETURN_IF_ERROR(backend.release_tickets());
  broken = false;
  return out;
}

Status Runner::Impl::issue(std::size_t i) {
  const Op& op = rp->op(i);
  const OpDesc& d = program.desc(op);
  dev.set_stream(d.stream);
  for (std::uint32_t dep : rp->deps(i)) {
    if (op_ticket[dep].valid()) {
      PLANNER_RETURN_IF_ERROR(await(op_ticket[dep]));
    } else if (program.desc(rp->op(dep)).stream != d.stream) {
      dev.wait_event(op_end[dep]);  // computation on another stream (a no-op on the cpu)
    }
  }
  OpCtx c;
  c.index = i;
  c.op = &op;
  c.d = &d;
  c.role = op.id.role();
  c.phase = op.id.phase();
  c.layer = op.id.layer();
  c.mb = op.id.microbatch();
  c.slot = op.id.slot();
  c.name = &names[i];
  op_start[i] = dev.record();
  PLANNER_RETURN_IF_ERROR(dispatch(c));
  if (op_ticket[i].valid()) {
    op_comm[i] = 1;
  } else {
    op_comm[i] = 0;
    op_end[i] = dev.record();
  }
  PLANNER_RETURN_IF_ERROR(backend.poll());
  return collect_retired();
}

Status Runner::Impl::dispatch(const OpCtx& c) {
  if (is_moe_role(c.role)) {
    const bool fwd = c.phase == Phase::kForward || c.phase == Phase::kRecompute;
    LayerActs& a = acts(c.mb, c.layer);
    return fwd ? moe_forward(c, a) : moe_backward(c, a);
  }
  if (is_layer_role(c.role)) {
    const bool fwd = c.phase == Phase::kForward || c.phase == Phase::kRecompute;
    return fwd ? layer_forward(c) : layer_backward(c);
  }
  switch (c.role) {
    case OpRole::kEmbedding:
    case OpRole::kEmbeddingReduce:
      return embedding_op(c);
    case OpRole::kFinalNorm:
    case OpRole::kLmHead:
    case OpRole::kLmHeadGather:
    case OpRole::kLmHeadReduce:
      return head_op(c);
    case OpRole::kLoss:
    case OpRole::kLossMax:
    case OpRole::kLossSum:
      return loss_op(c);
    case OpRole::kDataBroadcast:
      return data_broadcast(c);
    case OpRole::kPpSendActivation:
    case OpRole::kPpRecvActivation:
    case OpRole::kPpSendGrad:
    case OpRole::kPpRecvGrad:
      return pipeline_op(c);
    case OpRole::kDpGradReduce:
      return grad_reduce(c);
    case OpRole::kDpParamGather:
      return param_gather(c);
    case OpRole::kSpNormGradReduce:
      return sp_norm_grad_reduce(c);
    case OpRole::kEmbeddingGradReduce:
      return embedding_grad_reduce(c);
    case OpRole::kGradNorm:
      return grad_norm(c);
    case OpRole::kOptimizerStep:
      return optimizer_step(c);
    default:
      return mismatch(c, "no executor mapping for role " + std::string(to_string(c.role)));
  }
}

Status Runner::Impl::finish_step() {
  PLANNER_RETURN_IF_ERROR(backend.wait_all(deadline()));
  PLANNER_RETURN_IF_ERROR(collect_retired());
  PLANNER_RETURN_IF_ERROR(touch_all());
  if (!retired.empty()) return Status::internal("buffers still in flight at the end of the step");
  auto leaked = [&](const char* what, int mb) {
    return Status::internal(std::string(what) + " of micro-batch " + std::to_string(mb) +
                            " still held at the end of the step");
  };
  for (int mb = 0; mb < s.microbatches; ++mb) {
    for (int l = 0; l < s.local_layers; ++l) {
      const LayerActs& a = layer_acts[static_cast<std::size_t>(mb * s.local_layers + l)];
      if (!a.x.empty() || !a.dy.empty() || !a.q.empty() || !a.o.empty()) {
        return leaked("layer activations", mb);
      }
    }
    const EmbeddingActs& e = emb[static_cast<std::size_t>(mb)];
    if (!e.ids.empty() || !e.out.empty() || !e.dy.empty()) return leaked("embedding inputs", mb);
    const HeadActs& hd = head[static_cast<std::size_t>(mb)];
    if (!hd.x.empty() || !hd.logits.empty()) return leaked("LM head activations", mb);
    for (int ch = 0; ch < part.chunks(); ++ch) {
      const ChunkIo& cio = io(mb, ch);
      if (!cio.out.empty() || !cio.din.empty()) return leaked("pipeline buffers", mb);
    }
  }
  return Status::ok();
}

// ---- hazards

Status Runner::Impl::touch_grads(int group) {
  GroupHazard& hz = hazards[static_cast<std::size_t>(group)];
  if (hz.grads.valid()) {
    PLANNER_RETURN_IF_ERROR(await(hz.grads));
    hz.grads = {};
  }
  if (hz.zero_outside_shard) {
    // The reduce-scatter left this rank's shard reduced and the rest holding local sums; clear the
    // rest so that later micro-batches accumulate onto the reduced shard only (model_state.hpp).
    ParamGroup& g = state->groups()[static_cast<std::size_t>(group)];
    dev.zero(g.grad.f32(), g.shard_begin * 4);
    dev.zero(g.grad.f32() + g.shard_end, (g.padded - g.shard_end) * 4);
    hz.zero_outside_shard = false;
  }
  if (hz.replicated) PLANNER_RETURN_IF_ERROR(unpack_replicated());
  return Status::ok();
}

Status Runner::Impl::touch_params(int group) {
  GroupHazard& hz = hazards[static_cast<std::size_t>(group)];
  if (hz.params.valid()) {
    PLANNER_RETURN_IF_ERROR(await(hz.params));
    hz.params = {};
  }
  return Status::ok();
}

Status Runner::Impl::touch_all() {
  for (std::size_t g = 0; g < hazards.size(); ++g) {
    PLANNER_RETURN_IF_ERROR(touch_grads(static_cast<int>(g)));
    PLANNER_RETURN_IF_ERROR(touch_params(static_cast<int>(g)));
  }
  return Status::ok();
}

Status Runner::Impl::unpack_replicated() {
  PLANNER_RETURN_IF_ERROR(await(replicated_ticket));
  std::int64_t at = 0;
  const auto& tensors = state->tensors();
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const std::int64_t rep = tensors[t].tp_replicated;
    if (rep == 0) continue;
    dev.copy(state->grad(static_cast<int>(t)) + tensors[t].elements - rep,
             replicated_staging.f32() + at, rep * 4);
    at += rep;
  }
  replicated_staging.reset();
  replicated_ticket = {};
  for (GroupHazard& hz : hazards)
    hz.replicated = false;
  return Status::ok();
}

// ---- data-parallel and step-phase ops

Result<int> Runner::Impl::dp_group(const OpCtx& c) {
  const int g = state->group_for(c.layer, c.slot);
  if (g < 0 || group_comm(c) == nullptr) {
    return mismatch(c, "no parameter group or communicator for it");
  }
  const ParamGroup& grp = state->groups()[static_cast<std::size_t>(g)];
  // Gradients are reduced in fp32 (main grads); gathers move the model weights (A).
  const std::int64_t bytes = c.d->kind == OpKind::kAllGather ? s.es : 4;
  if (c.d->comm_bytes.raw() != grp.elements * bytes) {
    return mismatch(c, "moves " + std::to_string(c.d->comm_bytes.raw()) +
                           " bytes, the group holds " + std::to_string(grp.elements) + " x " +
                           std::to_string(bytes) + " bytes");
  }
  return g;
}

Status Runner::Impl::grad_reduce(const OpCtx& c) {
  PLANNER_ASSIGN_OR_RETURN(const int g, dp_group(c));
  Communicator* comm = group_comm(c);
  ParamGroup& grp = state->groups()[static_cast<std::size_t>(g)];
  PLANNER_RETURN_IF_ERROR(touch_grads(g));
  Ticket t;
  if (c.d->kind == OpKind::kAllReduce) {
    PLANNER_ASSIGN_OR_RETURN(t, comm->all_reduce(grp.grad.data(), grp.elements, DType::kFloat32,
                                                 ReduceOp::kSum, *c.name));
  } else {
    const std::int64_t shard = grp.padded / comm->size();
    PLANNER_ASSIGN_OR_RETURN(
        t, comm->reduce_scatter(grp.grad.data(), grp.grad.f32() + comm->rank() * shard, shard,
                                DType::kFloat32, ReduceOp::kSum, *c.name));
    hazards[static_cast<std::size_t>(g)].zero_outside_shard = true;
  }
  hazards[static_cast<std::size_t>(g)].grads = t;
  started(c, t);
  return Status::ok();
}

Status Runner::Impl::param_gather(const OpCtx& c) {
  PLANNER_ASSIGN_OR_RETURN(const int g, dp_group(c));
  Communicator* comm = group_comm(c);
  ParamGroup& grp = state->groups()[static_cast<std::size_t>(g)];
  PLANNER_RETURN_IF_ERROR(touch_params(g));
  const std::int64_t shard = grp.padded / comm->size();
  // The weights the kernels read: fp32 parameters, or the 16-bit model copy (mixed precision).
  std::byte* weights =
      static_cast<std::byte*>(state->mixed() ? grp.model.data() : grp.param.data());
  PLANNER_ASSIGN_OR_RETURN(Ticket t, comm->all_gather(weights + comm->rank() * shard * s.es,
                                                      weights, shard, s.at, *c.name));
  hazards[static_cast<std::size_t>(g)].params = t;
  started(c, t);
  return Status::ok();
}

Status Runner::Impl::sp_norm_grad_reduce(const OpCtx& c) {
  const auto& tensors = state->tensors();
  std::int64_t total = 0;
  for (const ParamTensor& pt : tensors)
    total += pt.tp_replicated;
  if (c.d->comm_bytes.raw() != total * 4 || tp_comm == nullptr) {
    return mismatch(c, "reduces " + std::to_string(c.d->comm_bytes.raw()) +
                           " bytes, the rank has " + std::to_string(total) +
                           " tp-replicated parameters");
  }
  PLANNER_ASSIGN_OR_RETURN(replicated_staging, alloc(total, "replicated gradients"));
  std::int64_t at = 0;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const std::int64_t rep = tensors[t].tp_replicated;
    if (rep == 0) continue;
    PLANNER_RETURN_IF_ERROR(touch_grads(state->group_of(static_cast<int>(t))));
    dev.copy(replicated_staging.f32() + at,
             state->grad(static_cast<int>(t)) + tensors[t].elements - rep, rep * 4);
    at += rep;
  }
  PLANNER_ASSIGN_OR_RETURN(Ticket t, tp_comm->all_reduce(replicated_staging.data(), total,
                                                         DType::kFloat32, ReduceOp::kSum, *c.name));
  replicated_ticket = t;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].tp_replicated > 0) {
      hazards[static_cast<std::size_t>(state->group_of(static_cast<int>(i)))].replicated = true;
    }
  }
  started(c, t);
  return Status::ok();
}

Status Runner::Impl::embedding_grad_reduce(const OpCtx& c) {
  const int t =
      s.stage == 0 ? tensor(OpId::kNone, OpRole::kEmbedding) : tensor(OpId::kNone, OpRole::kLmHead);
  Communicator* comm = group_comm(c);
  if (t < 0 || comm == nullptr) return mismatch(c, "no embedding or LM head on this rank");
  const std::int64_t n = s.V * s.h;
  if (c.d->comm_bytes.raw() != n * 4) return mismatch(c, "unexpected size");
  const int g = state->group_of(t);
  PLANNER_RETURN_IF_ERROR(touch_grads(g));
  PLANNER_ASSIGN_OR_RETURN(
      Ticket tk, comm->all_reduce(state->grad(t), n, DType::kFloat32, ReduceOp::kSum, *c.name));
  hazards[static_cast<std::size_t>(g)].grads = tk;
  started(c, tk);
  return Status::ok();
}

Result<double> Runner::Impl::local_grad_square_sum() {
  PLANNER_RETURN_IF_ERROR(touch_all());
  dev.zero(norm_acc.data(), norm_acc.bytes());
  const auto& tensors = state->tensors();
  // With unsharded gradients every rank of the data-parallel (dp-cp) group holds the same reduced
  // values; the norm's group (tp-cp-pp) then counts them once, on context-parallel rank 0. With
  // expert parallelism the experts differ across data-parallel ranks and the norm's group spans
  // them too (tp-cp-dp-pp): unsharded dense gradients count on data-parallel rank 0, expert ones
  // on expert-data-parallel rank 0.
  const bool tied_copy =
      model.tied_embeddings && !part.ends_on_one_stage() && s.stage == part.stages() - 1;
  const bool norm_spans_dp = plan.parallel.zero_stage >= 1 || (model.is_moe() && s.ep > 1);
  for (const ParamGroup& grp : state->groups()) {
    if (!grp.sharded) {
      const bool counted =
          grp.expert ? s.edp_rank == 0 : s.cp_rank == 0 && (!norm_spans_dp || s.dp_rank == 0);
      if (!counted) continue;
    }
    for (int t : grp.tensors) {
      const ParamTensor& pt = tensors[static_cast<std::size_t>(t)];
      if (tied_copy && pt.role == OpRole::kLmHead) continue;  // counted on the first stage
      const std::int64_t base = state->place(t).offset;
      // Split elements on every tp rank, replicated ones on tp rank 0 only.
      const std::int64_t end = base + pt.elements - (s.tp_rank == 0 ? 0 : pt.tp_replicated);
      const std::int64_t lo = std::max(base, grp.shard_begin);
      const std::int64_t hi = std::min(end, grp.shard_end);
      if (hi > lo) dev.sum_of_squares(grp.grad.f32() + lo, hi - lo, norm_acc.f64());
    }
  }
  double sum = 0;
  PLANNER_RETURN_IF_ERROR(dev.copy_to_host(&sum, norm_acc.data(), sizeof(double)));
  return sum;
}

Status Runner::Impl::grad_norm(const OpCtx& c) {
  Communicator* comm = group_comm(c);
  if (comm == nullptr) return mismatch(c, "no communicator");
  PLANNER_ASSIGN_OR_RETURN(const bool overflow, unscale_gradients());
  PLANNER_ASSIGN_OR_RETURN(double sum, local_grad_square_sum());
  // An inf or NaN in this rank's gradients makes the reduced norm inf on every rank of the norm's
  // group, which spans every distinct gradient (the data-parallel reductions have already spread
  // a non-finite value to all replicas): every rank then skips the step.
  const auto value = overflow ? std::numeric_limits<float>::infinity() : static_cast<float>(sum);
  PLANNER_RETURN_IF_ERROR(dev.copy_from_host(norm_buf.data(), &value, 4));
  PLANNER_ASSIGN_OR_RETURN(
      Ticket t, comm->all_reduce(norm_buf.data(), 1, DType::kFloat32, ReduceOp::kSum, *c.name));
  started(c, t);
  return Status::ok();
}

Result<bool> Runner::Impl::unscale_gradients() {
  if (!scaling) return false;
  PLANNER_RETURN_IF_ERROR(touch_all());
  dev.zero(found_nonfinite.data(), found_nonfinite.bytes());
  const float inv = 1.0f / loss_scale.scale();
  for (ParamGroup& grp : state->groups()) {
    if (grp.shard() > 0) {
      dev.unscale_and_check(grp.grad.f32() + grp.shard_begin, grp.shard(), inv,
                            found_nonfinite.i32());
    }
  }
  std::int32_t found = 0;
  PLANNER_RETURN_IF_ERROR(dev.copy_to_host(&found, found_nonfinite.data(), sizeof(found)));
  return found != 0;
}

Status Runner::Impl::optimizer_step(const OpCtx& c) {
  double square_sum = 0;
  if (have_grad_norm_op) {
    PLANNER_RETURN_IF_ERROR(touch_all());
    float reduced = 0;
    PLANNER_RETURN_IF_ERROR(dev.copy_to_host(&reduced, norm_buf.data(), 4));
    square_sum = reduced;
  } else {
    // No norm all-reduce: the norm's group is this rank alone (its gradients are all there is,
    // or data-parallel replicas hold the same reduced ones), so the local verdict is everyone's.
    PLANNER_ASSIGN_OR_RETURN(const bool overflow, unscale_gradients());
    PLANNER_ASSIGN_OR_RETURN(square_sum, local_grad_square_sum());
    if (overflow) square_sum = std::numeric_limits<double>::infinity();
  }
  if (scaling && !loss_scale.update(std::isfinite(square_sum))) {
    // Overflow somewhere: no update (moments, weights and the step count stay), a smaller scale.
    step_skipped = true;
    for (ParamGroup& grp : state->groups())
      dev.zero(grp.grad.data(), grp.grad.bytes());
    if (c.d->kind != OpKind::kOptimizerStep) return mismatch(c, "not an optimizer step");
    return Status::ok();
  }
  const OptimizerOptions& o = options.optimizer;
  const float coef =
      o.clip_grad > 0 ? kernels::cpu::clip_coefficient(std::sqrt(square_sum), o.clip_grad) : 1.0f;
  const Optimizer kind = plan.training.optimizer;
  const double wd = o.weight_decay >= 0 ? o.weight_decay : (kind == Optimizer::kAdamW ? 0.01 : 0.0);
  AdamConfig decay;
  decay.lr = static_cast<float>(o.lr);
  decay.beta1 = static_cast<float>(o.beta1);
  decay.beta2 = static_cast<float>(o.beta2);
  decay.eps = static_cast<float>(o.eps);
  decay.weight_decay = static_cast<float>(wd);
  decay.decay_mode = kind == Optimizer::kAdamW ? kernels::cpu::WeightDecayMode::kDecoupled
                                               : kernels::cpu::WeightDecayMode::kL2;
  AdamConfig plain = decay;
  plain.weight_decay = 0;
  state->count_step();
  const std::int64_t step = state->steps();
  const auto& tensors = state->tensors();
  for (ParamGroup& grp : state->groups()) {
    for (int t : grp.tensors) {
      const ParamTensor& pt = tensors[static_cast<std::size_t>(t)];
      const std::int64_t base = state->place(t).offset;
      const std::int64_t split = base + pt.elements - no_decay_tail(model, s.tp, pt);
      // [base, split) decays, [split, base + elements) does not; each clipped to the shard.
      const std::pair<std::int64_t, std::int64_t> parts[2] = {{base, split},
                                                              {split, base + pt.elements}};
      for (int p = 0; p < 2; ++p) {
        const std::int64_t lo = std::max(parts[p].first, grp.shard_begin);
        const std::int64_t hi = std::min(parts[p].second, grp.shard_end);
        if (hi <= lo) continue;
        const std::int64_t n = hi - lo;
        float* g = grp.grad.f32() + lo;
        float* w = state->master(grp) + (lo - grp.shard_begin);  // fp32 weights or masters
        void* model16 = state->mixed() ? at(grp.model, lo) : nullptr;
        float* m1 = grp.exp_avg.f32() + (lo - grp.shard_begin);
        const double lambda = p == 0 ? wd : 0.0;
        if (kind == Optimizer::kSgd) {
          // Momentum SGD (PyTorch's torch.optim.SGD): v = μ·v + g (+ λ·w), w −= lr·v.
          dev.scale(m1, n, static_cast<float>(o.momentum));
          dev.axpy(n, coef, g, m1);
          if (lambda > 0) dev.axpy(n, static_cast<float>(lambda), w, m1);
          dev.axpy(n, static_cast<float>(-o.lr), m1, w);
          if (model16 != nullptr) dev.to_activation_type(w, n, model16);
        } else {
          dev.adam_step(p == 0 ? decay : plain, step, n, coef, g, w, m1,
                        grp.exp_avg_sq.f32() + (lo - grp.shard_begin), model16);
        }
      }
    }
    dev.zero(grp.grad.data(), grp.grad.bytes());
  }
  if (c.d->kind != OpKind::kOptimizerStep) return mismatch(c, "not an optimizer step");
  return Status::ok();
}

}  // namespace planner::exec
