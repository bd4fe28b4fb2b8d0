#include "planner/core/memory.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "planner/core/diagnostics.hpp"
#include "planner/core/limits.hpp"
#include "planner/core/model_partition.hpp"
#include "planner/core/moe_routing.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/schedule.hpp"

namespace planner {
namespace {

// ZeRO §3.1 / mixed-precision training: fp32 master weights (4 bytes), Adam's two fp32 moments
// (8), an fp32 momentum for SGD (4).
constexpr int kMasterWeightBytes = 4;
constexpr int kAdamMomentBytes = 8;
constexpr int kSgdMomentumBytes = 4;
constexpr int kFp32Bytes = 4;
// Dropout masks are stored as one byte per element (Korthikanti et al. 2022 §4.1).
constexpr double kMaskBytes = 1.0;
// ZeRO-3 keeps the layer in use and the prefetched next one gathered.
constexpr int kZero3GatheredLayers = 2;
// Pipeline send and receive buffers, and the context-parallel K/V ring's two blocks.
constexpr int kP2pBuffers = 2;

// LayerKind as an index (mixer × 3 + MLP kind); kLayerKinds of them.
constexpr int kLayerKinds = 9;
std::size_t kind_index(LayerKind k) {
  return static_cast<std::size_t>(static_cast<int>(k.mixer) * 3 + static_cast<int>(k.ffn));
}

// The kinds of the model's layers and MTP blocks, each once.
std::vector<LayerKind> layer_kinds_of(const ModelSpec& m) {
  std::vector<LayerKind> kinds;
  for (int l = 0; l < m.num_layers + m.mtp_layers; ++l) {
    const LayerKind k = m.layer_kind(l);
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
    if (!m.is_hybrid() && !m.is_moe()) break;  // every layer alike
  }
  return kinds;
}

struct Activations {
  double split = 0;      // bytes sharded over tp by tensor parallelism itself
  double unsplit = 0;    // bytes replicated over tp unless sequence parallelism shards them
  double quadratic = 0;  // the softmax term (5·a·s²·b), tp-split
  double rank = 0;       // bytes of one rank already (the busiest rank's routed tokens)
};

// Korthikanti et al.'s per-layer accounting, generalised to the layer's actual shapes and parts.
// `p` says which parts selective recompute drops (parallel_config.hpp recompute_modules): their
// activations are not kept, only their inputs.
Activations layer_terms(const ModelSpec& m, double s, double b, double e, LayerKind kind,
                        const MoeRouting& routing, const ParallelConfig& p) {
  auto rc = [&](RecomputeModule module) { return recomputes(p, module); };
  // A norm's output (the next projection's input), unless layernorm recompute drops it: the norms
  // standing alone (before MLA's down-projections and an MoE block's router), not those Transformer
  // Engine fuses into the next linear (attention's QKV, a dense MLP's first projection, Mamba's
  // in_proj), which keeps its input for the weight gradient either way.
  const double normed = rc(RecomputeModule::kLayernorm) ? 0.0 : 1.0;
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.q_dim());
  const double kv = static_cast<double>(m.kv_dim());
  Activations a;
  if (kind.mixer == Mixer::kAttention && m.mla) {
    // MLA: the down-projections' input, the latents before and after their norms (the
    // up-projections' inputs, replicated over tp), the rope key, dropout mask | Q, K (qk_head),
    // V and the output projection's input (v_head).
    const MlaSpec& l = *m.mla;
    const double latents =
        2.0 * l.q_lora_rank + 2.0 * l.kv_lora_rank + static_cast<double>(l.qk_rope_head_dim);
    a.unsplit += e * s * b * (normed * h + latents) + kMaskBytes * s * b * h;
    const double qk = static_cast<double>(m.heads) * m.qk_head_dim();
    const double v = static_cast<double>(m.v_dim());
    // mla_up_proj recompute drops the up-projections' outputs (Q, K, V).
    const double up = rc(RecomputeModule::kMlaUpProj) ? 0.0 : qk + qk + v;
    a.split += e * s * b * (up + v);
  } else if (kind.mixer == Mixer::kAttention) {
    // Attention: QKV input, dropout mask | Q, K, V, output-projection input.
    a.unsplit += e * s * b * h + kMaskBytes * s * b * h;
    a.split += e * s * b * (q + kv + kv + q);
    if (m.attention_output_gate) a.split += e * s * b * q;  // the gate, for sigmoid's backward
  } else if (kind.mixer == Mixer::kMamba) {
    // Mamba-2: in_proj input | its output (z, x, B, C, dt), the convolved x | B | C, the scan
    // output and the gated norm's output (out_proj input), and the fp32 state of every chunk.
    // Gated DeltaNet keeps the same tensors (q | k | v | z | beta | a, the convolved q | k | v,
    // the scan output, the gated norm's output) and the chunk states of heads × N × P.
    const MambaSpec& mb = *m.mamba;
    a.unsplit += e * s * b * h;
    a.split += e * s * b * static_cast<double>(mb.in_proj_dim() + mb.conv_dim() + 2 * mb.d_inner());
    const double chunks = std::ceil(s / static_cast<double>(mb.chunk));
    a.split += kFp32Bytes * b * chunks * static_cast<double>(mb.d_inner()) * mb.state_dim;
  }
  if (kind.mixer == Mixer::kAttention) {
    // softmax output (2), its dropout mask (1) and dropout output (2) per head: 5·a·s²·b.
    a.quadratic = 5.0 * static_cast<double>(m.heads) * s * s * b;
  }
  const bool gated = is_gated(m.mlp);
  const double ffn_tensors = gated ? 3.0 : 2.0;  // (gate, up,) activation output
  if (kind.ffn == FfnKind::kMoe) {
    // MLP input (the norm's output), the dropout mask after the block. moe recompute keeps only
    // the input; moe_act drops the experts' activation output, shared_experts the shared
    // experts' intermediates.
    a.unsplit += normed * e * s * b * h + kMaskBytes * s * b * h;
    if (!rc(RecomputeModule::kMoe)) {
      a.unsplit += kFp32Bytes * s * b * static_cast<double>(m.moe->num_experts);  // router probs
      // The busiest rank's experts (moe_routing.hpp): the dispatched tokens after the etp gather
      // (kept for the first projection's weight gradient) and the expert intermediates, ffn /
      // etp wide.
      const double rows = static_cast<double>(routing.per_expert * routing.local_experts);
      const double expert_tensors = ffn_tensors - (rc(RecomputeModule::kMoeAct) ? 1.0 : 0.0);
      a.rank += e * rows * h;
      a.rank += e * rows * static_cast<double>(routing.expert_ffn) * expert_tensors;
      if (m.moe->shared_ffn() > 0 && !rc(RecomputeModule::kSharedExperts)) {
        a.split += e * s * b * static_cast<double>(m.moe->shared_ffn()) * ffn_tensors;
      }
    }
  } else if (kind.ffn == FfnKind::kDense) {
    const double f = static_cast<double>(m.ffn_hidden);
    a.unsplit += e * s * b * h + kMaskBytes * s * b * h;
    if (!rc(RecomputeModule::kMlp)) a.split += e * s * b * f * ffn_tensors;
  }
  // inputs of the norms: two per attention + MLP layer, one per single-block layer
  const bool two_blocks = kind.mixer != Mixer::kNone && kind.ffn != FfnKind::kNone;
  a.unsplit += (two_blocks ? 2.0 : 1.0) * e * s * b * h;
  return a;
}

// Bytes from a count computed in floating point. check_parallel() refuses plans whose activations
// exceed limits::kMaxActivationBytes; saturating there as well means a path that skipped the
// check still never wraps to a negative count.
Bytes saturated_bytes(double b) {
  return Bytes(std::llround(std::clamp(b, 0.0, static_cast<double>(limits::kMaxActivationBytes))));
}

double combine(const Activations& a, double t, bool sp, bool quadratic) {
  return (sp ? a.unsplit / t : a.unsplit) + a.split / t + (quadratic ? a.quadratic / t : 0.0) +
         a.rank;
}

}  // namespace

