// Per-rank memory: what one GPU of each pipeline stage holds at its peak, and whether it fits.
//
// Model states (Rajbhandari et al. 2020, "ZeRO", §3.1: mixed-precision Adam keeps 2 + 2 + 12 =
// 16 bytes per parameter: 16-bit weights and gradients, fp32 master weights, momentum and
// variance):
//   weights      params × param bytes (2 for bf16/fp16/fp8 training, 4 for fp32/tf32)
//   gradients    params × grad bytes (param bytes, or 4 with fp32 gradient accumulation)
//   optimizer    params × optimizer bytes: Adam/AdamW 12 (4 fp32 master + 8 moments; 8 when
//                training in fp32, the weights being the master copy); SGD with momentum 8 (4)
//   Expert weights: a rank holds experts / ep local experts, each split over etp (expert tensor
//   parallelism), and ZeRO shards them over the expert data parallel group, edp = tp × cp × dp /
//   (etp × ep) ranks (rank_grid.hpp); shared experts and the router are dense weights.
//   ZeRO shards over the data-parallel group (dp × cp for dense weights, expert data parallel
//   for experts): stage 1 the optimizer states, 2 also the gradients, 3 also the weights, which
//   are then gathered per layer (two layers' worth resident: the one in use and the prefetched).
//   Offload moves the optimizer states (and with params also the weight shards) to host memory.
//   A parameter-server plan keeps no optimizer state on the workers.
//
// Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
// Models", arXiv:2205.05198, §4): per layer and micro-batch, sequence s, micro-batch b, hidden h,
// heads a, tensor parallel t, in bytes with 16-bit activations:
//   no parallelism                    s·b·h·(34 + 5·a·s/h)
//   tensor parallel                   s·b·h·(10 + 24/t + 5·a·s/(h·t))
//   tensor + sequence parallel        s·b·h/t·(34 + 5·a·s/h)
//   selective recompute               the 5·a·s/h term (softmax, its dropout mask and output) is
//                                     recomputed and not stored (core_attn); the other
//                                     recompute modules drop their parts: layernorm the outputs
//                                     of the norms not fused into the next linear (MLA's and
//                                     an MoE block's), mla_up_proj MLA's Q, K and V, moe_act the
//                                     experts' activation output, mlp the dense MLP's
//                                     intermediates, moe everything of the MoE block but its input,
//                                     shared_experts the shared experts' intermediates; one layer's
//                                     dropped parts come back while it is recomputed
//   full recompute                    2·s·b·h per layer (its input; /t with SP), plus one layer's
//                                     full activations while that layer is recomputed
// The 34 is 11 (attention) + 19 (MLP) + 4 (two layer norms); planner computes it from the layer's
// shapes so GQA (K, V of kv_dim), gated MLPs (three ffn-sized tensors instead of two), MoE
// layers (router probabilities, the shared experts' MLP, and on the busiest expert-parallel rank
// (moe_routing.hpp) the dispatched tokens after the etp gather and the experts' intermediates,
// ffn / etp wide), multi-head latent attention (the down-projections' input, the q and kv latents
// before and after their norms, replicated over tp; Q and K of qk_head_dim, V and the output
// projection's input of v_head_dim, split) and Mamba-2 mixers (in_proj's input; its output, the
// convolved x|B|C, the scan output and the gated norm's output, split over tp; the fp32 chunk
// states, d_inner × N per chunk) follow the same accounting; for a GPT layer it is exactly
// Korthikanti's. Single-block layers of hybrid models store one norm input, not two. An MTP module
// adds, on the last stage, its block, its norms' and projection's inputs and another LM head's.
// Flash attention (flash_attention, the default, matching the lowering) never stores the s×s
// softmax: the 5·a·s/h term is dropped (its fp32 log-sum-exp, 4·a·s·b bytes, is ignored). Context
// parallelism divides s by cp (ring attention is block-wise, so no s×s term either). Korthikanti
// §4.3 extras: the first stage stores the embedding dropout mask (s·b·h/t with SP, 1 byte per
// element) per micro-batch in flight; the last stage the final norm and LM head inputs (2·s·b·h
// each, /t with SP) and the fp32 logits for the loss (4·s·b·V/t). Micro-batches in flight come from
// the schedule (schedule.hpp, peak_in_flight): 1F1B holds p − s on stage s, GPipe m, interleaving
// (p − s − 1)·2 + (v − 1)·p + 1 chunk-micro-batches of L/(p·v) layers, i.e. Korthikanti's factor 1
// + (p − 1)/(p·v) on the first stage; ZB-H1 counts a micro-batch until its weight-gradient pass (an
// upper bound: W needs only the GEMM inputs).
//
// Communication buffers: pipeline send and receive buffers (two activations), ZeRO-3 gathered
// layers are counted under weights, MoE all-to-all buffers (the busiest rank's dispatched tokens
// in and out), and
// context-parallel K/V ring buffers (two blocks). Framework overhead: CUDA context, cuBLAS and
// NCCL workspaces and allocator slack, an assumption of kDefaultFrameworkOverheadGiB (set it from
// measurements: it depends on the framework, NCCL channels and the number of communicators).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "planner/core/gpu_spec.hpp"
#include "planner/core/model_spec.hpp"
#include "planner/core/parallel_config.hpp"
#include "planner/core/status.hpp"
#include "planner/core/training_spec.hpp"
#include "planner/core/units.hpp"

