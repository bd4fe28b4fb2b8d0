// Mixture-of-experts layers: router, top-k routing and token permutation, the all-to-all dispatch
// and combine over the expert-parallel group, the local experts' grouped projections and the
// shared experts (mapping: runner.cpp).
//
// Routing is dropless and data-dependent, as in Megatron-core's all-to-all token dispatcher: the
// program's MoE ops carry the busiest rank's predicted sizes (core/moe_routing.hpp), while the
// executor moves and multiplies the tokens the router actually chose. Per MoE layer and
// micro-batch, on the Ts rows of the layer's input:
//   moe_router (fwd)   logits [Ts, E] = x · W_rᵀ
//   moe_topk (fwd)     scores, top-k experts and weights (kernels/cpu/moe.hpp); the (token, k)
//                      pairs sorted by expert (stably: by token within an expert) give the
//                      positions of the dispatched rows, which are gathered from x
//   ep_dispatch (fwd)  the per-expert counts are exchanged with an all-to-all inside the op (as
//                      Megatron's dispatcher does before moving tokens); then an all-to-all-v moves
//                      each expert's rows to its rank (blocks from member s, expert-ordered)
//   expert_* (fwd)     the received rows regrouped expert by expert, one GEMM per local expert
//   ep_combine (fwd)   the outputs regrouped by source and sent back (all-to-all-v)
//   moe_combine (fwd)  y[t] = sum_k w[t, k] · out[pos(t, k)] (onto the shared experts' output)
// Backward mirrors it; moe_topk's backward takes the weights' gradient through the normalisation
// and the softmax or sigmoid, and sums the k dispatched rows' gradients per token; moe_router's
// adds both to the shared experts' input gradient. Expert tensor parallelism (etp > 1) and
// Qwen2-MoE's shared-expert gate are not run (check_runnable).
#include <algorithm>
#include <numeric>

#include "runner_impl.hpp"

