// Published training runs: records in the format of the reference data's published_runs.json (a
// JSON array; see tests/data/reference/README.md), read into plain structs for `planner accuracy`.
//
// The format is external (no "schema_version" or "kind"), one object per run:
//   id               unique string
//   source, notes    free text
//   source_id        optional: the source's key for leave-one-source-out cross-validation
//                    (source_key() derives one from `source` when absent)
//   release_date     optional: when the source published the measurement, "YYYY", "YYYY-MM" or
//                    "YYYY-MM-DD"
//   stack            optional: the software stack (software_stack.hpp: megatron-lm,
//                    megatron-core, megatron-deepspeed, deepspeed, fsdp, nemo)
//   attention        optional: the attention kernel (unfused, fused-softmax, flash, flash2, flash3,
//                    cudnn)
//   overlap          optional: {grad_reduce, param_gather, tp_comm, p2p}, each true, false or null
//   software_source  optional free text: where stack, attention and overlap come from
//   model            {name, params_billion, active_params_billion, layers, hidden, heads,
//                     kv_heads, ffn_hidden, seq_len, vocab, experts, top_k, shared_experts,
//                     expert_ffn_hidden, arch_source, arch_notes}
//   hardware         {gpu (free text, e.g. "A100-SXM4-80GB"), num_gpus, gpus_per_node, intra_node,
//                     inter_node (free text), and the cluster in numbers when the source gives
//                     them: nvlink_GBps (per GPU, per direction; 0: no NVLink), nics_per_node,
//                     nic_Gbps (per NIC), nic_kind (a topology link kind: ib-hdr, roce,
//                     ...), fabric (fat-tree, rail-optimized, leaf-spine),
//                     oversubscription (leaf down:up, >= 1)}
//   parallel         {tp, pp, dp, cp, ep, etp, sp, virtual_stages, first_stage_layers,
//                     last_stage_layers (uneven pipeline stages), zero_stage, micro_batch,
//                     global_batch (sequences), recompute ("none" | "selective" | "full")}
//   precision        free text ("mixed precision fp16", "amp_bf16 ...", "FP8 (Transformer Engine)")
//   measured         what the source printed: {tflops_per_gpu, mfu, hfu, step_time_s, tokens_per_s,
//                     tokens_per_s_per_gpu, memory_gb, gpu_hours_per_trillion_tokens,
//                     pretraining_gpu_hours, pretraining_tokens}
//   derived          values computed from it: any number-valued keys (step_time_s, tflops_per_gpu,
//                     ...) plus "how" (the formula, free text)
//   flops_convention how the source counted FLOPs (free text; flop_convention_of() classifies it)
//   reliability      "A" (primary source, full config), "B" (small gaps), "C" (incomplete)
// Every field except id may be null, meaning "not published"; a consumer decides what it can do
// without it. Reading is strict: an unknown key, a wrong type or an impossible value is an error
// naming the file, the record's id and the field's JSON pointer ("runs.json: /3/parallel/tp:
// expected an integer, got string \"8\" (run narayanan21_t1_1p7B)"), and all problems are
// reported together. Only `derived` is open-ended (any number-valued key).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "planner/core/enums.hpp"
#include "planner/core/software_stack.hpp"
#include "planner/core/status.hpp"

namespace planner {

// How a published TFLOP/s figure counts FLOPs (core/flops.hpp implements each).
enum class FlopConvention {
  kMegatronEq3,  // Narayanan et al. eq. (3): 96·B·s·L·h²(1 + s/6h + V/16Lh), a recompute forward
                 // included ("Megatron eq.(3)", "Megatron 2019 accounting")
  kMegatronModel,  // Megatron-LM's num_floating_point_operations(), NeMo's "model TFLOP/s"
  kMosaicMl,       // llm-foundry: 3·B·(2·N·s + 4·L·h·s²)
  kPalm,  // PaLM (Chowdhery et al. 2022, arXiv:2204.02311, App. B) and Llama 3 style: 6·N +
          // 12·L·H·Q·T per token (N all parameters, attention non-causal); the same count as
          // MosaicML's
  kUnknown,
};

enum class Reliability { kA, kB, kC };

struct PublishedModel {
  std::string name;
  std::optional<double> params_billion;
  std::optional<double> active_params_billion;
  std::optional<int> layers;
  std::optional<std::int64_t> hidden;
  std::optional<int> heads;
  std::optional<int> kv_heads;
  std::optional<std::int64_t> ffn_hidden;
  std::optional<std::int64_t> seq_len;
  std::optional<std::int64_t> vocab;
  // Mixture of experts (all null for dense models).
  std::optional<int> experts;
  std::optional<int> top_k;
  std::optional<int> shared_experts;
  std::optional<std::int64_t> expert_ffn_hidden;
  std::string arch_source;  // free text
  std::string arch_notes;

  bool is_moe() const { return experts.has_value() && *experts > 1; }
};

struct PublishedHardware {
  std::string gpu;
  std::optional<std::int64_t> num_gpus;
  std::optional<int> gpus_per_node;
  std::string intra_node;  // empty when null
  std::string inter_node;
  // The cluster in numbers (topologies/cluster_numbers.hpp builds a topology from them).
  std::optional<double> nvlink_GBps;
  std::optional<int> nics_per_node;
  std::optional<double> nic_Gbps;
  std::string nic_kind;  // empty when not stated
  std::string fabric;
  std::optional<double> oversubscription;

