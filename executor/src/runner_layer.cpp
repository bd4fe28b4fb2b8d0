// Transformer layers: the forward (and recompute) and backward ops of attention and MLP blocks,
// with their tensor-, sequence- and context-parallel communication (mapping: runner.cpp).
#include "runner_impl.hpp"

namespace planner::exec {
namespace {

// A (query chunk, key chunk) pair of one context-parallel ring step: the query chunk's rows see
// the key chunk's positions causally (the diagonal) or entirely (an earlier chunk).
struct ChunkPair {
  int q = 0;
  int k = 0;
  bool causal = false;
};

// The pairs of ring step j on context-parallel rank r of cp (program.hpp, kAttention): step 0 is
// causal over the own chunks; later steps hold the K/V of rank src = (r − j) mod cp, and compute
// all local queries against its first chunk when src < r, else the second local query chunk
// against both of its chunks. Without context parallelism there is one chunk and one pair.
int ring_pairs(int cp, int r, int j, ChunkPair out[3]) {
  if (cp == 1) {
    out[0] = {0, 0, true};
    return 1;
  }
  if (j == 0) {
    out[0] = {0, 0, true};
    out[1] = {1, 0, false};
    out[2] = {1, 1, true};
    return 3;
  }
  const int src = ((r - j) % cp + cp) % cp;
  if (src < r) {
    out[0] = {0, 0, false};
    out[1] = {1, 0, false};
  } else {
    out[0] = {1, 0, false};
    out[1] = {1, 1, false};
  }
  return 2;
}

// Global index of local sequence chunk `chunk` of context-parallel rank r (load-balanced split:
// chunks r and 2·cp − 1 − r).
std::int64_t global_chunk(int cp, int r, int chunk) {
  if (cp == 1) return 0;
  return chunk == 0 ? r : 2 * cp - 1 - r;
}

// The kernel shape of one (query chunk, key chunk) pair of a ring step whose keys and values come
// from context-parallel rank `src`.
AttentionShape pair_shape(const Shapes& s, const ChunkPair& pair, int src) {
  AttentionShape sh;
  sh.batch = s.b;
  sh.heads = s.heads;
  sh.kv_heads = s.kv_heads;
  sh.head_dim = s.hd;
  sh.q_len = s.sc;
  sh.kv_len = s.sc;
  sh.q_offset = global_chunk(s.cp, s.cp_rank, pair.q) * s.sc;
  sh.kv_offset = global_chunk(s.cp, src, pair.k) * s.sc;
  sh.causal = pair.causal;
  sh.scale = kernels::cpu::attention_default_scale(s.hd);
  return sh;
}

}  // namespace

Status Runner::Impl::norm_forward(const void* x, int t, std::int64_t rows, DeviceBuffer& y,
                                  DeviceBuffer& mean, DeviceBuffer& rstd) {
  PLANNER_RETURN_IF_ERROR(ensure_act(y, rows * s.h, "norm output"));
  PLANNER_RETURN_IF_ERROR(ensure(rstd, rows, "norm statistics"));
  const void* gamma = weight(t);
  if (s.layer_norm) {
    PLANNER_RETURN_IF_ERROR(ensure(mean, rows, "norm statistics"));
    dev.layernorm_forward(x, gamma, weight(t, s.h), rows, s.h, kNormEps, y.data(), mean.f32(),
                          rstd.f32());
  } else {
    dev.rmsnorm_forward(x, gamma, rows, s.h, kNormEps, y.data(), rstd.f32());
  }
  return Status::ok();
}

Status Runner::Impl::norm_backward(const void* dy, const void* x, int t, const DeviceBuffer& mean,
                                   const DeviceBuffer& rstd, std::int64_t rows, DeviceBuffer& dx) {
  PLANNER_RETURN_IF_ERROR(touch_grads(state->group_of(t)));
  PLANNER_RETURN_IF_ERROR(ensure_act(dx, rows * s.h, "norm input gradient"));
  const void* gamma = weight(t);
  float* dgamma = state->grad(t);
  if (s.layer_norm) {
    dev.layernorm_backward(dy, x, gamma, mean.f32(), rstd.f32(), rows, s.h, dx.data(), dgamma,
                           dgamma + s.h);
  } else {
    dev.rmsnorm_backward(dy, x, gamma, rstd.f32(), rows, s.h, dx.data(), dgamma);
  }
  return Status::ok();
}

void Runner::Impl::layer_done(int mb, int layer) {
  LayerActs& a = acts(mb, layer);
  if (++a.open < 2) return;
  // The own K/V block went around the ring in forward and backward.
  const Ticket backward_send = a.bring_sends.empty() ? Ticket{} : a.bring_sends.front();
  retire(std::move(a.kv), a.kv_send, backward_send);
  a = LayerActs{};
}

// Splits the fused QKV projection into Q and the K | V block, and rotates Q and K (RoPE). Runs
// once per forward (or recomputed projection); the block is then sent around the ring and kept for
// the backward.
static Status split_qkv(Runner::Impl& r, LayerActs& a) {
  if (a.qkv.empty()) return Status::ok();
  const Shapes& s = r.s;
  PLANNER_RETURN_IF_ERROR(r.ensure_act(a.q, s.T * s.q, "attention queries"));
  PLANNER_RETURN_IF_ERROR(r.ensure_act(a.kv, 2 * s.T * s.kv, "attention keys and values"));
  const std::int64_t pitch = s.qkv * s.es;
  const std::int64_t qw = s.q * s.es;
  const std::int64_t kvw = s.kv * s.es;
  r.dev.copy_2d(a.q.data(), qw, a.qkv.data(), pitch, qw, s.T);
  r.dev.copy_2d(a.kv.data(), kvw, r.at(a.qkv, s.q), pitch, kvw, s.T);
  r.dev.copy_2d(r.at(a.kv, s.T * s.kv), kvw, r.at(a.qkv, s.q + s.kv), pitch, kvw, s.T);
  if (s.rope) {
    r.dev.rope_forward(r.rope_table.f32(), 1, s.T, s.heads, s.hd, a.q.data());
    r.dev.rope_forward(r.rope_table.f32(), 1, s.T, s.kv_heads, s.hd, a.kv.data());
  }
  a.qkv.reset();
  return Status::ok();
}

Status Runner::Impl::attention_forward(const OpCtx& c, LayerActs& a) {
  const int j = c.slot;
  if (c.d->kind != OpKind::kAttention || c.d->batch != s.b * s.heads || c.d->m != s.sl ||
      c.d->n != s.sl || c.d->k != s.hd || c.d->aux != s.kv_heads) {
    return mismatch(c, "attention shapes differ from the executor's");
  }
  if (j == 0) {
    PLANNER_RETURN_IF_ERROR(split_qkv(*this, a));
    PLANNER_RETURN_IF_ERROR(ensure_act(a.o, s.T * s.q, "attention output"));
    PLANNER_RETURN_IF_ERROR(ensure(a.lse, s.T * s.heads, "attention log-sum-exp"));
  }
  if (a.q.empty() || a.kv.empty()) return mismatch(c, "no queries, keys and values");
  const DeviceBuffer& kv = j == 0 ? a.kv : a.ring[static_cast<std::size_t>(j - 1)];
  const int src = ((s.cp_rank - j) % s.cp + s.cp) % s.cp;
  ChunkPair pairs[3];
  const int n = ring_pairs(s.cp, s.cp_rank, j, pairs);
  const std::int64_t rows = s.b * s.sc;  // rows of one chunk
  DeviceBuffer o_part, lse_part;
  bool written[2] = {j != 0, j != 0};  // step 0 writes each query chunk's first result directly
  for (int p = 0; p < n; ++p) {
    const ChunkPair& cp = pairs[p];
    const AttentionShape sh = pair_shape(s, cp, src);
    const void* q = at(a.q, cp.q * rows * s.q);
    const void* k = at(kv, cp.k * rows * s.kv);
    const void* v = at(kv, s.T * s.kv + cp.k * rows * s.kv);
    void* o = at(a.o, cp.q * rows * s.q);
    float* lse = a.lse.f32() + cp.q * rows * s.heads;
    if (!written[cp.q]) {
      dev.attention_forward(sh, q, k, v, o, lse);
      written[cp.q] = true;
      continue;
    }
    PLANNER_RETURN_IF_ERROR(ensure_act(o_part, rows * s.q, "attention partial output"));
    PLANNER_RETURN_IF_ERROR(ensure(lse_part, rows * s.heads, "attention partial log-sum-exp"));
    dev.attention_forward(sh, q, k, v, o_part.data(), lse_part.f32());
    dev.attention_combine(rows * s.heads, s.hd, o, lse, o_part.data(), lse_part.f32());
  }
  if (j == s.cp - 1 && s.cp > 1) {
    // Blocks received in this pass: free once the onward send of each has completed.
    for (std::size_t b = 0; b < a.ring.size(); ++b) {
      const Ticket send = b + 1 < a.ring_sends.size() ? a.ring_sends[b + 1] : Ticket{};
      retire(std::move(a.ring[b]), send);
    }
    a.ring.clear();
  }
  return Status::ok();
}

Status Runner::Impl::attention_backward(const OpCtx& c, LayerActs& a) {
  const int j = c.slot;
  if (c.d->kind != OpKind::kAttention || c.d->batch != s.b * s.heads || c.d->m != s.sl) {
    return mismatch(c, "attention shapes differ from the executor's");
  }
  if (j == 0) {
    PLANNER_RETURN_IF_ERROR(ensure(a.delta, s.T * s.heads, "attention delta"));
    dev.attention_backward_delta(s.T * s.heads, s.hd, a.o.data(), a.d_o.data(), a.delta.f32());
    PLANNER_RETURN_IF_ERROR(ensure_act(a.dq, s.T * s.q, "query gradient"));
    dev.zero(a.dq.data(), a.dq.bytes());
  }
  const DeviceBuffer& kv = j == 0 ? a.kv : a.bring[static_cast<std::size_t>(j - 1)];
  // The dK/dV of the block held at this step: started here (step 0) or continued from the partial
  // sums of the ranks that held it before.
  DeviceBuffer acc;
  PLANNER_ASSIGN_OR_RETURN(acc, alloc_act(2 * s.T * s.kv, "key/value gradient"));
  if (j == 0) {
    dev.zero(acc.data(), acc.bytes());
  } else {
    DeviceBuffer& partial = a.dpartial[static_cast<std::size_t>(j - 1)];
    dev.copy(acc.data(), partial.data(), acc.bytes());
    partial.reset();
  }
  const int src = ((s.cp_rank - j) % s.cp + s.cp) % s.cp;
  ChunkPair pairs[3];
  const int n = ring_pairs(s.cp, s.cp_rank, j, pairs);
  const std::int64_t rows = s.b * s.sc;
  for (int p = 0; p < n; ++p) {
    const ChunkPair& cp = pairs[p];
    const AttentionShape sh = pair_shape(s, cp, src);
    const std::int64_t qo = cp.q * rows;
    const std::int64_t ko = cp.k * rows * s.kv;
    dev.attention_backward(sh, at(a.q, qo * s.q), at(kv, ko), at(kv, s.T * s.kv + ko),
                           at(a.d_o, qo * s.q), a.lse.f32() + qo * s.heads,
                           a.delta.f32() + qo * s.heads, at(a.dq, qo * s.q), at(acc, ko),
                           at(acc, s.T * s.kv + ko));
  }
  if (s.cp == 1) {
    a.dkv = std::move(acc);
    return Status::ok();
  }
  if (a.dacc.size() < static_cast<std::size_t>(s.cp)) a.dacc.resize(static_cast<std::size_t>(s.cp));
  a.dacc[static_cast<std::size_t>(j)] = std::move(acc);
  if (j == s.cp - 1) {
    for (std::size_t b = 0; b < a.bring.size(); ++b) {
      const Ticket send = b + 1 < a.bring_sends.size() ? a.bring_sends[b + 1] : Ticket{};
      retire(std::move(a.bring[b]), send);
    }
    a.bring.clear();
  }
  return Status::ok();
}

Status Runner::Impl::layer_forward(const OpCtx& c) {
  LayerActs& a = acts(c.mb, c.layer);
  const int l = c.layer;
  Communicator* comm = group_comm(c);
  Ticket t;
  switch (c.role) {
    case OpRole::kAttnNorm:
      PLANNER_RETURN_IF_ERROR(check_rows(c, s.Ts, s.h));
      if (a.x.empty()) return mismatch(c, "no layer input");
      return norm_forward(a.x.data(), tensor(l, OpRole::kAttnNorm), s.Ts, a.n1, a.mean1, a.rstd1);
    case OpRole::kSpGatherAttn: {
      PLANNER_RETURN_IF_ERROR(ensure_act(a.n1_full, s.T * s.h, "gathered norm output"));
      PLANNER_ASSIGN_OR_RETURN(
          t, comm->all_gather(a.n1.data(), a.n1_full.data(), s.Ts * s.h, s.at, *c.name));
      break;
    }
    case OpRole::kAttnQkv: {
      const int w = tensor(l, OpRole::kAttnQkv);
      PLANNER_RETURN_IF_ERROR(ensure_act(a.qkv, s.T * s.qkv, "QKV projection"));
      PLANNER_RETURN_IF_ERROR(
          column_forward(c, w, (s.sp ? a.n1_full : a.n1).data(), s.h, s.qkv, a.qkv.data()));
      if (s.sp) a.n1_full.reset();
      return Status::ok();
    }
    case OpRole::kAttnCore:
      return attention_forward(c, a);
    case OpRole::kCpKvSend: {
      if (c.slot == 0) PLANNER_RETURN_IF_ERROR(split_qkv(*this, a));
      const DeviceBuffer& held = c.slot == 0 ? a.kv : a.ring[static_cast<std::size_t>(c.slot - 1)];
      if (c.d->comm_bytes.raw() != held.bytes()) return mismatch(c, "K/V block size");
      PLANNER_ASSIGN_OR_RETURN(
          t, p2p->send(held.data(), 2 * s.T * s.kv, s.at, c.op->peer, c.op->tag, *c.name));
      if (a.ring_sends.size() < static_cast<std::size_t>(s.cp)) {
        a.ring_sends.resize(static_cast<std::size_t>(s.cp));
      }
      a.ring_sends[static_cast<std::size_t>(c.slot)] = t;
      if (c.slot == 0) {
        // A recompute sends the block again: the forward's send must be over before the layer
        // can free the block on the later one alone.
        if (a.kv_send.valid()) PLANNER_RETURN_IF_ERROR(await(a.kv_send));
        a.kv_send = t;
      }
      break;
    }
    case OpRole::kCpKvRecv: {
      if (a.ring.size() <= static_cast<std::size_t>(c.slot)) {
        a.ring.resize(static_cast<std::size_t>(c.slot) + 1);
      }
      DeviceBuffer& into = a.ring[static_cast<std::size_t>(c.slot)];
      PLANNER_RETURN_IF_ERROR(ensure_act(into, 2 * s.T * s.kv, "received K/V block"));
      PLANNER_ASSIGN_OR_RETURN(
          t, p2p->recv(into.data(), 2 * s.T * s.kv, s.at, c.op->peer, c.op->tag, *c.name));
      break;
    }
    case OpRole::kAttnOut:
      PLANNER_RETURN_IF_ERROR(ensure_act(a.y1, s.T * s.h, "attention projection"));
      return linear_forward(c, a.o.data(), weight(tensor(l, OpRole::kAttnOut)), s.T, s.q, s.h,
                            a.y1.data());
    case OpRole::kTpReduceAttn:
    case OpRole::kTpReduceMlp: {
      DeviceBuffer& y = c.role == OpRole::kTpReduceAttn ? a.y1 : a.y2;
      PLANNER_ASSIGN_OR_RETURN(
          t, comm->all_reduce(y.data(), s.T * s.h, s.at, ReduceOp::kSum, *c.name));
      break;
    }
    case OpRole::kSpScatterAttn:
    case OpRole::kSpScatterMlp: {
      const bool attn = c.role == OpRole::kSpScatterAttn;
      DeviceBuffer& full = attn ? a.y1 : a.y2;
      DeviceBuffer& part_rows = attn ? a.y1s : a.y2s;
      PLANNER_RETURN_IF_ERROR(ensure_act(part_rows, s.Ts * s.h, "reduce-scattered projection"));
      PLANNER_ASSIGN_OR_RETURN(t, comm->reduce_scatter(full.data(), part_rows.data(), s.Ts * s.h,
                                                       s.at, ReduceOp::kSum, *c.name));
      retire(std::move(full), t);
      break;
    }
    case OpRole::kAttnResidual: {
      PLANNER_RETURN_IF_ERROR(check_rows(c, s.Ts, s.h));
      const DeviceBuffer& y = s.sp ? a.y1s : a.y1;
      PLANNER_RETURN_IF_ERROR(ensure_act(a.res1, s.Ts * s.h, "residual"));
      dev.add(a.x.data(), y.data(), s.Ts * s.h, a.res1.data());
      if (s.bias) {
        const int w = tensor(l, OpRole::kAttnOut);
        dev.bias_add(a.res1.data(), weight(w, s.h * s.q), s.Ts, s.h);
      }
      a.y1.reset();
      a.y1s.reset();
      return Status::ok();
    }
    case OpRole::kMlpNorm:
      return norm_forward(a.res1.data(), tensor(l, OpRole::kMlpNorm), s.Ts, a.n2, a.mean2, a.rstd2);
    case OpRole::kSpGatherMlp: {
      PLANNER_RETURN_IF_ERROR(ensure_act(a.n2_full, s.T * s.h, "gathered norm output"));
      PLANNER_ASSIGN_OR_RETURN(
          t, comm->all_gather(a.n2.data(), a.n2_full.data(), s.Ts * s.h, s.at, *c.name));
      break;
    }
    case OpRole::kMlpGate:
    case OpRole::kMlpUp: {
      const bool gate = c.role == OpRole::kMlpGate;
      const int w = tensor(l, c.role);
      DeviceBuffer& y = gate ? a.gate : a.up;
      PLANNER_RETURN_IF_ERROR(ensure_act(y, s.T * s.f, "MLP projection"));
      PLANNER_RETURN_IF_ERROR(
          column_forward(c, w, (s.sp ? a.n2_full : a.n2).data(), s.h, s.f, y.data()));
      if (!gate && s.sp) a.n2_full.reset();
      return Status::ok();
    }
    case OpRole::kMlpAct:
      PLANNER_RETURN_IF_ERROR(check_rows(c, s.T, s.f));
      PLANNER_RETURN_IF_ERROR(ensure_act(a.act, s.T * s.f, "MLP activation"));
      if (s.gated) {
        dev.swiglu_forward(a.gate.data(), a.up.data(), s.T, s.f, s.f, a.act.data());
      } else {
        dev.gelu_forward(a.up.data(), s.T * s.f, a.act.data());
      }
      return Status::ok();
    case OpRole::kMlpDown:
      PLANNER_RETURN_IF_ERROR(ensure_act(a.y2, s.T * s.h, "MLP output"));
      return linear_forward(c, a.act.data(), weight(tensor(l, OpRole::kMlpDown)), s.T, s.f, s.h,
                            a.y2.data());
    case OpRole::kMlpResidual: {
      PLANNER_RETURN_IF_ERROR(check_rows(c, s.Ts, s.h));
      const DeviceBuffer& y = s.sp ? a.y2s : a.y2;
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer out, alloc_act(s.Ts * s.h, "layer output"));
      dev.add(a.res1.data(), y.data(), s.Ts * s.h, out.data());
      if (s.bias) {
        const int w = tensor(l, OpRole::kMlpDown);
        dev.bias_add(out.data(), weight(w, s.h * s.f), s.Ts, s.h);
      }
      a.y2.reset();
      a.y2s.reset();
      if (c.phase == Phase::kRecompute) return Status::ok();  // the next layer's input is stored
      if (plan.parallel.recompute == Recompute::kFull) {
        // Full recompute keeps only the layer input; the backward recomputes the rest.
        retire(std::move(a.kv), a.kv_send);
        LayerActs kept;
        kept.x = std::move(a.x);
        a = std::move(kept);
      }
      a.ring_sends.clear();
      if (!last_in_chunk(l) || next_chunk_here(l)) {
        acts(c.mb, l + 1).x = std::move(out);
      } else {
        io(c.mb, chunk_of(l)).out = std::move(out);
      }
      return Status::ok();
    }
    default:
      return mismatch(c, "not a forward layer op");
  }
  started(c, t);
  return Status::ok();
}

