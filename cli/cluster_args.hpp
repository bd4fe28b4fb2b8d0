// Command-line flags that state the cluster in numbers instead of naming a topology preset
// (topologies/cluster_numbers.hpp builds the topology), shared by `planner simulate` and
// `planner sweep`:
//   --node-gpus N          GPUs per node (required with any of the others)
//   --nvlink-GBps X        NVLink per GPU per direction (0: PCIe only; default: the GPU preset's)
//   --nics N               scale-out NICs per node
//   --nic-Gbps X           rate of one NIC
//   --nic-kind K           ib-edr, ib-hdr, ib-ndr, ib-xdr, roce, efa, ethernet
//                          (default: InfiniBand of that rate, else ethernet)
//   --fabric F             fat-tree (default), rail-optimized, leaf-spine
//   --oversubscription R   leaf down:up, "1:1" (default), "2:1" or "2"
//   --fabric-tiers T       2 or 3 (default: from the cluster's size)
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "planner/core/gpu_spec.hpp"
#include "planner/core/status.hpp"
#include "planner/topo/cluster_numbers.hpp"

namespace planner::cli {

struct ClusterNumberArgs {
  int node_gpus = 0;
  double nvlink_GBps = -1;  // < 0: not given
  int nics = 0;
  double nic_Gbps = 0;
  std::string nic_kind;
  std::string fabric;
  std::string oversubscription;
  int tiers = 0;
};

// Adds the flags; every one of them excludes `topology` (the --topology option) when given.
void add_cluster_number_options(CLI::App* cmd, ClusterNumberArgs& args,
                                CLI::Option* topology = nullptr);

// True when any of the flags was given.
bool has_cluster_numbers(const ClusterNumberArgs& args);

// The numbers the flags state for `gpu` (its NVLink rate when --nvlink-GBps is not given);
// kInvalidInput naming the flag when a value is bad or --node-gpus is missing.
Result<topo::ClusterNumbers> cluster_numbers(const ClusterNumberArgs& args, const GpuSpec& gpu);

}  // namespace planner::cli
