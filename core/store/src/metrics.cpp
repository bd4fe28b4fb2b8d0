#include "planner/store/metrics.hpp"

namespace planner::store {

std::span<const MetricDef> known_metrics() {
  static constexpr MetricDef kAll[] = {
      metric::kStepTime,      metric::kTokensPerSecond, metric::kMfu,
      metric::kHfu,           metric::kBubbleFraction,  metric::kExposedCommTp,
      metric::kExposedCommPp, metric::kExposedCommDp,   metric::kExposedCommCp,
      metric::kExposedCommEp, metric::kPeakMemory,      metric::kMemoryHeadroom,
      metric::kTimeToTrain,   metric::kTotalCost,       metric::kCostPerHour,
      metric::kGoodput,       metric::kTokensPerUsd,    metric::kLoss,
  };
  return kAll;
}

}  // namespace planner::store
