#include "planner/topo/topology_spec.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <unordered_map>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/connected_components.hpp>

#include "fabric_layout.hpp"
#include "planner/core/limits.hpp"

namespace planner::topo {
namespace {

std::string str(long long v) {
  return std::to_string(v);
}

std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, std::fabs(r - std::round(r)) < 1e-9 ? "%.0f:1" : "%.2f:1", r);
  return buf;
}

bool is_node_kind(DeviceKind kind) {
  return !is_fabric_switch(kind);
}

// Splits `count` items over `groups` groups evenly: item i goes to group i * groups / count when
// there are more groups than items, to i / (count / groups) otherwise. Requires divisibility.
int group_of(int i, int count, int groups) {
  if (count >= groups) return i / (count / groups);
  return i * (groups / count);
}

bool divides_either(int a, int b) {
  return a > 0 && b > 0 && (a % b == 0 || b % a == 0);
}

}  // namespace

int NodeSpec::count(DeviceKind kind) const {
  return static_cast<int>(std::count_if(devices.begin(), devices.end(),
                                        [kind](const NodeDevice& d) { return d.kind == kind; }));
}

int NodeSpec::find(std::string_view id) const {
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

std::unordered_map<std::string_view, int> NodeSpec::index() const {
  std::unordered_map<std::string_view, int> out;
  out.reserve(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i)
    out.emplace(devices[i].id, static_cast<int>(i));
  return out;
}

const std::vector<CubeMeshLink>& hybrid_cube_mesh_links() {
  // Row i of `nvidia-smi topo -m` on a DGX-1 (V100): NV1/NV2 entries; every GPU has 6 links.
  static const std::vector<CubeMeshLink> kLinks{
      {0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1}, {1, 5, 2}, {2, 3, 2},
      {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2},
  };
  return kLinks;
}

bool generate_node(const NodeGeneratorParams& p, NodeSpec& out, Diagnostics& diag,
                   const std::string& pointer) {
  const std::size_t before = diag.size();
  auto error = [&](const std::string& key, std::string message) {
    diag.add(pointer + "/" + key, std::move(message));
  };
  const bool wants_nvlink = p.generator != NodeGenerator::kPcie;
  const std::string gen_name(to_string(p.generator));
  if (p.gpus < 1) error("gpus", "must be >= 1, got " + str(p.gpus));
  if (wants_nvlink && !p.nvlink) {
    error("nvlink", "required by the " + gen_name + " generator");
  } else if (!wants_nvlink && p.nvlink) {
    error("nvlink", "the pcie generator builds GPUs without NVLink; remove this key");
  }
  if (p.nvlink && link_class(p.nvlink->kind) != LinkClass::kNvlink) {
    error("nvlink/kind", "expected a GPU-to-GPU link kind (nvlink2 .. nvlink5, xgmi), got \"" +
                             std::string(to_string(p.nvlink->kind)) + "\"");
  }
  if (p.generator == NodeGenerator::kHybridCubeMesh) {
    if (p.gpus != 8)
      error("gpus", "the hybrid-cube-mesh generator builds 8 GPUs, got " + str(p.gpus));
    if (p.nvlink && p.nvlink->count != 1) {
      error("nvlink/count",
            "the hybrid-cube-mesh generator sets 1 or 2 links per GPU pair; give "
            "one link's figures, got count " +
                str(p.nvlink->count));
    }
  }
  if (link_class(p.pcie.kind) != LinkClass::kPcie) {
    error("pcie/kind", "expected a PCIe kind (pcie3 .. pcie6), got \"" +
                           std::string(to_string(p.pcie.kind)) + "\"");
  }
  if (p.pcie_switches < 1) {
    error("pcie_switches", "must be >= 1, got " + str(p.pcie_switches));
  } else if (p.gpus >= 1 && p.gpus % p.pcie_switches != 0) {
    error("pcie_switches", "must divide gpus (" + str(p.gpus) + "), got " + str(p.pcie_switches));
  }
  if (p.cpus < 1) {
    error("cpus", "must be >= 1, got " + str(p.cpus));
  } else if (p.pcie_switches >= 1 && p.pcie_switches % p.cpus != 0) {
    error("cpus", "must divide pcie_switches (" + str(p.pcie_switches) + "), got " + str(p.cpus));
  }
  if (p.cpus >= 2 && !p.cpu_link) error("cpu_link", "required when cpus >= 2");
  if (p.nics < 0) {
    error("nics", "must be >= 0, got " + str(p.nics));
  } else if (p.nics > 0 && p.pcie_switches >= 1 && !divides_either(p.nics, p.pcie_switches)) {
    error("nics", "must divide or be a multiple of pcie_switches (" + str(p.pcie_switches) +
                      "), got " + str(p.nics));
  } else if (p.nics > 0 && p.gpus >= 1 && !divides_either(p.nics, p.gpus)) {
    error("nics", "must divide or be a multiple of gpus (" + str(p.gpus) + "), got " + str(p.nics));
  }
  if (diag.size() != before) return false;

  NodeSpec node;
  node.generator = gen_name;
  auto add = [&node](std::string id, DeviceKind kind) {
    node.devices.push_back({std::move(id), kind, {}});
  };
  auto link = [&node](const std::string& a, const std::string& b, LinkSpec spec) {
    node.links.push_back({a, b, spec});
  };
  auto gpu = [](int i) { return "gpu" + str(i); };
  for (int i = 0; i < p.gpus; ++i)
    add(gpu(i), DeviceKind::kGpu);
  if (p.generator == NodeGenerator::kNvSwitch) add("nvswitch", DeviceKind::kNvSwitch);
  for (int i = 0; i < p.pcie_switches; ++i)
    add("pcie" + str(i), DeviceKind::kPcieSwitch);
  for (int i = 0; i < p.cpus; ++i)
    add("cpu" + str(i), DeviceKind::kCpu);
  for (int i = 0; i < p.nics; ++i) {
    add("nic" + str(i), DeviceKind::kNic);
    if (p.nics >= p.gpus) {
      node.devices.back().serves.push_back(gpu(i / (p.nics / p.gpus)));
    } else {
      const int per = p.gpus / p.nics;
      for (int g = i * per; g < (i + 1) * per; ++g)
        node.devices.back().serves.push_back(gpu(g));
    }
  }

  if (p.generator == NodeGenerator::kNvSwitch) {
    for (int i = 0; i < p.gpus; ++i)
      link(gpu(i), "nvswitch", *p.nvlink);
  } else if (p.generator == NodeGenerator::kHybridCubeMesh) {
    for (const CubeMeshLink& l : hybrid_cube_mesh_links()) {
      LinkSpec s = *p.nvlink;
      s.count = l.links;
      s.bandwidth = p.nvlink->bandwidth * l.links;
      link(gpu(l.a), gpu(l.b), s);
    }
  }
  for (int i = 0; i < p.gpus; ++i)
    link(gpu(i), "pcie" + str(group_of(i, p.gpus, p.pcie_switches)), p.pcie);
  for (int i = 0; i < p.nics; ++i)
    link("nic" + str(i), "pcie" + str(group_of(i, p.nics, p.pcie_switches)), p.pcie);
  for (int i = 0; i < p.pcie_switches; ++i)
    link("pcie" + str(i), "cpu" + str(group_of(i, p.pcie_switches, p.cpus)), p.pcie);
  for (int a = 0; a < p.cpus; ++a) {
    for (int b = a + 1; b < p.cpus; ++b)
      link("cpu" + str(a), "cpu" + str(b), *p.cpu_link);
  }
  out = std::move(node);
  return true;
}

Result<NodeSpec> generate_node(const NodeGeneratorParams& params) {
  Diagnostics diag("node generator");
  NodeSpec node;
  if (!generate_node(params, node, diag, "")) return diag.to_status();
  return node;
}

bool check_node(const NodeSpec& node, bool through_domain, Diagnostics& diag,
                const std::string& pointer) {
  const std::size_t before = diag.size();
  const bool explicit_node = node.generator.empty();
  auto at = [&](const std::string& suffix) { return explicit_node ? pointer + suffix : pointer; };
  const int gpus = node.count(DeviceKind::kGpu);
  if (gpus == 0) diag.add(at("/devices"), "a node needs at least one gpu device");
  // Routes are kept for every pair of a node's GPUs: bound the node before building anything.
  if (gpus > limits::kMaxGpusPerNode) {
    diag.add(at("/devices"), "a node holds at most " + str(limits::kMaxGpusPerNode) +
                                 " gpu devices, got " + str(gpus));
    return false;
  }
  if (node.devices.size() > static_cast<std::size_t>(limits::kMaxNodeDevices)) {
    diag.add(at("/devices"), "a node holds at most " + str(limits::kMaxNodeDevices) +
                                 " devices, got " +
                                 str(static_cast<long long>(node.devices.size())));
    return false;
  }
  const std::unordered_map<std::string_view, int> index = node.index();
  auto find = [&index](std::string_view id) {
    const auto it = index.find(id);
    return it == index.end() ? -1 : it->second;
  };
  std::map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < node.devices.size(); ++i) {
    const NodeDevice& d = node.devices[i];
    const std::string dp = "/devices/" + str(static_cast<long long>(i));
    auto [it, inserted] = first.emplace(d.id, i);
    if (!inserted) {
      diag.add(at(dp + "/id"), "duplicate device id \"" + d.id + "\" (first at " + pointer +
                                   "/devices/" + str(static_cast<long long>(it->second)) + ")");
    }
    if (!is_node_kind(d.kind)) {
      diag.add(at(dp + "/kind"), "\"" + std::string(to_string(d.kind)) +
                                     "\" switches are generated from /fabric; a node holds gpu, "
                                     "nvswitch, pcie-switch, cpu and nic devices");
    }
    if (!d.serves.empty() && d.kind != DeviceKind::kNic) {
      diag.add(at(dp + "/serves"), "only nic devices serve GPUs; \"" + d.id + "\" is a " +
                                       std::string(to_string(d.kind)));
    }
    for (std::size_t j = 0; j < d.serves.size(); ++j) {
      const int target = find(d.serves[j]);
      const std::string sp = dp + "/serves/" + str(static_cast<long long>(j));
      if (target < 0) {
        diag.add(at(sp), "unknown device \"" + d.serves[j] + "\"");
      } else if (node.devices[target].kind != DeviceKind::kGpu) {
        diag.add(at(sp), "\"" + d.serves[j] + "\" is a " +
                             std::string(to_string(node.devices[target].kind)) + ", not a gpu");
      }
    }
  }
  for (std::size_t i = 0; i < node.links.size(); ++i) {
    const NodeLink& l = node.links[i];
    const std::string lp = "/links/" + str(static_cast<long long>(i));
    if (find(l.a) < 0) diag.add(at(lp + "/a"), "unknown device \"" + l.a + "\"");
    if (find(l.b) < 0) diag.add(at(lp + "/b"), "unknown device \"" + l.b + "\"");
    if (l.a == l.b) {
      diag.add(at(lp + "/b"), "a link joins two different devices, got \"" + l.a + "\" twice");
    }
    if (!(l.link.bandwidth.raw() > 0)) diag.add(at(lp), "bandwidth must be > 0");
    if (l.link.count < 1) diag.add(at(lp + "/count"), "must be >= 1, got " + str(l.link.count));
    if (l.link.latency < Time::zero()) diag.add(at(lp + "/latency_ns"), "must be >= 0");
  }
  if (diag.size() != before) return false;

  // Connectivity: one component over the node's links (plus a virtual domain switch on all GPUs).
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
  const std::size_t n = node.devices.size();
  Graph g(n + (through_domain ? 1 : 0));
  for (const NodeLink& l : node.links) {
    boost::add_edge(static_cast<std::size_t>(find(l.a)), static_cast<std::size_t>(find(l.b)), g);
  }
  if (through_domain) {
    for (std::size_t i = 0; i < n; ++i) {
      if (node.devices[i].kind == DeviceKind::kGpu) boost::add_edge(i, n, g);
    }
  }
  std::vector<int> component(boost::num_vertices(g));
  boost::connected_components(g, component.data());
  for (std::size_t i = 1; i < n; ++i) {
    if (component[i] != component[0]) {
      diag.add(at("/devices/" + str(static_cast<long long>(i))),
               "device \"" + node.devices[i].id + "\" is not connected to \"" + node.devices[0].id +
                   "\": the node graph is disconnected");
    }
  }
  return diag.size() == before;
}

