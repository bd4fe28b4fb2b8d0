// Accuracy against published runs: every record of a published-runs file (core/published_run.hpp)
// that planner can model is simulated and compared with what its source measured.
//
// Per record (map_published_run):
//   GPU       the record's hardware.gpu text up to its parenthesised remark, as a GPU preset name
//             or alias; a bare family name ("A100-SXM4", no memory size) takes the family's variant
//             with the least HBM (every published batch fits it), and the report says so; else the
//             presets its words name, vendor words dropped ("NVIDIA A100 40GB": a memory size picks
//             the variant; a PCIe card only a PCIe preset). Texts
//             naming a part no preset describes (TPUs, V100-SXM3 in DGX-2H servers, which run it
//             at 450 W and higher clocks) are skipped with the reason. "B200 in GB200 NVL72" is the
//             GPU as a system holds it: the GPU preset named after the system (GB200) when it
//             holds that GPU (GB200-B200-186GB).
//   topology  the built-in topology preset that best matches the record's GPU and interconnect
//             text: presets with the record's GPU, or with a GPU of the same family (their GPU is
//             then replaced by the record's, the node layout being the same), and the record's GPUs
//             per node; scored by the scale-out link technology the text names (HDR, NDR, EDR,
//             RoCE, EFA: +2) and the preset's name and alias tokens it contains (+1 each, "dgx",
//             "selene"); ties go to the preset with the record's exact GPU, then catalogue order.
//             A rack's NVLink domain stated as its GPUs per node (72) is that rack. Where the
//             inter-node text states the network in numbers ("4 x 100 Gb/s Omni-Path") that the
//             preset's nodes do not have, a topology of those numbers instead (as the hardware
//             number fields build one). Nodes = ⌈num_gpus / GPUs per node⌉. The profile is the
//             first of AccuracyOptions::profiles that describes the GPU, else the built-in one.
//   model     layers, hidden, heads, kv_heads (null: multi-head), ffn_hidden, seq_len and vocab
//             from the record; the structure (MLP, norm, position embedding, tied embeddings,
//             biases; vocab when null) from a model preset of the same shape when there is one,
//             else from the name's family (Llama, Mistral, Mixtral, Qwen, DeepSeek, InternLM,
//             Baichuan, Granite: SwiGLU, RMSNorm, RoPE, untied, no biases; OLMo the same with
//             LayerNorm; Gemma: GeGLU; MPT: GeLU, LayerNorm, ALiBi, tied, no biases; BLOOM the
//             same with biases; Falcon: GeLU, LayerNorm, RoPE, tied; Pythia, NeoX: GeLU, RoPE,
//             untied, biases; OPT: learned positions, tied, biases; Nemotron: squared ReLU;
//             otherwise GPT: GeLU, LayerNorm, learned positions, tied, biases). A vocabulary tp
//             does not divide is padded to a multiple of 128·tp as Megatron-LM does.
//             A mixture-of-experts record (experts > 1) takes the whole structure of the MoE
//             preset of its shape (layers, hidden, heads, kv_heads, ffn_hidden and vocab when
//             stated, experts, top_k, expert_ffn_hidden, shared_experts × expert_ffn_hidden as the
//             shared FFN): dense first layers, MLA, Mamba-2 mixers and layer pattern, router;
//             its MTP module unless the notes say "w/o MTP" / "no MTP". A preset of the same
//             layers, attention and experts whose dense FFN width, vocabulary or shared experts
//             differ from the record's is the same model described differently: its structure,
//             the record's vocabulary, the differences noted. No preset of the shape:
//             built from the record's fields and the config keys its notes quote (head_dim, MLA
//             ranks, first_k_dense_replace, hybrid_override_pattern, ...; moe_record_model.hpp),
//             the common MoE transformer's structure where they say nothing; a field neither
//             gives (a vocabulary without a preset of the family, a dense width for dense
//             layers) skips the record, naming it.
//   training  global batch and sequence length from the record; precision from its text (fp8,
//             bf16, fp16, tf32, fp32; the FP8 recipe it names first, MXFP8, blockwise,
//             per-tensor current or delayed scaling, else delayed: the plan's fp8_recipe, which
//             sets the quantization's bytes; every recipe's GEMMs run at the FP8 GEMM rate);
//             Adam.
//   parallel  published fields are kept. cp null is 1 and dp null is num_gpus / (tp·pp·cp) when
//             the GPU count says so; tp or pp missing skips the record, and so does the global
//             batch missing, except where the record publishes only a rate (TFLOP/s, MFU,
//             tokens/s) with pp 1: 8 sequences per data-parallel replica, the rate depending on
//             the batch only through the optimizer step's share (arXiv:1909.08053's single-GPU
//             baseline). Null
//             fields with a choice are chosen the way the planner chooses: every combination of
//             the candidates below is simulated and the fastest that fits in memory wins (when
//             none fits, the one needing the least memory is simulated anyway and flagged):
//               micro_batch     powers of two dividing global_batch / dp
//               virtual_stages  1 (1F1B) and, where the stack runs the interleaved schedule
//                               (stack_runs: not DeepSpeed's PipelineEngine), every v ≥ 2 whose
//                               chunks split the layers (evenly, or with the balanced uneven
//                               split below), and 2 and 4 in chunks of unequal size where only
//                               the balanced layout holds them
//               uneven stages   when pp does not divide the layers and the record states no
//                               first_stage_layers / last_stage_layers: the balanced split,
//                               the embedding and the loss counted as a layer each (Llama 3
//                               405B's 126 layers on pp 16: 7 + 14 × 8 + 7)
//               sp              false, true (tp > 1)
//               zero_stage      0, 1 (the distributed optimizer)
//               recompute       full when the FLOP convention counts a recompute forward
//                               (Megatron eq. (3) assumes it), else none, selective, full
//             A stated virtual_stages whose pp·v chunks cannot hold the layers in equal chunks
//             (Megatron-core's --pipeline-model-parallel-layout chunks of unequal size) becomes
//             the largest v that splits, said in the assumptions.
//             ep null is 1 for dense models. MoE records: ep null is chosen like the fields
//             above (every divisor of the experts that etp·ep fits in the stage's tp·cp·dp
//             ranks); etp null is tp (Megatron-core's default); etp·ep that does not divide
//             tp·cp·dp skips the record (the fields contradict each other). Unknown keys in the
//             model, hardware or parallel sections skip the record (planner cannot tell what they
//             change).
//   routing   MoE records, from the id and notes: token dropping ("tokendrop", "token drop", not
//             "token-dropless") takes the stated --moe-expert-capacity-factor (padded when
//             --moe-pad-expert-input-to-capacity is stated), else 1.0 padded (NeMo's and
//             Megatron-Bridge's token-drop defaults); otherwise dropless. Imbalance 1 (balanced):
//             the report says whether the benchmark force-balanced the routing
//             (--moe-router-force-load-balancing, "fake balanced gate", NVIDIA's footnotes).
//   placement a job larger than the topology's rack-scale NVLink domain (GB200 / GB300 NVL72) is
//             placed in equal blocks of whole nodes, one per rack: the largest block of at most
//             the rack's nodes that divides the job's nodes (Slurm --segment), so that
//             power-of-two parallel groups do not straddle racks.
//   software  stack, attention kernel and overlaps as the record states them (`stack`,
//             `attention`, `overlap`); only a field the record leaves out is inferred, and the
//             report marks it inferred with the reason:
//               stack      the text (source, notes, precision) names Megatron-DeepSpeed, NeMo or
//                          Megatron-Bridge (NeMo AutoModel: fsdp), DeepSpeed, FSDP /
//                          TorchTitan / Composer / llm-foundry; Megatron before 2023 is
//                          megatron-lm, later megatron-core; nothing named: megatron-core
//                          (the default stack)
//               attention  the text names FlashAttention: flash; megatron-lm and
//                          megatron-deepspeed: fused-softmax (flash attention was opt-in);
//                          other records dated (run_year()) before 2022, when FlashAttention
//                          was released (Dao et al., arXiv:2205.14135): unfused; else flash
//               overlap    grad_reduce and param_gather false for megatron-lm (gradients
//                          all-reduced after the backward pass until Megatron-core's
//                          --overlap-grad-reduce, 2023) and megatron-deepspeed (DeepSpeed's
//                          PipelineEngine reduces after the last backward, _exec_reduce_grads);
//                          true for the others. tp_comm as stated, else the stack's
//                          (overlaps_tp_comm: nemo), applied where tp > 1 with sequence
//                          parallelism (ParallelConfig::tp_comm_overlap); p2p is reported when
//                          stated, the simulator does not model that overlap yet.
//             The simulator runs flash-style kernels (flash, flash2, flash3, cudnn) as
//             AttentionKernel::kFlash, fused-softmax as kFusedSoftmax and unfused as kUnfused.
//   published the step time the comparison is made on (PublishedBasis): measured.step_time_s;
//             else derived.step_time_s; else the global batch's tokens over tokens/s (measured,
//             or tokens/s per GPU × GPUs); else the record's FLOPs per step under its convention
//             (core/flops.hpp: Megatron eq. (3), Megatron / NeMo model FLOPs, MosaicML, PaLM)
//             over TFLOP/s per GPU × GPUs; else those FLOPs over MFU × the GPU's dense 16-bit peak
//             (the peak MFU conventions quote, also for FP8 runs) × GPUs; MFU whose record names
//             no convention is MFU as PaLM defined it (6N + attention per token), and says so. A
//             record with none of these, or only TFLOP/s under an unknown convention, is skipped.
// Error = (predicted − published) / published step time; MAPE = mean |error| over the modelled
// records, overall and per GPU type (the GPU preset); bias = mean signed error. Records of one
// configuration measured more than once bound the MAPE any prediction can reach on them
// (RepeatedConfigurations).
//
// The simulations run on `threads` threads; results do not depend on the thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "planner/core/catalog.hpp"
#include "planner/core/hardware_profile.hpp"
#include "planner/core/host_model.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/published_run.hpp"
#include "planner/core/software_stack.hpp"
#include "planner/core/status.hpp"
#include "planner/sim/compute_model.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topo/topology_catalog.hpp"