namespace planner {

inline constexpr double kDefaultFrameworkOverheadGiB = 2.0;

// Bytes per parameter / element, by role, for a training setup.
struct PrecisionBytes {
  int param = 2;       // stored weights (fp8 training keeps 16-bit weights)
  int grad = 2;        // gradient accumulation buffer and the DP reduction
  int optimizer = 12;  // fp32 master (when not fp32 training) + optimizer moments
  int activation = 2;  // stored activations and p2p / collective payloads
};
PrecisionBytes precision_bytes(const TrainingSpec& training, bool fp32_grads = false);

struct MemoryOptions {
  Bytes framework_overhead = gibibytes(kDefaultFrameworkOverheadGiB);
  bool flash_attention = true;  // false: store the s×s softmax as Korthikanti's formula does
  bool fp32_grads = false;
};

// Korthikanti's per-layer activation bytes for one micro-batch of a layer of `kind`, with the
// options' attention kind; see the header.
Bytes layer_activation_bytes(const ModelSpec& model, const TrainingSpec& training,
                             const ParallelConfig& parallel, LayerKind kind,
                             const MemoryOptions& options = {});
// The same for an attention layer with a dense MLP, or an MoE one when `moe_layer`.
Bytes layer_activation_bytes(const ModelSpec& model, const TrainingSpec& training,
                             const ParallelConfig& parallel, bool moe_layer,
                             const MemoryOptions& options = {});

struct StageMemory {
  int stage = 0;
  std::int64_t params = 0;            // parameter elements held by one rank (before ZeRO sharding)
  std::int64_t embedding_params = 0;  // of which embedding / LM head / final norm
  Bytes weights;
  Bytes gradients;
  Bytes optimizer;
  Bytes activations;        // layer activations + extras
  Bytes layer_activations;  // Σ layers in flight × per-layer activations (Korthikanti's term)
  Bytes extra_activations;  // embedding mask, LM head inputs and logits, recompute working layer
  double layers_in_flight = 0;  // layer-micro-batches whose activations are held at the peak
  int microbatches_in_flight = 0;
  Bytes comm_buffers;
  Bytes overhead;
  Bytes host;  // offloaded to host memory (not counted in total)
  Bytes total() const {
    return weights + gradients + optimizer + activations + comm_buffers + overhead;
  }
};

struct MemoryReport {
  std::vector<StageMemory> stages;
  int peak_stage = 0;
  Bytes peak;
  Bytes capacity;  // the GPU's HBM; zero when no GPU was given
  bool fits = true;
};

// Fails with the reasons when check_parallel() rejects the combination.
Result<MemoryReport> estimate_memory(const ModelSpec& model, const TrainingSpec& training,
                                     const ParallelConfig& parallel, const GpuSpec& gpu,
                                     const MemoryOptions& options = {});

// The peak of a plan's per-stage memory, as estimate_memory() reports it.
struct MemoryPeak {
  int stage = 0;      // the stage with the largest total
  Bytes bytes;        // its total (StageMemory::total())
  Bytes activations;  // of which activations
  Bytes capacity;     // the GPU's HBM; zero when no GPU was given
  bool fits = true;
};

// Repeated memory estimates of one model and training setup on one GPU over many parallel configs
// (a sweep's memory pruning): peak() equals estimate_memory()'s peak stage and bytes (to a byte of
// rounding) without building a report. It caches what configs share: the parameters of every stage
// per (tp, ep, pp, virtual stages, etp), and per (schedule, pp, micro-batches, virtual stages) the
// micro-batch chunks a stage holds in flight at the moments that can be its peak. Schedules other
// than GPipe reach their steady state within kInFlightSaturation × pp micro-batches (1F1B holds
// at most pp − s, interleaving and ZB-H1 repeat a period of pp micro-batches after a warm-up
// shorter than 2·pp; tests/core/memory_test.cpp checks it), so their profile is computed with at
// most that many; the interleaved schedule with (kInFlightSaturation + 2) × pp + m mod pp, as its
// last group of p + m mod p micro-batches lengthens a warm-up that spans the groups of p before
// it. Not thread-safe: use one estimator per thread.
class MemoryEstimator {
 public:
  static constexpr int kInFlightSaturation = 2;

  MemoryEstimator(ModelSpec model, TrainingSpec training, GpuSpec gpu, MemoryOptions options = {});
  ~MemoryEstimator();
  MemoryEstimator(MemoryEstimator&&) noexcept;
  MemoryEstimator& operator=(MemoryEstimator&&) noexcept;

  // `parallel` must pass check_parallel() (the sweep enumerates valid configs); a partition or
  // schedule that cannot be built is an error.
  Result<MemoryPeak> peak(const ParallelConfig& parallel);

  // Micro-batches the in-flight profile of a schedule is computed with.
  static int schedule_microbatches(Schedule schedule, int stages, int microbatches);

 private:
  struct Layout;
  struct InFlight;
  Result<const Layout*> layout(const ParallelConfig& p);
  Result<const InFlight*> in_flight(const ParallelConfig& p, int microbatches);

  ModelSpec model_;
  TrainingSpec training_;
  GpuSpec gpu_;
  MemoryOptions options_;
  // (tp, ep, pp, vs, etp, first_stage_layers, last_stage_layers, lm_head_stage), layout
  std::map<std::pair<std::array<int, 8>, std::vector<int>>, std::unique_ptr<Layout>> layouts_;
  std::unordered_map<std::uint64_t, std::unique_ptr<InFlight>> in_flight_;
};

}  // namespace planner
