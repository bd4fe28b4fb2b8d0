// Hardware profiles: the parameters of the simulator's compute and network models for one GPU type
// and the links around it, each group with the measurement or reasoning it comes from.
//
// The simulator (simulator/, planner::sim) never reads files: callers hand it a HardwareProfile.
// Profiles come from three places:
//   * the built-in presets (core/presets/profiles/*.json, embedded in the binary), one per GPU
//     preset, filled from physical reasoning and the reference data (hardware_specs.json,
//     collectives.json);
//   * measured profiles that `planner calibrate` stores in the database (planner::store keeps a
//     profile document, kind "profile", as the parameters JSON of its profile records);
//   * derive_profile(), a generic profile computed from a GPU's datasheet for GPUs without one.
//
// JSON document (kind "profile"); units are in the key names:
//   name, gpus [GPU preset names this profile describes], description, source
//   provenance {key: text}            optional, for measured profiles: how and where it was
//                                     measured ("host", "backend", "device", "date", "planner",
//                                     "mpi", "driver", "nccl", "command", ...)
//   compute {
//     sm_count                        streaming multiprocessors (compute units on AMD)
//     gemm {<precision>: {tflops, source}}   asymptotic GEMM rate per precision (dense)
//     gemm_tiles [{m, n, efficiency}] output tile shapes a GEMM library picks from, with their
//                                     per-SM throughput relative to the best tile
//     gemm_k_overhead                 a tile's fixed cost (pipeline fill, epilogue) in elements
//                                     of k
//     gemm_shape_source
//     attention_forward_tflops, attention_backward_tflops   flash-style attention at long
//                                     sequence and head dimension 128
//     attention_half_seq              key/value length at which attention runs at half that rate
//     attention_half_head_dim         optional (default 0): head dimension d0 of the rate's
//                                     d / (d + d0) dependence, relative to 128
//     attention_source
//     memory_bandwidth_GBps, memory_source   achievable HBM bandwidth for memory-bound kernels
//     kernel_overhead_us, kernel_overhead_source   fixed time per kernel
//     comm_slowdown, comm_slowdown_source   fraction of compute throughput lost while a
//                                     communication kernel runs on the same GPU
//     host_memory_bandwidth_GBps, pcie_copy_GBps, host_source   offloaded optimizer and copies
//     host_cores                      optional, CPU hosts: cores the ranks of a node share;
//                                     ranks computing at once beyond it split them evenly
//     oversubscribed_efficiency, oversubscribed_source   optional, CPU hosts (default 1): the
//                                     fraction of the cores' throughput left when more ranks
//                                     compute at once than there are cores (context switches,
//                                     caches refilled after each switch), in (0, 1]
//     memory_bound_GBps {<op kind>: GB/s}, memory_bound_source   optional (calibrated profiles):
//                                     the measured bandwidth of one kind of memory-bound op
//                                     ("norm", "activation", "elementwise", "embedding",
//                                     "softmax_ce", "optimizer") in place of memory_bandwidth_GBps
//                                     (CPU kernels such as GeLU are bound by arithmetic, not
//                                     memory)
//   }
//   network {
//     links [{kind, efficiency, latency_us, source}]   per topology link kind ("nvlink4",
//                                     "ib-ndr", ...): achievable fraction of the link's bandwidth
//                                     and a latency added per traversal (on top of the topology's)
//     default_link {efficiency, latency_us, source}   for kinds not listed
//     protocols [{name, bandwidth_factor, base_latency_us,
//                 step_latency_us {nvlink, pcie, network}}]   NCCL-style protocols: payload
//                                     fraction on the wire, latency per collective call and per
//                                     algorithm step over a link of each class
//     protocol_source
//     algorithm_efficiency {ring, tree, hierarchical, nvls, all_to_all, p2p}   bandwidth factor
//                                     per algorithm relative to the link efficiency (ring is the
//                                     reference; nvls 0 means NVLink SHARP is unavailable)
//     algorithm_source
//   }
#pragma once

#include <array>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/diagnostics.hpp"
#include "planner/core/enums.hpp"
#include "planner/core/gpu_spec.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/program.hpp"
#include "planner/core/status.hpp"
#include "planner/core/units.hpp"