namespace planner::fit {

// Where the published step time of a record comes from (see the header).
enum class PublishedBasis { kStepTime, kDerivedStepTime, kTokensPerSecond, kTflopsPerGpu, kMfu };

// A value the record did not publish (or published as free text) and planner chose or derived.
struct ChosenField {
  std::string field;  // "/parallel/micro_batch", "gpu", "topology", "attention", ...
  std::string value;
  std::string reason;
};

// One software field of a record (stack, attention, overlap/...): stated by the record or
// inferred.
struct SoftwareField {
  std::string field;  // "stack", "attention", "overlap/grad_reduce", ...
  std::string value;
  bool stated = false;
  std::string reason;  // inferred: why; stated: empty, or what planner does with it
};

// The software a record ran, resolved.
struct SoftwareSetup {
  SoftwareStack stack = SoftwareStack::kMegatronCore;
  AttentionImpl attention = AttentionImpl::kFlash;
  OverlapSpec overlap;  // grad_reduce and param_gather always set
  std::vector<SoftwareField> fields;
  std::string source;  // the record's software_source
};

// Resolves a record's stack, attention kernel and overlaps (see the header).
SoftwareSetup resolve_software(const PublishedRun& run);

// The published step time of a record for `plan` (its model, GPU and batch as mapped) and how it
// was obtained; kInvalidInput when the record gives nothing to compare with.
struct PublishedStep {
  double seconds = 0;
  PublishedBasis basis = PublishedBasis::kStepTime;
  std::string how;
};
Result<PublishedStep> published_step(const PublishedRun& run, const Plan& plan,
                                     FlopConvention convention);

// A record mapped onto planner's presets, with the candidates for its null fields.
struct RunSetup {
  Plan plan;  // model, GPU, cluster, training; parallel holds the published fields
  topo::TopologySpec topology;
  int nodes = 0;
  std::shared_ptr<const HardwareProfile> profile;
  std::string source;  // source_key()
  SoftwareSetup software;
  sim::AttentionKernel attention = sim::AttentionKernel::kFlash;
  HostCosts host;  // the host model of the run's stack (host_model.hpp)
  FlopConvention convention = FlopConvention::kUnknown;
  PublishedStep published;
  std::vector<ChosenField> assumptions;  // mappings and derivations
  // Candidates for the null fields (one element when published).
  std::vector<std::int64_t> micro_batches;
  std::vector<int> virtual_stages;
  std::vector<bool> sequence_parallel;
  std::vector<int> zero_stages;
  std::vector<Recompute> recomputes;
  // The recompute module sets of the selective candidates; empty: the plan's only.
  std::vector<std::uint8_t> recompute_modules;
  std::vector<int> expert_parallel;  // empty: plan.parallel.ep
  bool micro_batch_null = false, virtual_stages_null = false, sp_null = false, zero_null = false,
       recompute_null = false, ep_null = false;
  // pp does not divide the layers and the record states no split: each candidate takes the
  // balanced uneven split for its virtual stages (balanced_stage_split).
  bool balanced_split = false;
  // pp × the published virtual stages do not divide the layers and no uneven split of the
  // stages does: every candidate with those virtual stages takes this balanced layout of chunks
  // of unequal size (balanced_layout, Megatron-core's --pipeline-model-parallel-layout).
  std::vector<int> layout;
  // The record names DeepSeek's DualPipe: every candidate runs its cut-in-half form, dualpipev
  // on pp / 2 stages (fold_dualpipe).
  bool dualpipe = false;
};

// Maps a record. A record planner cannot model is an error whose message is the reason
// (kNotFound for unknown hardware, kInvalidInput for missing or unusable fields).
// `profiles` replace the built-in profiles of the GPUs they describe.
Result<RunSetup> map_published_run(const PublishedRun& run, const Catalog& catalog,
                                   const topo::TopologyCatalog& topologies,
                                   std::span<const HardwareProfile> profiles = {});

// Every combination of the setup's candidates that check_parallel() accepts, in a fixed order
// (ep, micro-batch, virtual stages, sp, ZeRO, recompute, each in candidate order). `first_problem`,
// when given and empty, receives the first problem check_parallel() finds in a rejected one.
std::vector<ParallelConfig> candidate_configs(const RunSetup& setup,
                                              std::string* first_problem = nullptr);

// The published FLOPs of one step under `convention` for the plan's model and batch: Megatron
// eq. (3), Megatron model FLOPs, MosaicML or PaLM.
std::optional<Flops> published_step_flops(FlopConvention convention, const Plan& plan);

struct RunAccuracy {
  std::string id;
  std::string source;  // source_key()
  std::optional<Reliability> reliability;
  std::string gpu_type;  // the GPU preset; the record's text when unmapped
  bool modelled = false;
  std::string skip_reason;
  PublishedBasis basis = PublishedBasis::kStepTime;
  std::string published_how;
  double published = 0;  // step time, s
  double predicted = 0;  // step time, s
  double error_percent = 0;
  std::string topology;
  int nodes = 0;
  std::string profile;
  sim::AttentionKernel attention = sim::AttentionKernel::kFlash;
  std::vector<SoftwareField> software;
  std::string software_source;           // the record's software_source
  Plan plan;                             // the configuration simulated (null fields chosen)
  std::vector<ChosenField> chosen;       // null fields and how they were chosen
  std::vector<ChosenField> assumptions;  // hardware, model and software mapping
  int candidates = 0;                    // configurations tried
  int out_of_memory = 0;                 // of which did not fit
  bool forced_memory = false;            // none fitted; simulated the smallest anyway
  double step_time_s = 0;
  double model_tflops_per_gpu = 0;
  double mfu = 0;
  double bubble_fraction = 0;
  std::array<double, sim::kNumTimeBuckets> exposed_s{};  // mean per simulated worker, per bucket
  double peak_memory_gib = 0;
};

struct GpuTypeAccuracy {
  std::string gpu_type;
  int runs = 0;
  double mape_percent = 0;
  std::string worst_id;
  double worst_error_percent = 0;
};

// Error over the modelled records of one source (source_key()).
struct SourceAccuracy {
  std::string source;
  int runs = 0;
  double mape_percent = 0;
  double bias_percent = 0;  // mean signed error
};

// Modelled records measured more than once: records whose simulated configuration (model
// structure, GPU, cluster, training, parallel layout, software) is another record's, such as one
// benchmark row in several releases of its table. A prediction is a function of the configuration,
// so on these records no prediction gets below floor_mape_percent: the MAPE of the best single step
// time per configuration (the median of its measurements weighted by 1 / measurement, which
// minimises the sum of |t / measured - 1|). model_mape_percent is planner's MAPE on the same
// records.
struct RepeatedConfigurations {
  int configurations = 0;  // configurations with two or more modelled records
  int runs = 0;            // the records of those configurations
  double floor_mape_percent = 0;
  double model_mape_percent = 0;
  double widest_ratio = 0;  // the largest ratio of slowest to fastest measurement of one of them
  std::string widest_id;    // a record of that configuration
};

// The repeated configurations among the report's modelled runs (key: RunAccuracy::plan without
// its names (the plan's is the record id) and the model's source, with topology, nodes, profile,
// attention and software fields).
RepeatedConfigurations repeated_configurations(std::span<const RunAccuracy> runs);

struct AccuracyReport {
  std::vector<RunAccuracy> runs;             // file order
  std::vector<GpuTypeAccuracy> by_gpu_type;  // by name
  std::vector<SourceAccuracy> by_source;     // by first appearance in the file
  int modelled = 0;
  int skipped = 0;
  double mape_percent = 0;
  double bias_percent = 0;
  // The modelled grade-A record with the largest |error|, as an index into `runs`.
  std::optional<std::size_t> worst_a_grade;
  RepeatedConfigurations repeated;
  int simulations = 0;
};

struct AccuracyOptions {
  std::string gpu_type;           // only records on this GPU preset (name or alias); empty: all
  std::vector<std::string> only;  // only these record ids; empty: all
  int threads = 0;                // 0: std::thread::hardware_concurrency()
  std::vector<HardwareProfile> profiles;  // replace the built-in profiles of their GPUs
  // Overrides of every run's host costs (parse_host_costs text, applied over the costs of the
  // run's stack); empty: the stacks' built-in costs.
  std::string host_costs;
};

// Fails (kInvalidInput) when an id of options.only is not in `runs` or options.gpu_type is not a
// GPU preset; a record that cannot be modelled is a skipped entry, not an error.
Result<AccuracyReport> evaluate_accuracy(
    std::span<const PublishedRun> runs, const AccuracyOptions& options,
    const Catalog& catalog = builtin_catalog(),
    const topo::TopologyCatalog& topologies = topo::builtin_topologies());

// Recomputes a report's totals (modelled, skipped, MAPE, bias, per GPU type and per source, the
// worst grade-A record) from its runs.
void summarize_accuracy(AccuracyReport& report);

}  // namespace planner::fit

namespace planner {

template <>
struct EnumTraits<fit::PublishedBasis> {
  static constexpr std::string_view kWhat = "published basis";
  static constexpr std::array<std::pair<fit::PublishedBasis, std::string_view>, 5> kNames{{
      {fit::PublishedBasis::kStepTime, "step_time_s"},
      {fit::PublishedBasis::kDerivedStepTime, "derived_step_time_s"},
      {fit::PublishedBasis::kTokensPerSecond, "tokens_per_s"},
      {fit::PublishedBasis::kTflopsPerGpu, "tflops_per_gpu"},
      {fit::PublishedBasis::kMfu, "mfu"},
  }};
};

}  // namespace planner
