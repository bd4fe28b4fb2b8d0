// Small clusters, profiles and hand-built step programs for simulator tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "planner/core/hardware_profile.hpp"
#include "planner/core/program.hpp"
#include "planner/topo/cluster.hpp"
#include "planner/topo/topology_catalog.hpp"
#include "planner/topo/topology_json.hpp"

namespace planner::sim::testing {

inline topo::TopologySpec parse_topology(const std::string& json) {
  auto spec = topo::parse_topology(json, "test.json");
  if (!spec) throw std::runtime_error(spec.status().message());
  return *spec;
}

inline std::shared_ptr<const topo::Cluster> build(const topo::TopologySpec& spec, int nodes) {
  auto c = topo::Cluster::build(spec, nodes);
  if (!c) throw std::runtime_error(c.status().message());
  return std::make_shared<const topo::Cluster>(std::move(c).value());
}

inline std::shared_ptr<const topo::Cluster> preset_cluster(const std::string& name, int nodes) {
  auto spec = topo::builtin_topologies().get(name);
  if (!spec) throw std::runtime_error(spec.status().message());
  return build(*spec, nodes);
}

// n GPUs joined in a physical ring (GPU i to GPU i+1 mod n), every link `gbps` GB/s per
// direction with `latency_ns`; one node, no fabric. A slow PCIe switch joins all GPUs too (GPUs
// do not forward traffic, so the node needs it to be connected); ring neighbours use their
// direct link.
inline std::string ring_topology_json(int n, double gbps, double latency_ns) {
  std::string devices = R"({"id": "sw", "kind": "pcie-switch"})", links;
  for (int i = 0; i < n; ++i) {
    devices += R"(, {"id": "g)" + std::to_string(i) + R"(", "kind": "gpu"})";
    if (n > 2 || i == 0) {
      links += R"({"a": "g)" + std::to_string(i) + R"(", "b": "g)" + std::to_string((i + 1) % n) +
               R"(", "kind": "nvlink4", "bandwidth_GBps": )" + std::to_string(gbps) +
               R"(, "latency_ns": )" + std::to_string(latency_ns) + "}, ";
    }
    links += R"({"a": "g)" + std::to_string(i) +
             R"(", "b": "sw", "kind": "pcie3", "latency_ns": 1000})" + (i + 1 < n ? ", " : "");
  }
  return R"({"schema_version": 1, "kind": "topology", "name": "ring", "description": "a ring",
    "gpu": "H100", "sources": ["test"], "node": {"devices": [)" +
         devices + "], \"links\": [" + links + R"(]}, "fabric": {"type": "none"}})";
}

// `nodes_gpus` GPUs per node behind one PCIe switch sharing one NIC, nodes on a one-leaf
// Ethernet fabric of `nic_gbps` Gb/s.
inline std::string shared_nic_json(int gpus, double nic_gbps) {
  return R"({"schema_version": 1, "kind": "topology", "name": "shared-nic",
    "description": "GPUs sharing one NIC", "gpu": "H100", "sources": ["test"],
    "node": {"generator": "pcie", "gpus": )" +
         std::to_string(gpus) + R"(, "pcie": {"kind": "pcie5", "latency_ns": 0},
             "pcie_switches": 1, "cpus": 1, "nics": 1},
    "fabric": {"type": "fat-tree", "tiers": 2, "hosts_per_leaf": 8,
      "host_link": {"kind": "ethernet", "bandwidth_Gbps": )" +
         std::to_string(nic_gbps) + R"(, "latency_ns": 0},
      "switch_link": {"kind": "ethernet", "bandwidth_Gbps": 400, "latency_ns": 0}}})";
}

// A profile with ideal links and one protocol: efficiency 1 everywhere, no base latency, and
// `step_us` per algorithm step; memory-bound ops at `memory_GBps`, no kernel overhead, no
// slowdown from communication.
inline HardwareProfile ideal_profile(double step_us = 0.0, double memory_GBps = 1000.0) {
  HardwareProfile p = derive_profile(*builtin_catalog().find_gpu("H100"));
  p.name = "ideal";
  p.compute.memory_bandwidth = GBps(memory_GBps);
  p.compute.kernel_overhead = Time(0);
  p.compute.comm_slowdown = 0.0;
  p.network.links.clear();
  p.network.default_link = {"", 1.0, Time(0), "ideal"};
  p.network.protocols = {{"simple",
                          1.0,
                          Time(0),
                          {microseconds(step_us), microseconds(step_us), microseconds(step_us)}}};
  p.network.algorithm_efficiency = AlgorithmEfficiency{1.0, 1.0, 1.0, 0.0, 1.0, 1.0};
  return p;
}

}  // namespace planner::sim::testing

namespace planner {
// Readable times in test failures.
inline void PrintTo(Time t, std::ostream* os) {
  *os << t.raw() << " ps";
}
}  // namespace planner

namespace planner::sim::testing {

inline OpId op_id(int microbatch, Phase phase, OpRole role, int slot = 0) {
  return OpId::make(OpId::kNone, microbatch, phase, role, slot);
}

// A collective desc of `bytes` on `stream`.
inline OpDesc collective(OpKind kind, Stream stream, std::int64_t bytes) {
  OpDesc d;
  d.kind = kind;
  d.stream = stream;
  d.comm_bytes = Bytes(bytes);
  return d;
}

// A memory-bound compute desc moving `bytes` (read) on the compute stream.
inline OpDesc elementwise(std::int64_t bytes) {
  OpDesc d;
  d.kind = OpKind::kElementwise;
  d.stream = Stream::kCompute;
  d.bytes_read = Bytes(bytes);
  return d;
}

}  // namespace planner::sim::testing
