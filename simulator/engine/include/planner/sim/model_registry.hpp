// The registry of the simulator's models (after SimGrid's model descriptions): every model the
// simulator uses, with its name, a one-line description, what it assumes and where it comes from.
// `planner sim-models` prints it; the parameters live in hardware profiles
// (core/hardware_profile.hpp), each with its own source.
#pragma once

#include <span>
#include <string_view>

namespace planner::sim {

struct ModelInfo {
  std::string_view category;  // engine, compute, collective, network, memory
  std::string_view name;
  std::string_view description;
  std::string_view assumptions;
  std::string_view source;
};

std::span<const ModelInfo> model_registry();

}  // namespace planner::sim