double FabricSpec::leaf_oversubscription() const {
  if (uplinks_per_leaf <= 0) return 0;
  return (host_link.bandwidth * hosts_per_leaf) / (switch_link.bandwidth * uplinks_per_leaf);
}

double FabricSpec::spine_oversubscription() const {
  if (tiers != 3 || uplinks_per_spine <= 0) return 0;
  return static_cast<double>(leaves_per_pod) / uplinks_per_spine;
}

Result<int> uplinks_for_oversubscription(int down, Bandwidth down_bw, double ratio,
                                         Bandwidth up_bw) {
  if (!(ratio > 0) || !(up_bw.raw() > 0)) {
    return Status::invalid_input("oversubscription and bandwidths must be > 0");
  }
  const double exact = (down_bw * down) / up_bw / ratio;
  const double rounded = std::round(exact);
  if (rounded < 1 || std::fabs(exact - rounded) > 1e-9 * std::max(1.0, exact)) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%d down links of %g GB/s at %s oversubscription need %.4g uplinks of %g GB/s; "
                  "that must be a whole number >= 1",
                  down, to_GBps(down_bw), ratio_text(ratio).c_str(), exact, to_GBps(up_bw));
    return Status::invalid_input(buf);
  }
  return static_cast<int>(rounded);
}

bool TopologySpec::matches(std::string_view query) const {
  auto iequal = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) ==
                    std::tolower(static_cast<unsigned char>(y));
           });
  };
  if (iequal(name, query)) return true;
  return std::any_of(aliases.begin(), aliases.end(),
                     [&](const std::string& a) { return iequal(a, query); });
}