  bool states_numbers() const {
    return nvlink_GBps || nics_per_node || nic_Gbps || !nic_kind.empty() || !fabric.empty() ||
           oversubscription;
  }
};

struct PublishedParallel {
  std::optional<int> tp, pp, dp, cp, ep, etp;
  std::optional<bool> sp;
  std::optional<int> virtual_stages;
  std::optional<int> first_stage_layers, last_stage_layers;  // uneven pipeline stages
  std::optional<int> zero_stage;
  std::optional<std::int64_t> micro_batch;
  std::optional<std::int64_t> global_batch;
  std::optional<Recompute> recompute;
};

struct PublishedMeasured {
  std::optional<double> tflops_per_gpu;
  std::optional<double> mfu;
  std::optional<double> hfu;
  std::optional<double> step_time_s;
  std::optional<double> tokens_per_s;
  std::optional<double> tokens_per_s_per_gpu;
  std::optional<double> memory_gb;
  std::optional<double> gpu_hours_per_trillion_tokens;
  std::optional<double> pretraining_gpu_hours;
  std::optional<double> pretraining_tokens;
};

// A calendar date with the precision the record gives (month and day 0 when not stated).
struct PublishedDate {
  int year = 0;
  int month = 0;
  int day = 0;
  bool operator==(const PublishedDate&) const = default;
};

struct PublishedRun {
  std::string id;
  std::size_t index = 0;  // position in the file
  std::string source;
  std::string notes;
  std::string source_id;  // empty when not stated
  std::optional<PublishedDate> release_date;
  std::optional<SoftwareStack> stack;
  std::optional<AttentionImpl> attention;
  OverlapSpec overlap;
  std::string software_source;
  PublishedModel model;
  PublishedHardware hardware;
  PublishedParallel parallel;
  std::string precision;
  PublishedMeasured measured;
  std::vector<std::pair<std::string, double>> derived;  // numeric derived values, file order
  std::string derived_how;
  std::string flops_convention;
  std::optional<Reliability> reliability;

  // A derived value by key, or nullopt.
  std::optional<double> derived_value(std::string_view key) const;
  // measured.step_time_s, else derived.step_time_s.
  std::optional<double> step_time_s() const;
  // measured.tflops_per_gpu, else derived.tflops_per_gpu.
  std::optional<double> tflops_per_gpu() const;
  // measured.mfu, else derived.mfu.
  std::optional<double> mfu() const;
  // Tokens per second of the whole job: measured.tokens_per_s, else tokens_per_s_per_gpu ×
  // num_gpus (measured, else derived).
  std::optional<double> tokens_per_s() const;
};

// The latest year that free text names: four-digit years 2010-2039 standing alone ("2021-04-08",
// "NeurIPS 2021"), arXiv identifiers (arXiv:2104.04473 → 2021), two-digit years after an
// apostrophe ("SC'21", "MLSys ’22") or glued to a conference's abbreviation ("SC21", "ICML22");
// not decimals, version numbers ("24.07") or the digits of a commit hash.
std::optional<int> year_in_text(std::string_view text);

// The year of a record: release_date's when stated, else year_in_text(source).
std::optional<int> run_year(const PublishedRun& run);

// The source of a record for leave-one-source-out cross-validation: `source_id` when stated;
// else the first arXiv identifier in `source` ("arXiv:2104.04473"); else its first repository
// reference, "owner/repo" followed by a path ("NVIDIA/NeMo docs/source/performance/x.md @ 8e3d"
// and "NVIDIA-NeMo/Megatron-Bridge@4ab94d:docs/x.md" both give "owner/repo/path", commit
// dropped); else `source` up to its first comma, semicolon or parenthesis, trimmed; else the id.
// Records of one paper or one benchmark table share a key even when their texts differ.
std::string source_key(const PublishedRun& run);

// Parses a whole file's text (`source` names it in messages).
Result<std::vector<PublishedRun>> parse_published_runs(std::string_view text,
                                                       std::string_view source);
Result<std::vector<PublishedRun>> load_published_runs_file(const std::string& path);

// Classifies a record's flops_convention text: "Megatron eq.(3)..." and "Megatron 2019
// accounting..." (which the reference data describes as the same equation) are kMegatronEq3;
// "MosaicML..." kMosaicMl; "NeMo ... model ..." and "Megatron ... model FLOPs" kMegatronModel;
// "PaLM ...", "Llama 3 ..." and "6N + ..." kPalm.
FlopConvention flop_convention_of(std::string_view text);
// True when the convention counts the forward pass that full recomputation repeats.
bool counts_recompute(FlopConvention convention);

}  // namespace planner

namespace planner {

template <>
struct EnumTraits<FlopConvention> {
  static constexpr std::string_view kWhat = "FLOP convention";
  static constexpr std::array<std::pair<FlopConvention, std::string_view>, 5> kNames{{
      {FlopConvention::kMegatronEq3, "megatron-eq3"},
      {FlopConvention::kMegatronModel, "megatron-model"},
      {FlopConvention::kMosaicMl, "mosaicml"},
      {FlopConvention::kPalm, "palm"},
      {FlopConvention::kUnknown, "unknown"},
  }};
};

template <>
struct EnumTraits<Reliability> {
  static constexpr std::string_view kWhat = "reliability grade";
  static constexpr std::array<std::pair<Reliability, std::string_view>, 3> kNames{{
      {Reliability::kA, "A"},
      {Reliability::kB, "B"},
      {Reliability::kC, "C"},
  }};
};

}  // namespace planner
