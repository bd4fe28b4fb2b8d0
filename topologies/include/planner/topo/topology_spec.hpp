// A topology description: one node (its devices and links) plus how nodes are joined (a scale-out
// fabric and, optionally, a rack-scale NVLink domain). Cluster::build() turns it into a graph of
// any node count. These are plain structs; topology_json.hpp reads them from "topology" documents.
//
// Units: LinkSpec::bandwidth is bytes/s per direction for all `count` parallel links together;
// latency is the one-way time to cross the link (integer picoseconds).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "planner/core/diagnostics.hpp"
#include "planner/core/status.hpp"
#include "planner/core/units.hpp"
#include "planner/topo/link_kind.hpp"

namespace planner::topo {

struct LinkSpec {
  LinkKind kind = LinkKind::kPcie4;
  int count = 1;        // parallel links bonded into this one (e.g. 18 NVLink4 links per GPU)
  Bandwidth bandwidth;  // per direction, all `count` links together
  Time latency;         // one way
};

struct NodeDevice {
  std::string id;
  DeviceKind kind = DeviceKind::kGpu;
  // NICs only: ids of the GPUs whose network traffic this NIC carries. Empty: the GPUs nearest to
  // it (by route cost) use it.
  std::vector<std::string> serves;
};

struct NodeLink {
  std::string a;
  std::string b;
  LinkSpec link;
};

// One node. GPUs are numbered in the order they appear in `devices` (local ranks), NICs likewise
// (rails). Only gpu, nvswitch, pcie-switch, cpu and nic devices belong in a node.
struct NodeSpec {
  std::string generator;  // the generator that produced it, or "" when listed explicitly
  std::vector<NodeDevice> devices;
  std::vector<NodeLink> links;

  int count(DeviceKind kind) const;
  // Index of the device with `id` in `devices`, or -1 (a linear search: for many look-ups, use
  // index()).
  int find(std::string_view id) const;
  // Device ids to their index in `devices` (the first, for a duplicated id); the views point into
  // `devices`.
  std::unordered_map<std::string_view, int> index() const;
};

enum class NodeGenerator { kNvSwitch, kHybridCubeMesh, kPcie };

// Parameters of the node generators:
//   nvswitch          every GPU has `nvlink` to one (logical) NVSwitch: all-to-all at the full
//                     per-GPU NVLink rate, as in DGX/HGX A100, H100, H200 (the physical 4-6
//                     NVSwitch chips act as one crossbar, since NCCL stripes over all of them).
//   hybrid-cube-mesh  8 GPUs with direct NVLink between neighbours as in the DGX-1 (V100);
//                     `nvlink` is one link, pairs carry 1 or 2 of them (hybrid_cube_mesh_links()).
//   pcie              GPUs only behind PCIe switches (no NVLink), e.g. L40S servers.
// All generators put GPUs and NICs evenly behind `pcie_switches` PCIe switches, spread the switches
// evenly over `cpus` CPUs, join the CPUs all-to-all with `cpu_link`, and let NIC i serve the GPUs
// on a proportional share (8 GPUs, 4 NICs: NIC i serves GPUs 2i, 2i+1; 8 GPUs, 32 NICs: NIC i
// serves GPU i/4).
struct NodeGeneratorParams {
  NodeGenerator generator = NodeGenerator::kNvSwitch;
  int gpus = 8;
  std::optional<LinkSpec> nvlink;
  LinkSpec pcie;
  int pcie_switches = 1;
  int cpus = 1;
  std::optional<LinkSpec> cpu_link;
  int nics = 0;
};

// The DGX-1 (V100) hybrid cube-mesh as (gpu a, gpu b, NVLink count) triples. Each GPU has 6
// NVLink2 links. Source: NVIDIA DGX-1 with Tesla V100 System Architecture white paper (WP-08437),
// NVLink topology figure, as `nvidia-smi topo -m` prints it (NV1/NV2).
struct CubeMeshLink {
  int a;
  int b;
  int links;
};
const std::vector<CubeMeshLink>& hybrid_cube_mesh_links();

// Builds a node from generator parameters. Problems are added to `diag` at `pointer` + "/" + the
// parameter's key (e.g. "/node/pcie_switches"); returns false when there were any.
bool generate_node(const NodeGeneratorParams& params, NodeSpec& out, Diagnostics& diag,
                   const std::string& pointer);
Result<NodeSpec> generate_node(const NodeGeneratorParams& params);

enum class FabricType { kNone, kFatTree, kRailOptimized, kLeafSpine };

// The scale-out network joining nodes through their NICs.
//   fat-tree        NIC ports fill leaves in node order (`hosts_per_leaf` ports per leaf);
//                   2 tiers (leaf, spine) or 3 (leaf, spine, core, with `leaves_per_pod` leaves
//                   per pod).
//   rail-optimized  nodes form units of `hosts_per_leaf` nodes; NIC i of every node in a unit
//                   meets on rail leaf i of that unit; above the leaves, as a fat-tree.
//   leaf-spine      a 2-tier fat-tree (plain Ethernet top-of-rack + spine).
// Each leaf has `uplinks_per_leaf` links up, one to each spine of its pod (to every spine, with 2
// tiers). With 3 tiers, spine j of every pod has `uplinks_per_spine` links, one to each core of
// core plane j. Oversubscription = down bandwidth / up bandwidth of a switch.
struct FabricSpec {
  FabricType type = FabricType::kNone;
  int tiers = 2;
  int hosts_per_leaf = 0;  // NIC ports per leaf (rail-optimized: nodes per unit)
  int uplinks_per_leaf = 0;
  int leaves_per_pod = 0;     // 3 tiers only
  int uplinks_per_spine = 0;  // 3 tiers only
  int radix = 0;              // switch port count to check against; 0 = unchecked
  LinkSpec host_link;         // NIC to leaf
  LinkSpec switch_link;       // leaf to spine, spine to core

