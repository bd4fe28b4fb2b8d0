#include "planner/topo/cluster_numbers.hpp"

#include <cmath>
#include <cstdio>
#include <numeric>

namespace planner::topo {
namespace {

// The assumptions of the header: switch radix, latencies, the CPU link.
constexpr int kRadix = 64;
constexpr int kLeavesPerPod = kRadix / 2;
constexpr int kCpus = 2;
constexpr double kCpuLinkGBps = 64;
constexpr double kNvlinkLatencyNs = 250;
constexpr double kPcieLatencyNs = 150;
constexpr double kCpuLatencyNs = 120;
constexpr double kNicLatencyNs = 600;
constexpr double kSwitchLatencyNs = 230;
// NVLink per GPU per direction by generation (reference data hardware_specs.json links.nvlink:
// NVLink2 150 GB/s on V100, NVLink3 300 on A100, NVLink4 450 on H100, NVLink5 900 on B200).
constexpr double kNvlink2GBps = 150;
constexpr double kNvlink3GBps = 300;
constexpr double kNvlink4GBps = 450;

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

LinkKind nvlink_kind(double per_gpu_GBps) {
  if (per_gpu_GBps <= kNvlink2GBps) return LinkKind::kNvlink2;
  if (per_gpu_GBps <= kNvlink3GBps) return LinkKind::kNvlink3;
  if (per_gpu_GBps <= kNvlink4GBps) return LinkKind::kNvlink4;
  return LinkKind::kNvlink5;
}

LinkKind pcie_kind(const GpuSpec& gpu) {
  if (gpu.arch == "Volta") return LinkKind::kPcie3;
  if (gpu.arch == "Ampere" || gpu.arch == "Ada Lovelace") return LinkKind::kPcie4;
  return LinkKind::kPcie5;
}

LinkSpec link(LinkKind kind, Bandwidth bandwidth, double latency_ns) {
  LinkSpec l;
  l.kind = kind;
  l.count = 1;
  l.bandwidth = bandwidth;
  l.latency = nanoseconds(latency_ns);
  return l;
}

}  // namespace

LinkKind nic_link_kind(const ClusterNumbers& n) {
  if (n.nic_kind) return *n.nic_kind;
  for (LinkKind k : {LinkKind::kIbEdr, LinkKind::kIbHdr, LinkKind::kIbNdr, LinkKind::kIbXdr}) {
    if (auto nominal = nominal_bandwidth(k);
        nominal && std::abs(to_GBps(*nominal) * 8 - n.nic_Gbps) < 1e-6) {
      return k;
    }
  }
  return LinkKind::kEthernet;
}

std::string describe(const ClusterNumbers& n) {
  std::string out =
      std::to_string(n.gpus_per_node) + " GPUs, " +
      (n.nvlink_GBps > 0 ? "NVLink " + number(n.nvlink_GBps) + " GB/s" : std::string("PCIe only"));
  if (n.nics > 0) {
    out += ", " + std::to_string(n.nics) + " x " + number(n.nic_Gbps) + " Gb/s " +
           std::string(to_string(nic_link_kind(n))) + ", " + std::string(to_string(n.fabric)) +
           " " + number(n.oversubscription) + ":1";
  }
  return out;
}

std::optional<double> parse_oversubscription(const std::string& text) {
  double down = 0, up = 1;
  const std::size_t colon = text.find(':');
  try {
    std::size_t used = 0;
    down = std::stod(text.substr(0, colon), &used);
    if (used != (colon == std::string::npos ? text.size() : colon)) return std::nullopt;
    if (colon != std::string::npos) {
      const std::string rest = text.substr(colon + 1);
      up = std::stod(rest, &used);
      if (used != rest.size()) return std::nullopt;
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!(up > 0) || !std::isfinite(down / up) || down / up < 1) return std::nullopt;
  return down / up;
}

Result<TopologySpec> topology_from_numbers(const ClusterNumbers& n, const GpuSpec& gpu, int nodes) {
  if (n.gpus_per_node < 1) {
    return Status::invalid_input("GPUs per node must be >= 1, got " +
                                 std::to_string(n.gpus_per_node));
  }
  if (!(n.nvlink_GBps >= 0) || !std::isfinite(n.nvlink_GBps)) {
    return Status::invalid_input("NVLink bandwidth must be >= 0 GB/s, got " +
                                 number(n.nvlink_GBps));
  }
  if (n.nics < 0) return Status::invalid_input("NICs per node must be >= 0");
  if (n.nics > 0 && !(n.nic_Gbps > 0 && std::isfinite(n.nic_Gbps))) {
    return Status::invalid_input("NICs need a rate: NIC Gb/s must be > 0, got " +
                                 number(n.nic_Gbps));
  }
  if (!(n.oversubscription >= 1) || !std::isfinite(n.oversubscription)) {
    return Status::invalid_input("oversubscription must be >= 1 (down:up), got " +
                                 number(n.oversubscription));
  }
  if (n.tiers != 0 && n.tiers != 2 && n.tiers != 3) {
    return Status::invalid_input("fabric tiers must be 2 or 3, got " + std::to_string(n.tiers));
  }
  if (nodes < 1) return Status::invalid_input("nodes must be >= 1");
  if (n.fabric != FabricType::kNone && n.nics == 0 && nodes > 1) {
    return Status::invalid_input("a " + std::string(to_string(n.fabric)) + " fabric joining " +
                                 std::to_string(nodes) +
                                 " nodes needs NICs: give the NICs per node and their rate");
  }

  TopologySpec t;
  t.name = describe(n);
  t.gpu = gpu.name;
  t.default_nodes = nodes;
  t.description = "stated in numbers: " + describe(n);
  t.sources = {"the numbers given: " + describe(n)};
  std::string notes;

  NodeGeneratorParams p;
  p.gpus = n.gpus_per_node;
  if (n.nvlink_GBps > 0) {
    p.generator = NodeGenerator::kNvSwitch;
    p.nvlink = link(nvlink_kind(n.nvlink_GBps), GBps(n.nvlink_GBps), kNvlinkLatencyNs);
    notes += "GPUs joined by one NVSwitch crossbar at " + number(n.nvlink_GBps) +
             " GB/s per direction (" + std::string(to_string(p.nvlink->kind)) + " by its rate). ";
  } else {
    p.generator = NodeGenerator::kPcie;
    notes += "GPUs joined only through PCIe. ";
  }
  const LinkKind pcie = pcie_kind(gpu);
  p.pcie = link(pcie, *nominal_bandwidth(pcie), kPcieLatencyNs);
  p.nics = n.nics;
  // Without NICs the switches follow the CPUs (each CPU needs a whole number of switches).
  p.pcie_switches =
      n.nics > 0 ? std::gcd(n.gpus_per_node, n.nics) : (n.gpus_per_node % kCpus == 0 ? kCpus : 1);
  p.cpus = p.pcie_switches % kCpus == 0 ? kCpus : 1;
  p.cpu_link = link(LinkKind::kCpuInterconnect, GBps(kCpuLinkGBps), kCpuLatencyNs);
  notes += std::string(to_string(pcie)) + " by the GPU's architecture (" + gpu.arch + "), " +
           std::to_string(p.pcie_switches) + " PCIe switches, " + std::to_string(p.cpus) +
           " CPUs (assumed). ";
  PLANNER_ASSIGN_OR_RETURN(t.node, generate_node(p));

  FabricSpec& f = t.fabric;
  f.type = n.nics > 0 ? n.fabric : FabricType::kNone;
  if (f.type != FabricType::kNone) {
    const LinkKind kind = nic_link_kind(n);
    f.host_link = link(kind, Gbps(n.nic_Gbps), kNicLatencyNs);
    f.switch_link =
        link(kind == LinkKind::kRoce || kind == LinkKind::kEfa ? LinkKind::kEthernet : kind,
             Gbps(n.nic_Gbps), kSwitchLatencyNs);
    f.radix = kRadix;
    int hosts = 0;
    for (int h = kRadix - 1; h >= 1; --h) {
      const double up = h / n.oversubscription;
      if (std::abs(up - std::round(up)) < 1e-9 && up >= 1 &&
          h + static_cast<int>(std::round(up)) <= kRadix) {
        hosts = h;
        break;
      }
    }
    if (hosts == 0) {
      return Status::invalid_input("oversubscription " + number(n.oversubscription) +
                                   ":1 leaves no whole number of uplinks on a " +
                                   std::to_string(kRadix) + "-port leaf");
    }
    f.hosts_per_leaf = hosts;
    f.uplinks_per_leaf = static_cast<int>(std::round(hosts / n.oversubscription));
    const std::int64_t ports = static_cast<std::int64_t>(nodes) * n.nics;
    const std::int64_t leaves = f.type == FabricType::kRailOptimized
                                    ? (nodes + hosts - 1) / hosts * n.nics
                                    : (ports + hosts - 1) / hosts;
    if (f.type == FabricType::kLeafSpine) {
      f.tiers = 2;
    } else {
      f.tiers = n.tiers != 0 ? n.tiers : (leaves <= kRadix ? 2 : 3);
    }
    if (f.tiers == 3) {
      f.leaves_per_pod = kLeavesPerPod;
      f.uplinks_per_spine = kLeavesPerPod;
    }
    notes += std::to_string(n.nics) + " NICs of " + number(n.nic_Gbps) + " Gb/s (" +
             std::string(to_string(kind)) + (n.nic_kind ? "" : ", by its rate") + ") on a " +
             std::to_string(f.tiers) + "-tier " + std::string(to_string(f.type)) + " of " +
             std::to_string(kRadix) + "-port switches (assumed), " + std::to_string(hosts) +
             " hosts and " + std::to_string(f.uplinks_per_leaf) + " uplinks per leaf. ";
  }
  t.notes = notes;
  Diagnostics diag{"cluster numbers"};
  check_node(t.node, false, diag, "/node");
  check_fabric(t, nodes, diag, "/fabric");
  PLANNER_RETURN_IF_ERROR(diag.to_status());
  return t;
}

}  // namespace planner::topo
