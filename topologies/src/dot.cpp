#include "planner/topo/dot.hpp"

#include <sstream>

namespace planner::topo {
namespace {

const char* shape(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kGpu:
      return "box, style=filled, fillcolor=\"#b7e1a1\"";
    case DeviceKind::kNvSwitch:
      return "diamond, style=filled, fillcolor=\"#8fbc8f\"";
    case DeviceKind::kPcieSwitch:
      return "ellipse";
    case DeviceKind::kCpu:
      return "box3d";
    case DeviceKind::kNic:
      return "hexagon, style=filled, fillcolor=\"#add8e6\"";
    case DeviceKind::kLeaf:
    case DeviceKind::kSpine:
    case DeviceKind::kCore:
      return "trapezium, style=filled, fillcolor=\"#d3d3d3\"";
  }
  return "ellipse";
}

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

}  // namespace

std::string to_dot(const Cluster& c) {
  std::ostringstream out;
  out << "graph " << quoted(c.spec().name) << " {\n"
      << "  graph [rankdir=TB, fontname=\"Helvetica\"];\n"
      << "  node [fontname=\"Helvetica\", fontsize=10];\n"
      << "  edge [fontname=\"Helvetica\", fontsize=8];\n";
  const int per_node = c.devices_per_node();
  for (int n = 0; n < c.num_nodes(); ++n) {
    out << "  subgraph cluster_node" << n << " {\n    label=\"node " << n << "\";\n";
    for (DeviceId d = n * per_node; d < (n + 1) * per_node; ++d) {
      out << "    " << quoted(c.device_name(d)) << " [shape=" << shape(c.device(d).kind) << "];\n";
    }
    out << "  }\n";
  }
  for (DeviceId d = c.num_nodes() * per_node; d < static_cast<DeviceId>(c.devices().size()); ++d) {
    out << "  " << quoted(c.device_name(d)) << " [shape=" << shape(c.device(d).kind) << "];\n";
  }
  for (LinkId id = 0; id < static_cast<LinkId>(c.links().size()); id += 2) {
    const Link& l = c.link(id);
    out << "  " << quoted(c.device_name(l.src)) << " -- " << quoted(c.device_name(l.dst))
        << " [label=\"" << to_string(l.kind) << (l.count > 1 ? " x" + std::to_string(l.count) : "")
        << "\\n"
        << rate_text(l.kind, l.bandwidth) << "\"];\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace planner::topo
