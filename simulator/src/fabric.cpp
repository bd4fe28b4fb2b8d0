#include "planner/sim/fabric.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "planner/topo/link_kind.hpp"

namespace planner::sim {
namespace {

// Device classes: devices of one class are interchangeable ends of pooled links. Identity for
// most devices; NICs by (node, GPUs served); spines by pod; all cores together.
enum ClassKind : std::int64_t { kIdentity = 0, kNicSet = 1, kPod = 2, kCores = 3 };

std::int64_t class_key(ClassKind kind, std::int64_t value) {
  return (static_cast<std::int64_t>(kind) << 40) | value;
}

}  // namespace

Fabric Fabric::build(const topo::Cluster& cluster, const HardwareProfile& profile, bool balanced) {
  const auto links = cluster.links();
  const auto devices = cluster.devices();
  std::vector<std::int64_t> cls(devices.size());
  for (std::size_t d = 0; d < devices.size(); ++d)
    cls[d] = class_key(kIdentity, static_cast<std::int64_t>(d));
  if (balanced) {
    // NICs: the set of GPUs each serves, per node.
    std::vector<std::vector<int>> served(devices.size());
    for (int g = 0; g < cluster.num_gpus(); ++g) {
      for (topo::DeviceId nic : cluster.nics_of(g))
        served[static_cast<std::size_t>(nic)].push_back(g);
    }
    std::map<std::vector<int>, std::int64_t> nic_sets;
    for (std::size_t d = 0; d < devices.size(); ++d) {
      if (devices[d].kind != topo::DeviceKind::kNic || served[d].empty()) continue;
      std::sort(served[d].begin(), served[d].end());
      const auto id = nic_sets.emplace(served[d], static_cast<std::int64_t>(nic_sets.size())).first;
      cls[d] = class_key(kNicSet, id->second);
    }
    // Spines: the pod is the smallest leaf they are joined to.
    std::vector<topo::DeviceId> pod(devices.size(), topo::kNoDevice);
    for (const topo::Link& l : links) {
      if (devices[static_cast<std::size_t>(l.src)].kind == topo::DeviceKind::kLeaf &&
          devices[static_cast<std::size_t>(l.dst)].kind == topo::DeviceKind::kSpine) {
        auto& p = pod[static_cast<std::size_t>(l.dst)];
        p = p == topo::kNoDevice ? l.src : std::min(p, l.src);
      }
    }
    for (std::size_t d = 0; d < devices.size(); ++d) {
      if (devices[d].kind == topo::DeviceKind::kSpine && pod[d] != topo::kNoDevice) {
        cls[d] = class_key(kPod, pod[d]);
      } else if (devices[d].kind == topo::DeviceKind::kCore) {
        cls[d] = class_key(kCores, 0);
      }
    }
  }
  Fabric f;
  f.resource_of_link.reserve(links.size());
  std::map<std::pair<std::int64_t, std::int64_t>, std::int32_t> pools;
  for (const topo::Link& l : links) {
    const double cap = l.bandwidth.raw() * profile.link(to_string(l.kind)).efficiency;
    const auto key =
        std::make_pair(cls[static_cast<std::size_t>(l.src)], cls[static_cast<std::size_t>(l.dst)]);
    const auto [it, fresh] = pools.emplace(key, static_cast<std::int32_t>(f.capacity.size()));
    if (fresh) {
      f.capacity.push_back(cap);
    } else {
      f.capacity[static_cast<std::size_t>(it->second)] += cap;
    }
    f.resource_of_link.push_back(it->second);
  }
  return f;
}

}  // namespace planner::sim