PrecisionBytes precision_bytes(const TrainingSpec& training, bool fp32_grads) {
  PrecisionBytes b;
  const bool full = bytes_per_element(training.precision) == 4;
  const bool sgd = training.optimizer == Optimizer::kSgd;
  b.param = full ? 4 : 2;
  b.activation = full ? 4 : 2;
  b.grad = (full || fp32_grads) ? 4 : 2;
  b.optimizer = (full ? 0 : kMasterWeightBytes) + (sgd ? kSgdMomentumBytes : kAdamMomentBytes);
  return b;
}

Bytes layer_activation_bytes(const ModelSpec& m, const TrainingSpec& training,
                             const ParallelConfig& p, LayerKind kind,
                             const MemoryOptions& options) {
  const double s = static_cast<double>(training.seq_length) / p.cp;
  const double b = static_cast<double>(p.micro_batch_size);
  const double e = precision_bytes(training, options.fp32_grads).activation;
  const double t = p.tp;
  const bool sp = p.sequence_parallel && p.tp > 1;
  if (p.recompute == Recompute::kFull) {
    const double input = e * s * b * static_cast<double>(m.hidden);
    return saturated_bytes(sp ? input / t : input);
  }
  const bool quadratic =
      !options.flash_attention && p.cp == 1 && !recomputes(p, RecomputeModule::kCoreAttn);
  const MoeRouting routing = moe_routing(m, p, training.seq_length);
  return saturated_bytes(combine(layer_terms(m, s, b, e, kind, routing, p), t, sp, quadratic));
}