namespace planner {

inline constexpr std::size_t kNumPrecisions = EnumTraits<Precision>::kNames.size();

struct GemmRate {
  FlopRate rate;  // zero: the profile has no rate for this precision
  std::string source;
};

// An output tile shape: a GEMM of m × n runs ceil(m / tile.m) · ceil(n / tile.n) tiles, in waves
// of sm_count tiles; `efficiency` scales the per-SM throughput for this shape.
struct GemmTile {
  int m = 128;
  int n = 128;
  double efficiency = 1.0;
  bool operator==(const GemmTile&) const = default;
};

struct ComputeProfile {
  int sm_count = 0;
  std::array<GemmRate, kNumPrecisions> gemm{};  // indexed by Precision
  std::vector<GemmTile> gemm_tiles;
  int gemm_k_overhead = 0;
  std::string gemm_shape_source;
  FlopRate attention_forward;
  FlopRate attention_backward;
  std::int64_t attention_half_seq = 0;
  // Head dimension d0 at which the flash kernel's throughput per FLOP is half its large-head
  // rate: it scales as d / (d + d0), relative to head dimension 128 (the attention rates above are
  // for 128): each score costs 4d FLOPs of GEMM and a fixed softmax (exp, max, rescale), so small
  // heads spend more of the kernel outside the tensor cores. 0: no dependence on the head dim.
  std::int64_t attention_half_head_dim = 0;
  std::string attention_source;
  Bandwidth memory_bandwidth;
  std::string memory_source;
  // Measured bandwidth per memory-bound op kind (zero: use memory_bandwidth), indexed by OpKind.
  std::array<Bandwidth, EnumTraits<OpKind>::kNames.size()> memory_bound{};
  std::string memory_bound_source;
  Time kernel_overhead;
  std::string kernel_overhead_source;
  // CPU hosts: the cores the ranks of one node share (0: every rank has its own device). When
  // more ranks of a node compute at once, they split the cores evenly (processor sharing).
  int host_cores = 0;
  // CPU hosts: when more ranks of a node compute at once than host_cores, each runs at
  // host_cores / computing · oversubscribed_efficiency of a core (1: ideal processor sharing).
  double oversubscribed_efficiency = 1.0;
  std::string oversubscribed_source;
  double comm_slowdown = 0.0;
  std::string comm_slowdown_source;
  Bandwidth host_memory_bandwidth;
  Bandwidth pcie_copy_bandwidth;
  std::string host_source;

  const GemmRate& gemm_rate(Precision p) const { return gemm[static_cast<std::size_t>(p)]; }
  // The bandwidth memory-bound ops of `kind` run at: memory_bound's entry, else memory_bandwidth.
  Bandwidth memory_bandwidth_for(OpKind kind) const {
    const Bandwidth b = memory_bound[static_cast<std::size_t>(kind)];
    return b.raw() > 0 ? b : memory_bandwidth;
  }
};

struct LinkProfile {
  std::string kind;  // a topology link kind; empty for NetworkProfile::default_link
  double efficiency = 1.0;
  Time latency;
  std::string source;
};

// Step latencies by link class: the class of the slowest link an algorithm step crosses.
enum class LinkClassLatency { kNvlink, kPcie, kNetwork };

struct ProtocolProfile {
  std::string name;
  double bandwidth_factor = 1.0;
  Time base_latency;
  std::array<Time, 3> step_latency{};  // indexed by LinkClassLatency
  Time step(LinkClassLatency c) const { return step_latency[static_cast<std::size_t>(c)]; }
};

struct AlgorithmEfficiency {
  double ring = 1.0;
  double tree = 1.0;
  double hierarchical = 1.0;
  double nvls = 0.0;  // 0: NVLink SHARP unavailable
  double all_to_all = 1.0;
  double p2p = 1.0;
};

struct NetworkProfile {
  std::vector<LinkProfile> links;
  LinkProfile default_link;
  std::vector<ProtocolProfile> protocols;
  std::string protocol_source;
  AlgorithmEfficiency algorithm_efficiency;
  std::string algorithm_source;
};

struct HardwareProfile {
  std::string name;
  std::vector<std::string> gpus;
  std::string description;
  std::string source;
  std::map<std::string, std::string> provenance;  // measured profiles: host, backend, date, ...
  ComputeProfile compute;
  NetworkProfile network;

  // The entry for a topology link kind, or default_link.
  const LinkProfile& link(std::string_view kind) const;
  // True when `gpu` matches one of `gpus` (name or alias, ignoring case).
  bool describes(const GpuSpec& gpu) const;
};

// Reads the fields of a profile object (header already consumed) and calls finish(). When
// `link_kinds` is not empty, every links[].kind must be one of them.
bool read_profile_fields(JsonObject& obj, HardwareProfile& out,
                         std::span<const std::string_view> link_kinds = {});
Json to_json(const HardwareProfile& profile);
std::string to_json_text(const HardwareProfile& profile);
Result<HardwareProfile> parse_profile(std::string_view text, std::string_view source,
                                      std::span<const std::string_view> link_kinds = {});

// Adds kind "profile" to `planner validate`, checking link kinds against `link_kinds`.
class DocumentTypes;
void register_profile_document(DocumentTypes& types, std::vector<std::string_view> link_kinds);

// The built-in profiles (core/presets/profiles), parsed on first use; tests load them all.
const std::vector<HardwareProfile>& builtin_profiles();
// Parses every embedded profile; fails naming the preset when one is malformed.
Result<std::vector<HardwareProfile>> load_builtin_profiles();
// A built-in profile by name (ignoring case); kNotFound listing the names.
Result<HardwareProfile> builtin_profile(std::string_view name);
// The built-in profile describing `gpu`, or nullptr.
const HardwareProfile* builtin_profile_for(const GpuSpec& gpu);

// Generic fractions of the datasheet used by derive_profile() (each named and explained in
// hardware_profile.cpp), for GPUs without a measured or preset profile.
HardwareProfile derive_profile(const GpuSpec& gpu);
// The profile a prediction uses unless it is given another: the built-in profile describing `gpu`,
// else one derived from its datasheet (derive_profile()).
HardwareProfile default_profile_for(const GpuSpec& gpu);

}  // namespace planner