Status Runner::Impl::layer_backward(const OpCtx& c) {
  LayerActs& a = acts(c.mb, c.layer);
  const int l = c.layer;
  Communicator* comm = group_comm(c);
  const bool wgrad = c.phase == Phase::kBackwardWeight;
  Ticket t;
  // The MLP and attention blocks' output gradients, full rows (gathered with SP).
  const DeviceBuffer& g_mlp = s.sp ? a.g : a.dy;
  const DeviceBuffer& g_attn = s.sp ? a.g2 : a.dres;
  // This rank's rows of the residual stream within a full-row gradient (replicated biases).
  const std::int64_t own_rows = s.sp ? s.tp_rank * s.Ts * s.h : 0;
  switch (c.role) {
    case OpRole::kSpScatterMlp: {  // bwd: all-gather of the layer's output gradient
      PLANNER_RETURN_IF_ERROR(ensure_act(a.g, s.T * s.h, "gathered output gradient"));
      PLANNER_ASSIGN_OR_RETURN(
          t, comm->all_gather(a.dy.data(), a.g.data(), s.Ts * s.h, s.at, *c.name));
      break;
    }
    case OpRole::kMlpDown: {
      const int w = tensor(l, OpRole::kMlpDown);
      if (!wgrad) {
        PLANNER_RETURN_IF_ERROR(ensure_act(a.dact, s.T * s.f, "activation gradient"));
        return linear_input_grad(c, g_mlp.data(), weight(w), s.T, s.f, s.h, 0.0f, a.dact.data());
      }
      return weight_grad(c, w, g_mlp.data(), a.act.data(), s.f, s.h, at(g_mlp, own_rows), s.Ts);
    }
    case OpRole::kMlpAct:
      PLANNER_RETURN_IF_ERROR(check_rows(c, s.T, s.f));
      PLANNER_RETURN_IF_ERROR(ensure_act(a.dup, s.T * s.f, "MLP up gradient"));
      if (s.gated) {
        PLANNER_RETURN_IF_ERROR(ensure_act(a.dgate, s.T * s.f, "MLP gate gradient"));
        dev.swiglu_backward(a.gate.data(), a.up.data(), a.dact.data(), s.T, s.f, s.f,
                            a.dgate.data(), a.dup.data());
      } else {
        dev.gelu_backward(a.up.data(), a.dact.data(), s.T * s.f, a.dup.data());
      }
      a.dact.reset();
      return Status::ok();
    case OpRole::kSpGatherMlp:
    case OpRole::kSpGatherAttn: {
      const bool mlp = c.role == OpRole::kSpGatherMlp;
      if (wgrad) {  // the norm output again, for the weight gradients
        DeviceBuffer& full = mlp ? a.n2_full : a.n1_full;
        PLANNER_RETURN_IF_ERROR(ensure_act(full, s.T * s.h, "gathered norm output"));
        PLANNER_ASSIGN_OR_RETURN(t, comm->all_gather((mlp ? a.n2 : a.n1).data(), full.data(),
                                                     s.Ts * s.h, s.at, *c.name));
        break;
      }
      // bwd: reduce-scatter of the input gradient to the sequence-parallel rows
      DeviceBuffer& full = mlp ? a.dn2 : a.dn1;
      DeviceBuffer& rows = mlp ? a.dn2s : a.dn1s;
      PLANNER_RETURN_IF_ERROR(ensure_act(rows, s.Ts * s.h, "reduce-scattered gradient"));
      PLANNER_ASSIGN_OR_RETURN(t, comm->reduce_scatter(full.data(), rows.data(), s.Ts * s.h, s.at,
                                                       ReduceOp::kSum, *c.name));
      retire(std::move(full), t);
      break;
    }
    case OpRole::kMlpGate:
    case OpRole::kMlpUp: {
      const bool gate = c.role == OpRole::kMlpGate;
      const int w = tensor(l, c.role);
      const DeviceBuffer& dy = gate ? a.dgate : a.dup;
      if (!wgrad) {
        PLANNER_RETURN_IF_ERROR(ensure_act(a.dn2, s.T * s.h, "MLP input gradient"));
        // The up projection's input gradient adds onto the gate's (both reach the norm output).
        const float beta = !gate && s.gated ? 1.0f : 0.0f;
        return linear_input_grad(c, dy.data(), weight(w), s.T, s.h, s.f, beta, a.dn2.data());
      }
      PLANNER_RETURN_IF_ERROR(touch_grads(state->group_of(w)));
      PLANNER_RETURN_IF_ERROR(linear_weight_grad(c, dy.data(), (s.sp ? a.n2_full : a.n2).data(),
                                                 s.T, s.h, s.f, state->grad(w)));
      if (s.bias) dev.bias_backward(dy.data(), s.T, s.f, state->grad(w) + s.f * s.h);
      return Status::ok();
    }
    case OpRole::kTpReduceMlp:
    case OpRole::kTpReduceAttn: {
      DeviceBuffer& dx = c.role == OpRole::kTpReduceMlp ? a.dn2 : a.dn1;
      PLANNER_ASSIGN_OR_RETURN(
          t, comm->all_reduce(dx.data(), s.T * s.h, s.at, ReduceOp::kSum, *c.name));
      break;
    }
    case OpRole::kMlpNorm: {
      const DeviceBuffer& dy = s.sp ? a.dn2s : a.dn2;
      PLANNER_RETURN_IF_ERROR(norm_backward(dy.data(), a.res1.data(), tensor(l, OpRole::kMlpNorm),
                                            a.mean2, a.rstd2, s.Ts, a.dnorm2));
      a.dn2.reset();
      a.dn2s.reset();
      return Status::ok();
    }
    case OpRole::kMlpResidual:
      PLANNER_RETURN_IF_ERROR(ensure_act(a.dres, s.Ts * s.h, "residual gradient"));
      dev.add(a.dnorm2.data(), a.dy.data(), s.Ts * s.h, a.dres.data());
      a.dnorm2.reset();
      return Status::ok();
    case OpRole::kSpScatterAttn: {  // bwd: all-gather of the attention block's output gradient
      PLANNER_RETURN_IF_ERROR(ensure_act(a.g2, s.T * s.h, "gathered residual gradient"));
      PLANNER_ASSIGN_OR_RETURN(
          t, comm->all_gather(a.dres.data(), a.g2.data(), s.Ts * s.h, s.at, *c.name));
      break;
    }
    case OpRole::kAttnOut: {
      const int w = tensor(l, OpRole::kAttnOut);
      if (!wgrad) {
        PLANNER_RETURN_IF_ERROR(ensure_act(a.d_o, s.T * s.q, "attention output gradient"));
        return linear_input_grad(c, g_attn.data(), weight(w), s.T, s.q, s.h, 0.0f, a.d_o.data());
      }
      return weight_grad(c, w, g_attn.data(), a.o.data(), s.q, s.h, at(g_attn, own_rows), s.Ts);
    }
    case OpRole::kAttnCore:
      return attention_backward(c, a);
    case OpRole::kCpKvSend: {
      const DeviceBuffer& held = c.slot == 0 ? a.kv : a.bring[static_cast<std::size_t>(c.slot - 1)];
      PLANNER_ASSIGN_OR_RETURN(
          t, p2p->send(held.data(), 2 * s.T * s.kv, s.at, c.op->peer, c.op->tag, *c.name));
      if (a.bring_sends.size() < static_cast<std::size_t>(s.cp)) {
        a.bring_sends.resize(static_cast<std::size_t>(s.cp));
      }
      a.bring_sends[static_cast<std::size_t>(c.slot)] = t;
      break;
    }
    case OpRole::kCpKvRecv: {
      if (a.bring.size() <= static_cast<std::size_t>(c.slot)) {
        a.bring.resize(static_cast<std::size_t>(c.slot) + 1);
      }
      DeviceBuffer& into = a.bring[static_cast<std::size_t>(c.slot)];
      PLANNER_RETURN_IF_ERROR(ensure_act(into, 2 * s.T * s.kv, "received K/V block"));
      PLANNER_ASSIGN_OR_RETURN(
          t, p2p->recv(into.data(), 2 * s.T * s.kv, s.at, c.op->peer, c.op->tag, *c.name));
      break;
    }
    case OpRole::kCpDkvSend: {
      DeviceBuffer& acc = a.dacc[static_cast<std::size_t>(c.slot)];
      if (c.d->comm_bytes.raw() != acc.bytes()) return mismatch(c, "dK/dV block size");
      PLANNER_ASSIGN_OR_RETURN(
          t, p2p->send(acc.data(), 2 * s.T * s.kv, s.at, c.op->peer, c.op->tag, *c.name));
      retire(std::move(acc), t);
      break;
    }
    case OpRole::kCpDkvRecv: {
      if (a.dpartial.size() <= static_cast<std::size_t>(c.slot)) {
        a.dpartial.resize(static_cast<std::size_t>(c.slot) + 1);
      }
      DeviceBuffer& into = a.dpartial[static_cast<std::size_t>(c.slot)];
      PLANNER_RETURN_IF_ERROR(ensure_act(into, 2 * s.T * s.kv, "received dK/dV block"));
      PLANNER_ASSIGN_OR_RETURN(
          t, p2p->recv(into.data(), 2 * s.T * s.kv, s.at, c.op->peer, c.op->tag, *c.name));
      break;
    }
    case OpRole::kAttnQkv: {
      const int w = tensor(l, OpRole::kAttnQkv);
      if (!wgrad) {
        // Join dQ and the own block's complete dK/dV (RoPE reversed) into the fused gradient.
        DeviceBuffer& dkv = s.cp == 1 ? a.dkv : a.dpartial[static_cast<std::size_t>(s.cp - 1)];
        if (dkv.empty() || a.dq.empty()) return mismatch(c, "no attention gradients");
        if (s.rope) {
          dev.rope_backward(rope_table.f32(), 1, s.T, s.heads, s.hd, a.dq.data());
          dev.rope_backward(rope_table.f32(), 1, s.T, s.kv_heads, s.hd, dkv.data());
        }
        PLANNER_RETURN_IF_ERROR(ensure_act(a.dqkv, s.T * s.qkv, "QKV gradient"));
        const std::int64_t pitch = s.qkv * s.es;
        const std::int64_t qw = s.q * s.es;
        const std::int64_t kvw = s.kv * s.es;
        dev.copy_2d(a.dqkv.data(), pitch, a.dq.data(), qw, qw, s.T);
        dev.copy_2d(at(a.dqkv, s.q), pitch, dkv.data(), kvw, kvw, s.T);
        dev.copy_2d(at(a.dqkv, s.q + s.kv), pitch, at(dkv, s.T * s.kv), kvw, kvw, s.T);
        a.dq.reset();
        a.dkv.reset();
        a.dpartial.clear();
        a.dacc.clear();
        a.delta.reset();
        a.d_o.reset();
        PLANNER_RETURN_IF_ERROR(ensure_act(a.dn1, s.T * s.h, "QKV input gradient"));
        return linear_input_grad(c, a.dqkv.data(), weight(w), s.T, s.h, s.qkv, 0.0f, a.dn1.data());
      }
      PLANNER_RETURN_IF_ERROR(weight_grad(c, w, a.dqkv.data(), (s.sp ? a.n1_full : a.n1).data(),
                                          s.h, s.qkv, a.dqkv.data(), s.T));
      layer_done(c.mb, l);
      return Status::ok();
    }
    case OpRole::kAttnNorm: {
      const DeviceBuffer& dy = s.sp ? a.dn1s : a.dn1;
      PLANNER_RETURN_IF_ERROR(norm_backward(dy.data(), a.x.data(), tensor(l, OpRole::kAttnNorm),
                                            a.mean1, a.rstd1, s.Ts, a.dnorm1));
      a.dn1.reset();
      a.dn1s.reset();
      return Status::ok();
    }
    case OpRole::kAttnResidual: {
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer dx, alloc_act(s.Ts * s.h, "layer input gradient"));
      dev.add(a.dnorm1.data(), a.dres.data(), s.Ts * s.h, dx.data());
      if (!first_in_chunk(l) || previous_chunk_here(l)) {
        acts(c.mb, l - 1).dy = std::move(dx);
      } else {
        io(c.mb, chunk_of(l)).din = std::move(dx);
      }
      layer_done(c.mb, l);
      return Status::ok();
    }
    default:
      return mismatch(c, "not a backward layer op");
  }
  started(c, t);
  return Status::ok();
}

}  // namespace planner::exec