Bytes layer_activation_bytes(const ModelSpec& m, const TrainingSpec& training,
                             const ParallelConfig& p, bool moe_layer,
                             const MemoryOptions& options) {
  return layer_activation_bytes(
      m, training, p,
      LayerKind{Mixer::kAttention, moe_layer && m.is_moe() ? FfnKind::kMoe : FfnKind::kDense},
      options);
}

namespace {

// Scalars of one (model, training, parallel config, options) that every stage shares.
struct Common {
  PrecisionBytes pb;
  double t = 1;
  bool sp = false;
  double s = 0, b = 0, h = 0, e = 0;
  double seq_shard = 1;
  std::int64_t dense_shard = 1, expert_shard = 1;
  bool ps = false;
  std::array<Bytes, kLayerKinds> layer{};  // one layer's activations by kind_index()
  MoeRouting routing;
  Bytes working_layer;  // what one layer recomputes, held while it runs again
  double embedding_extra = 0;
  double head_extra = 0;
};

Common common_terms(const ModelSpec& m, const TrainingSpec& training, const ParallelConfig& p,
                    const MemoryOptions& options) {
  Common c;
  c.pb = precision_bytes(training, options.fp32_grads);
  c.t = p.tp;
  c.sp = p.sequence_parallel && p.tp > 1;
  c.s = static_cast<double>(training.seq_length) / p.cp;
  c.b = static_cast<double>(p.micro_batch_size);
  c.h = static_cast<double>(m.hidden);
  c.e = c.pb.activation;
  c.seq_shard = c.sp ? c.t : 1.0;
  c.dense_shard = static_cast<std::int64_t>(p.dp) * p.cp;
  c.expert_shard = std::max<std::int64_t>(1, p.expert_dp());
  c.ps = p.dp_sync == DpSync::kParameterServer;
  c.routing = moe_routing(m, p, training.seq_length);
  ParallelConfig no_recompute = p;
  no_recompute.recompute = Recompute::kNone;
  for (LayerKind kind : layer_kinds_of(m)) {
    c.layer[kind_index(kind)] = layer_activation_bytes(m, training, p, kind, options);
    if (p.recompute == Recompute::kFull) {
      c.working_layer = std::max(c.working_layer,
                                 layer_activation_bytes(m, training, no_recompute, kind, options));
    } else if (p.recompute == Recompute::kSelective) {
      // What the recomputed modules drop comes back for one layer while its backward runs (the
      // s x s scores an unfused attention core materialises again are not counted, as before).
      ParallelConfig core_attn = p;
      core_attn.recompute_modules = kDefaultRecomputeModules;
      const Bytes whole = layer_activation_bytes(m, training, core_attn, kind, options);
      c.working_layer = std::max(c.working_layer, whole - c.layer[kind_index(kind)]);
    }
  }
  c.embedding_extra = kMaskBytes * c.s * c.b * c.h / c.seq_shard;
  c.head_extra = 2.0 * c.e * c.s * c.b * c.h / c.seq_shard +
                 kFp32Bytes * c.s * c.b * static_cast<double>(m.vocab) / c.t;
  if (m.mtp_layers > 0) {
    // Each MTP module: its norms' and projection's inputs (the main stream and the shifted
    // embedding, 3·h), its block, and its own LM head input and logits.
    c.head_extra +=
        m.mtp_layers *
        (3.0 * c.e * c.s * c.b * c.h / c.seq_shard +
         static_cast<double>(c.layer[kind_index(m.layer_kind(m.num_layers))].raw()) + c.head_extra);
  }
  return c;
}

// The parameters one rank of a stage holds and its largest layer (ZeRO-3 gathers it).
struct StageParamInfo {
  RankParams params;
  std::int64_t largest_layer = 0;
};

StageParamInfo stage_param_info(const ModelPartition& part, int stage) {
  StageParamInfo info;
  info.params = part.rank_params(stage);
  for (int c = 0; c < part.chunks(); ++c) {
    std::int64_t current = 0;
    int layer = OpId::kNone;
    for (const ParamTensor& pt : part.chunk_params(stage, c)) {
      if (pt.layer != layer) {
        info.largest_layer = std::max(info.largest_layer, current);
        current = 0;
        layer = pt.layer;
      }
      current += pt.elements;
    }
    info.largest_layer = std::max(info.largest_layer, current);
  }
  return info;
}

// Everything of a stage but its activations: model states, communication buffers, overhead.
void fill_states(StageMemory& sm, const StageParamInfo& info, const ModelSpec& m,
                 const ParallelConfig& p, const Common& c, const MemoryOptions& options) {
  const RankParams& rp = info.params;
  sm.params = rp.total();
  sm.embedding_params = rp.embedding;
  const std::int64_t shard = (rp.dense + c.dense_shard - 1) / c.dense_shard +
                             (rp.expert + c.expert_shard - 1) / c.expert_shard;
  const std::int64_t held_params = p.zero_stage >= 3 ? shard : sm.params;
  const Bytes param_bytes(held_params * c.pb.param);
  const Bytes gathered(kZero3GatheredLayers * info.largest_layer * c.pb.param);
  if (p.offload == Offload::kOptimizerAndParams) {
    sm.host += param_bytes;
    sm.weights = gathered;
  } else {
    sm.weights = param_bytes + (p.zero_stage >= 3 ? gathered : Bytes(0));
  }
  sm.gradients = Bytes((p.zero_stage >= 2 ? shard : sm.params) * c.pb.grad);
  const Bytes optimizer((p.zero_stage >= 1 ? shard : sm.params) * c.pb.optimizer);
  if (c.ps) {
    // Parameter servers hold the optimizer state.
  } else if (p.offload != Offload::kNone) {
    sm.host += optimizer;
  } else {
    sm.optimizer = optimizer;
  }
  double comm = 0;
  if (p.pp > 1) comm += kP2pBuffers * c.e * c.s * c.b * c.h / c.seq_shard;
  if (p.cp > 1) comm += kP2pBuffers * 2.0 * c.e * c.b * c.s * static_cast<double>(m.kv_dim()) / c.t;
  if (m.is_moe() && p.ep > 1) {
    // All-to-all send and receive buffers of the busiest rank's dispatched tokens.
    comm += 2.0 * c.e * static_cast<double>(c.routing.received) * c.h;
  }
  if (p.zero_stage >= 3) comm += static_cast<double>(info.largest_layer * c.pb.grad);
  sm.comm_buffers = saturated_bytes(comm);
  sm.overhead = options.framework_overhead;
}

int microbatches_of(const TrainingSpec& training, const ParallelConfig& p) {
  return static_cast<int>(training.global_batch_size /
                          (static_cast<std::int64_t>(p.dp) * p.micro_batch_size));
}

}  // namespace

