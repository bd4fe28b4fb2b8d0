// Kinds of devices and links in a cluster graph, with their JSON spellings and nominal rates.
//
// A link kind names the technology (NVLink generation, PCIe generation, InfiniBand speed grade,
// Ethernet/RoCE, AWS EFA, CPU-to-CPU or CPU-to-GPU interconnect, or the shared memory through
// which CPU ranks on one host exchange messages). Kinds with a standard rate have a nominal
// per-direction bandwidth per link (nominal_bandwidth()); the others (Ethernet, RoCE, EFA,
// NVLink-C2C, CPU interconnects, shared memory) need an explicit bandwidth in the topology
// document.
//
// Nominal per-direction rates (reference data hardware_specs.json, "links"):
//   NVLink2/3/4: 25 GB/s per link (V100 6 links = 150, A100 12 = 300, H100 18 = 450 GB/s)
//   NVLink5:     50 GB/s per link (B200 18 links = 900 GB/s)
//   PCIe x16:    gen3 15.75, gen4 31.5, gen5 63, gen6 121 GB/s (gen3 from core/presets/gpus V100)
//   InfiniBand 4x port: EDR 100, HDR 200, NDR 400, XDR 800 Gb/s
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "planner/core/enums.hpp"
#include "planner/core/units.hpp"

namespace planner::topo {

enum class DeviceKind { kGpu, kNvSwitch, kPcieSwitch, kCpu, kNic, kLeaf, kSpine, kCore };

enum class LinkKind {
  kNvlink2,
  kNvlink3,
  kNvlink4,
  kNvlink5,
  kNvlinkC2c,
  kPcie3,
  kPcie4,
  kPcie5,
  kPcie6,
  kCpuInterconnect,
  kIbEdr,
  kIbHdr,
  kIbNdr,
  kIbXdr,
  kEthernet,
  kRoce,
  kEfa,
  kSharedMemory,  // a CPU rank's copies through host memory (MPI's shared-memory transport)
};

// What a link is for: GPU-to-GPU scale-up, host I/O, CPU coherence, or the scale-out network.
enum class LinkClass { kNvlink, kPcie, kHost, kNetwork };

LinkClass link_class(LinkKind kind);

// Per-direction bandwidth of one link of this kind, or nullopt when the kind has no standard rate.
std::optional<Bandwidth> nominal_bandwidth(LinkKind kind);

// "400 Gb/s" for network links (as NICs are sold), "450 GB/s" for the others; per direction.
std::string rate_text(LinkKind kind, Bandwidth bandwidth);

// True for leaf, spine and core switches (the scale-out fabric).
constexpr bool is_fabric_switch(DeviceKind kind) {
  return kind == DeviceKind::kLeaf || kind == DeviceKind::kSpine || kind == DeviceKind::kCore;
}

}  // namespace planner::topo

namespace planner {

template <>
struct EnumTraits<topo::DeviceKind> {
  static constexpr std::string_view kWhat = "device kind";
  static constexpr std::array<std::pair<topo::DeviceKind, std::string_view>, 8> kNames{{
      {topo::DeviceKind::kGpu, "gpu"},
      {topo::DeviceKind::kNvSwitch, "nvswitch"},
      {topo::DeviceKind::kPcieSwitch, "pcie-switch"},
      {topo::DeviceKind::kCpu, "cpu"},
      {topo::DeviceKind::kNic, "nic"},
      {topo::DeviceKind::kLeaf, "leaf"},
      {topo::DeviceKind::kSpine, "spine"},
      {topo::DeviceKind::kCore, "core"},
  }};
};

template <>
struct EnumTraits<topo::LinkKind> {
  static constexpr std::string_view kWhat = "link kind";
  static constexpr std::array<std::pair<topo::LinkKind, std::string_view>, 18> kNames{{
      {topo::LinkKind::kNvlink2, "nvlink2"},
      {topo::LinkKind::kNvlink3, "nvlink3"},
      {topo::LinkKind::kNvlink4, "nvlink4"},
      {topo::LinkKind::kNvlink5, "nvlink5"},
      {topo::LinkKind::kNvlinkC2c, "nvlink-c2c"},
      {topo::LinkKind::kPcie3, "pcie3"},
      {topo::LinkKind::kPcie4, "pcie4"},
      {topo::LinkKind::kPcie5, "pcie5"},
      {topo::LinkKind::kPcie6, "pcie6"},
      {topo::LinkKind::kCpuInterconnect, "cpu-interconnect"},
      {topo::LinkKind::kIbEdr, "ib-edr"},
      {topo::LinkKind::kIbHdr, "ib-hdr"},
      {topo::LinkKind::kIbNdr, "ib-ndr"},
      {topo::LinkKind::kIbXdr, "ib-xdr"},
      {topo::LinkKind::kEthernet, "ethernet"},
      {topo::LinkKind::kRoce, "roce"},
      {topo::LinkKind::kEfa, "efa"},
      {topo::LinkKind::kSharedMemory, "shared-memory"},
  }};
};

template <>
struct EnumTraits<topo::LinkClass> {
  static constexpr std::string_view kWhat = "link class";
  static constexpr std::array<std::pair<topo::LinkClass, std::string_view>, 4> kNames{{
      {topo::LinkClass::kNvlink, "nvlink"},
      {topo::LinkClass::kPcie, "pcie"},
      {topo::LinkClass::kHost, "host"},
      {topo::LinkClass::kNetwork, "network"},
  }};
};

}  // namespace planner
