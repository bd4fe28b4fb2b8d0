// Graphviz DOT export of a cluster graph: one undirected edge per cable, labelled with its kind,
// parallel link count and per-direction bandwidth; each node's devices in a box of their own.
#pragma once

#include <string>

#include "planner/topo/cluster.hpp"

namespace planner::topo {

std::string to_dot(const Cluster& cluster);

}  // namespace planner::topo