Result<MemoryReport> estimate_memory(const ModelSpec& m, const TrainingSpec& training,
                                     const ParallelConfig& p, const GpuSpec& gpu,
                                     const MemoryOptions& options) {
  Diagnostics diag("memory of " + (m.name.empty() ? std::string("model") : m.name));
  check_parallel(m, training, p, diag);
  if (!diag.empty()) return diag.to_status();
  PLANNER_ASSIGN_OR_RETURN(ModelPartition part, ModelPartition::create(m, p));
  PLANNER_ASSIGN_OR_RETURN(PipelineSchedule sched,
                           PipelineSchedule::create(p.schedule, p.pp, microbatches_of(training, p),
                                                    p.virtual_stages, p.extra_warmup()));
  const Common c = common_terms(m, training, p, options);

  MemoryReport report;
  report.capacity = gpu.hbm;
  for (int stage = 0; stage < p.pp; ++stage) {
    StageMemory sm;
    sm.stage = stage;
    fill_states(sm, stage_param_info(part, stage), m, p, c, options);

    // Activations at the schedule's peak.
    auto chunk_layers = [&](int chunk) {
      double bytes = 0;
      const int first = part.first_layer(stage, chunk);
      for (int l = first; l < first + part.layers_per_chunk(stage, chunk); ++l) {
        bytes += static_cast<double>(c.layer[kind_index(m.layer_kind(l))].raw());
      }
      return bytes;
    };
    auto chunk_extra = [&](int chunk) {
      return (part.has_embedding(stage, chunk) ? c.embedding_extra : 0.0) +
             (part.has_lm_head(stage, chunk) ? c.head_extra : 0.0);
    };
    double cur_layers = 0, cur_extra = 0, cur_layer_count = 0;
    double best_total = -1, best_layers = 0, best_extra = 0, best_count = 0;
    int cur_mb = 0, best_mb = 0;
    const Pass last = sched.split_backward() ? Pass::kWeight : Pass::kBackward;
    for (const PassItem& it : sched.stage(stage)) {
      const double sign = it.pass == Pass::kForward ? 1.0 : (it.pass == last ? -1.0 : 0.0);
      if (sign == 0.0) continue;
      cur_layers += sign * chunk_layers(it.chunk);
      cur_extra += sign * chunk_extra(it.chunk);
      cur_layer_count += sign * part.layers_per_chunk(stage, it.chunk);
      cur_mb += static_cast<int>(sign);
      if (sign > 0 && cur_layers + cur_extra > best_total) {
        best_total = cur_layers + cur_extra;
        best_layers = cur_layers;
        best_extra = cur_extra;
        best_count = cur_layer_count;
        best_mb = cur_mb;
      }
    }
    sm.layer_activations = saturated_bytes(best_layers);
    sm.extra_activations = saturated_bytes(best_extra) + c.working_layer;
    sm.activations = sm.layer_activations + sm.extra_activations;
    sm.layers_in_flight = best_count;
    sm.microbatches_in_flight = best_mb;
    report.stages.push_back(sm);
  }
  for (const StageMemory& sm : report.stages) {
    if (sm.total() > report.peak) {
      report.peak = sm.total();
      report.peak_stage = sm.stage;
    }
  }
  report.fits = report.capacity.raw() == 0 || report.peak <= report.capacity;
  return report;
}

