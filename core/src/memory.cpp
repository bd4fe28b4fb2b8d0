#include "planner/core/memory.hpp"

#include <algorithm>
#include <cmath>

#include "planner/core/diagnostics.hpp"
#include "planner/core/model_partition.hpp"
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

struct Activations {
  double split = 0;      // bytes sharded over tp by tensor parallelism itself
  double unsplit = 0;    // bytes replicated over tp unless sequence parallelism shards them
  double quadratic = 0;  // the softmax term (5·a·s²·b), tp-split
};

// Korthikanti et al.'s per-layer accounting, generalised to the layer's actual shapes.
Activations layer_terms(const ModelSpec& m, double s, double b, double e, bool moe) {
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.q_dim());
  const double kv = static_cast<double>(m.kv_dim());
  Activations a;
  // Attention: QKV input, dropout mask | Q, K, V, output-projection input.
  a.unsplit += e * s * b * h + kMaskBytes * s * b * h;
  a.split += e * s * b * (q + kv + kv + q);
  // softmax output (2), its dropout mask (1) and dropout output (2) per head: 5·a·s²·b.
  a.quadratic = 5.0 * static_cast<double>(m.heads) * s * s * b;
  const bool gated = m.mlp != MlpKind::kGelu;
  const double ffn_tensors = gated ? 3.0 : 2.0;  // (gate, up,) activation output
  if (moe) {
    const double routed = static_cast<double>(m.moe->top_k) * m.moe->capacity_factor;
    const double f = static_cast<double>(m.moe->expert_ffn_hidden);
    a.unsplit += e * s * b * h + kMaskBytes * s * b * h;                        // MLP input, mask
    a.unsplit += kFp32Bytes * s * b * static_cast<double>(m.moe->num_experts);  // router probs
    a.unsplit += e * routed * s * b * h;                                        // dispatched tokens
    a.split += e * routed * s * b * f * ffn_tensors;
  } else {
    const double f = static_cast<double>(m.ffn_hidden);
    a.unsplit += e * s * b * h + kMaskBytes * s * b * h;
    a.split += e * s * b * f * ffn_tensors;
  }
  a.unsplit += 2.0 * e * s * b * h;  // inputs of the two norms
  return a;
}

double combine(const Activations& a, double t, bool sp, bool quadratic) {
  return (sp ? a.unsplit / t : a.unsplit) + a.split / t + (quadratic ? a.quadratic / t : 0.0);
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
                             const ParallelConfig& p, bool moe_layer,
                             const MemoryOptions& options) {
  const double s = static_cast<double>(training.seq_length) / p.cp;
  const double b = static_cast<double>(p.micro_batch_size);
  const double e = precision_bytes(training, options.fp32_grads).activation;
  const double t = p.tp;
  const bool sp = p.sequence_parallel && p.tp > 1;
  if (p.recompute == Recompute::kFull) {
    const double input = e * s * b * static_cast<double>(m.hidden);
    return Bytes(std::llround(sp ? input / t : input));
  }
  const bool quadratic = !options.flash_attention && p.cp == 1 && p.recompute == Recompute::kNone;
  return Bytes(std::llround(combine(layer_terms(m, s, b, e, moe_layer), t, sp, quadratic)));
}

