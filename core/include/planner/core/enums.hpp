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
enum class MlpKind { kGelu, kSwiglu, kGeglu };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class PositionEmbedding { kLearned, kRope, kAlibi, kNone };
enum class Optimizer { kAdam, kAdamW, kSgd };
enum class Schedule { kGpipe, k1F1B, kInterleaved, kZeroBubbleH1 };
enum class Recompute { kNone, kSelective, kFull };
enum class Offload { kNone, kOptimizer, kOptimizerAndParams };
enum class DpSync { kAllReduce, kParameterServer };
// How compute is bought: on demand, spot (preemptible), reserved for 1 or 3 years, or a capacity
// block (a fixed-length reservation bought ahead, as AWS EC2 Capacity Blocks for ML).
enum class Offering { kOnDemand, kSpot, kReserved1y, kReserved3y, kCapacityBlock };

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
  static constexpr std::array<std::pair<MlpKind, std::string_view>, 3> kNames{{
      {MlpKind::kGelu, "gelu"},
      {MlpKind::kSwiglu, "swiglu"},
      {MlpKind::kGeglu, "geglu"},
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
  static constexpr std::array<std::pair<Schedule, std::string_view>, 4> kNames{{
      {Schedule::kGpipe, "gpipe"},
      {Schedule::k1F1B, "1f1b"},
      {Schedule::kInterleaved, "interleaved"},
      {Schedule::kZeroBubbleH1, "zb-h1"},
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