std::string TopologySpec::fabric_summary() const {
  std::string s;
  const FabricSpec& f = fabric;
  if (f.type == FabricType::kNone) {
    s = "no scale-out fabric";
  } else {
    s = std::string(to_string(f.type));
    if (f.type != FabricType::kLeafSpine) s += ", " + str(f.tiers) + " tiers";
    s += f.type == FabricType::kRailOptimized ? ", " + str(f.hosts_per_leaf) + " nodes/unit"
                                              : ", " + str(f.hosts_per_leaf) + " ports/leaf";
    s += ", " + ratio_text(f.leaf_oversubscription());
    if (f.tiers == 3 && f.spine_oversubscription() > 1 + 1e-9) {
      s += " (spines " + ratio_text(f.spine_oversubscription()) + ")";
    }
    s += ", " + std::string(to_string(f.host_link.kind)) + " " +
         rate_text(f.host_link.kind, f.host_link.bandwidth);
  }
  if (nvlink_domain) s += "; NVLink domain of " + str(nvlink_domain->nodes) + " nodes";
  return s;
}

namespace detail {

int leaf_of(const FabricSpec& fabric, int nics_per_node, int node, int nic) {
  if (fabric.type == FabricType::kRailOptimized) {
    return (node / fabric.hosts_per_leaf) * nics_per_node + nic;
  }
  return static_cast<int>((static_cast<long long>(node) * nics_per_node + nic) /
                          fabric.hosts_per_leaf);
}

FabricLayout fabric_layout(const TopologySpec& spec, int nodes) {
  FabricLayout out;
  const FabricSpec& f = spec.fabric;
  out.nics_per_node = spec.node.count(DeviceKind::kNic);
  if (f.type == FabricType::kNone || out.nics_per_node == 0 || f.hosts_per_leaf < 1) return out;
  out.leaves = f.type == FabricType::kRailOptimized
                   ? ceil_div(nodes, f.hosts_per_leaf) * out.nics_per_node
                   : ceil_div(static_cast<long long>(nodes) * out.nics_per_node, f.hosts_per_leaf);
  out.pods = 1;
  if (out.leaves <= 1) return out;
  if (f.tiers == 3 && f.leaves_per_pod >= 1) {
    out.pods = ceil_div(out.leaves, f.leaves_per_pod);
    out.spines = out.pods * f.uplinks_per_leaf;
    if (out.pods > 1) out.cores = f.uplinks_per_leaf * f.uplinks_per_spine;
  } else {
    out.spines = f.uplinks_per_leaf;
  }
  return out;
}

}  // namespace detail

