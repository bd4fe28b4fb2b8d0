// The machines a plan runs on: node count, GPUs per node, GPU type, fabric and how it is bought.
//
// JSON (kind "cluster", or the "cluster" object of a plan): name, nodes, gpus_per_node, gpu (a GPU
// preset name or alias), topology (a topology preset name; optional), offering (on-demand | spot |
// reserved | capacity-block), usd_per_gpu_hour (optional price override).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "planner/core/enums.hpp"
#include "planner/core/units.hpp"

namespace planner {

struct ClusterSpec {
  std::string name;
  int nodes = 1;
  int gpus_per_node = 8;
  std::string gpu;
  std::string topology;
  Offering offering = Offering::kOnDemand;
  std::optional<Usd> usd_per_gpu_hour;

  std::int64_t num_gpus() const { return static_cast<std::int64_t>(nodes) * gpus_per_node; }
};

// Whole nodes of `gpus_per_node` GPUs needed to hold `gpus` GPUs (at least 1).
inline int nodes_for(std::int64_t gpus, int gpus_per_node) {
  const std::int64_t per_node = gpus_per_node > 0 ? gpus_per_node : 1;
  const std::int64_t nodes = (gpus + per_node - 1) / per_node;
  return static_cast<int>(nodes > 1 ? nodes : 1);
}

}  // namespace planner
