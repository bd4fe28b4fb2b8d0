// A cluster stated in numbers, as a datasheet, a paper or a user states it ("8 GPUs per node,
// NVLink 450 GB/s, 4 x 100 Gb/s NICs, fat-tree 1:1"), turned into a topology by the generators of
// topology_spec.hpp, so a run need not be mapped to the nearest preset. Presets stay a convenience;
// these numbers replace them wherever they are given.
//
// How the numbers become a topology (every choice below is written into the topology's notes):
//   node     the nvswitch generator when nvlink_GBps > 0 (every GPU reaches every other through
//            one NVSwitch crossbar at nvlink_GBps per direction, as in DGX/HGX nodes), else the
//            pcie generator. NVLink generation by rate: up to 150 GB/s per direction NVLink2,
//            300 NVLink3, 450 NVLink4, above NVLink5. PCIe generation by the GPU's architecture:
//            Volta PCIe 3, Ampere and Ada PCIe 4, Hopper and later PCIe 5. PCIe switches: the
//            greatest common divisor of the GPU and NIC counts (each switch with the same share
//            of GPUs and NICs; without NICs, 2 when the GPU count is even, else 1), 2 CPUs
//            joined at 64 GB/s per direction (an approximate socket-to-socket figure, as in the
//            presets) when the switches split evenly between them, else 1. Latencies as the
//            presets': NVLink 250 ns, PCIe 150 ns, CPU link 120 ns, NIC link 600 ns, switch link
//            230 ns.
//   network  `nics` NICs of nic_Gbps each per node on the stated fabric (fat-tree, rail-optimized
//            or leaf-spine; none for a single node), switches of radix 64; a leaf takes the most
//            hosts h with h + h / oversubscription ≤ 64 and h / oversubscription whole (1:1: 32
//            down, 32 up). Two tiers when the cluster's NIC ports fit 64 leaves, else three with
//            32 leaves per pod (`tiers` overrides). The NIC link kind: nic_kind when stated, else
//            the InfiniBand generation of that rate (100 Gb/s EDR, 200 HDR, 400 NDR, 800 XDR),
//            else ethernet.
#pragma once

#include <optional>
#include <string>

#include "planner/core/gpu_spec.hpp"
#include "planner/core/status.hpp"
#include "planner/topo/link_kind.hpp"
#include "planner/topo/topology_spec.hpp"

namespace planner::topo {

struct ClusterNumbers {
  int gpus_per_node = 8;
  double nvlink_GBps = 0;  // per GPU, per direction, all its links; 0: no NVLink
  int nics = 0;            // scale-out NICs per node
  double nic_Gbps = 0;     // per NIC, per direction
  std::optional<LinkKind> nic_kind;
  FabricType fabric = FabricType::kFatTree;
  double oversubscription = 1;  // leaf down : up bandwidth
  int tiers = 0;                // 0: chosen from the size (see the header)
};

// The NIC link kind the numbers imply (see the header).
LinkKind nic_link_kind(const ClusterNumbers& numbers);

// The topology for `nodes` nodes of `gpu`. kInvalidInput naming the field when a number is out of
// range (gpus_per_node < 1, a negative rate, NICs without a rate, a fabric without NICs, an
// oversubscription < 1) or the fabric cannot join that many nodes.
Result<TopologySpec> topology_from_numbers(const ClusterNumbers& numbers, const GpuSpec& gpu,
                                           int nodes);

// "8 GPUs, NVLink 450 GB/s, 4 x 100 Gb/s ib-edr, fat-tree 1:1": the numbers in one line.
std::string describe(const ClusterNumbers& numbers);

// Parses an oversubscription ratio: "1:1", "2:1", "2" or "1.5"; nullopt unless it is >= 1.
std::optional<double> parse_oversubscription(const std::string& text);

}  // namespace planner::topo
