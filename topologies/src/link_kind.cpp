#include "planner/topo/link_kind.hpp"

#include <cmath>
#include <cstdio>

namespace planner::topo {
namespace {

// Reference data hardware_specs.json "links": NVLink per-direction GB/s divided by link count.
constexpr double kNvlink234PerLinkGBps = 25.0;  // 150/6, 300/12, 450/18
constexpr double kNvlink5PerLinkGBps = 50.0;    // 900/18
// Reference data hardware_specs.json "links.pcie" (x16, per direction); gen3 from the V100 preset.
constexpr double kPcie3x16GBps = 15.75;
constexpr double kPcie4x16GBps = 31.5;
constexpr double kPcie5x16GBps = 63.0;
constexpr double kPcie6x16GBps = 121.0;
// Reference data hardware_specs.json "links.infiniband_per_4x_port_Gbps".
constexpr double kIbEdrGbps = 100.0;
constexpr double kIbHdrGbps = 200.0;
constexpr double kIbNdrGbps = 400.0;
constexpr double kIbXdrGbps = 800.0;

}  // namespace

LinkClass link_class(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvlink2:
    case LinkKind::kNvlink3:
    case LinkKind::kNvlink4:
    case LinkKind::kNvlink5:
      return LinkClass::kNvlink;
    case LinkKind::kPcie3:
    case LinkKind::kPcie4:
    case LinkKind::kPcie5:
    case LinkKind::kPcie6:
      return LinkClass::kPcie;
    case LinkKind::kNvlinkC2c:
    case LinkKind::kCpuInterconnect:
    case LinkKind::kSharedMemory:
      return LinkClass::kHost;
    case LinkKind::kIbEdr:
    case LinkKind::kIbHdr:
    case LinkKind::kIbNdr:
    case LinkKind::kIbXdr:
    case LinkKind::kEthernet:
    case LinkKind::kRoce:
    case LinkKind::kEfa:
      return LinkClass::kNetwork;
  }
  return LinkClass::kNetwork;
}

std::optional<Bandwidth> nominal_bandwidth(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvlink2:
    case LinkKind::kNvlink3:
    case LinkKind::kNvlink4:
      return GBps(kNvlink234PerLinkGBps);
    case LinkKind::kNvlink5:
      return GBps(kNvlink5PerLinkGBps);
    case LinkKind::kPcie3:
      return GBps(kPcie3x16GBps);
    case LinkKind::kPcie4:
      return GBps(kPcie4x16GBps);
    case LinkKind::kPcie5:
      return GBps(kPcie5x16GBps);
    case LinkKind::kPcie6:
      return GBps(kPcie6x16GBps);
    case LinkKind::kIbEdr:
      return Gbps(kIbEdrGbps);
    case LinkKind::kIbHdr:
      return Gbps(kIbHdrGbps);
    case LinkKind::kIbNdr:
      return Gbps(kIbNdrGbps);
    case LinkKind::kIbXdr:
      return Gbps(kIbXdrGbps);
    case LinkKind::kNvlinkC2c:
    case LinkKind::kCpuInterconnect:
    case LinkKind::kEthernet:
    case LinkKind::kRoce:
    case LinkKind::kEfa:
    case LinkKind::kSharedMemory:
      return std::nullopt;
  }
  return std::nullopt;
}

std::string rate_text(LinkKind kind, Bandwidth bandwidth) {
  const bool network = link_class(kind) == LinkClass::kNetwork;
  const double value = network ? bandwidth.raw() * 8.0 / 1e9 : to_GBps(bandwidth);
  char buf[48];
  const bool whole = std::fabs(value - std::round(value)) < 1e-6;
  std::snprintf(buf, sizeof buf, whole ? "%.0f %s" : "%.2f %s", value, network ? "Gb/s" : "GB/s");
  return buf;
}

}  // namespace planner::topo
