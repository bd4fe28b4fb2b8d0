// The model's ends and the pipeline: data broadcast, embedding, final norm, LM head and
// vocab-parallel loss, and the activations and gradients sent between stages (mapping:
// runner.cpp).
#include <cstring>

#include "runner_impl.hpp"

namespace planner::exec {
namespace {

constexpr std::int64_t kInt64 = 8;
constexpr std::int64_t kFloat = 4;
// Megatron-LM's get_batch sends int64 tokens and position ids to the first stage, int64 labels
// and an fp32 loss mask to the last (the lowering's data_broadcast sizes).
constexpr std::int64_t kInputBytesPerToken = kInt64 + kInt64;
constexpr std::int64_t kLabelBytesPerToken = kInt64 + kFloat;

}  // namespace

// The micro-batch `mb` of this rank in the broadcast layout: inputs are int64 tokens then int64
// positions; labels are int64 next tokens then the fp32 loss mask (all ones: the synthetic data has
// no padding). Rows are [chunk][sample][token of the chunk] (runner.cpp, init_layout).
static std::vector<std::byte> batch_bytes(Runner::Impl& r, int mb, bool inputs) {
  const Shapes& s = r.s;
  std::vector<std::byte> out(
      static_cast<std::size_t>(s.T * (inputs ? kInputBytesPerToken : kLabelBytesPerToken)));
  auto* tokens = reinterpret_cast<std::int64_t*>(out.data());
  std::byte* second = out.data() + s.T * kInt64;
  for (std::int64_t i = 0; i < s.b; ++i) {
    const std::int64_t index =
        sequence_index(r.plan.training, r.plan.parallel, r.step_index, s.dp_rank, mb, i);
    r.data.sequence(index, r.host_tokens.data());
    for (int q = 0; q < s.chunks; ++q) {
      for (std::int64_t p = 0; p < s.sc; ++p) {
        const std::int64_t row = (q * s.b + i) * s.sc + p;
        const std::int64_t pos = r.host_positions[static_cast<std::size_t>(row)];
        tokens[row] = r.host_tokens[static_cast<std::size_t>(pos + (inputs ? 0 : 1))];
        if (inputs) {
          const std::int64_t position = pos;
          std::memcpy(second + row * kInt64, &position, kInt64);
        } else {
          const float mask = 1.0f;
          std::memcpy(second + row * kFloat, &mask, kFloat);
        }
      }
    }
  }
  return out;
}

static Result<DeviceBuffer> upload_batch(Runner::Impl& r, int mb, bool inputs) {
  const std::vector<std::byte> host = batch_bytes(r, mb, inputs);
  PLANNER_ASSIGN_OR_RETURN(DeviceBuffer buf,
                           DeviceBuffer::allocate(r.dev, static_cast<std::int64_t>(host.size()),
                                                  inputs ? "input tokens" : "labels"));
  PLANNER_RETURN_IF_ERROR(
      r.dev.copy_from_host(buf.data(), host.data(), static_cast<std::int64_t>(host.size())));
  return buf;
}

Status Runner::Impl::data_broadcast(const OpCtx& c) {
  const bool inputs = c.slot == 0;
  const std::int64_t bytes = s.T * (inputs ? kInputBytesPerToken : kLabelBytesPerToken);
  Communicator* comm = group_comm(c);
  if (comm == nullptr || c.d->comm_bytes.raw() != bytes) {
    return mismatch(c, "broadcasts " + std::to_string(c.d->comm_bytes.raw()) +
                           " bytes, the executor's batch has " + std::to_string(bytes));
  }
  DeviceBuffer& batch = inputs ? emb[static_cast<std::size_t>(c.mb)].batch
                               : head[static_cast<std::size_t>(c.mb)].batch;
  if (comm->rank() == 0) {
    PLANNER_ASSIGN_OR_RETURN(batch, upload_batch(*this, c.mb, inputs));
  } else {
    PLANNER_ASSIGN_OR_RETURN(batch, DeviceBuffer::allocate(dev, bytes, "broadcast batch"));
  }
  PLANNER_ASSIGN_OR_RETURN(Ticket t,
                           comm->broadcast(batch.data(), bytes, DType::kByte, 0, *c.name));
  started(c, t);
  return Status::ok();
}

Status Runner::Impl::embedding_op(const OpCtx& c) {
  EmbeddingActs& e = emb[static_cast<std::size_t>(c.mb)];
  const int w = tensor(OpId::kNone, OpRole::kEmbedding);
  Communicator* comm = group_comm(c);
  const int first = part.first_layer(s.stage, 0);
  Ticket t;
  if (c.role == OpRole::kEmbedding && c.phase == Phase::kForward) {
    PLANNER_RETURN_IF_ERROR(check_rows(c, s.T, s.h));
    if (c.d->aux != s.V) return mismatch(c, "vocabulary shard size");
    if (e.batch.empty()) {
      if (s.tp > 1) return mismatch(c, "the input batch was not broadcast");
      PLANNER_ASSIGN_OR_RETURN(e.batch, upload_batch(*this, c.mb, true));
    }
    PLANNER_ASSIGN_OR_RETURN(e.ids, DeviceBuffer::allocate(dev, s.T * 4, "token ids"));
    PLANNER_ASSIGN_OR_RETURN(e.pos, DeviceBuffer::allocate(dev, s.T * 4, "positions"));
    dev.narrow_int64(e.batch.i64(), s.T, e.ids.i32());
    dev.narrow_int64(e.batch.i64() + s.T, s.T, e.pos.i32());
    e.batch.reset();
    PLANNER_RETURN_IF_ERROR(ensure_act(e.out, s.T * s.h, "embedding output"));
    dev.embedding_forward(e.ids.i32(), s.T, weight(w), s.vocab_start, s.V, s.h, e.out.data());
    // Positions are tp-replicated: added once, on tp rank 0, before the tensor-parallel sum.
    if (s.learned && s.tp_rank == 0) {
      dev.position_embedding_forward(e.pos.i32(), 1, s.T, weight(w, s.V * s.h), s.h, e.out.data());
    }
    if (s.tp == 1) acts(c.mb, first).x = std::move(e.out);
    return Status::ok();
  }
  if (c.role == OpRole::kEmbeddingReduce && c.phase == Phase::kForward) {
    if (c.d->kind == OpKind::kAllReduce) {
      PLANNER_ASSIGN_OR_RETURN(
          t, comm->all_reduce(e.out.data(), s.T * s.h, s.at, ReduceOp::kSum, *c.name));
      acts(c.mb, first).x = std::move(e.out);
    } else {
      PLANNER_ASSIGN_OR_RETURN(DeviceBuffer x, alloc_act(s.Ts * s.h, "layer input"));
      PLANNER_ASSIGN_OR_RETURN(t, comm->reduce_scatter(e.out.data(), x.data(), s.Ts * s.h, s.at,
                                                       ReduceOp::kSum, *c.name));
      retire(std::move(e.out), t);
      acts(c.mb, first).x = std::move(x);
    }
    started(c, t);
    return Status::ok();
  }
  if (e.dy.empty()) e.dy = std::move(io(c.mb, 0).din);
  if (c.role == OpRole::kEmbeddingReduce) {  // bwd with sequence parallelism: all-gather
    PLANNER_RETURN_IF_ERROR(ensure_act(e.g, s.T * s.h, "gathered embedding gradient"));
    PLANNER_ASSIGN_OR_RETURN(t,
                             comm->all_gather(e.dy.data(), e.g.data(), s.Ts * s.h, s.at, *c.name));
    started(c, t);
    return Status::ok();
  }
  // wgrad: scatter-add into the word rows of this vocabulary shard and the position rows.
  PLANNER_RETURN_IF_ERROR(touch_grads(state->group_of(w)));
  const DeviceBuffer& g = s.sp ? e.g : e.dy;
  float* grad = state->grad(w);
  dev.embedding_backward(e.ids.i32(), s.T, g.data(), s.vocab_start, s.V, s.h, grad);
  if (s.learned) {
    // Replicated positions: from this rank's rows of the residual stream (all of them without
    // sequence parallelism; with it, the tp ranks' parts are summed by sp_norm_grad_reduce).
    const std::int64_t r0 = s.sp ? s.tp_rank * s.Ts : 0;
    dev.position_embedding_backward(e.pos.i32() + r0, 1, s.Ts, at(g, r0 * s.h), s.h,
                                    grad + s.V * s.h);
  }
  e = EmbeddingActs{};
  return Status::ok();
}

void Runner::Impl::head_done(int mb) {
  HeadActs& hd = head[static_cast<std::size_t>(mb)];
  if (++hd.open == 2) hd = HeadActs{};
}

Status Runner::Impl::head_op(const OpCtx& c) {
  HeadActs& hd = head[static_cast<std::size_t>(c.mb)];
  const int norm = tensor(OpId::kNone, OpRole::kFinalNorm);
  const int w = tensor(OpId::kNone, OpRole::kLmHead);
  const int last_chunk = part.chunks() - 1;
  const int last_layer =
      part.first_layer(s.stage, last_chunk) + part.layers_per_chunk(s.stage, last_chunk) - 1;
  Communicator* comm = group_comm(c);
  const bool fwd = c.phase == Phase::kForward;
  const bool wgrad = c.phase == Phase::kBackwardWeight;
  Ticket t;
  switch (c.role) {
    case OpRole::kFinalNorm:
      PLANNER_RETURN_IF_ERROR(check_rows(c, s.Ts, s.h));
      if (fwd) {
        hd.x = std::move(io(c.mb, last_chunk).out);
        if (hd.x.empty()) return mismatch(c, "no input from the last layer");
        return norm_forward(hd.x.data(), norm, s.Ts, hd.fn, hd.mean, hd.rstd);
      } else {
        const DeviceBuffer& dy = s.sp ? hd.dfns : hd.dfn;
        DeviceBuffer dx;
        PLANNER_RETURN_IF_ERROR(
            norm_backward(dy.data(), hd.x.data(), norm, hd.mean, hd.rstd, s.Ts, dx));
        acts(c.mb, last_layer).dy = std::move(dx);
        head_done(c.mb);
        return Status::ok();
      }
    case OpRole::kLmHeadGather: {
      if (fwd || wgrad) {
        PLANNER_RETURN_IF_ERROR(ensure_act(hd.fn_full, s.T * s.h, "gathered final norm output"));
        PLANNER_ASSIGN_OR_RETURN(
            t, comm->all_gather(hd.fn.data(), hd.fn_full.data(), s.Ts * s.h, s.at, *c.name));
      } else {
        PLANNER_RETURN_IF_ERROR(ensure_act(hd.dfns, s.Ts * s.h, "reduce-scattered gradient"));
        PLANNER_ASSIGN_OR_RETURN(t, comm->reduce_scatter(hd.dfn.data(), hd.dfns.data(), s.Ts * s.h,
                                                         s.at, ReduceOp::kSum, *c.name));
        retire(std::move(hd.dfn), t);
      }
      break;
    }
    case OpRole::kLmHeadReduce: {
      PLANNER_ASSIGN_OR_RETURN(
          t, comm->all_reduce(hd.dfn.data(), s.T * s.h, s.at, ReduceOp::kSum, *c.name));
      break;
    }
    case OpRole::kLmHead: {
      const DeviceBuffer& in = s.sp ? hd.fn_full : hd.fn;
      if (fwd) {
        PLANNER_RETURN_IF_ERROR(ensure_act(hd.logits, s.T * s.V, "logits"));
        PLANNER_RETURN_IF_ERROR(
            linear_forward(c, in.data(), weight(w), s.T, s.h, s.V, hd.logits.data()));
        if (s.sp) hd.fn_full.reset();
        return Status::ok();
      }
      if (!wgrad) {
        PLANNER_RETURN_IF_ERROR(ensure_act(hd.dfn, s.T * s.h, "final norm output gradient"));
        return linear_input_grad(c, hd.logits.data(), weight(w), s.T, s.h, s.V, 0.0f,
                                 hd.dfn.data());
      }
      PLANNER_RETURN_IF_ERROR(touch_grads(state->group_of(w)));
      PLANNER_RETURN_IF_ERROR(
          linear_weight_grad(c, hd.logits.data(), in.data(), s.T, s.h, s.V, state->grad(w)));
      head_done(c.mb);
      return Status::ok();
    }
    default:
      return mismatch(c, "not an LM head op");
  }
  started(c, t);
  return Status::ok();
}

Status Runner::Impl::loss_op(const OpCtx& c) {
  HeadActs& hd = head[static_cast<std::size_t>(c.mb)];
  Communicator* comm = group_comm(c);
  float* acc = loss_acc.f32() + c.mb;
  Ticket t;
  if (c.role == OpRole::kLossMax) {
    PLANNER_ASSIGN_OR_RETURN(
        t, comm->all_reduce(hd.stats.data(), s.T, DType::kFloat32, ReduceOp::kMax, *c.name));
    started(c, t);
    return Status::ok();
  }
  if (c.role == OpRole::kLossSum) {  // sum of exponentials and target logits, together
    PLANNER_ASSIGN_OR_RETURN(t, comm->all_reduce(hd.stats.f32() + s.T, 2 * s.T, DType::kFloat32,
                                                 ReduceOp::kSum, *c.name));
    started(c, t);
    return Status::ok();
  }
  if (c.phase != Phase::kForward) {
    // The loss gradient of the mean over the global batch's tokens, in place into the logits
    // (times the loss scale with fp16 loss scaling).
    const float numerator = scaling ? loss_scale.scale() : 1.0f;
    dev.cross_entropy_backward(hd.logits.data(), s.T, s.V, s.vocab_start, hd.labels.i32(),
                               hd.lse.f32(), numerator / static_cast<float>(s.global_tokens),
                               hd.logits.data());
    hd.labels.reset();
    hd.lse.reset();
    return Status::ok();
  }
  auto labels = [&]() -> Status {
    if (hd.batch.empty()) {
      if (s.tp > 1) return mismatch(c, "the labels were not broadcast");
      PLANNER_ASSIGN_OR_RETURN(hd.batch, upload_batch(*this, c.mb, false));
    }
    PLANNER_ASSIGN_OR_RETURN(hd.labels, DeviceBuffer::allocate(dev, s.T * 4, "labels"));
    dev.narrow_int64(hd.batch.i64(), s.T, hd.labels.i32());
    hd.batch.reset();
    return Status::ok();
  };
  if (s.tp == 1) {
    PLANNER_RETURN_IF_ERROR(check_rows(c, s.T, s.V));
    PLANNER_RETURN_IF_ERROR(labels());
    PLANNER_RETURN_IF_ERROR(ensure(hd.loss, s.T, "token losses"));
    PLANNER_RETURN_IF_ERROR(ensure(hd.lse, s.T, "logit log-sum-exp"));
    dev.cross_entropy_forward(hd.logits.data(), s.T, s.V, hd.labels.i32(), hd.loss.f32(),
                              hd.lse.f32());
    dev.accumulate_sum(hd.loss.f32(), s.T, acc);
    hd.loss.reset();
    return Status::ok();
  }
  switch (c.slot) {
    case 0:  // this shard's row maxima
      PLANNER_RETURN_IF_ERROR(ensure(hd.stats, 3 * s.T, "loss statistics"));
      dev.cross_entropy_local_max(hd.logits.data(), s.T, s.V, hd.stats.f32());
      return Status::ok();
    case 1:  // sum of exponentials and the target logit, against the global maxima
      PLANNER_RETURN_IF_ERROR(labels());
      dev.cross_entropy_local_sum_exp(hd.logits.data(), s.T, s.V, hd.stats.f32(),
                                      hd.stats.f32() + s.T);
      dev.cross_entropy_local_target_logit(hd.logits.data(), s.T, s.V, s.vocab_start,
                                           hd.labels.i32(), hd.stats.f32() + 2 * s.T);
      return Status::ok();
    case 2:
      PLANNER_RETURN_IF_ERROR(ensure(hd.loss, s.T, "token losses"));
      PLANNER_RETURN_IF_ERROR(ensure(hd.lse, s.T, "logit log-sum-exp"));
      dev.cross_entropy_loss(s.T, hd.stats.f32(), hd.stats.f32() + s.T, hd.stats.f32() + 2 * s.T,
                             hd.loss.f32(), hd.lse.f32());
      if (s.tp_rank == 0) dev.accumulate_sum(hd.loss.f32(), s.T, acc);
      hd.stats.reset();
      hd.loss.reset();
      return Status::ok();
    default:
      return mismatch(c, "unknown loss step");
  }
}

Status Runner::Impl::pipeline_op(const OpCtx& c) {
  if (c.d->comm_bytes.raw() != s.Ts * s.h * s.es) {
    return mismatch(c, "moves " + std::to_string(c.d->comm_bytes.raw()) +
                           " bytes, the executor's activation has " +
                           std::to_string(s.Ts * s.h * s.es));
  }
  const std::int64_t n = s.Ts * s.h;
  Ticket t;
  switch (c.role) {
    case OpRole::kPpRecvActivation: {
      LayerActs& a = acts(c.mb, c.layer);
      PLANNER_RETURN_IF_ERROR(ensure_act(a.x, n, "received activation"));
      PLANNER_ASSIGN_OR_RETURN(t, p2p->recv(a.x.data(), n, s.at, c.op->peer, c.op->tag, *c.name));
      break;
    }
    case OpRole::kPpRecvGrad: {
      LayerActs& a = acts(c.mb, c.layer);
      PLANNER_RETURN_IF_ERROR(ensure_act(a.dy, n, "received gradient"));
      PLANNER_ASSIGN_OR_RETURN(t, p2p->recv(a.dy.data(), n, s.at, c.op->peer, c.op->tag, *c.name));
      break;
    }
    case OpRole::kPpSendActivation:
    case OpRole::kPpSendGrad: {
      ChunkIo& cio = io(c.mb, chunk_of(c.layer));
      DeviceBuffer buf = std::move(c.role == OpRole::kPpSendActivation ? cio.out : cio.din);
      if (buf.empty()) return mismatch(c, "nothing to send");
      PLANNER_ASSIGN_OR_RETURN(t, p2p->send(buf.data(), n, s.at, c.op->peer, c.op->tag, *c.name));
      retire(std::move(buf), t);
      break;
    }
    default:
      return mismatch(c, "not a pipeline op");
  }
  started(c, t);
  return Status::ok();
}

}  // namespace planner::exec
