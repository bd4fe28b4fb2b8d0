#include "planner/topo/topology_json.hpp"

#include "planner/core/json_reader.hpp"
#include "planner/core/limits.hpp"
#include "planner/core/spec_json.hpp"

namespace planner::topo {
namespace {

constexpr int kMaxCount = 1 << 16;  // parallel links, switch ports, NICs per leaf
// Link rates per direction. Above: 1 PB/s, beyond any link. Below: 10 MB/s, slower than any link
// planner models (1 GbE is 0.125 GB/s); a rate near zero made route costs (integer picoseconds
// for a 1 MiB reference transfer) overflow and the graph's shortest paths fail.
constexpr double kMaxGBps = 1e6;
constexpr double kMinGBps = 0.01;
constexpr const char* kRateHint = "GB/s per direction; at least 0.01 (10 MB/s), 1 GbE is 0.125";
constexpr double kMaxLatencyNs = 1e9;  // 1 s

// Reads the LINK fields of `o` (not finish()ed: callers may read more keys).
bool read_link_fields(JsonObject& o, LinkSpec& out) {
  Diagnostics& diag = o.diagnostics();
  const std::size_t before = diag.size();
  const bool have_kind = o.read_enum("kind", out.kind, Need::kRequired);
  o.read("count", out.count, Need::kOptional, {1, kMaxCount});
  double gbytes = 0;
  double gbits = 0;
  const bool have_bytes =
      o.read("bandwidth_GBps", gbytes, Need::kOptional, {kMinGBps, kMaxGBps, false, kRateHint});
  const bool have_bits =
      o.read("bandwidth_Gbps", gbits, Need::kOptional,
             {kMinGBps * 8, kMaxGBps * 8, false, "Gbit/s per direction; at least 0.08"});
  double latency_ns = 0;
  if (o.read("latency_ns", latency_ns, Need::kRequired, {0.0, kMaxLatencyNs})) {
    out.latency = nanoseconds(latency_ns);
  }
  Bandwidth per_link;
  if (have_bytes && have_bits) {
    o.error("bandwidth_Gbps", "give bandwidth_GBps or bandwidth_Gbps, not both");
  } else if (have_bytes) {
    per_link = GBps(gbytes);
  } else if (have_bits) {
    per_link = Gbps(gbits);
  } else if (have_kind && !o.has("bandwidth_GBps") && !o.has("bandwidth_Gbps")) {
    if (auto nominal = nominal_bandwidth(out.kind)) {
      per_link = *nominal;
    } else {
      o.error("kind", "\"" + std::string(to_string(out.kind)) +
                          "\" links have no standard rate: give bandwidth_GBps or bandwidth_Gbps "
                          "(per direction, per link)");
    }
  }
  out.bandwidth = per_link * out.count;
  return diag.size() == before;
}

bool read_link_object(JsonObject& parent, std::string_view key, Need need, LinkSpec& out) {
  const Json* j = parent.child(key, need);
  if (j == nullptr) return false;
  JsonObject o(*j, parent.pointer_of(key), parent.diagnostics());
  if (!o.valid()) return false;
  const bool ok = read_link_fields(o, out);
  o.finish();
  return ok;
}

// Iterates the objects of an array at `key`; `fn(JsonObject&)` reads each one.
template <class Fn>
void read_object_array(JsonObject& parent, std::string_view key, Fn&& fn) {
  const Json* arr = parent.child(key, Need::kRequired);
  if (arr == nullptr) return;
  if (!arr->is_array()) {
    parent.error(key, "expected an array of objects, got " + describe_json(*arr));
    return;
  }
  for (std::size_t i = 0; i < arr->size(); ++i) {
    JsonObject o((*arr)[i], parent.pointer_of(key) + "/" + std::to_string(i), parent.diagnostics());
    if (o.valid()) fn(o);
  }
}

void read_generated_node(JsonObject& o, NodeSpec& out) {
  Diagnostics& diag = o.diagnostics();
  const std::size_t before = diag.size();
  NodeGeneratorParams p;
  o.read_enum("generator", p.generator, Need::kRequired);
  const IntRange per_node{1, limits::kMaxGpusPerNode};
  o.read("gpus", p.gpus, Need::kRequired, per_node);
  if (LinkSpec l; read_link_object(o, "nvlink", Need::kOptional, l)) p.nvlink = l;
  read_link_object(o, "pcie", Need::kRequired, p.pcie);
  o.read("pcie_switches", p.pcie_switches, Need::kRequired, per_node);
  o.read("cpus", p.cpus, Need::kRequired, per_node);
  if (LinkSpec l; read_link_object(o, "cpu_link", Need::kOptional, l)) p.cpu_link = l;
  o.read("nics", p.nics, Need::kRequired, {0, limits::kMaxGpusPerNode});
  o.finish();
  if (diag.size() != before) return;
  generate_node(p, out, diag, o.pointer());
}

void read_explicit_node(JsonObject& o, NodeSpec& out) {
  read_object_array(o, "devices", [&](JsonObject& d) {
    NodeDevice dev;
    d.read("id", dev.id, Need::kRequired);
    d.read_enum("kind", dev.kind, Need::kRequired);
    d.read("serves", dev.serves, Need::kOptional);
    d.finish();
    out.devices.push_back(std::move(dev));
  });
  read_object_array(o, "links", [&](JsonObject& l) {
    NodeLink link;
    l.read("a", link.a, Need::kRequired);
    l.read("b", link.b, Need::kRequired);
    read_link_fields(l, link.link);
    l.finish();
    out.links.push_back(std::move(link));
  });
  o.finish();
}

void read_fabric(JsonObject& o, FabricSpec& f) {
  Diagnostics& diag = o.diagnostics();
  const std::size_t before = diag.size();
  if (!o.read_enum("type", f.type, Need::kRequired)) {
    // Nothing else can be interpreted; still flag unknown keys against the full vocabulary.
    for (const char* key : {"tiers", "hosts_per_leaf", "nodes_per_unit", "oversubscription",
                            "uplinks_per_leaf", "leaves_per_pod", "spine_oversubscription",
                            "uplinks_per_spine", "radix", "host_link", "switch_link"}) {
      o.accept(key);
    }
    o.finish();
    return;
  }
  if (f.type == FabricType::kNone) {
    o.finish();
    return;
  }
  if (f.type == FabricType::kLeafSpine) {
    o.read("tiers", f.tiers, Need::kOptional, {2, 2});
  } else {
    o.read("tiers", f.tiers, Need::kRequired, {2, 3});
  }
  const char* hosts_key =
      f.type == FabricType::kRailOptimized ? "nodes_per_unit" : "hosts_per_leaf";
  o.read(hosts_key, f.hosts_per_leaf, Need::kRequired, {1, kMaxCount});
  read_link_object(o, "host_link", Need::kRequired, f.host_link);
  read_link_object(o, "switch_link", Need::kRequired, f.switch_link);
  o.read("radix", f.radix, Need::kOptional, {2, kMaxCount});
  double ratio = 1;
  const bool have_ratio =
      o.read("oversubscription", ratio, Need::kOptional, {1.0, 1024.0, false, "down:up, e.g. 2"});
  const bool have_uplinks =
      o.read("uplinks_per_leaf", f.uplinks_per_leaf, Need::kOptional, {1, kMaxCount});
  if (have_ratio && have_uplinks) {
    o.error("uplinks_per_leaf", "give oversubscription or uplinks_per_leaf, not both");
  }
  const bool three = f.tiers == 3;
  if (three) {
    o.read("leaves_per_pod", f.leaves_per_pod, Need::kRequired, {1, kMaxCount});
  }
  double spine_ratio = 1;
  bool have_spine_ratio = false;
  bool have_spine_uplinks = false;
  for (const char* key : {"leaves_per_pod", "spine_oversubscription", "uplinks_per_spine"}) {
    if (!three && o.has(key)) {
      o.error(key, "only for 3-tier fabrics");
      o.accept(key);
    }
  }
  if (three) {
    have_spine_ratio = o.read("spine_oversubscription", spine_ratio, Need::kOptional,
                              {1.0, 1024.0, false, "down:up, e.g. 7"});
    have_spine_uplinks =
        o.read("uplinks_per_spine", f.uplinks_per_spine, Need::kOptional, {1, kMaxCount});
    if (have_spine_ratio && have_spine_uplinks) {
      o.error("uplinks_per_spine", "give spine_oversubscription or uplinks_per_spine, not both");
    }
  }
  o.finish();
  if (diag.size() != before) return;
  if (!have_uplinks) {
    auto uplinks = uplinks_for_oversubscription(f.hosts_per_leaf, f.host_link.bandwidth, ratio,
                                                f.switch_link.bandwidth);
    if (uplinks) {
      f.uplinks_per_leaf = *uplinks;
    } else {
      o.error(have_ratio ? "oversubscription" : "switch_link", uplinks.status().message());
    }
  }
  if (three && !have_spine_uplinks) {
    auto uplinks = uplinks_for_oversubscription(f.leaves_per_pod, f.switch_link.bandwidth,
                                                spine_ratio, f.switch_link.bandwidth);
    if (uplinks) {
      f.uplinks_per_spine = *uplinks;
    } else {
      o.error("spine_oversubscription", uplinks.status().message());
    }
  }
}

}  // namespace

bool read_topology_fields(JsonObject& root, const Catalog& catalog, TopologySpec& t) {
  Diagnostics& diag = root.diagnostics();
  const std::size_t before = diag.size();
  root.read_name("name", t.name, Need::kRequired);
  root.read_names("aliases", t.aliases, Need::kOptional);
  root.read("description", t.description, Need::kRequired);
  if (root.read("gpu", t.gpu, Need::kRequired)) {
    auto gpu = catalog.gpu(t.gpu);
    if (gpu) {
      t.gpu = gpu->name;
    } else {
      root.error("gpu", gpu.status().message());
    }
  }
  root.read("provider", t.provider, Need::kOptional);
  root.read("instance", t.instance, Need::kOptional);
  if (t.provider.empty() != t.instance.empty()) {
    root.error(t.provider.empty() ? "provider" : "instance",
               "give the cloud instance's provider and instance together (e.g. \"provider\": "
               "\"AWS\", \"instance\": \"p5.48xlarge\")");
  }
  root.read("default_nodes", t.default_nodes, Need::kOptional, {1, limits::kMaxNodes});
  if (root.read("sources", t.sources, Need::kRequired) && t.sources.empty()) {
    root.error("sources", "list at least one source for the figures in this topology");
  }
  root.read("notes", t.notes, Need::kOptional);

  bool node_read = false;
  if (const Json* node = root.child("node", Need::kRequired)) {
    JsonObject o(*node, root.pointer_of("node"), diag);
    if (o.valid()) {
      const std::size_t node_before = diag.size();
      if (o.has("generator")) {
        if (o.has("devices") || o.has("links")) {
          o.error("generator", "give a generator or explicit devices and links, not both");
          o.accept("devices");
          o.accept("links");
        }
        read_generated_node(o, t.node);
      } else {
        read_explicit_node(o, t.node);
      }
      node_read = diag.size() == node_before;
    }
  }
  if (const Json* domain = root.child("nvlink_domain", Need::kOptional)) {
    JsonObject o(*domain, root.pointer_of("nvlink_domain"), diag);
    if (o.valid()) {
      NvlinkDomainSpec d;
      o.read("nodes", d.nodes, Need::kRequired, {2, limits::kMaxNodes});
      if (read_link_object(o, "link", Need::kRequired, d.link) &&
          link_class(d.link.kind) != LinkClass::kNvlink) {
        diag.add(o.pointer_of("link") + "/kind",
                 "expected a GPU-to-GPU link kind (nvlink2 .. nvlink5, xgmi), got \"" +
                     std::string(to_string(d.link.kind)) + "\"");
      }
      o.finish();
      t.nvlink_domain = d;
    }
  }
  bool fabric_read = false;
  if (const Json* fabric = root.child("fabric", Need::kRequired)) {
    JsonObject o(*fabric, root.pointer_of("fabric"), diag);
    if (o.valid()) {
      const std::size_t fabric_before = diag.size();
      read_fabric(o, t.fabric);
      fabric_read = diag.size() == fabric_before;
    }
  }
  root.finish();
  if (node_read) node_read = check_node(t.node, t.nvlink_domain.has_value(), diag, "/node");
  if (node_read && fabric_read && diag.size() == before) {
    check_fabric(t, t.default_nodes, diag, "/fabric");
  }
  return diag.size() == before;
}

Result<TopologySpec> parse_topology(std::string_view text, std::string_view source,
                                    const Catalog& catalog) {
  Diagnostics diag{std::string(source)};
  auto json = parse_json_text(text, diag);
  if (!json) return diag.to_status();
  JsonObject root(*json, "", diag);
  TopologySpec spec;
  if (root.valid()) {
    read_document_header(root, "topology");
    read_topology_fields(root, catalog, spec);
  }
  if (!diag.empty()) return diag.to_status();
  return spec;
}

Result<TopologySpec> load_topology_file(const std::string& path, const Catalog& catalog) {
  PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_topology(text, path, catalog);
}

void register_topology_documents(DocumentTypes& types) {
  types.add("topology", "a node's devices and links plus the fabric joining nodes",
            [](JsonObject& root, Diagnostics&) {
              TopologySpec spec;
              read_topology_fields(root, builtin_catalog(), spec);
            });
}

}  // namespace planner::topo