// ---- MemoryEstimator

namespace {

// Four fields of 16 bits into a cache key (sizes and counts of a sweep stay far below 65,536;
// micro-batches are capped by schedule_microbatches() or checked by the caller).
std::uint64_t pack(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  return (a << 48) | ((b & 0xffffu) << 32) | ((c & 0xffffu) << 16) | (d & 0xffffu);
}

// Drops the vectors another one dominates (>= in every chunk): with weights >= 0 they can never
// hold the strict maximum.
void keep_maximal(std::vector<std::vector<int>>& vs) {
  std::sort(vs.begin(), vs.end());
  vs.erase(std::unique(vs.begin(), vs.end()), vs.end());
  std::vector<std::vector<int>> out;
  for (std::size_t i = 0; i < vs.size(); ++i) {
    bool dominated = false;
    for (std::size_t j = 0; j < vs.size() && !dominated; ++j) {
      if (i == j) continue;
      bool ge = true;
      for (std::size_t c = 0; c < vs[i].size() && ge; ++c)
        ge = vs[j][c] >= vs[i][c];
      dominated = ge;
    }
    if (!dominated) out.push_back(vs[i]);
  }
  vs = std::move(out);
}

}  // namespace

struct MemoryEstimator::Layout {
  std::vector<StageParamInfo> stages;
  std::vector<std::array<int, kLayerKinds>> kinds;  // per stage × chunks + chunk: layers by kind
  bool has_embedding_stage0 = true;
};

