// The GUI's scenario: a "sweep" document (planner/search/sweep_spec.hpp), read by the same parser
// as `planner sweep --spec FILE`, so a scenario saved from the app runs unchanged on the CLI and
// every error the app shows is the CLI's own diagnostic ("scenario.json: /training/seq_length:
// ...").
//
// The editor shows one model and one cluster: the first entries of "models" and "clusters".
// Keys the editor does not show (the search space, failures, further models) are kept as loaded.
//
// What-if knobs change the document (GPU, node count, price, batch) or, for the fabric (inter-node
// bandwidth, leaf oversubscription), the resolved topology: a topology has no per-scenario key in
// the sweep document, so those two live beside it in a FabricChange.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/diagnostics.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/status.hpp"
#include "planner/search/sweep.hpp"
#include "planner/topo/topology_spec.hpp"

namespace planner::gui {

inline constexpr std::string_view kScenarioSource = "scenario.json";

// Fabric changes applied to the resolved topology.
struct FabricChange {
  double internode_bandwidth_scale = 1.0;       // scales the NIC-to-leaf and switch links
  std::optional<double> leaf_oversubscription;  // down : up bandwidth at the leaves
  bool operator==(const FabricChange&) const = default;
};

// Applies `change`; kInvalidInput when the oversubscription cannot be built with whole uplinks
// (the topology library's message) or the topology has no scale-out fabric.
Status apply_fabric_change(topo::TopologySpec& topology, const FabricChange& change);

struct ParsedScenario {
  std::optional<search::SweepRequest> request;  // set when there were no diagnostics
  Diagnostics diagnostics;
};

// Reads `doc` as `planner sweep --spec <source>` reads the file, then applies `change` to every
// scenario's topology (a failure there is a diagnostic at /clusters/0/topology).
ParsedScenario parse_scenario(const Json& doc, std::string_view source = kScenarioSource,
                              const FabricChange& change = {});

// The GPUs per node of the document's first cluster (its topology, or the first preset with its
// GPU); 0 when that cannot be resolved.
int gpus_per_node(const Json& doc);

// The knobs a what-if changes, one at a time.
enum class Knob { kGpu, kNodes, kInternodeBandwidth, kOversubscription, kPrice, kBatch };
struct KnobInfo {
  Knob knob;
  std::string_view name;  // as shown in the app
  std::string_view unit;
};
const std::vector<KnobInfo>& knobs();

// Returns a copy of `doc` / `change` with one knob set to `value` (GPU: a GPU name, whose first
// topology preset replaces the cluster's; nodes: node count; bandwidth: a scale factor;
// oversubscription: a ratio; price: USD per GPU-hour; batch: global batch size in sequences).
struct WhatIf {
  Json doc;
  FabricChange change;
};
Result<WhatIf> apply_knob(const Json& doc, const FabricChange& change, Knob knob,
                          std::string_view value);

}  // namespace planner::gui