namespace planner::exec {

bool is_moe_role(OpRole role) {
  switch (role) {
    case OpRole::kRouter:
    case OpRole::kRouterTopk:
    case OpRole::kEpDispatch:
    case OpRole::kEpCombine:
    case OpRole::kExpertGate:
    case OpRole::kExpertUp:
    case OpRole::kExpertAct:
    case OpRole::kExpertDown:
    case OpRole::kExpertCombine:
    case OpRole::kSharedGate:
    case OpRole::kSharedUp:
    case OpRole::kSharedAct:
    case OpRole::kSharedDown:
    case OpRole::kMoeTokenCounts:
      return true;
    default:
      return false;
  }
}

// Host-side routing bookkeeping after moe_route: positions sorted by expert, and the rows sent to
// each expert-parallel member.
Status Runner::Impl::moe_permute(MoeActs& m) {
  const std::int64_t pairs = s.Ts * s.topk;
  std::vector<std::int32_t> experts(static_cast<std::size_t>(pairs));
  PLANNER_RETURN_IF_ERROR(dev.copy_to_host(experts.data(), m.topk.data(), pairs * 4));
  m.counts.assign(static_cast<std::size_t>(s.experts), 0);
  for (std::int32_t e : experts) {
    if (e < 0 || e >= s.experts)
      return Status::internal("the router chose expert " + std::to_string(e));
    ++m.counts[static_cast<std::size_t>(e)];
  }
  std::vector<std::int64_t> next(static_cast<std::size_t>(s.experts), 0);
  std::exclusive_scan(m.counts.begin(), m.counts.end(), next.begin(), std::int64_t{0});
  std::vector<std::int32_t> perm(static_cast<std::size_t>(pairs));
  std::vector<std::int32_t> pos(static_cast<std::size_t>(pairs));
  for (std::int64_t i = 0; i < pairs; ++i) {
    const std::int64_t p = next[static_cast<std::size_t>(experts[static_cast<std::size_t>(i)])]++;
    perm[static_cast<std::size_t>(p)] = static_cast<std::int32_t>(i / s.topk);
    pos[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(p);
  }
  PLANNER_RETURN_IF_ERROR(ensure_bytes(m.perm, pairs, 4, "dispatch permutation"));
  PLANNER_RETURN_IF_ERROR(ensure_bytes(m.pos, pairs, 4, "combine positions"));
  PLANNER_RETURN_IF_ERROR(dev.copy_from_host(m.perm.data(), perm.data(), pairs * 4));
  PLANNER_RETURN_IF_ERROR(dev.copy_from_host(m.pos.data(), pos.data(), pairs * 4));
  m.send.assign(static_cast<std::size_t>(s.ep), 0);
  for (std::int64_t e = 0; e < s.experts; ++e) {
    m.send[static_cast<std::size_t>(e / s.experts_l)] += m.counts[static_cast<std::size_t>(e)];
  }
  return Status::ok();
}

// The received rows' layout: per source member and local expert (from the count exchange), and
// the regrouping of source-ordered rows into expert order.
Status Runner::Impl::moe_layout(MoeActs& m, const std::vector<std::int32_t>& received) {
  const std::int64_t el = s.experts_l;
  m.recv.assign(static_cast<std::size_t>(s.ep), 0);
  m.expert_rows.assign(static_cast<std::size_t>(el), 0);
  for (std::int64_t src = 0; src < s.ep; ++src) {
    for (std::int64_t e = 0; e < el; ++e) {
      const std::int64_t n = received[static_cast<std::size_t>(src * el + e)];
      m.recv[static_cast<std::size_t>(src)] += n;
      m.expert_rows[static_cast<std::size_t>(e)] += n;
    }
  }
  m.rows = std::accumulate(m.recv.begin(), m.recv.end(), std::int64_t{0});
  std::vector<std::int32_t> order(static_cast<std::size_t>(m.rows));
  std::vector<std::int32_t> inverse(static_cast<std::size_t>(m.rows));
  std::int64_t i = 0;
  for (std::int64_t e = 0; e < el; ++e) {
    std::int64_t src_base = 0;
    for (std::int64_t src = 0; src < s.ep; ++src) {
      std::int64_t offset = src_base;
      for (std::int64_t f = 0; f < e; ++f)
        offset += received[static_cast<std::size_t>(src * el + f)];
      const std::int64_t n = received[static_cast<std::size_t>(src * el + e)];
      for (std::int64_t r = 0; r < n; ++r, ++i) {
        order[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(offset + r);
        inverse[static_cast<std::size_t>(offset + r)] = static_cast<std::int32_t>(i);
      }
      src_base += m.recv[static_cast<std::size_t>(src)];
    }
  }
  const std::int64_t n = std::max<std::int64_t>(1, m.rows);
  PLANNER_RETURN_IF_ERROR(ensure_bytes(m.order, n, 4, "expert order"));
  PLANNER_RETURN_IF_ERROR(ensure_bytes(m.inverse, n, 4, "source order"));
  PLANNER_RETURN_IF_ERROR(dev.copy_from_host(m.order.data(), order.data(), m.rows * 4));
  PLANNER_RETURN_IF_ERROR(dev.copy_from_host(m.inverse.data(), inverse.data(), m.rows * 4));
  return Status::ok();
}

// Rows regrouped through `index` (rows x hidden), into a fresh buffer.
Result<DeviceBuffer> Runner::Impl::regroup(const DeviceBuffer& src, const DeviceBuffer& index,
                                           std::int64_t rows, const char* what) {
  PLANNER_ASSIGN_OR_RETURN(DeviceBuffer out,
                           alloc_act(std::max<std::int64_t>(1, rows) * s.h, what));
  if (rows > 0) dev.gather_rows(src.data(), index.i32(), rows, s.h, out.data());
  return out;
}

// An all-to-all-v of `rows_out` rows per member from `send` into a fresh buffer of `rows_in` rows
// per member, over the expert-parallel group (or a plain move without expert parallelism).
Result<Ticket> Runner::Impl::exchange(const OpCtx& c, DeviceBuffer& send, DeviceBuffer& recv,
                                      const std::vector<std::int64_t>& rows_out,
                                      const std::vector<std::int64_t>& rows_in, const char* what) {
  Communicator* comm = group_comm(c);
  if (comm == nullptr) return Status::internal("op " + *c.name + ": no expert-parallel group");
  std::vector<std::int64_t> out(rows_out.size()), in(rows_in.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = rows_out[i] * s.h;
  for (std::size_t i = 0; i < in.size(); ++i)
    in[i] = rows_in[i] * s.h;
  const std::int64_t total = std::accumulate(in.begin(), in.end(), std::int64_t{0});
  PLANNER_ASSIGN_OR_RETURN(recv, alloc_act(std::max<std::int64_t>(1, total), what));
  PLANNER_ASSIGN_OR_RETURN(Ticket t,
                           comm->all_to_all_v(send.data(), out, recv.data(), in, s.at, *c.name));
  retire(std::move(send), t);
  return t;
}

// One GEMM per local expert over its rows of `x` (expert order): y_e = x_e · W_eᵀ, W_e the e-th
// [out x in] block of tensor w (+ its bias, stored after every expert's weights).
void Runner::Impl::expert_forward(const MoeActs& m, int w, const void* x, std::int64_t in,
                                  std::int64_t out, void* y) {
  std::int64_t row = 0;
  for (std::int64_t e = 0; e < s.experts_l; ++e) {
    const std::int64_t n = m.expert_rows[static_cast<std::size_t>(e)];
    if (n > 0) {
      dev.gemm(Transpose::kNo, Transpose::kYes, n, out, in, 1.0f,
               static_cast<const std::byte*>(x) + row * in * s.es, in, weight(w, e * out * in), in,
               0.0f, static_cast<std::byte*>(y) + row * out * s.es, out);
      if (s.bias) {
        dev.bias_add(static_cast<std::byte*>(y) + row * out * s.es,
                     weight(w, s.experts_l * out * in + e * out), n, out);
      }
    }
    row += n;
  }
}

// dx_e (+)= dy_e · W_e per local expert.
void Runner::Impl::expert_input_grad(const MoeActs& m, int w, const void* dy, std::int64_t in,
                                     std::int64_t out, float beta, void* dx) {
  std::int64_t row = 0;
  for (std::int64_t e = 0; e < s.experts_l; ++e) {
    const std::int64_t n = m.expert_rows[static_cast<std::size_t>(e)];
    if (n > 0) {
      dev.gemm(Transpose::kNo, Transpose::kNo, n, in, out, 1.0f,
               static_cast<const std::byte*>(dy) + row * out * s.es, out, weight(w, e * out * in),
               in, beta, static_cast<std::byte*>(dx) + row * in * s.es, in);
    }
    row += n;
  }
}

// dW_e += dy_eᵀ · x_e per local expert (and the biases' column sums).
Status Runner::Impl::expert_weight_grad(const MoeActs& m, int w, const void* dy, const void* x,
                                        std::int64_t in, std::int64_t out) {
  PLANNER_RETURN_IF_ERROR(touch_grads(state->group_of(w)));
  float* grad = state->grad(w);
  std::int64_t row = 0;
  for (std::int64_t e = 0; e < s.experts_l; ++e) {
    const std::int64_t n = m.expert_rows[static_cast<std::size_t>(e)];
    if (n > 0) {
      const void* g = static_cast<const std::byte*>(dy) + row * out * s.es;
      dev.gemm_fp32_out(Transpose::kYes, Transpose::kNo, out, in, n, 1.0f, g, out,
                        static_cast<const std::byte*>(x) + row * in * s.es, in, 1.0f,
                        grad + e * out * in, in);
      if (s.bias) dev.bias_backward(g, n, out, grad + s.experts_l * out * in + e * out);
    }
    row += n;
  }
  return Status::ok();
}

Status Runner::Impl::moe_forward(const OpCtx& c, LayerActs& a) {
  MoeActs& m = a.moe;
  const int l = c.layer;
  Ticket t;
  switch (c.role) {
    case OpRole::kRouter:
      PLANNER_RETURN_IF_ERROR(ensure_act(m.logits, s.Ts * s.experts, "router logits"));
      return linear_forward(c, a.n2.data(), weight(tensor(l, OpRole::kRouter)), s.Ts, s.h,
                            s.experts, m.logits.data());
    case OpRole::kRouterTopk: {
      PLANNER_RETURN_IF_ERROR(ensure(m.scores, s.Ts * s.experts, "router scores"));
      PLANNER_RETURN_IF_ERROR(ensure_bytes(m.topk, s.Ts * s.topk, 4, "chosen experts"));
      PLANNER_RETURN_IF_ERROR(ensure(m.weights, s.Ts * s.topk, "routing weights"));
      dev.moe_route(m.logits.data(), s.Ts, s.route, m.scores.f32(), m.topk.i32(), m.weights.f32());
      m.logits.reset();
      PLANNER_RETURN_IF_ERROR(moe_permute(m));
      PLANNER_ASSIGN_OR_RETURN(m.x_perm, regroup(a.n2, m.perm, s.Ts * s.topk, "dispatched tokens"));
      if (s.ep == 1) {
        // No dispatch: this rank holds every expert, the rows already in expert order.
        std::vector<std::int32_t> counts(m.counts.begin(), m.counts.end());
        PLANNER_RETURN_IF_ERROR(moe_layout(m, counts));
        m.x_recv = std::move(m.x_perm);
      }
      return Status::ok();
    }
    case OpRole::kMoeTokenCounts:
      // The router's permutation (moe_permute) has read the counts on the host already.
      return Status::ok();
    case OpRole::kEpDispatch: {
      // The counts first: E/ep per member, blocking (bounded by the deadline).
      Communicator* comm = group_comm(c);
      if (comm == nullptr) return mismatch(c, "no expert-parallel group");
      std::vector<std::int32_t> counts(m.counts.begin(), m.counts.end());
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer send_counts,
                               DeviceBuffer::allocate(dev, s.experts * 4, "expert counts"));
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer recv_counts,
                               DeviceBuffer::allocate(dev, s.experts * 4, "expert counts"));
      PLANNER_RETURN_IF_ERROR(dev.copy_from_host(send_counts.data(), counts.data(), s.experts * 4));
      PLANNER_ASSIGN_OR_RETURN(Ticket ct, comm->all_to_all(send_counts.data(), recv_counts.data(),
                                                           s.experts_l, DType::kInt32, *c.name));
      PLANNER_RETURN_IF_ERROR(await(ct));
      std::vector<std::int32_t> received(static_cast<std::size_t>(s.experts));
      PLANNER_RETURN_IF_ERROR(dev.copy_to_host(received.data(), recv_counts.data(), s.experts * 4));
      PLANNER_RETURN_IF_ERROR(moe_layout(m, received));
      PLANNER_ASSIGN_OR_RETURN(t,
                               exchange(c, m.x_perm, m.x_recv, m.send, m.recv, "received tokens"));
      break;
    }
    case OpRole::kExpertGate:
    case OpRole::kExpertUp: {
      if (m.x_exp.empty()) {
        PLANNER_ASSIGN_OR_RETURN(m.x_exp, regroup(m.x_recv, m.order, m.rows, "expert inputs"));
        m.x_recv.reset();
      }
      const bool gate = c.role == OpRole::kExpertGate;
      DeviceBuffer& y = gate ? m.gate : m.up;
      PLANNER_RETURN_IF_ERROR(
          ensure_act(y, std::max<std::int64_t>(1, m.rows) * s.fe, "expert projection"));
      expert_forward(m, tensor(l, c.role), m.x_exp.data(), s.h, s.fe, y.data());
      return Status::ok();
    }
    case OpRole::kExpertAct: {
      PLANNER_RETURN_IF_ERROR(
          ensure_act(m.act, std::max<std::int64_t>(1, m.rows) * s.fe, "expert activation"));
      if (m.rows == 0) return Status::ok();
      if (s.gated) {
        dev.swiglu_forward(m.gate.data(), m.up.data(), m.rows, s.fe, s.fe, m.act.data());
      } else {
        dev.gelu_forward(m.up.data(), m.rows * s.fe, m.act.data());
      }
      return Status::ok();
    }
    case OpRole::kExpertDown:
      PLANNER_RETURN_IF_ERROR(
          ensure_act(m.y_exp, std::max<std::int64_t>(1, m.rows) * s.h, "expert outputs"));
      expert_forward(m, tensor(l, OpRole::kExpertDown), m.act.data(), s.fe, s.h, m.y_exp.data());
      return Status::ok();
    case OpRole::kEpCombine: {
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer by_source,
                               regroup(m.y_exp, m.inverse, m.rows, "expert outputs by source"));
      m.y_exp.reset();
      PLANNER_ASSIGN_OR_RETURN(t,
                               exchange(c, by_source, m.y_back, m.recv, m.send, "combined tokens"));
      break;
    }
    case OpRole::kExpertCombine: {
      if (s.ep == 1) m.y_back = std::move(m.y_exp);
      DeviceBuffer& out = s.sp ? a.y2s : a.y2;
      const bool shared = s.fs > 0;
      PLANNER_RETURN_IF_ERROR(ensure_act(out, s.Ts * s.h, "MoE output"));
      dev.moe_combine(m.y_back.data(), m.pos.i32(), m.weights.f32(), s.Ts, s.topk, s.h, shared,
                      out.data());
      return Status::ok();
    }
    case OpRole::kSharedGate:
    case OpRole::kSharedUp: {
      const bool gate = c.role == OpRole::kSharedGate;
      DeviceBuffer& y = gate ? a.gate : a.up;
      PLANNER_RETURN_IF_ERROR(ensure_act(y, s.T * s.fs, "shared expert projection"));
      PLANNER_RETURN_IF_ERROR(column_forward(c, tensor(l, c.role), (s.sp ? a.n2_full : a.n2).data(),
                                             s.h, s.fs, y.data()));
      if (!gate && s.sp) a.n2_full.reset();
      return Status::ok();
    }
    case OpRole::kSharedAct:
      PLANNER_RETURN_IF_ERROR(check_rows(c, s.T, s.fs));
      PLANNER_RETURN_IF_ERROR(ensure_act(a.act, s.T * s.fs, "shared expert activation"));
      if (s.gated) {
        dev.swiglu_forward(a.gate.data(), a.up.data(), s.T, s.fs, s.fs, a.act.data());
      } else {
        dev.gelu_forward(a.up.data(), s.T * s.fs, a.act.data());
      }
      return Status::ok();
    case OpRole::kSharedDown:
      PLANNER_RETURN_IF_ERROR(ensure_act(a.y2, s.T * s.h, "shared expert output"));
      return linear_forward(c, a.act.data(), weight(tensor(l, OpRole::kSharedDown)), s.T, s.fs, s.h,
                            a.y2.data());
    default:
      return mismatch(c, "not a forward MoE op");
  }
  started(c, t);
  return Status::ok();
}

Status Runner::Impl::moe_backward(const OpCtx& c, LayerActs& a) {
  MoeActs& m = a.moe;
  const int l = c.layer;
  const bool wgrad = c.phase == Phase::kBackwardWeight;
  const DeviceBuffer& g_mlp = s.sp ? a.g : a.dy;
  const std::int64_t own_rows = s.sp ? s.tp_rank * s.Ts * s.h : 0;
  const std::int64_t rows = std::max<std::int64_t>(1, m.rows);
  Ticket t;
  switch (c.role) {
    case OpRole::kExpertCombine: {
      PLANNER_RETURN_IF_ERROR(ensure_act(m.g_perm, s.Ts * s.topk * s.h, "dispatched gradients"));
      PLANNER_RETURN_IF_ERROR(ensure(m.dw, s.Ts * s.topk, "routing weight gradients"));
      dev.moe_combine_backward(a.dy.data(), m.y_back.data(), m.pos.i32(), m.weights.f32(), s.Ts,
                               s.topk, s.h, m.g_perm.data(), m.dw.f32());
      m.y_back.reset();
      if (s.ep == 1) m.g_recv = std::move(m.g_perm);
      return Status::ok();
    }
    case OpRole::kEpCombine: {  // bwd: the gradients to the experts' ranks
      PLANNER_ASSIGN_OR_RETURN(
          t, exchange(c, m.g_perm, m.g_recv, m.send, m.recv, "expert output gradients"));
      break;
    }
    case OpRole::kExpertDown: {
      const int w = tensor(l, OpRole::kExpertDown);
      if (m.g_exp.empty()) {
        PLANNER_ASSIGN_OR_RETURN(m.g_exp,
                                 regroup(m.g_recv, m.order, m.rows, "expert output gradients"));
        m.g_recv.reset();
      }
      if (!wgrad) {
        PLANNER_RETURN_IF_ERROR(ensure_act(m.dact, rows * s.fe, "expert activation gradient"));
        expert_input_grad(m, w, m.g_exp.data(), s.fe, s.h, 0.0f, m.dact.data());
        return Status::ok();
      }
      return expert_weight_grad(m, w, m.g_exp.data(), m.act.data(), s.fe, s.h);
    }
    case OpRole::kExpertAct:
      PLANNER_RETURN_IF_ERROR(ensure_act(m.dup, rows * s.fe, "expert up gradient"));
      if (s.gated)
        PLANNER_RETURN_IF_ERROR(ensure_act(m.dgate, rows * s.fe, "expert gate gradient"));
      if (m.rows > 0) {
        if (s.gated) {
          dev.swiglu_backward(m.gate.data(), m.up.data(), m.dact.data(), m.rows, s.fe, s.fe,
                              m.dgate.data(), m.dup.data());
        } else {
          dev.gelu_backward(m.up.data(), m.dact.data(), m.rows * s.fe, m.dup.data());
        }
      }
      m.dact.reset();
      return Status::ok();
    case OpRole::kExpertGate:
    case OpRole::kExpertUp: {
      const bool gate = c.role == OpRole::kExpertGate;
      const int w = tensor(l, c.role);
      const DeviceBuffer& dy = gate ? m.dgate : m.dup;
      if (!wgrad) {
        PLANNER_RETURN_IF_ERROR(ensure_act(m.dx_exp, rows * s.h, "expert input gradient"));
        const float beta = !gate && s.gated ? 1.0f : 0.0f;
        expert_input_grad(m, w, dy.data(), s.h, s.fe, beta, m.dx_exp.data());
        return Status::ok();
      }
      return expert_weight_grad(m, w, dy.data(), m.x_exp.data(), s.h, s.fe);
    }
    case OpRole::kEpDispatch: {  // bwd: the input gradients back to the tokens' ranks
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer by_source,
                               regroup(m.dx_exp, m.inverse, m.rows, "input gradients by source"));
      m.dx_exp.reset();
      PLANNER_ASSIGN_OR_RETURN(
          t, exchange(c, by_source, m.dx_perm, m.recv, m.send, "token gradients"));
      break;
    }
    case OpRole::kRouterTopk: {
      if (s.ep == 1) m.dx_perm = std::move(m.dx_exp);
      PLANNER_RETURN_IF_ERROR(ensure_act(m.dlogits, s.Ts * s.experts, "router logit gradients"));
      dev.moe_route_backward(m.scores.f32(), m.topk.i32(), m.weights.f32(), m.dw.f32(), s.Ts,
                             s.route, m.dlogits.data());
      PLANNER_RETURN_IF_ERROR(ensure_act(m.dtok, s.Ts * s.h, "token gradients"));
      dev.moe_combine(m.dx_perm.data(), m.pos.i32(), nullptr, s.Ts, s.topk, s.h, false,
                      m.dtok.data());
      m.dx_perm.reset();
      return Status::ok();
    }
    case OpRole::kRouter: {
      const int w = tensor(l, OpRole::kRouter);
      if (wgrad) {
        PLANNER_RETURN_IF_ERROR(touch_grads(state->group_of(w)));
        return linear_weight_grad(c, m.dlogits.data(), a.n2.data(), s.Ts, s.h, s.experts,
                                  state->grad(w));
      }
      // The MoE block's input gradient: the shared experts' (already there), the dispatched
      // rows' and the router's.
      DeviceBuffer& out = s.sp ? a.dn2s : a.dn2;
      if (s.fs > 0) {
        dev.add(out.data(), m.dtok.data(), s.Ts * s.h, out.data());
        m.dtok.reset();
      } else {
        out = std::move(m.dtok);
      }
      PLANNER_RETURN_IF_ERROR(check_gemm(c, s.Ts, s.h, s.experts));
      dev.gemm(Transpose::kNo, Transpose::kNo, s.Ts, s.h, s.experts, 1.0f, m.dlogits.data(),
               s.experts, weight(w), s.h, 1.0f, out.data(), s.h);
      return Status::ok();
    }
    case OpRole::kSharedDown: {
      const int w = tensor(l, OpRole::kSharedDown);
      if (!wgrad) {
        PLANNER_RETURN_IF_ERROR(ensure_act(a.dact, s.T * s.fs, "shared activation gradient"));
        return linear_input_grad(c, g_mlp.data(), weight(w), s.T, s.fs, s.h, 0.0f, a.dact.data());
      }
      return weight_grad(c, w, g_mlp.data(), a.act.data(), s.fs, s.h, at(g_mlp, own_rows), s.Ts);
    }
    case OpRole::kSharedAct:
      PLANNER_RETURN_IF_ERROR(check_rows(c, s.T, s.fs));
      PLANNER_RETURN_IF_ERROR(ensure_act(a.dup, s.T * s.fs, "shared up gradient"));
      if (s.gated) {
        PLANNER_RETURN_IF_ERROR(ensure_act(a.dgate, s.T * s.fs, "shared gate gradient"));
        dev.swiglu_backward(a.gate.data(), a.up.data(), a.dact.data(), s.T, s.fs, s.fs,
                            a.dgate.data(), a.dup.data());
      } else {
        dev.gelu_backward(a.up.data(), a.dact.data(), s.T * s.fs, a.dup.data());
      }
      a.dact.reset();
      return Status::ok();
    case OpRole::kSharedGate:
    case OpRole::kSharedUp: {
      const bool gate = c.role == OpRole::kSharedGate;
      const int w = tensor(l, c.role);
      const DeviceBuffer& dy = gate ? a.dgate : a.dup;
      if (!wgrad) {
        PLANNER_RETURN_IF_ERROR(ensure_act(a.dn2, s.T * s.h, "shared expert input gradient"));
        const float beta = !gate && s.gated ? 1.0f : 0.0f;
        return linear_input_grad(c, dy.data(), weight(w), s.T, s.h, s.fs, beta, a.dn2.data());
      }
      PLANNER_RETURN_IF_ERROR(touch_grads(state->group_of(w)));
      PLANNER_RETURN_IF_ERROR(linear_weight_grad(c, dy.data(), (s.sp ? a.n2_full : a.n2).data(),
                                                 s.T, s.h, s.fs, state->grad(w)));
      if (s.bias) dev.bias_backward(dy.data(), s.T, s.fs, state->grad(w) + s.fs * s.h);
      return Status::ok();
    }
    default:
      return mismatch(c, "not a backward MoE op");
  }
  started(c, t);
  return Status::ok();
}

}  // namespace planner::exec
