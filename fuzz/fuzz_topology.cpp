// Topology documents on arbitrary bytes; a topology that loads is built into a cluster graph of a
// few nodes and routed, so figures that validate but break the graph are found too.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "planner/core/catalog.hpp"
#include "planner/topo/cluster.hpp"
#include "planner/topo/topology_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = planner::topo::parse_topology(text, "fuzz.json", planner::builtin_catalog());
  if (!spec) return 0;
  // A few nodes: enough for the fabric and the NVLink domain to matter, small enough to be fast.
  const int nodes = std::clamp(spec->default_nodes, 1, 4);
  auto cluster = planner::topo::Cluster::build(*spec, nodes);
  if (cluster && cluster->num_gpus() > 1) {
    const auto path = cluster->path(0, cluster->num_gpus() - 1);
    volatile double sink = planner::to_seconds(cluster->path_latency(path)) +
                           planner::to_GBps(cluster->path_bandwidth(path));
    (void)sink;
  }
  return 0;
}
