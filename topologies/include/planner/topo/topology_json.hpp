// Reading "topology" documents (schema_version 1) strictly, with JSON-pointer diagnostics.
//
// A topology document:
//   name, aliases?, description, gpu (a GPU preset name or alias), provider? and instance? (both
//   or neither: the cloud instance modelled, as the price data names it), default_nodes? (>= 1,
//   the node count `planner topology show` uses), sources [strings, at least one], notes?,
//   node:    either a generator
//              {generator: nvswitch | hybrid-cube-mesh | pcie, gpus, nvlink?: LINK,
//               pcie: LINK, pcie_switches, cpus, cpu_link?: LINK, nics}
//            or explicit devices and links
//              {devices: [{id, kind: gpu|nvswitch|pcie-switch|cpu|nic, serves?: [gpu ids]}],
//               links: [{a, b, ...LINK}]}
//   fabric:  {type: none} or
//            {type: fat-tree | rail-optimized | leaf-spine, tiers (2|3; leaf-spine: 2),
//             hosts_per_leaf (rail-optimized: nodes_per_unit), oversubscription? |
//             uplinks_per_leaf?, leaves_per_pod (3 tiers), spine_oversubscription? |
//             uplinks_per_spine? (3 tiers), radix?, host_link: LINK, switch_link: LINK}
//   nvlink_domain?: {nodes, link: LINK}   (rack-scale NVLink, e.g. GB200 NVL72)
// LINK = {kind, count? (default 1), bandwidth_GBps? | bandwidth_Gbps? (per direction, per link;
//         defaults to the kind's nominal rate), latency_ns}
// Oversubscription defaults to 1 (non-blocking). See topology_spec.hpp for what each part means.
#pragma once

#include <string>
#include <string_view>

#include "planner/core/catalog.hpp"
#include "planner/core/loaders.hpp"
#include "planner/topo/topology_spec.hpp"

namespace planner {
class JsonObject;
}

namespace planner::topo {

// Parses and checks a topology document (node graph, fabric at default_nodes). `source` names the
// input in messages. GPU names resolve through `catalog`.
Result<TopologySpec> parse_topology(std::string_view text, std::string_view source,
                                    const Catalog& catalog = builtin_catalog());
Result<TopologySpec> load_topology_file(const std::string& path,
                                        const Catalog& catalog = builtin_catalog());

// Reads the fields of a topology document whose header was consumed, runs the same checks and
// calls finish(); true when no diagnostic was added.
bool read_topology_fields(JsonObject& root, const Catalog& catalog, TopologySpec& out);

// Adds the "topology" kind to `planner validate`.
void register_topology_documents(DocumentTypes& types);

}  // namespace planner::topo