bool check_fabric(const TopologySpec& spec, int nodes, Diagnostics& diag,
                  const std::string& pointer) {
  const std::size_t before = diag.size();
  const FabricSpec& f = spec.fabric;
  auto error = [&](const std::string& key, std::string message) {
    diag.add(pointer + "/" + key, std::move(message));
  };
  const int domain_nodes = spec.nvlink_domain ? spec.nvlink_domain->nodes : 1;
  if (f.type == FabricType::kNone) {
    if (nodes > domain_nodes) {
      error("type", "without a scale-out fabric at most " + str(domain_nodes) +
                        " node(s) can be joined, asked for " + str(nodes));
    }
    return diag.size() == before;
  }
  const int nics = spec.node.count(DeviceKind::kNic);
  if (nics == 0)
    error("type", "a " + std::string(to_string(f.type)) +
                      " fabric needs nic devices in the node; it has none");
  if (f.tiers != 2 && f.tiers != 3) error("tiers", "must be 2 or 3, got " + str(f.tiers));
  if (f.type == FabricType::kLeafSpine && f.tiers != 2)
    error("tiers", "a leaf-spine fabric has 2 tiers");
  if (f.hosts_per_leaf < 1) {
    error(f.type == FabricType::kRailOptimized ? "nodes_per_unit" : "hosts_per_leaf",
          "must be >= 1, got " + str(f.hosts_per_leaf));
  }
  if (f.uplinks_per_leaf < 1)
    error("uplinks_per_leaf", "must be >= 1, got " + str(f.uplinks_per_leaf));
  if (f.tiers == 3) {
    if (f.leaves_per_pod < 1)
      error("leaves_per_pod", "must be >= 1 with 3 tiers, got " + str(f.leaves_per_pod));
    if (f.uplinks_per_spine < 1) {
      error("uplinks_per_spine", "must be >= 1 with 3 tiers, got " + str(f.uplinks_per_spine));
    }
  }
  if (!(f.host_link.bandwidth.raw() > 0)) error("host_link", "bandwidth must be > 0");
  if (!(f.switch_link.bandwidth.raw() > 0)) error("switch_link", "bandwidth must be > 0");
  if (diag.size() != before) return false;

  const detail::FabricLayout layout = detail::fabric_layout(spec, nodes);
  if (f.radix > 0) {
    const int leaf_ports = f.hosts_per_leaf + f.uplinks_per_leaf;
    if (leaf_ports > f.radix) {
      error("radix", "a leaf needs " + str(leaf_ports) + " ports (" + str(f.hosts_per_leaf) +
                         " down + " + str(f.uplinks_per_leaf) + " up), more than the radix " +
                         str(f.radix));
    }
    if (f.tiers == 2 && layout.leaves > f.radix) {
      error("tiers", str(nodes) + " nodes need " + str(layout.leaves) + " leaves, so spines with " +
                         str(layout.leaves) + " ports, more than the radix " + str(f.radix) +
                         "; use 3 tiers or fewer nodes");
    }
    if (f.tiers == 3) {
      const int spine_ports = f.leaves_per_pod + f.uplinks_per_spine;
      if (spine_ports > f.radix) {
        error("radix", "a spine needs " + str(spine_ports) + " ports (" + str(f.leaves_per_pod) +
                           " down + " + str(f.uplinks_per_spine) + " up), more than the radix " +
                           str(f.radix));
      }
      if (layout.pods > f.radix) {
        error("leaves_per_pod", str(nodes) + " nodes need " + str(layout.pods) +
                                    " pods, so cores with " + str(layout.pods) +
                                    " ports, more than the radix " + str(f.radix));
      }
    }
  }
  return diag.size() == before;
}

}  // namespace planner::topo
