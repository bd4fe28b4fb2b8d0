// Published training runs: records in the format of the reference data's published_runs.json (a
// JSON array; see tests/data/reference/README.md), read into plain structs for `planner accuracy`.
//
// The format is external (no "schema_version" or "kind"), one object per run:
//   id               unique string
//   source, notes    free text
//   model            {name, params_billion, layers, hidden, heads, kv_heads, ffn_hidden, seq_len,
//                     vocab}
//   hardware         {gpu (free text, e.g. "A100-SXM4-80GB"), num_gpus, gpus_per_node, intra_node,
//                     inter_node (free text)}
//   parallel         {tp, pp, dp, cp, ep, sp, virtual_stages, zero_stage, micro_batch,
//                     global_batch (sequences), recompute ("none" | "selective" | "full")}
//   precision        free text ("mixed precision fp16", "amp_bf16 ...", "FP8 (Transformer Engine)")
//   measured         what the source printed: {tflops_per_gpu, mfu, hfu, step_time_s, tokens_per_s,
//                     tokens_per_s_per_gpu, memory_gb}
//   derived          values computed from it: any number-valued keys (step_time_s, tflops_per_gpu,
//                     ...) plus "how" (the formula, free text)
//   flops_convention how the source counted FLOPs (free text; flop_convention_of() classifies it)
//   reliability      "A" (primary source, full config), "B" (small gaps), "C" (incomplete)
// Every field except id may be null, meaning "not published"; a consumer decides what it can do
// without it. Reading is strict about what it understands: a wrong type or an impossible value is
// an error naming the file, the record's id and the field's JSON pointer ("runs.json:
// /3/parallel/tp: expected an integer, got string \"8\" (run narayanan21_t1_1p7B)"), and all
// problems are reported together. Keys the reader does not know are tolerated (the format is
// external and grows) and listed in PublishedRun::unknown_keys, so a consumer can refuse to model a
// record whose model or parallel section it does not fully understand.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "planner/core/enums.hpp"
#include "planner/core/status.hpp"

namespace planner {

// How a published TFLOP/s figure counts FLOPs (core/flops.hpp implements each).
enum class FlopConvention {
  kMegatronEq3,  // Narayanan et al. eq. (3): 96·B·s·L·h²(1 + s/6h + V/16Lh), a recompute forward
                 // included ("Megatron eq.(3)", "Megatron 2019 accounting")
  kMegatronModel,  // Megatron-LM's num_floating_point_operations(), NeMo's "model TFLOP/s"
  kMosaicMl,       // llm-foundry: 3·B·(2·N·s + 4·L·h·s²)
  kUnknown,
};

enum class Reliability { kA, kB, kC };

struct PublishedModel {
  std::string name;
  std::optional<double> params_billion;
  std::optional<int> layers;
  std::optional<std::int64_t> hidden;
  std::optional<int> heads;
  std::optional<int> kv_heads;
  std::optional<std::int64_t> ffn_hidden;
  std::optional<std::int64_t> seq_len;
  std::optional<std::int64_t> vocab;
};

struct PublishedHardware {
  std::string gpu;
  std::optional<std::int64_t> num_gpus;
  std::optional<int> gpus_per_node;
  std::string intra_node;  // empty when null
  std::string inter_node;
};

struct PublishedParallel {
  std::optional<int> tp, pp, dp, cp, ep;
  std::optional<bool> sp;
  std::optional<int> virtual_stages;
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
};

struct PublishedRun {
  std::string id;
  std::size_t index = 0;  // position in the file
  std::string source;
  std::string notes;
  PublishedModel model;
  PublishedHardware hardware;
  PublishedParallel parallel;
  std::string precision;
  PublishedMeasured measured;
  std::vector<std::pair<std::string, double>> derived;  // numeric derived values, file order
  std::string derived_how;
  std::string flops_convention;
  std::optional<Reliability> reliability;
  std::vector<std::string> unknown_keys;  // JSON pointers within the record ("/model/experts")

  // A derived value by key, or nullopt.
  std::optional<double> derived_value(std::string_view key) const;
  // measured.step_time_s, else derived.step_time_s.
  std::optional<double> step_time_s() const;
  // measured.tflops_per_gpu, else derived.tflops_per_gpu.
  std::optional<double> tflops_per_gpu() const;
};

// Parses a whole file's text (`source` names it in messages).
Result<std::vector<PublishedRun>> parse_published_runs(std::string_view text,
                                                       std::string_view source);
Result<std::vector<PublishedRun>> load_published_runs_file(const std::string& path);

// Classifies a record's flops_convention text: "Megatron eq.(3)..." and "Megatron 2019
// accounting..." (which the reference data describes as the same equation) are kMegatronEq3;
// "MosaicML..." kMosaicMl; "NeMo ... model ..." and "Megatron ... model FLOPs" kMegatronModel.
FlopConvention flop_convention_of(std::string_view text);
// True when the convention counts the forward pass that full recomputation repeats.
bool counts_recompute(FlopConvention convention);

}  // namespace planner

namespace planner {

template <>
struct EnumTraits<FlopConvention> {
  static constexpr std::string_view kWhat = "FLOP convention";
  static constexpr std::array<std::pair<FlopConvention, std::string_view>, 4> kNames{{
      {FlopConvention::kMegatronEq3, "megatron-eq3"},
      {FlopConvention::kMegatronModel, "megatron-model"},
      {FlopConvention::kMosaicMl, "mosaicml"},
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