struct MemoryEstimator::InFlight {
  // Per stage: the per-chunk counts of micro-batch chunks in flight after the forward passes that
  // can hold the peak (the maximal ones).
  std::vector<std::vector<std::vector<int>>> stages;
};

MemoryEstimator::MemoryEstimator(ModelSpec model, TrainingSpec training, GpuSpec gpu,
                                 MemoryOptions options)
    : model_(std::move(model)), training_(training), gpu_(std::move(gpu)), options_(options) {}

MemoryEstimator::~MemoryEstimator() = default;
MemoryEstimator::MemoryEstimator(MemoryEstimator&&) noexcept = default;
MemoryEstimator& MemoryEstimator::operator=(MemoryEstimator&&) noexcept = default;

int MemoryEstimator::schedule_microbatches(Schedule schedule, int stages, int microbatches) {
  if (schedule == Schedule::kGpipe) return microbatches;
  if (schedule != Schedule::kInterleaved) {
    return std::min(microbatches, kInFlightSaturation * stages);
  }
  // The interleaved schedule's last group holds p + m mod p micro-batches and sets the warm-up,
  // which spans up to two groups of p before it: keep m mod p, and three groups before the last.
  return std::min(microbatches, (kInFlightSaturation + 2) * stages + microbatches % stages);
}

Result<const MemoryEstimator::Layout*> MemoryEstimator::layout(const ParallelConfig& p) {
  const std::array<int, 8> key{p.tp,
                               p.ep,
                               p.pp,
                               p.virtual_stages,
                               p.expert_tp(),
                               p.first_stage_layers,
                               p.last_stage_layers,
                               p.lm_head_stage()};
  auto it = layouts_.find({key, p.layout});
  if (it != layouts_.end()) return it->second.get();
  PLANNER_ASSIGN_OR_RETURN(ModelPartition part, ModelPartition::create(model_, p));
  auto l = std::make_unique<Layout>();
  for (int stage = 0; stage < p.pp; ++stage) {
    l->stages.push_back(stage_param_info(part, stage));
    for (int c = 0; c < part.chunks(); ++c) {
      std::array<int, kLayerKinds> counts{};
      const int first = part.first_layer(stage, c);
      for (int layer = first; layer < first + part.layers_per_chunk(stage, c); ++layer)
        ++counts[kind_index(model_.layer_kind(layer))];
      l->kinds.push_back(counts);
    }
  }
  const Layout* out = l.get();
  layouts_.emplace(std::pair{key, p.layout}, std::move(l));
  return out;
}

