// Enumerations of the domain model and their canonical spellings in JSON and on the command line.
//
// Every enum has an EnumTraits specialisation listing (value, name) pairs; to_string(),
// parse_enum() and enum_choices() work for all of them. Names are lower-case, as users type them.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace planner {

enum class Precision { kFp32, kTf32, kBf16, kFp16, kFp8 };
// Squared ReLU (relu2: max(x, 0)², So et al. 2021 "Primer"; Nemotron-H's MLPs and experts) is
// ungated like GeLU.
enum class MlpKind { kGelu, kSwiglu, kGeglu, kSquaredRelu };
// How an MoE router turns logits into expert scores: softmax over all experts (Mixtral, Qwen,
// Megatron's default) or a sigmoid per expert (DeepSeek-V3, Nemotron-3).
enum class RouterScoring { kSoftmax, kSigmoid };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class PositionEmbedding { kLearned, kRope, kAlibi, kNone };
enum class Optimizer { kAdam, kAdamW, kSgd };
enum class Schedule { kGpipe, k1F1B, kInterleaved, kZeroBubbleH1, kDualPipeV };
enum class Recompute { kNone, kSelective, kFull };
// The parts of a layer selective recompute runs again (Megatron-core's --recompute-modules;
// parallel_config.hpp). kCoreAttn is Megatron's default.
enum class RecomputeModule {
  kCoreAttn,
  kMoeAct,
  kLayernorm,
  kMlaUpProj,
  kMlp,
  kMoe,
  kSharedExperts
};
enum class Offload { kNone, kOptimizer, kOptimizerAndParams };
enum class DpSync { kAllReduce, kParameterServer };
// How compute is bought: on demand, spot (preemptible), reserved for 1 or 3 years, or a capacity
// block (a fixed-length reservation bought ahead, as AWS EC2 Capacity Blocks for ML).
enum class Offering { kOnDemand, kSpot, kReserved1y, kReserved3y, kCapacityBlock };
// How an MoE layer's tokens reach the experts of other ranks: NCCL's all-to-all (Megatron-core's
// "alltoall" dispatcher), or hierarchical, as DeepEP and HybridEP do: a token crosses the network
// once per destination node, to the GPU on its own rail, which forwards it over NVLink.
enum class MoeA2a { kNccl, kHierarchical };
// Transformer Engine's fp8 scaling recipe (Megatron-core --fp8-recipe): per-tensor delayed scaling
// (scales from an amax history; the cast computes the amax as it goes), per-tensor current scaling
// (an amax pass over the tensor, then the cast), MXFP8 (Blackwell: a scale per 32 elements) or
// blockwise (DeepSeek-V3: 1×128 activation and 128×128 weight blocks).
enum class Fp8Recipe { kDelayed, kCurrent, kMxfp8, kBlockwise };

template <class E>
struct EnumTraits;