Result<MemoryReport> estimate_memory(const ModelSpec& m, const TrainingSpec& training,
                                     const ParallelConfig& p, const GpuSpec& gpu,
                                     const MemoryOptions& options) {
  Diagnostics diag("memory of " + (m.name.empty() ? std::string("model") : m.name));
  check_parallel(m, training, p, diag);
  if (!diag.empty()) return diag.to_status();
  PLANNER_ASSIGN_OR_RETURN(ModelPartition part, ModelPartition::create(m, p));
  const int microbatches = static_cast<int>(training.global_batch_size /
                                            (static_cast<std::int64_t>(p.dp) * p.micro_batch_size));
  PLANNER_ASSIGN_OR_RETURN(
      PipelineSchedule sched,
      PipelineSchedule::create(p.schedule, p.pp, microbatches, p.virtual_stages));
  const PrecisionBytes pb = precision_bytes(training, options.fp32_grads);
  const double t = p.tp;
  const bool sp = p.sequence_parallel && p.tp > 1;
  const double s = static_cast<double>(training.seq_length) / p.cp;
  const double b = static_cast<double>(p.micro_batch_size);
  const double h = static_cast<double>(m.hidden);
  const double e = pb.activation;
  const std::int64_t dense_shard = static_cast<std::int64_t>(p.dp) * p.cp;
  const std::int64_t expert_shard = dense_shard / p.ep;
  const bool ps = p.dp_sync == DpSync::kParameterServer;

  const Bytes dense_layer = layer_activation_bytes(m, training, p, false, options);
  const Bytes moe_layer = layer_activation_bytes(m, training, p, true, options);
  // One layer's full activations while it is recomputed (full recompute).
  ParallelConfig no_recompute = p;
  no_recompute.recompute = Recompute::kNone;
  const Bytes working_layer =
      p.recompute == Recompute::kFull
          ? std::max(layer_activation_bytes(m, training, no_recompute, false, options),
                     m.is_moe() ? layer_activation_bytes(m, training, no_recompute, true, options)
                                : Bytes(0))
          : Bytes(0);
  const double seq_shard = sp ? t : 1.0;
  const double embedding_extra = kMaskBytes * s * b * h / seq_shard;
  const double head_extra =
      2.0 * e * s * b * h / seq_shard + kFp32Bytes * s * b * static_cast<double>(m.vocab) / t;

  MemoryReport report;
  report.capacity = gpu.hbm;
  for (int stage = 0; stage < p.pp; ++stage) {
    StageMemory sm;
    sm.stage = stage;
    const RankParams rp = part.rank_params(stage);
    sm.params = rp.total();
    sm.embedding_params = rp.embedding;
    const std::int64_t shard =
        (rp.dense + dense_shard - 1) / dense_shard + (rp.expert + expert_shard - 1) / expert_shard;
    // Largest layer on this stage (ZeRO-3 gathers it).
    std::int64_t largest_layer = 0;
    for (int c = 0; c < part.chunks(); ++c) {
      std::int64_t current = 0;
      int layer = OpId::kNone;
      for (const ParamTensor& pt : part.chunk_params(stage, c)) {
        if (pt.layer != layer) {
          largest_layer = std::max(largest_layer, current);
          current = 0;
          layer = pt.layer;
        }
        current += pt.elements;
      }
      largest_layer = std::max(largest_layer, current);
    }
    const std::int64_t held_params = p.zero_stage >= 3 ? shard : sm.params;
    const Bytes param_bytes(held_params * pb.param);
    if (p.offload == Offload::kOptimizerAndParams) {
      sm.host += param_bytes;
      sm.weights = Bytes(kZero3GatheredLayers * largest_layer * pb.param);
    } else {
      sm.weights =
          param_bytes +
          (p.zero_stage >= 3 ? Bytes(kZero3GatheredLayers * largest_layer * pb.param) : Bytes(0));
    }
    sm.gradients = Bytes((p.zero_stage >= 2 ? shard : sm.params) * pb.grad);
    const Bytes optimizer((p.zero_stage >= 1 ? shard : sm.params) * pb.optimizer);
    if (ps) {
      // Parameter servers hold the optimizer state.
    } else if (p.offload != Offload::kNone) {
      sm.host += optimizer;
    } else {
      sm.optimizer = optimizer;
    }

    // Activations at the schedule's peak.
    auto chunk_layers = [&](int chunk) {
      double bytes = 0;
      const int first = part.first_layer(stage, chunk);
      for (int l = first; l < first + part.layers_per_chunk(); ++l) {
        bytes += static_cast<double>((m.is_moe_layer(l) ? moe_layer : dense_layer).raw());
      }
      return bytes;
    };
    auto chunk_extra = [&](int chunk) {
      return (part.has_embedding(stage, chunk) ? embedding_extra : 0.0) +
             (part.has_lm_head(stage, chunk) ? head_extra : 0.0);
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
      cur_layer_count += sign * part.layers_per_chunk();
      cur_mb += static_cast<int>(sign);
      if (sign > 0 && cur_layers + cur_extra > best_total) {
        best_total = cur_layers + cur_extra;
        best_layers = cur_layers;
        best_extra = cur_extra;
        best_count = cur_layer_count;
        best_mb = cur_mb;
      }
    }
    sm.layer_activations = Bytes(std::llround(best_layers));
    sm.extra_activations = Bytes(std::llround(best_extra)) + working_layer;
    sm.activations = sm.layer_activations + sm.extra_activations;
    sm.layers_in_flight = best_count;
    sm.microbatches_in_flight = best_mb;

    // Communication buffers.
    double comm = 0;
    if (p.pp > 1) comm += kP2pBuffers * e * s * b * h / seq_shard;
    if (p.cp > 1) {
      comm += kP2pBuffers * 2.0 * e * b * s * static_cast<double>(m.kv_dim()) / t;
    }
    if (m.is_moe() && p.ep > 1) {
      comm += 2.0 * e * s * b * h / seq_shard * m.moe->top_k * m.moe->capacity_factor;
    }
    if (p.zero_stage >= 3) comm += static_cast<double>(largest_layer * pb.grad);
    sm.comm_buffers = Bytes(std::llround(comm));
    sm.overhead = options.framework_overhead;
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

}  // namespace planner
