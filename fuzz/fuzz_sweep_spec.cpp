// Sweep specs (kind "sweep") on arbitrary bytes, with topologies resolved as the CLI does.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "planner/core/catalog.hpp"
#include "planner/search/sweep_spec.hpp"
#include "planner/topo/topology_catalog.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = planner::search::parse_sweep_spec(
      text, "fuzz.json", planner::builtin_catalog(),
      [](std::string_view name) { return planner::topo::resolve_topology(name); });
  if (spec) {
    volatile std::size_t sink = spec->scenarios.size();
    (void)sink;
  }
  return 0;
}