template <>
struct EnumTraits<Precision> {
  static constexpr std::string_view kWhat = "precision";
  static constexpr std::array<std::pair<Precision, std::string_view>, 5> kNames{{
      {Precision::kFp32, "fp32"},
      {Precision::kTf32, "tf32"},
      {Precision::kBf16, "bf16"},
      {Precision::kFp16, "fp16"},
      {Precision::kFp8, "fp8"},
  }};
};
template <>
struct EnumTraits<MlpKind> {
  static constexpr std::string_view kWhat = "MLP kind";
  static constexpr std::array<std::pair<MlpKind, std::string_view>, 4> kNames{{
      {MlpKind::kGelu, "gelu"},
      {MlpKind::kSwiglu, "swiglu"},
      {MlpKind::kGeglu, "geglu"},
      {MlpKind::kSquaredRelu, "relu2"},
  }};
};
// Gated MLPs (SwiGLU, GeGLU) have a gate and an up projection; the others an up projection only.
constexpr bool is_gated(MlpKind mlp) {
  return mlp == MlpKind::kSwiglu || mlp == MlpKind::kGeglu;
}
template <>
struct EnumTraits<RouterScoring> {
  static constexpr std::string_view kWhat = "router scoring";
  static constexpr std::array<std::pair<RouterScoring, std::string_view>, 2> kNames{{
      {RouterScoring::kSoftmax, "softmax"},
      {RouterScoring::kSigmoid, "sigmoid"},
  }};
};
template <>
struct EnumTraits<NormKind> {
  static constexpr std::string_view kWhat = "norm";
  static constexpr std::array<std::pair<NormKind, std::string_view>, 2> kNames{{
      {NormKind::kLayerNorm, "layernorm"},
      {NormKind::kRmsNorm, "rmsnorm"},
  }};
};
template <>
struct EnumTraits<PositionEmbedding> {
  static constexpr std::string_view kWhat = "position embedding";
  static constexpr std::array<std::pair<PositionEmbedding, std::string_view>, 4> kNames{{
      {PositionEmbedding::kLearned, "learned"},
      {PositionEmbedding::kRope, "rope"},
      {PositionEmbedding::kAlibi, "alibi"},
      {PositionEmbedding::kNone, "none"},
  }};
};
template <>
struct EnumTraits<Optimizer> {
  static constexpr std::string_view kWhat = "optimizer";
  static constexpr std::array<std::pair<Optimizer, std::string_view>, 3> kNames{{
      {Optimizer::kAdam, "adam"},
      {Optimizer::kAdamW, "adamw"},
      {Optimizer::kSgd, "sgd"},
  }};
};
template <>
struct EnumTraits<Schedule> {
  static constexpr std::string_view kWhat = "pipeline schedule";
  static constexpr std::array<std::pair<Schedule, std::string_view>, 5> kNames{{
      {Schedule::kGpipe, "gpipe"},
      {Schedule::k1F1B, "1f1b"},
      {Schedule::kInterleaved, "interleaved"},
      {Schedule::kZeroBubbleH1, "zb-h1"},
      {Schedule::kDualPipeV, "dualpipev"},
  }};
};
template <>
struct EnumTraits<Recompute> {
  static constexpr std::string_view kWhat = "recompute";
  static constexpr std::array<std::pair<Recompute, std::string_view>, 3> kNames{{
      {Recompute::kNone, "none"},
      {Recompute::kSelective, "selective"},
      {Recompute::kFull, "full"},
  }};
};
template <>
struct EnumTraits<RecomputeModule> {
  static constexpr std::string_view kWhat = "recompute module";
  static constexpr std::array<std::pair<RecomputeModule, std::string_view>, 7> kNames{{
      {RecomputeModule::kCoreAttn, "core_attn"},
      {RecomputeModule::kMoeAct, "moe_act"},
      {RecomputeModule::kLayernorm, "layernorm"},
      {RecomputeModule::kMlaUpProj, "mla_up_proj"},
      {RecomputeModule::kMlp, "mlp"},
      {RecomputeModule::kMoe, "moe"},
      {RecomputeModule::kSharedExperts, "shared_experts"},
  }};
};
template <>
struct EnumTraits<Offload> {
  static constexpr std::string_view kWhat = "offload";
  static constexpr std::array<std::pair<Offload, std::string_view>, 3> kNames{{
      {Offload::kNone, "none"},
      {Offload::kOptimizer, "optimizer"},
      {Offload::kOptimizerAndParams, "optimizer+params"},
  }};
};
template <>
struct EnumTraits<DpSync> {
  static constexpr std::string_view kWhat = "data-parallel synchronisation";
  static constexpr std::array<std::pair<DpSync, std::string_view>, 2> kNames{{
      {DpSync::kAllReduce, "allreduce"},
      {DpSync::kParameterServer, "parameter-server"},
  }};
};
template <>
struct EnumTraits<MoeA2a> {
  static constexpr std::string_view kWhat = "MoE all-to-all";
  static constexpr std::array<std::pair<MoeA2a, std::string_view>, 2> kNames{{
      {MoeA2a::kNccl, "nccl"},
      {MoeA2a::kHierarchical, "hierarchical"},
  }};
  // The dispatchers that implement them (Megatron-core --moe-token-dispatcher-type alltoall; flex
  // with --moe-flex-dispatcher-backend deepep or hybridep).
  static constexpr std::array<std::pair<MoeA2a, std::string_view>, 3> kAliases{{
      {MoeA2a::kNccl, "alltoall"},
      {MoeA2a::kHierarchical, "deepep"},
      {MoeA2a::kHierarchical, "hybridep"},
  }};
};
template <>
struct EnumTraits<Fp8Recipe> {
  static constexpr std::string_view kWhat = "fp8 recipe";
  static constexpr std::array<std::pair<Fp8Recipe, std::string_view>, 4> kNames{{
      {Fp8Recipe::kDelayed, "delayed"},
      {Fp8Recipe::kCurrent, "current"},
      {Fp8Recipe::kMxfp8, "mxfp8"},
      {Fp8Recipe::kBlockwise, "blockwise"},
  }};
  // Megatron-core's and Megatron-Bridge's names for them.
  static constexpr std::array<std::pair<Fp8Recipe, std::string_view>, 3> kAliases{{
      {Fp8Recipe::kCurrent, "tensorwise"},
      {Fp8Recipe::kCurrent, "fp8-cs"},
      {Fp8Recipe::kMxfp8, "fp8-mx"},
  }};
};
template <>
struct EnumTraits<Offering> {
  static constexpr std::string_view kWhat = "offering";
  static constexpr std::array<std::pair<Offering, std::string_view>, 5> kNames{{
      {Offering::kOnDemand, "on-demand"},
      {Offering::kSpot, "spot"},
      {Offering::kReserved1y, "reserved-1y"},
      {Offering::kReserved3y, "reserved-3y"},
      {Offering::kCapacityBlock, "capacity-block"},
  }};
  // Older documents wrote "reserved" (a reservation of unstated length): read as the shortest
  // term planner prices, one year.
  static constexpr std::array<std::pair<Offering, std::string_view>, 1> kAliases{{
      {Offering::kReserved1y, "reserved"},
  }};
};

template <class E>
constexpr std::string_view to_string(E value) {
  for (const auto& [v, name] : EnumTraits<E>::kNames) {
    if (v == value) return name;
  }
  return "?";
}

// The canonical spelling, or one of the older spellings an EnumTraits lists in kAliases (still
// read, never written).
template <class E>
constexpr std::optional<E> parse_enum(std::string_view text) {
  for (const auto& [v, name] : EnumTraits<E>::kNames) {
    if (name == text) return v;
  }
  if constexpr (requires { EnumTraits<E>::kAliases; }) {
    for (const auto& [v, name] : EnumTraits<E>::kAliases) {
      if (name == text) return v;
    }
  }
  return std::nullopt;
}

// "a, b, c": the accepted spellings, for error messages and --help.
template <class E>
std::string enum_choices() {
  std::string out;
  for (const auto& [v, name] : EnumTraits<E>::kNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// Bytes per element of a tensor stored in this precision (tf32 is stored as fp32).
constexpr int bytes_per_element(Precision p) {
  switch (p) {
    case Precision::kFp32:
    case Precision::kTf32:
      return 4;
    case Precision::kBf16:
    case Precision::kFp16:
      return 2;
    case Precision::kFp8:
      return 1;
  }
  return 4;
}

}  // namespace planner
