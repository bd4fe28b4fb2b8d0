// The built-in topology presets (topologies/presets/*.json, embedded in the binary) and lookups
// that also accept a topology file path wherever a preset name is accepted.
#pragma once

#include <string_view>
#include <vector>

#include "planner/core/catalog.hpp"
#include "planner/core/cluster_spec.hpp"
#include "planner/core/status.hpp"
#include "planner/topo/cluster.hpp"
#include "planner/topo/topology_spec.hpp"

namespace planner::topo {

class TopologyCatalog {
 public:
  // Parses every embedded preset; fails (naming the preset file) when one is malformed.
  static Result<TopologyCatalog> load_builtin(const Catalog& gpus = builtin_catalog());

  const std::vector<TopologySpec>& all() const { return topologies_; }
  // By name or alias, ignoring case; nullptr when unknown.
  const TopologySpec* find(std::string_view name) const;
  // kNotFound listing the known names.
  Result<TopologySpec> get(std::string_view name) const;

 private:
  std::vector<TopologySpec> topologies_;
};

// The built-in presets, parsed on first use (empty if one were malformed; tests load them all).
const TopologyCatalog& builtin_topologies();

// A preset name or alias, or else the path of a topology JSON file (anything containing '/' or
// ending in ".json" is taken as a path).
Result<TopologySpec> resolve_topology(std::string_view name_or_path,
                                      const TopologyCatalog& catalog = builtin_topologies());

// The default topology for a GPU type: the first preset whose GPU is `gpu` (in the order of
// topologies/CMakeLists.txt: one default per GPU first). kNotFound when no preset has it.
Result<TopologySpec> topology_for_gpu(const GpuSpec& gpu,
                                      const TopologyCatalog& catalog = builtin_topologies());

// The cluster a core ClusterSpec describes, built for spec.nodes nodes: its "topology" (a preset
// name or file) when given, else the first preset with the same GPU and GPUs per node. Fails when
// the topology's GPU or GPU count per node disagrees with the spec, or no preset fits.
Result<Cluster> build_cluster(const ClusterSpec& spec,
                              const TopologyCatalog& catalog = builtin_topologies(),
                              const Catalog& gpus = builtin_catalog());

}  // namespace planner::topo
