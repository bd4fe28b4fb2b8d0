// The metric names and units predictions and measurements share, so a predicted "step_time" and a
// measured one line up. Any other name may be stored too; these are the ones planner's commands
// write and the CLI knows how to show.
#pragma once

#include <span>
#include <string_view>

#include "planner/store/records.hpp"

namespace planner::store {

struct MetricDef {
  std::string_view name;
  std::string_view unit;
  std::string_view description;
};

namespace metric {
inline constexpr MetricDef kStepTime{"step_time", "s", "time of one training step"};
inline constexpr MetricDef kTokensPerSecond{"tokens_per_s", "tokens/s", "training throughput"};
inline constexpr MetricDef kMfu{"mfu", "fraction",
                                "model FLOPs utilisation: model FLOPs / (time x peak)"};
inline constexpr MetricDef kHfu{"hfu", "fraction",
                                "hardware FLOPs utilisation: executed FLOPs, recompute included"};
inline constexpr MetricDef kBubbleFraction{"bubble_fraction", "fraction",
                                           "pipeline idle time / step time"};
inline constexpr MetricDef kExposedCommTp{"exposed_comm_tp", "s",
                                          "tensor-parallel communication not hidden by compute"};
inline constexpr MetricDef kExposedCommPp{"exposed_comm_pp", "s",
                                          "pipeline send/recv time not hidden by compute"};
inline constexpr MetricDef kExposedCommDp{"exposed_comm_dp", "s",
                                          "data-parallel communication not hidden by compute"};
inline constexpr MetricDef kExposedCommCp{"exposed_comm_cp", "s",
                                          "context-parallel communication not hidden by compute"};
inline constexpr MetricDef kExposedCommEp{"exposed_comm_ep", "s",
                                          "expert-parallel all-to-all not hidden by compute"};
inline constexpr MetricDef kPeakMemory{"peak_memory", "bytes", "largest per-GPU memory in use"};
inline constexpr MetricDef kMemoryHeadroom{"memory_headroom", "bytes",
                                           "GPU memory left at the peak"};
inline constexpr MetricDef kTimeToTrain{"time_to_train", "s", "time to train the token budget"};
inline constexpr MetricDef kTotalCost{"total_cost", "USD", "cost to train the token budget"};
inline constexpr MetricDef kCostPerHour{"cost_per_hour", "USD/h", "cluster price per hour"};
inline constexpr MetricDef kGoodput{"goodput", "fraction",
                                    "useful fraction of time after failures and checkpoints"};
inline constexpr MetricDef kTokensPerUsd{"tokens_per_usd", "tokens/USD",
                                         "effective (goodput-adjusted) tokens per dollar"};
inline constexpr MetricDef kLoss{"loss", "nats", "training loss"};
}  // namespace metric

// A value of a shared metric, under its name and unit.
inline Metric make_metric(const MetricDef& def, double value) {
  return Metric{std::string(def.name), value, std::string(def.unit)};
}

// Every shared metric, in the order the CLI shows them.
std::span<const MetricDef> known_metrics();

}  // namespace planner::store