Result<const MemoryEstimator::InFlight*> MemoryEstimator::in_flight(const ParallelConfig& p,
                                                                    int microbatches) {
  const int m = schedule_microbatches(p.schedule, p.pp, microbatches);
  if (m < 1 || m > 0xffff || p.pp > 0xffff || p.virtual_stages > 0xffff) {
    return Status::invalid_input("memory estimator: " + std::to_string(m) + " micro-batches, " +
                                 std::to_string(p.pp) + " stages and " +
                                 std::to_string(p.virtual_stages) +
                                 " virtual stages are out of its range (1 to 65,535)");
  }
  const std::uint64_t key = pack(static_cast<std::uint64_t>(p.schedule) * 2 + (p.extra_warmup()),
                                 static_cast<std::uint64_t>(p.pp), static_cast<std::uint64_t>(m),
                                 static_cast<std::uint64_t>(p.virtual_stages));
  auto it = in_flight_.find(key);
  if (it != in_flight_.end()) return it->second.get();
  PLANNER_ASSIGN_OR_RETURN(
      PipelineSchedule sched,
      PipelineSchedule::create(p.schedule, p.pp, m, p.virtual_stages, p.extra_warmup()));
  auto f = std::make_unique<InFlight>();
  const Pass last = sched.split_backward() ? Pass::kWeight : Pass::kBackward;
  for (int stage = 0; stage < p.pp; ++stage) {
    std::vector<int> counts(static_cast<std::size_t>(p.virtual_stages), 0);
    std::vector<std::vector<int>> peaks;
    bool rising = false;  // a forward ran since the last decrease: the current counts may peak
    for (const PassItem& it2 : sched.stage(stage)) {
      if (it2.pass == Pass::kForward) {
        ++counts[static_cast<std::size_t>(it2.chunk)];
        rising = true;
      } else if (it2.pass == last) {
        if (rising) peaks.push_back(counts);
        rising = false;
        --counts[static_cast<std::size_t>(it2.chunk)];
      }
    }
    if (rising) peaks.push_back(counts);
    keep_maximal(peaks);
    f->stages.push_back(std::move(peaks));
  }
  const InFlight* out = f.get();
  in_flight_.emplace(key, std::move(f));
  return out;
}

Result<MemoryPeak> MemoryEstimator::peak(const ParallelConfig& p) {
  PLANNER_ASSIGN_OR_RETURN(const Layout* l, layout(p));
  PLANNER_ASSIGN_OR_RETURN(const InFlight* f, in_flight(p, microbatches_of(training_, p)));
  const Common c = common_terms(model_, training_, p, options_);
  const int chunks = p.virtual_stages;
  MemoryPeak out;
  out.capacity = gpu_.hbm;
  std::vector<double> weight(static_cast<std::size_t>(chunks));
  for (int stage = 0; stage < p.pp; ++stage) {
    StageMemory sm;
    fill_states(sm, l->stages[static_cast<std::size_t>(stage)], model_, p, c, options_);
    for (int ch = 0; ch < chunks; ++ch) {
      const auto& counts = l->kinds[static_cast<std::size_t>(stage * chunks + ch)];
      double w = 0;
      for (std::size_t k = 0; k < counts.size(); ++k) {
        if (counts[k] > 0) w += counts[k] * static_cast<double>(c.layer[k].raw());
      }
      if (stage == 0 && ch == 0) w += c.embedding_extra;
      if (stage == p.lm_head_stage() && ch == chunks - 1) w += c.head_extra;
      weight[static_cast<std::size_t>(ch)] = w;
    }
    double best = 0;
    for (const std::vector<int>& counts : f->stages[static_cast<std::size_t>(stage)]) {
      double total = 0;
      for (int ch = 0; ch < chunks; ++ch)
        total += counts[static_cast<std::size_t>(ch)] * weight[static_cast<std::size_t>(ch)];
      best = std::max(best, total);
    }
    sm.activations = saturated_bytes(best) + c.working_layer;
    const Bytes total = sm.total();
    if (total > out.bytes) {
      out.bytes = total;
      out.stage = stage;
      out.activations = sm.activations;
    }
  }
  out.fits = out.capacity.raw() == 0 || out.bytes <= out.capacity;
  return out;
}

}  // namespace planner
