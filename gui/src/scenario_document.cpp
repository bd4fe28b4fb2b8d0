#include "scenario_document.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "planner/core/catalog.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/search/sweep_spec.hpp"
#include "planner/topo/topology_catalog.hpp"

namespace planner::gui {

namespace {

Json& first_cluster(Json& doc) {
  return doc["clusters"][0];
}

Result<double> parse_number(std::string_view knob, std::string_view value) {
  double v = 0;
  const auto* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || ptr != end || !std::isfinite(v)) {
    return Status::invalid_input("what-if " + std::string(knob) + ": expected a number, got \"" +
                                 std::string(value) + "\"");
  }
  return v;
}

Result<topo::TopologySpec> topology_of(const Json& cluster) {
  if (cluster.contains("topology") && cluster["topology"].is_string()) {
    return topo::resolve_topology(cluster["topology"].get<std::string>());
  }
  if (!cluster.contains("gpu") || !cluster["gpu"].is_string()) {
    return Status::invalid_input("the cluster names no GPU");
  }
  PLANNER_ASSIGN_OR_RETURN(GpuSpec gpu, builtin_catalog().gpu(cluster["gpu"].get<std::string>()));
  return topo::topology_for_gpu(gpu);
}

int node_count(const Json& doc) {
  const int per_node = gpus_per_node(doc);
  const Json& gpus = doc["clusters"][0]["gpus"];
  if (per_node <= 0 || !gpus.is_array() || gpus.empty() || !gpus[0].is_number_integer()) {
    return 1;
  }
  return std::max(1, gpus[0].get<int>() / per_node);
}

}  // namespace

Status apply_fabric_change(topo::TopologySpec& topology, const FabricChange& change) {
  if (change == FabricChange{}) return Status::ok();
  topo::FabricSpec& fabric = topology.fabric;
  if (fabric.type == topo::FabricType::kNone) {
    return Status::invalid_input("topology " + topology.name +
                                 " has no scale-out fabric to change");
  }
  if (!(change.internode_bandwidth_scale > 0)) {
    return Status::invalid_input("inter-node bandwidth scale must be > 0");
  }
  fabric.host_link.bandwidth = fabric.host_link.bandwidth.scaled(change.internode_bandwidth_scale);
  fabric.switch_link.bandwidth =
      fabric.switch_link.bandwidth.scaled(change.internode_bandwidth_scale);
  if (change.leaf_oversubscription) {
    PLANNER_ASSIGN_OR_RETURN(fabric.uplinks_per_leaf,
                             topo::uplinks_for_oversubscription(
                                 fabric.hosts_per_leaf, fabric.host_link.bandwidth,
                                 *change.leaf_oversubscription, fabric.switch_link.bandwidth));
  }
  return Status::ok();
}

ParsedScenario parse_scenario(const Json& doc, std::string_view source,
                              const FabricChange& change) {
  ParsedScenario out{std::nullopt, Diagnostics{std::string(source)}};
  Diagnostics& diag = out.diagnostics;
  JsonObject root(doc, "", diag);
  if (!root.valid()) return out;
  search::SweepRequest request;
  if (!read_document_header(root, "sweep")) return out;
  search::read_sweep_fields(
      root, builtin_catalog(), [](std::string_view name) { return topo::resolve_topology(name); },
      request);
  if (!diag.empty()) return out;
  for (search::SweepScenario& s : request.scenarios) {
    if (Status st = apply_fabric_change(s.topology, change); !st.is_ok()) {
      diag.add("/clusters/0/topology", st.message());
      return out;
    }
  }
  out.request = std::move(request);
  return out;
}

int gpus_per_node(const Json& doc) {
  if (!doc.is_object() || !doc.contains("clusters") || !doc["clusters"].is_array() ||
      doc["clusters"].empty()) {
    return 0;
  }
  auto topology = topology_of(doc["clusters"][0]);
  return topology ? topology->gpus_per_node() : 0;
}

const std::vector<KnobInfo>& knobs() {
  static const std::vector<KnobInfo> kKnobs{
      {Knob::kGpu, "GPU type", "name"},
      {Knob::kNodes, "node count", "nodes"},
      {Knob::kInternodeBandwidth, "inter-node bandwidth", "x current"},
      {Knob::kOversubscription, "leaf oversubscription", ": 1"},
      {Knob::kPrice, "price", "USD per GPU-hour"},
      {Knob::kBatch, "global batch", "sequences"},
  };
  return kKnobs;
}

Result<WhatIf> apply_knob(const Json& doc, const FabricChange& change, Knob knob,
                          std::string_view value) {
  WhatIf out{doc, change};
  if (!out.doc.contains("clusters") || !out.doc["clusters"].is_array() ||
      out.doc["clusters"].empty()) {
    return Status::invalid_input("the scenario has no cluster to change");
  }
  Json& cluster = first_cluster(out.doc);
  std::string_view name;
  for (const KnobInfo& k : knobs()) {
    if (k.knob == knob) name = k.name;
  }
  switch (knob) {
    case Knob::kGpu: {
      PLANNER_ASSIGN_OR_RETURN(GpuSpec gpu, builtin_catalog().gpu(value));
      PLANNER_ASSIGN_OR_RETURN(topo::TopologySpec topology, topo::topology_for_gpu(gpu));
      const int nodes = node_count(doc);
      cluster["gpu"] = gpu.name;
      cluster["topology"] = topology.name;
      cluster["gpus"] = Json::array({nodes * topology.gpus_per_node()});
      cluster.erase("usd_per_gpu_hour");  // a price is per GPU type
      cluster.erase("provider");          // and so are the providers renting it
      cluster.erase("min_gpus");
      return out;
    }
    case Knob::kNodes: {
      PLANNER_ASSIGN_OR_RETURN(double nodes, parse_number(name, value));
      const int per_node = gpus_per_node(doc);
      if (nodes < 1 || nodes != std::floor(nodes) || per_node <= 0) {
        return Status::invalid_input("what-if node count: expected a whole number >= 1, got \"" +
                                     std::string(value) + "\"");
      }
      cluster["gpus"] = Json::array({static_cast<int>(nodes) * per_node});
      cluster.erase("min_gpus");
      return out;
    }
    case Knob::kInternodeBandwidth: {
      PLANNER_ASSIGN_OR_RETURN(out.change.internode_bandwidth_scale, parse_number(name, value));
      return out;
    }
    case Knob::kOversubscription: {
      PLANNER_ASSIGN_OR_RETURN(double ratio, parse_number(name, value));
      out.change.leaf_oversubscription = ratio;
      return out;
    }
    case Knob::kPrice: {
      PLANNER_ASSIGN_OR_RETURN(double usd, parse_number(name, value));
      cluster["usd_per_gpu_hour"] = usd;
      return out;
    }
    case Knob::kBatch: {
      PLANNER_ASSIGN_OR_RETURN(double gbs, parse_number(name, value));
      out.doc["training"]["global_batch_size"] = static_cast<std::int64_t>(gbs);
      return out;
    }
  }
  return out;
}

}  // namespace planner::gui
