#include "cluster_args.hpp"

#include "plan_args.hpp"

namespace planner::cli {

void add_cluster_number_options(CLI::App* cmd, ClusterNumberArgs& a, CLI::Option* topology) {
  std::vector<CLI::Option*> opts;
  opts.push_back(cmd->add_option("--node-gpus", a.node_gpus,
                                 "The cluster in numbers instead of a topology preset: GPUs per "
                                 "node (with --nics, --nic-Gbps, ...)"));
  opts.push_back(cmd->add_option("--nvlink-GBps", a.nvlink_GBps,
                                 "NVLink per GPU per direction, GB/s (0: PCIe only; default: the "
                                 "GPU preset's)"));
  opts.push_back(cmd->add_option("--nics", a.nics, "Scale-out NICs per node"));
  opts.push_back(cmd->add_option("--nic-Gbps", a.nic_Gbps, "Rate of one NIC, Gb/s"));
  opts.push_back(cmd->add_option("--nic-kind", a.nic_kind,
                                 "ib-edr, ib-hdr, ib-ndr, ib-xdr, roce, efa or ethernet "
                                 "(default: InfiniBand of that rate, else ethernet)"));
  opts.push_back(
      cmd->add_option("--fabric", a.fabric, "fat-tree (default), rail-optimized or leaf-spine"));
  opts.push_back(cmd->add_option("--oversubscription", a.oversubscription,
                                 "Leaf down:up bandwidth, e.g. 1:1 (default) or 2:1"));
  opts.push_back(cmd->add_option("--fabric-tiers", a.tiers,
                                 "Switch tiers, 2 or 3 (default: from the cluster's size)"));
  if (topology != nullptr) {
    for (CLI::Option* o : opts)
      o->excludes(topology);
  }
}

bool has_cluster_numbers(const ClusterNumberArgs& a) {
  return a.node_gpus != 0 || a.nvlink_GBps >= 0 || a.nics != 0 || a.nic_Gbps != 0 ||
         !a.nic_kind.empty() || !a.fabric.empty() || !a.oversubscription.empty() || a.tiers != 0;
}

Result<topo::ClusterNumbers> cluster_numbers(const ClusterNumberArgs& a, const GpuSpec& gpu) {
  if (a.node_gpus < 1) {
    return Status::invalid_input(
        "--node-gpus: the cluster in numbers needs the GPUs per node (>= 1)" +
        std::string(a.node_gpus != 0 ? ", got " + std::to_string(a.node_gpus) : ""));
  }
  topo::ClusterNumbers n;
  n.gpus_per_node = a.node_gpus;
  n.nvlink_GBps = a.nvlink_GBps >= 0 ? a.nvlink_GBps : to_GBps(gpu.nvlink_bandwidth);
  if (a.nics < 0)
    return Status::invalid_input("--nics: must be >= 0, got " + std::to_string(a.nics));
  n.nics = a.nics;
  if (a.nic_Gbps < 0) return Status::invalid_input("--nic-Gbps: must be > 0");
  n.nic_Gbps = a.nic_Gbps;
  if (n.nics > 0 && !(n.nic_Gbps > 0)) {
    return Status::invalid_input("--nic-Gbps: give the rate of the " + std::to_string(n.nics) +
                                 " NICs");
  }
  if (n.nic_Gbps > 0 && n.nics == 0) {
    return Status::invalid_input("--nics: give the NICs per node of --nic-Gbps " +
                                 std::to_string(n.nic_Gbps));
  }
  if (!a.nic_kind.empty()) {
    PLANNER_ASSIGN_OR_RETURN(topo::LinkKind kind,
                             parse_flag<topo::LinkKind>("--nic-kind", a.nic_kind));
    if (topo::link_class(kind) != topo::LinkClass::kNetwork) {
      return Status::invalid_input("--nic-kind: \"" + a.nic_kind +
                                   "\" is not a network link kind (ib-edr, ib-hdr, ib-ndr, ib-xdr, "
                                   "roce, efa, ethernet)");
    }
    n.nic_kind = kind;
  }
  if (!a.fabric.empty()) {
    PLANNER_ASSIGN_OR_RETURN(n.fabric, parse_flag<topo::FabricType>("--fabric", a.fabric));
    if (n.fabric == topo::FabricType::kNone) {
      return Status::invalid_input(
          "--fabric: give fat-tree, rail-optimized or leaf-spine (a "
          "single node needs no --fabric)");
    }
  }
  if (!a.oversubscription.empty()) {
    const auto ratio = topo::parse_oversubscription(a.oversubscription);
    if (!ratio) {
      return Status::invalid_input(
          "--oversubscription: expected down:up with down >= up, e.g. "
          "1:1 or 2:1, got \"" +
          a.oversubscription + "\"");
    }
    n.oversubscription = *ratio;
  }
  if (a.tiers != 0 && a.tiers != 2 && a.tiers != 3) {
    return Status::invalid_input("--fabric-tiers: 2 or 3, got " + std::to_string(a.tiers));
  }
  n.tiers = a.tiers;
  return n;
}

}  // namespace planner::cli
