// A cluster graph built from a TopologySpec for a node count: devices, directed links and routes.
//
// Ids are stable for a given (spec, node count):
//   DeviceId  node n's devices occupy [n * D, (n + 1) * D) in the node spec's device order (D
//             devices per node); then one NVLink-domain switch per rack-scale domain; then the
//             leaves, spines and cores of the scale-out fabric.
//   LinkId    every cable is two directed links: 2k (a -> b) and 2k + 1 (b -> a), so reverse(id)
//             = id ^ 1 and each direction has its own bandwidth for max-min fair sharing. Node n's
//             links occupy a contiguous block in the node spec's link order; then GPU-to-domain
//             links, NIC-to-leaf links, leaf-to-spine and spine-to-core links.
//   GPU       GPUs are numbered node-major: gpu = node * gpus_per_node + local rank, where the
//             local rank is the GPU's position among the node spec's gpu devices.
//
// Routing (path()): GPUs and NICs never forward traffic. Between two GPUs the route is the
// cheapest of (a) a path inside their node, (b) GPU -> NVLink-domain switch -> GPU when they share
// a rack-scale NVLink domain, (c) GPU -> a NIC serving it -> the scale-out fabric -> a NIC serving
// the destination -> GPU. A link's cost is its latency plus the time to move kRouteReferenceBytes
// over it, so wide links win (NVLink over PCIe, as NCCL chooses). Among equal-cost alternatives
// (ECMP: spines, cores, several NICs per GPU, parallel intra-node routes) the flow hash chooses,
// deterministically. Node-local routes are computed once per node type; fabric routes use
// per-destination-leaf distance tables computed lazily and cached (no all-pairs tables).
//
// A Cluster is immutable after build(); every const member function may be called from several
// threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/core/units.hpp"
#include "planner/topo/topology_spec.hpp"

namespace planner::topo {

using DeviceId = std::int32_t;
using LinkId = std::int32_t;
inline constexpr DeviceId kNoDevice = -1;

// Route costs compare links by the time to move this many bytes plus their latency.
inline constexpr std::int64_t kRouteReferenceBytes = std::int64_t{1} << 20;

struct Device {
  DeviceKind kind = DeviceKind::kGpu;
  std::int32_t node = -1;  // the node holding it; -1 for domain and fabric switches
  std::int32_t local = 0;  // index in the node spec's devices; for switches outside nodes, the
                           // ordinal among devices of its kind and tier (leaf i, spine i, ...)
  std::int32_t gpu = -1;   // global GPU index, or -1
};

struct Link {
  DeviceId src = kNoDevice;
  DeviceId dst = kNoDevice;
  LinkKind kind = LinkKind::kPcie4;
  std::int32_t count = 1;  // parallel physical links bonded into this one
  Bandwidth bandwidth;     // this direction
  Time latency;
};

// What two GPUs may have in common (Cluster::shares()).
enum class Scope {
  kNode,          // the same node
  kNvlinkDomain,  // joined by NVLink, directly or through NVSwitches (nvlink_domain_of())
  kNvSwitch,      // linked directly to the same NVSwitch
  kPcieSwitch,    // linked directly to the same PCIe switch
  kNic,           // served by a common NIC
};

class Cluster {
 public:
  // Fails (kInvalidInput, naming the topology and the element) when the node graph or the fabric
  // cannot be built for `nodes` nodes.
  static Result<Cluster> build(const TopologySpec& spec, int nodes);

  Cluster(Cluster&&) noexcept;
  Cluster& operator=(Cluster&&) noexcept;
  ~Cluster();

  const TopologySpec& spec() const;
  int num_nodes() const;
  int gpus_per_node() const;
  int num_gpus() const;
  int nics_per_node() const;
  int devices_per_node() const;

  std::span<const Device> devices() const;
  std::span<const Link> links() const;
  const Device& device(DeviceId id) const { return devices()[id]; }
  const Link& link(LinkId id) const { return links()[id]; }
  static constexpr LinkId reverse(LinkId id) { return id ^ 1; }
  // Directed links leaving `id`.
  std::span<const LinkId> out_links(DeviceId id) const;
  // "n3.gpu2" for node devices, "nvl0", "leaf12", "spine4", "core7" for the others.
  std::string device_name(DeviceId id) const;

  DeviceId gpu_device(int gpu) const;
  int node_of(int gpu) const { return gpu / gpus_per_node(); }
  int local_rank(int gpu) const { return gpu % gpus_per_node(); }
  // GPUs with the same value are joined by NVLink (directly or through NVSwitches, including a
  // rack-scale domain). A GPU without NVLink is a domain of its own.
  int nvlink_domain_of(int gpu) const;
  // GPUs in the largest NVLink domain.
  int nvlink_domain_size() const;
  // The rack-scale NVLink domain of the GPU when the topology has one, else its node: the set of
  // GPUs that talk without the scale-out network.
  int island_of(int gpu) const;
  int num_islands() const;
  // NICs carrying this GPU's network traffic (empty without a fabric).
  std::span<const DeviceId> nics_of(int gpu) const;
  // The first device of `kind` linked directly to the GPU, or kNoDevice.
  DeviceId attached(int gpu, DeviceKind kind) const;
  bool shares(int gpu_a, int gpu_b, Scope scope) const;
  // The link from a NIC to its leaf switch (the reverse goes down), or -1 without a fabric.
  LinkId uplink_of_nic(DeviceId nic) const;

  // The directed links from `src_gpu` to `dst_gpu` (empty when equal). The same flow hash gives
  // the same route; different hashes spread over equal-cost alternatives.
  std::vector<LinkId> path(int src_gpu, int dst_gpu, std::uint64_t flow_hash = 0) const;
  void append_path(int src_gpu, int dst_gpu, std::uint64_t flow_hash,
                   std::vector<LinkId>& out) const;
  // Sum of latencies, and the narrowest link's bandwidth (zero for an empty path).
  Time path_latency(std::span<const LinkId> path) const;
  Bandwidth path_bandwidth(std::span<const LinkId> path) const;

 private:
  struct Impl;
  friend struct ClusterInternals;
  explicit Cluster(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace planner::topo