  // Down / up bandwidth at the leaves (and at the spines, 3 tiers only).
  double leaf_oversubscription() const;
  double spine_oversubscription() const;
};

// The number of uplinks that gives `ratio` : 1 oversubscription for `down` ports at `down_bw`
// going up at `up_bw`; fails unless it is a whole number >= 1.
Result<int> uplinks_for_oversubscription(int down, Bandwidth down_bw, double ratio,
                                         Bandwidth up_bw);

// A rack-scale NVLink domain (GB200 NVL72): `nodes` consecutive nodes whose GPUs each have `link`
// to one (logical) NVLink switch for the domain.
struct NvlinkDomainSpec {
  int nodes = 1;
  LinkSpec link;
};

struct TopologySpec {
  std::string name;
  std::vector<std::string> aliases;
  std::string description;
  std::string gpu;  // a GPU preset name (core/presets/gpus)
  // The cloud instance this topology models, as the price data names it ("AWS", "p5.48xlarge"):
  // its prices are the price records with this provider and instance (pricing.hpp PriceQuery).
  // Both empty for reference designs (DGX, HGX) that no one provider rents.
  std::string provider;
  std::string instance;
  int default_nodes = 1;
  std::vector<std::string> sources;
  std::string notes;
  NodeSpec node;
  FabricSpec fabric;
  std::optional<NvlinkDomainSpec> nvlink_domain;

  int gpus_per_node() const { return node.count(DeviceKind::kGpu); }
  // True when `query` is the name or an alias, ignoring case.
  bool matches(std::string_view query) const;
  // "rail-optimized fat-tree, 3 tiers, 1:1, ib-ndr" and the like.
  std::string fabric_summary() const;
};

// Checks a node: at least one GPU, unique ids, only node device kinds, link endpoints that exist
// and differ, NICs serving GPUs that exist, every device connected to every other (through the
// node, or through the NVLink domain when `through_domain`). Diagnostics point into
// `pointer` + "/devices/i", "/links/i" for explicit nodes and at `pointer` for generated ones.
bool check_node(const NodeSpec& node, bool through_domain, Diagnostics& diag,
                const std::string& pointer);

// Checks that the fabric can join `nodes` nodes (tiers, port counts against the radix, uplinks,
// NICs present). Diagnostics point into `pointer` (the fabric object).
bool check_fabric(const TopologySpec& spec, int nodes, Diagnostics& diag,
                  const std::string& pointer);

}  // namespace planner::topo

namespace planner {

template <>
struct EnumTraits<topo::NodeGenerator> {
  static constexpr std::string_view kWhat = "node generator";
  static constexpr std::array<std::pair<topo::NodeGenerator, std::string_view>, 3> kNames{{
      {topo::NodeGenerator::kNvSwitch, "nvswitch"},
      {topo::NodeGenerator::kHybridCubeMesh, "hybrid-cube-mesh"},
      {topo::NodeGenerator::kPcie, "pcie"},
  }};
};

template <>
struct EnumTraits<topo::FabricType> {
  static constexpr std::string_view kWhat = "fabric type";
  static constexpr std::array<std::pair<topo::FabricType, std::string_view>, 4> kNames{{
      {topo::FabricType::kNone, "none"},
      {topo::FabricType::kFatTree, "fat-tree"},
      {topo::FabricType::kRailOptimized, "rail-optimized"},
      {topo::FabricType::kLeafSpine, "leaf-spine"},
  }};
};

}  // namespace planner
