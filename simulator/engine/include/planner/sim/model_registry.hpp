// The registry of the simulator's models (after SimGrid's model descriptions): every model the
// simulator uses, with its name, a one-line description, what it assumes and where it comes from.
// `planner sim-models` prints it; the parameters live in hardware profiles
// (core/hardware_profile.hpp), each with its own source.
//
// The registry is bound to the code: every model has a SimModel id, and the code that implements
// it names its entry with implements(SimModel::k...). An id exists only with its entry (the
// registry is checked against the enum at compile time), and the registry test fails when an entry
// is named by no implementation in simulator/engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace planner::sim {

// Every model of the registry, in its order.
enum class SimModel : std::uint8_t {
  kDiscreteEvent,
  kStreams,
  kGemmTileRoofline,
  kPerExpertGemms,
  kFp8Quantize,
  kFlashAttention,
  kUnfusedAttention,
  kMemoryBound,
  kKernelOverhead,
  kCommSmSharing,
  kCoreSharing,
  kMemoryBoundPerKind,
  kHost,
  kHostIssue,
  kMergedPasses,
  kRing,
  kTree,
  kHierarchical,
  kNvls,
  kDirect,
  kHierarchicalA2a,
  kChainBroadcast,
  kP2p,
  kNcclSelection,
  kMaxMinFair,
  kBalancedEcmp,
  kSymmetricBackground,
  kStepAccounting,
};
inline constexpr std::size_t kNumSimModels = 28;
static_assert(static_cast<std::size_t>(SimModel::kStepAccounting) + 1 == kNumSimModels);

struct ModelInfo {
  SimModel id = SimModel::kDiscreteEvent;
  std::string_view category;  // engine, compute, collective, network, memory
  std::string_view name;
  std::string_view description;
  std::string_view assumptions;
  std::string_view source;
};

// Every model, in SimModel order.
std::span<const ModelInfo> model_registry();
const ModelInfo& model_info(SimModel id);

// Placed in the code that implements a model, names its registry entry; does nothing at run time.
constexpr void implements(SimModel) {}

}  // namespace planner::sim
