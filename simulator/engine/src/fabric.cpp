#include "planner/sim/fabric.hpp"

#include <algorithm>
#include <array>
#include <map>

#include "planner/sim/model_registry.hpp"
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
    implements(SimModel::kBalancedEcmp);
    // NICs: the set of GPUs each serves. A NIC serves GPUs of its own node only, so NICs with the
    // same set are found among their node's NICs; the set's class is its first NIC.
    std::vector<std::vector<int>> served(devices.size());
    for (int g = 0; g < cluster.num_gpus(); ++g) {
      for (topo::DeviceId nic : cluster.nics_of(g))
        served[static_cast<std::size_t>(nic)].push_back(g);
    }
    std::map<std::vector<int>, std::int64_t> nic_sets;  // of the current node
    std::int32_t node = -1;
    for (std::size_t d = 0; d < devices.size(); ++d) {
      if (devices[d].kind != topo::DeviceKind::kNic || served[d].empty()) continue;
      if (devices[d].node != node) {
        node = devices[d].node;
        nic_sets.clear();
      }
      std::sort(served[d].begin(), served[d].end());
      const auto id = nic_sets.emplace(std::move(served[d]), static_cast<std::int64_t>(d)).first;
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
  // Efficiency per link kind, looked up once.
  std::array<double, EnumTraits<topo::LinkKind>::kNames.size()> efficiency{};
  for (const auto& [kind, name] : EnumTraits<topo::LinkKind>::kNames)
    efficiency[static_cast<std::size_t>(kind)] = profile.link(name).efficiency;
  // Links with the same (class of source, class of destination) form one resource; resources are
  // numbered in the order of their first link. Links of one pool leave devices of one class, so
  // pools are found per source class: its devices' outgoing links, ordered by the class of their
  // destination and then by id (no sort over every link of the cluster).
  std::vector<std::int32_t> head(links.size());            // the first link of each link's pool
  std::vector<topo::DeviceId> members;                     // of one source class
  std::vector<std::pair<std::int64_t, std::int32_t>> out;  // (class of destination, link)
  auto pool = [&] {
    out.clear();
    for (topo::DeviceId d : members) {
      for (topo::LinkId l : cluster.out_links(d))
        out.emplace_back(cls[static_cast<std::size_t>(links[static_cast<std::size_t>(l)].dst)], l);
    }
    std::sort(out.begin(), out.end());
    for (std::size_t i = 0; i < out.size(); ++i) {
      const bool same = i > 0 && out[i].first == out[i - 1].first;
      head[static_cast<std::size_t>(out[i].second)] =
          same ? head[static_cast<std::size_t>(out[i - 1].second)] : out[i].second;
    }
  };
  // Devices of a class other than their own, grouped by class (in device order within a class).
  std::vector<std::pair<std::int64_t, topo::DeviceId>> shared;
  for (std::size_t d = 0; d < devices.size(); ++d) {
    if (cls[d] == class_key(kIdentity, static_cast<std::int64_t>(d))) {
      members.assign(1, static_cast<topo::DeviceId>(d));
      pool();
    } else {
      shared.emplace_back(cls[d], static_cast<topo::DeviceId>(d));
    }
  }
  std::sort(shared.begin(), shared.end());
  for (std::size_t i = 0; i < shared.size();) {
    members.clear();
    std::size_t j = i;
    for (; j < shared.size() && shared[j].first == shared[i].first; ++j)
      members.push_back(shared[j].second);
    pool();
    i = j;
  }
  Fabric f;
  f.resource_of_link.assign(links.size(), -1);
  for (std::size_t i = 0; i < links.size(); ++i) {
    const double cap =
        links[i].bandwidth.raw() * efficiency[static_cast<std::size_t>(links[i].kind)];
    const auto first = static_cast<std::size_t>(head[i]);
    if (first == i) {
      f.resource_of_link[i] = static_cast<std::int32_t>(f.capacity.size());
      f.capacity.push_back(cap);
    } else {
      f.resource_of_link[i] = f.resource_of_link[first];
      f.capacity[static_cast<std::size_t>(f.resource_of_link[i])] += cap;
    }
  }
  return f;
}

}  // namespace planner::sim
