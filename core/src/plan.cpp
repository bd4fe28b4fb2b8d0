#include "planner/core/plan.hpp"

#include <algorithm>
#include <cstdio>

#include "planner/core/checked.hpp"
#include "planner/core/diagnostics.hpp"
#include "planner/core/limits.hpp"
#include "planner/core/model_partition.hpp"
#include "planner/core/rank_grid.hpp"
#include "planner/core/schedule.hpp"

namespace planner {
namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

std::int64_t Plan::num_microbatches() const {
  const std::int64_t per_step = static_cast<std::int64_t>(parallel.dp) * parallel.micro_batch_size;
  return per_step > 0 ? training.global_batch_size / per_step : 0;
}

void check_plan(const Plan& plan, Diagnostics& diag) {
  const ParallelConfig& p = plan.parallel;
  if (p.world_size() != plan.cluster.num_gpus()) {
    const auto world = checked_product({p.tp, p.cp, p.dp, p.pp});
    diag.add("/parallel", "tp x cp x dp x pp = " + str(p.tp) + " x " + str(p.cp) + " x " +
                              str(p.dp) + " x " + str(p.pp) + " = " +
                              (world ? str(*world) : std::string("more than 2^63")) +
                              ", but the cluster has " + str(plan.cluster.num_gpus()) +
                              " GPUs (nodes x gpus_per_node = " + str(plan.cluster.nodes) + " x " +
                              str(plan.cluster.gpus_per_node) + ")");
  }
  check_parallel(plan.model, plan.training, p, diag);
  if (!plan.gpu.name.empty() && !plan.gpu.supports(plan.training.precision)) {
    diag.add("/training/precision",
             plan.gpu.name + " has no " + std::string(to_string(plan.training.precision)) +
                 " support (no peak_tflops." + std::string(to_string(plan.training.precision)) +
                 " in its spec)");
  } else if (!plan.gpu.name.empty()) {
    if (std::string why = fp8_recipe_problem(plan.gpu, plan.training); !why.empty()) {
      diag.add("/training/fp8_recipe", std::move(why));
    }
  }
}

// MXFP8's block scales are a Blackwell tensor-core format: Transformer Engine refuses the recipe
// on earlier GPUs.
std::string fp8_recipe_problem(const GpuSpec& gpu, const TrainingSpec& training) {
  if (training.precision != Precision::kFp8 || training.fp8_recipe != Fp8Recipe::kMxfp8 ||
      gpu.arch.find("Blackwell") != std::string::npos) {
    return {};
  }
  return "mxfp8 needs a Blackwell GPU; " + gpu.name + " is " +
         (gpu.arch.empty() ? std::string("not one") : gpu.arch);
}

void check_parallel(const ModelSpec& m, const TrainingSpec& t, const ParallelConfig& p,
                    Diagnostics& diag) {
  const std::pair<const char*, std::int64_t> sizes[] = {{"tp", p.tp},
                                                        {"pp", p.pp},
                                                        {"dp", p.dp},
                                                        {"cp", p.cp},
                                                        {"ep", p.ep},
                                                        {"micro_batch_size", p.micro_batch_size},
                                                        {"virtual_stages", p.virtual_stages}};
  for (const auto& [name, value] : sizes) {
    if (value < 1) {
      diag.add(std::string("/parallel/") + name, "must be >= 1, got " + str(value));
      return;
    }
  }
  if (p.zero_stage < 0 || p.zero_stage > 3) {
    diag.add("/parallel/zero_stage", "must be 0, 1, 2 or 3, got " + str(p.zero_stage));
  }
  if (t.global_batch_size < 1 || t.seq_length < 1) {
    diag.add("/training", "global_batch_size and seq_length must be >= 1, got " +
                              str(t.global_batch_size) + " and " + str(t.seq_length));
    return;
  }
  if (m.heads % p.tp != 0) {
    diag.add("/parallel/tp", "must divide heads (" + str(m.heads) + "), got " + str(p.tp));
  } else if (m.kv_heads % p.tp != 0) {
    diag.add("/parallel/tp", "must divide kv_heads (" + str(m.kv_heads) + "), got " + str(p.tp));
  }
  bool dense_mlps = false;  // all-MoE models never use ffn_hidden
  for (int l = 0; l < m.num_layers && !dense_mlps; ++l)
    dense_mlps = m.layer_kind(l).ffn == FfnKind::kDense;
  if (dense_mlps && m.ffn_hidden % p.tp != 0) {
    diag.add("/parallel/tp",
             "must divide ffn_hidden (" + str(m.ffn_hidden) + "), got " + str(p.tp));
  }
  if (m.is_moe() && m.moe->shared_ffn() % p.tp != 0) {
    diag.add("/parallel/tp", "must divide the shared experts' ffn size (" +
                                 str(m.moe->shared_ffn()) + "), got " + str(p.tp));
  }
  if (m.mamba && (m.mamba->heads % p.tp != 0 || m.mamba->groups % p.tp != 0)) {
    diag.add("/parallel/tp",
             m.mamba->delta()
                 ? "must divide the Gated DeltaNet value heads (" + str(m.mamba->heads) +
                       ") and key heads (" + str(m.mamba->groups) + "), got " + str(p.tp)
                 : "must divide the Mamba-2 heads (" + str(m.mamba->heads) + ") and groups (" +
                       str(m.mamba->groups) + "), got " + str(p.tp));
  }
  if (m.vocab % p.tp != 0) {
    diag.add("/parallel/tp", "must divide vocab (" + str(m.vocab) +
                                 ") so the embedding splits evenly, got " + str(p.tp));
  }
  const std::int64_t chunks = static_cast<std::int64_t>(p.pp) * p.virtual_stages;
  if (!p.layout.empty()) {
    if (auto counts = stage_layer_counts(m.num_layers, p); !counts) {
      diag.add("/parallel/layout", counts.status().message());
    }
  } else if (p.schedule == Schedule::kDualPipeV && p.first_stage_layers == 0 &&
             p.last_stage_layers == 0) {
    // The V splits each stage's layers in two, the odd one to chunk 0.
    if (!stage_layer_counts(m.num_layers, p)) {
      std::string hint;
      if (const auto split = balanced_v_split(m.num_layers, p.pp)) {
        hint = "; uneven stages would work: first_stage_layers " + str(split->first) +
               ", last_stage_layers " + str(split->second);
      }
      diag.add("/parallel/pp",
               std::string(p.dualpipe ? "under dualpipe pp / 2 (" : "under dualpipev pp (") +
                   str(p.pp) + ") must divide layers (" + str(m.num_layers) + "), each " +
                   (p.dualpipe ? "pair of mirrored ranks" : "stage") + " holding 2 or more" + hint);
    }
  } else if (p.first_stage_layers == 0 && p.last_stage_layers == 0) {
    if (m.num_layers % chunks != 0) {
      std::string hint;
      if (const auto split = balanced_stage_split(m.num_layers, p.pp, p.virtual_stages)) {
        hint = "; uneven stages would work: first_stage_layers " + str(split->first) +
               ", last_stage_layers " + str(split->second);
      } else if (const auto layout =
                     p.virtual_stages > 1
                         ? balanced_layout(m.num_layers, p.pp, p.virtual_stages, lm_head_units(m))
                         : std::nullopt) {
        hint = "; chunks of unequal size would work: layout \"" +
               pipeline_layout_text(*layout, m.mtp_layers) + "\"";
      }
      diag.add("/parallel/pp", "pp x virtual_stages (" + str(p.pp) + " x " + str(p.virtual_stages) +
                                   " = " + str(chunks) + ") must divide layers (" +
                                   str(m.num_layers) + ")" + hint);
    }
  } else if (auto counts = stage_layer_counts(m.num_layers, p); !counts) {
    diag.add(
        p.first_stage_layers > 0 ? "/parallel/first_stage_layers" : "/parallel/last_stage_layers",
        counts.status().message());
  }
  const std::int64_t per_step = static_cast<std::int64_t>(p.dp) * p.micro_batch_size;
  if (per_step > 0 && t.global_batch_size % per_step != 0) {
    // DualPipe feeds half the micro-batches from each end: 2 x its written dp.
    diag.add("/training/global_batch_size",
             std::string("must be a multiple of ") + (p.dualpipe ? "2 x " : "") +
                 "dp x micro_batch_size (" + (p.dualpipe ? "2 x " : "") + str(p.written_dp()) +
                 " x " + str(p.micro_batch_size) + " = " + str(per_step) + "), got " +
                 str(t.global_batch_size));
  }
  if (p.cp > 1 && t.seq_length % (2 * p.cp) != 0) {
    diag.add("/training/seq_length", "must be divisible by 2 x cp (" + str(2 * p.cp) +
                                         ") for load-balanced context parallelism, got " +
                                         str(t.seq_length));
  }
  // One layer's activations for one micro-batch grow with tokens x widths (and the unfused
  // softmax with heads x s^2 x b): an upper bound in floating point keeps every byte count of
  // the memory estimate exact in 64 bits (limits::kMaxActivationBytes).
  {
    const double s = static_cast<double>(t.seq_length) / static_cast<double>(p.cp);
    const double tokens = s * static_cast<double>(p.micro_batch_size);
    double ffn = static_cast<double>(m.ffn_hidden);
    double routed = 1;
    double experts = 0;
    if (m.moe) {
      ffn = std::max(ffn, static_cast<double>(m.moe->expert_ffn_hidden));
      routed = std::max(1.0, m.moe->top_k * m.moe->capacity_factor);
      experts = m.moe->num_experts;
    }
    const double widths = static_cast<double>(m.hidden) + static_cast<double>(m.q_dim()) +
                          2.0 * static_cast<double>(m.kv_dim()) + 3.0 * ffn * routed + experts +
                          static_cast<double>(m.vocab);
    const double bound = 16.0 * tokens * widths + 5.0 * m.heads * s * tokens;
    if (bound > static_cast<double>(limits::kMaxActivationBytes)) {
      char text[240];
      std::snprintf(text, sizeof text,
                    "a micro-batch of %lld x %lld tokens (micro_batch_size x seq_length / cp) "
                    "holds up to %.2g bytes of activations per layer, more than the %.2g planner "
                    "can account for",
                    static_cast<long long>(p.micro_batch_size), static_cast<long long>(s), bound,
                    static_cast<double>(limits::kMaxActivationBytes));
      diag.add("/training/seq_length", text);
    }
  }
  if (m.position_embedding == PositionEmbedding::kLearned && m.max_seq_len > 0 &&
      t.seq_length > m.max_seq_len) {
    diag.add("/training/seq_length",
             "exceeds the model's learned position embeddings (max_seq_len " + str(m.max_seq_len) +
                 "), got " + str(t.seq_length));
  }
  if (p.ep > 1 && !m.is_moe()) {
    diag.add("/parallel/ep", "expert parallelism needs an MoE model, got ep " + str(p.ep) +
                                 " for dense model " + m.name);
  } else if (p.ep > 1 && m.moe->num_experts % p.ep != 0) {
    diag.add("/parallel/ep", "must divide the number of experts (" + str(m.moe->num_experts) +
                                 "), got " + str(p.ep));
  }
  if (p.etp < 0) {
    diag.add("/parallel/etp", "must be >= 1, got " + str(p.etp));
  } else if (p.etp > 0 && p.etp != p.tp && !m.is_moe()) {
    diag.add("/parallel/etp", "expert tensor parallelism needs an MoE model, got etp " +
                                  str(p.etp) + " for dense model " + m.name);
  } else if (m.is_moe()) {
    const std::int64_t etp = p.expert_tp();
    const std::int64_t stage = static_cast<std::int64_t>(p.tp) * p.cp * p.dp;
    if (stage % (etp * p.ep) != 0) {
      diag.add(p.etp > 0 ? "/parallel/etp" : "/parallel/ep",
               "etp x ep (" + str(etp) + " x " + str(p.ep) + ") must divide tp x cp x dp (" +
                   str(stage) +
                   "): the MoE layers regroup each pipeline stage's ranks as etp x ep "
                   "x expert data parallel");
    } else if (m.moe->expert_ffn_hidden % etp != 0) {
      diag.add(p.etp > 0 ? "/parallel/etp" : "/parallel/tp", "must divide the experts' ffn size (" +
                                                                 str(m.moe->expert_ffn_hidden) +
                                                                 "), got " + str(etp));
    } else {
      auto dense = RankGrid::dense(p);
      auto expert = RankGrid::expert(p);
      if (dense && expert && !RankGrid::same_stages(*dense, *expert)) {
        diag.add("/parallel/order",
                 "puts ranks on different pipeline stages in the dense and the expert grid (cp "
                 "folds into expert data parallelism); keep pp outside tp, cp, ep and dp, got \"" +
                     p.order + "\"");
      }
    }
  }
  if (!m.is_moe()) {
    if (p.moe_imbalance != 1.0) {
      diag.add("/parallel/moe_imbalance",
               "routing imbalance needs an MoE model, got " + std::to_string(p.moe_imbalance));
    }
    if (p.moe_capacity_factor >= 0 || p.moe_pad_to_capacity || p.moe_fp8_dispatch ||
        p.moe_a2a != MoeA2a::kNccl || p.moe_a2a_overlap) {
      diag.add("/parallel",
               "moe_capacity_factor, moe_pad_to_capacity, moe_fp8_dispatch, moe_a2a and "
               "moe_a2a_overlap need an MoE model");
    }
  } else {
    if (p.moe_a2a_overlap && p.ep < 2) {
      diag.add("/parallel/moe_a2a_overlap",
               "overlaps the expert-parallel all-to-alls, so it needs ep > 1, got ep " +
                   std::to_string(p.ep));
    }
    if (p.moe_a2a_overlap && p.schedule == Schedule::kDualPipeV) {
      diag.add("/parallel/moe_a2a_overlap",
               "the dualpipev schedule merges its forward and backward chunks by itself; leave "
               "moe_a2a_overlap off");
    } else if (p.moe_a2a_overlap && !merges_forward_backward(p.schedule, p.pp)) {
      diag.add("/parallel/moe_a2a_overlap",
               "merges the passes of the interleaved schedule, or of 1f1b with pp 1 (merged "
               "1F1B passes would wait on each other stage by stage), got " +
                   std::string(to_string(p.schedule)) + " with pp " + std::to_string(p.pp));
    }
    if (p.moe_imbalance < 1.0) {
      diag.add("/parallel/moe_imbalance",
               "is the hottest expert's load over the mean, so >= 1, got " +
                   std::to_string(p.moe_imbalance));
    }
    const double cf = p.moe_capacity_factor >= 0 ? p.moe_capacity_factor : m.moe->capacity_factor;
    if (p.moe_pad_to_capacity && cf <= 0) {
      diag.add("/parallel/moe_pad_to_capacity",
               "padding to capacity needs a capacity factor; the routing is dropless");
    }
  }
  if (m.sliding_window > 0 && p.cp > 1 && m.sliding_window > t.seq_length / (2 * p.cp)) {
    diag.add("/parallel/cp", "local attention over " + str(m.sliding_window) +
                                 " tokens needs chunks of at least that many with context "
                                 "parallelism (seq_length / (2 x cp) = " +
                                 str(t.seq_length / (2 * p.cp)) + ")");
  }
  if (p.sequence_parallel && p.tp == 1) {
    diag.add("/parallel/sequence_parallel",
             "needs tp > 1 (it shards activations inside the tp group)");
  }
  if (p.tp_comm_overlap && !p.sequence_parallel) {
    diag.add("/parallel/tp_comm_overlap",
             "needs sequence_parallel (Transformer Engine's userbuffers overlap the "
             "sequence-parallel all-gathers and reduce-scatters with their GEMMs)");
  }
  if (p.schedule == Schedule::kInterleaved) {
    if (p.virtual_stages < 2) {
      diag.add("/parallel/virtual_stages",
               "the interleaved schedule needs virtual_stages >= 2, got " + str(p.virtual_stages));
    }
    if (p.pp < 2) diag.add("/parallel/schedule", "the interleaved schedule needs pp >= 2");
    const std::int64_t mb = t.global_batch_size / per_step;
    if (p.pp > 1 && mb > 0 && mb < p.pp) {
      diag.add("/parallel/schedule", "the interleaved schedule needs num_microbatches (" + str(mb) +
                                         ") to be at least pp (" + str(p.pp) + ")");
    }
  } else if (p.schedule == Schedule::kDualPipeV) {
    if (p.virtual_stages != 2) {
      diag.add("/parallel/virtual_stages",
               "the " + std::string(schedule_name(p)) +
                   " schedule runs 2 model chunks per stage (a V), got virtual_stages " +
                   str(p.virtual_stages));
    }
    if (p.pp < 2) {
      diag.add("/parallel/schedule", p.dualpipe ? "the dualpipe schedule needs pp >= 4 (dualpipev, "
                                                  "its cut-in-half form, needs 2 stages)"
                                                : "the dualpipev schedule needs pp >= 2");
    }
    // DualPipe's written micro-batches are twice its cut-in-half form's, as are its pp and the
    // bound (DualPipe's own: at least 2 x its ranks).
    const std::int64_t mb = t.global_batch_size / per_step * (p.dualpipe ? 2 : 1);
    if (p.pp > 1 && mb > 0 && mb < 2 * p.written_pp()) {
      diag.add("/parallel/schedule",
               "the " + std::string(schedule_name(p)) + " schedule needs num_microbatches (" +
                   str(mb) + ") to be at least 2 x pp (" + str(2 * p.written_pp()) + ")");
    }
  } else if (p.virtual_stages != 1) {
    diag.add("/parallel/virtual_stages", "only the interleaved schedule uses virtual stages; got " +
                                             str(p.virtual_stages) + " with " +
                                             std::string(to_string(p.schedule)));
  }
  if (p.dp_sync == DpSync::kParameterServer) {
    if (p.param_servers < 1) {
      diag.add("/parallel/param_servers", "dp_sync parameter-server needs param_servers >= 1");
    }
    if (p.zero_stage != 0) {
      diag.add("/parallel/zero_stage",
               "ZeRO shards state over data-parallel ranks and cannot be "
               "combined with parameter servers; got zero_stage " +
                   str(p.zero_stage));
    }
  } else if (p.param_servers != 0) {
    diag.add("/parallel/param_servers",
             "only used with dp_sync parameter-server, got " + str(p.param_servers));
  }
  if (per_step > 0 && t.global_batch_size < per_step) {
    diag.add("/training/global_batch_size", "must be at least dp x micro_batch_size (" +
                                                str(per_step) + ") for one micro-batch, got " +
                                                str(t.global_batch_size));
  }
  if (p.sequence_parallel && p.tp > 1 && (t.seq_length / p.cp) % p.tp != 0) {
    diag.add("/training/seq_length", "with sequence parallelism the sequence per cp rank (" +
                                         str(t.seq_length / p.cp) + ") must be divisible by tp (" +
                                         str(p.tp) + ")");
  }
  if (m.is_moe() && p.tp > 1 && !p.sequence_parallel) {
    diag.add("/parallel/sequence_parallel",
             "an MoE model with tp > 1 needs sequence parallelism (as Megatron-core requires for "
             "its token dispatcher)");
  }
  if (p.offload == Offload::kOptimizerAndParams && p.zero_stage != 3) {
    diag.add("/parallel/offload",
             "offloading parameters needs zero_stage 3 (they are gathered "
             "per layer), got zero_stage " +
                 str(p.zero_stage));
  }
}

}  // namespace planner
