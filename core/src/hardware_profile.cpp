#include "planner/core/hardware_profile.hpp"

#include <algorithm>
#include <cctype>

#include "planner/core/embedded.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/spec_json.hpp"

namespace planner::presets {
std::span<const EmbeddedFile> profile_files();
}  // namespace planner::presets

namespace planner {
namespace {

// ---- Generic fractions for derive_profile() (GPUs without a preset or measured profile).
// Large-GEMM rate as a fraction of the dense datasheet peak: the measured maximum achievable
// matmul rates in reference data hardware_specs.json are 0.87 (A100 bf16), 0.80 (H100 bf16), 0.78
// (B200 bf16), 0.73 (GB200 bf16) and 0.51 (MI300X bf16) of peak; 0.75 is their NVIDIA median.
constexpr double kGenericGemmFraction = 0.75;
// Flash-style attention as a fraction of the 16-bit peak: FlashAttention-2 at head_dim 128 and
// sequence 8192 on H100 reached 327.9 of 989 TFLOP/s (reference data hardware_specs.json, Azure).
constexpr double kGenericAttentionFraction = 0.33;
// Backward attention relative to forward: FlashAttention-2's backward pass reaches lower
// utilisation than its forward pass (Dao 2023, arXiv:2307.08691, section 4); assumed 0.8.
constexpr double kGenericAttentionBackwardRatio = 0.8;
// Achievable HBM bandwidth as a fraction of the datasheet: STREAM triad measured 0.83 (A100
// 80GB), 0.89 (H100), 0.86 (H200) of peak (reference data hardware_specs.json, Azure).
constexpr double kGenericMemoryFraction = 0.86;
// Host-to-device copies reach about 80% of the PCIe link rate (PCIe encoding and TLP overheads);
// assumed, not measured.
constexpr double kGenericPcieCopyFraction = 0.8;
// CPU memory bandwidth available to an offloaded optimizer; assumed (a share of a dual-socket
// server's DRAM bandwidth), not measured.
constexpr double kGenericHostMemoryGBps = 50.0;
// Fixed time per kernel: the gap between back-to-back kernels on a stream plus ramp-up and tail,
// 1-3 us in Nsight Systems timelines of training steps; assumed 2 us.
constexpr double kGenericKernelOverheadUs = 2.0;
// Compute lost while a communication kernel shares the SMs: NCCL runs one thread block per
// channel and Transformer Engine reserves on the order of 16-20 SMs for overlapped
// tensor-parallel communication, about 12-15% of a 108-132-SM GPU; assumed 0.12.
constexpr double kGenericCommSlowdown = 0.12;
constexpr int kGenericSmCount = 108;
constexpr int kGenericKOverhead = 64;
// Link efficiency for derived profiles: ring all-reduce bus bandwidth reaches 0.77-0.82 of the
// NVLink rate and 0.94-0.96 of InfiniBand NIC rates (reference data collectives.json); 0.85 is a
// middle value for links of unknown kind.
constexpr double kGenericLinkEfficiency = 0.85;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

constexpr RealRange kFraction{0.0, 1.0, true, "a fraction in (0, 1]"};
// Link and algorithm efficiencies: achieved over nominal bandwidth. Presets stay at or below 1;
// a calibrated profile may exceed 1 where the topology understates a link (the cpu-host
// topology's shared-memory bandwidth is one machine's 64 MiB ping-pong, bound by DRAM, while
// messages of up to a few MiB move through the caches at up to ~30x that). Beyond 64 the topology,
// not the profile, is wrong.
constexpr RealRange kEfficiency{0.0, 64.0, true,
                                "a ratio of achieved to nominal bandwidth in (0, 64]"};
constexpr RealRange kNonNegative{0.0, 1e9, false};

const char* const kClassNames[] = {"nvlink", "pcie", "network"};

bool memory_bound_kind(OpKind kind) {
  switch (kind) {
    case OpKind::kNorm:
    case OpKind::kActivation:
    case OpKind::kElementwise:
    case OpKind::kEmbedding:
    case OpKind::kSoftmaxCrossEntropy:
    case OpKind::kOptimizerStep:
      return true;
    default:
      return false;
  }
}

// Reads the array `key` of `parent`, calling each(element object) for every valid element;
// `what` describes an element for the type error ("{m, n, efficiency}").
template <class F>
void read_array(JsonObject& parent, std::string_view key, bool non_empty, const char* what,
                F&& each) {
  const Json* items = parent.child(key, Need::kRequired);
  if (items == nullptr) return;
  if (!items->is_array() || (non_empty && items->empty())) {
    parent.error(key, std::string("expected ") + (non_empty ? "a non-empty" : "an") + " array of " +
                          what + ", got " + describe_json(*items));
    return;
  }
  for (std::size_t i = 0; i < items->size(); ++i) {
    JsonObject item((*items)[i], parent.pointer_of(key) + "/" + std::to_string(i),
                    parent.diagnostics());
    if (item.valid()) each(item);
  }
}

void read_link(JsonObject& o, LinkProfile& link, bool need_kind,
               std::span<const std::string_view> link_kinds) {
  if (need_kind && o.read("kind", link.kind, Need::kRequired) && !link_kinds.empty() &&
      std::find(link_kinds.begin(), link_kinds.end(), link.kind) == link_kinds.end()) {
    std::string choices;
    for (std::string_view k : link_kinds)
      choices += (choices.empty() ? "" : ", ") + std::string(k);
    o.error("kind", "unknown link kind \"" + link.kind + "\" (choices: " + choices + ")");
  }
  o.read("efficiency", link.efficiency, Need::kRequired, kEfficiency);
  double us = 0;
  if (o.read("latency_us", us, Need::kOptional, kNonNegative)) link.latency = microseconds(us);
  o.read("source", link.source, Need::kRequired);
  o.finish();
}

void read_tiles(JsonObject& c, std::vector<GemmTile>& out) {
  read_array(c, "gemm_tiles", true, "{m, n, efficiency}", [&](JsonObject& t) {
    GemmTile tile;
    t.read("m", tile.m, Need::kRequired, {1, 4096});
    t.read("n", tile.n, Need::kRequired, {1, 4096});
    t.read("efficiency", tile.efficiency, Need::kRequired, kFraction);
    t.finish();
    out.push_back(tile);
  });
}

void read_compute(JsonObject& c, ComputeProfile& out) {
  c.read("sm_count", out.sm_count, Need::kRequired, {1, 100000});
  if (const Json* gemm = c.child("gemm", Need::kRequired)) {
    JsonObject g(*gemm, c.pointer_of("gemm"), c.diagnostics());
    if (g.valid()) {
      bool any = false;
      for (const auto& [precision, name] : EnumTraits<Precision>::kNames) {
        const Json* entry = g.child(name, Need::kOptional);
        if (entry == nullptr) continue;
        JsonObject e(*entry, g.pointer_of(name), c.diagnostics());
        if (!e.valid()) continue;
        GemmRate& rate = out.gemm[static_cast<std::size_t>(precision)];
        double tflops = 0;
        if (e.read("tflops", tflops, Need::kRequired,
                   {0.0, 1e6, true, "dense TFLOP/s, not FLOP/s"})) {
          rate.rate = tflops_per_s(tflops);
          any = true;
        }
        e.read("source", rate.source, Need::kRequired);
        e.finish();
      }
      g.finish();
      if (!any)
        c.error("gemm", "must give a rate for at least one of " + enum_choices<Precision>());
    }
  }
  read_tiles(c, out.gemm_tiles);
  c.read("gemm_k_overhead", out.gemm_k_overhead, Need::kRequired, {0, 1 << 20});
  c.read("gemm_shape_source", out.gemm_shape_source, Need::kRequired);
  double v = 0;
  if (c.read("attention_forward_tflops", v, Need::kRequired, {0.0, 1e6, true, "TFLOP/s"})) {
    out.attention_forward = tflops_per_s(v);
  }
  if (c.read("attention_backward_tflops", v, Need::kRequired, {0.0, 1e6, true, "TFLOP/s"})) {
    out.attention_backward = tflops_per_s(v);
  }
  c.read("attention_half_seq", out.attention_half_seq, Need::kRequired, {0, 1 << 30});
  c.read("attention_half_head_dim", out.attention_half_head_dim, Need::kOptional, {0, 4096});
  c.read("attention_source", out.attention_source, Need::kRequired);
  if (c.read("memory_bandwidth_GBps", v, Need::kRequired,
             {1.0, 1e6, false, "GB/s: 3.35 TB/s is 3350"})) {
    out.memory_bandwidth = GBps(v);
  }
  c.read("memory_source", out.memory_source, Need::kRequired);
  if (const Json* bound = c.child("memory_bound_GBps", Need::kOptional)) {
    JsonObject b(*bound, c.pointer_of("memory_bound_GBps"), c.diagnostics());
    if (b.valid()) {
      for (const auto& [kind, name] : EnumTraits<OpKind>::kNames) {
        if (!b.has(name)) continue;
        if (!memory_bound_kind(kind)) {
          b.error(name,
                  "not a memory-bound op kind (expected one of norm, activation, "
                  "elementwise, embedding, softmax_ce, optimizer)");
          continue;
        }
        double gbps = 0;
        if (b.read(name, gbps, Need::kRequired, {0.001, 1e6, false, "GB/s"})) {
          out.memory_bound[static_cast<std::size_t>(kind)] = GBps(gbps);
        }
      }
      b.finish();
    }
    c.read("memory_bound_source", out.memory_bound_source, Need::kRequired);
  }
  if (c.read("kernel_overhead_us", v, Need::kRequired, {0.0, 1e6, false, "microseconds"})) {
    out.kernel_overhead = microseconds(v);
  }
  c.read("kernel_overhead_source", out.kernel_overhead_source, Need::kRequired);
  c.read("host_cores", out.host_cores, Need::kOptional, {0, 1 << 20});
  if (c.read("oversubscribed_efficiency", out.oversubscribed_efficiency, Need::kOptional,
             {0.0, 1.0, true, "a fraction of the cores' throughput, e.g. 0.85"})) {
    c.read("oversubscribed_source", out.oversubscribed_source, Need::kRequired);
  }
  c.read("comm_slowdown", out.comm_slowdown, Need::kRequired,
         {0.0, 0.9, false, "a fraction of compute throughput, e.g. 0.12"});
  c.read("comm_slowdown_source", out.comm_slowdown_source, Need::kRequired);
  if (c.read("host_memory_bandwidth_GBps", v, Need::kRequired, {0.1, 1e6, false, "GB/s"})) {
    out.host_memory_bandwidth = GBps(v);
  }
  if (c.read("pcie_copy_GBps", v, Need::kRequired, {0.1, 1e6, false, "GB/s"})) {
    out.pcie_copy_bandwidth = GBps(v);
  }
  c.read("host_source", out.host_source, Need::kRequired);
  c.finish();
}

void read_protocols(JsonObject& n, std::vector<ProtocolProfile>& out) {
  read_array(n, "protocols", true, "protocols", [&](JsonObject& p) {
    ProtocolProfile proto;
    if (p.read("name", proto.name, Need::kRequired)) {
      for (const ProtocolProfile& other : out) {
        if (other.name == proto.name) p.error("name", "duplicate protocol \"" + proto.name + "\"");
      }
    }
    p.read("bandwidth_factor", proto.bandwidth_factor, Need::kRequired, kFraction);
    double us = 0;
    if (p.read("base_latency_us", us, Need::kRequired, kNonNegative)) {
      proto.base_latency = microseconds(us);
    }
    if (const Json* steps = p.child("step_latency_us", Need::kRequired)) {
      JsonObject s(*steps, p.pointer_of("step_latency_us"), n.diagnostics());
      if (s.valid()) {
        for (std::size_t c = 0; c < proto.step_latency.size(); ++c) {
          if (s.read(kClassNames[c], us, Need::kRequired, kNonNegative)) {
            proto.step_latency[c] = microseconds(us);
          }
        }
        s.finish();
      }
    }
    p.finish();
    out.push_back(std::move(proto));
  });
}

void read_network(JsonObject& n, NetworkProfile& out, std::span<const std::string_view> kinds) {
  read_array(n, "links", false, "{kind, efficiency, latency_us, source}", [&](JsonObject& l) {
    LinkProfile link;
    read_link(l, link, true, kinds);
    for (const LinkProfile& other : out.links) {
      if (!link.kind.empty() && other.kind == link.kind) {
        l.diagnostics().add(l.pointer_of("kind"), "duplicate link kind \"" + link.kind + "\"");
      }
    }
    out.links.push_back(std::move(link));
  });
  if (const Json* d = n.child("default_link", Need::kRequired)) {
    JsonObject l(*d, n.pointer_of("default_link"), n.diagnostics());
    if (l.valid()) read_link(l, out.default_link, false, kinds);
  }
  read_protocols(n, out.protocols);
  n.read("protocol_source", out.protocol_source, Need::kRequired);
  if (const Json* a = n.child("algorithm_efficiency", Need::kRequired)) {
    JsonObject e(*a, n.pointer_of("algorithm_efficiency"), n.diagnostics());
    if (e.valid()) {
      AlgorithmEfficiency& x = out.algorithm_efficiency;
      e.read("ring", x.ring, Need::kRequired, kEfficiency);
      e.read("tree", x.tree, Need::kRequired, kEfficiency);
      e.read("hierarchical", x.hierarchical, Need::kRequired, kEfficiency);
      e.read("nvls", x.nvls, Need::kRequired, {0.0, 1.0, false, "0 when unavailable"});
      e.read("all_to_all", x.all_to_all, Need::kRequired, kEfficiency);
      e.read("p2p", x.p2p, Need::kRequired, kEfficiency);
      e.finish();
    }
  }
  n.read("algorithm_source", out.algorithm_source, Need::kRequired);
  n.finish();
}

double us_of(Time t) {
  return to_microseconds(t);
}

Json link_json(const LinkProfile& l, bool with_kind) {
  Json j = Json::object();
  if (with_kind) j["kind"] = l.kind;
  j["efficiency"] = l.efficiency;
  j["latency_us"] = us_of(l.latency);
  j["source"] = l.source;
  return j;
}

}  // namespace

const LinkProfile& HardwareProfile::link(std::string_view kind) const {
  for (const LinkProfile& l : network.links) {
    if (l.kind == kind) return l;
  }
  return network.default_link;
}

bool HardwareProfile::describes(const GpuSpec& gpu) const {
  for (const std::string& g : gpus) {
    if (gpu.matches(g)) return true;
  }
  return false;
}

bool read_profile_fields(JsonObject& obj, HardwareProfile& p,
                         std::span<const std::string_view> link_kinds) {
  Diagnostics& diag = obj.diagnostics();
  const std::size_t before = diag.size();
  obj.read_name("name", p.name, Need::kRequired);
  obj.read("gpus", p.gpus, Need::kRequired);
  obj.read("description", p.description, Need::kOptional);
  obj.read("source", p.source, Need::kRequired);
  if (const Json* prov = obj.child("provenance", Need::kOptional)) {
    JsonObject po(*prov, obj.pointer_of("provenance"), obj.diagnostics());
    if (po.valid()) {
      for (const auto& [key, value] : prov->items()) {
        std::string text;
        if (po.read(key, text, Need::kRequired, true)) p.provenance[key] = text;
      }
      po.finish();
    }
  }
  if (const Json* c = obj.child("compute", Need::kRequired)) {
    JsonObject co(*c, obj.pointer_of("compute"), diag);
    if (co.valid()) read_compute(co, p.compute);
  }
  if (const Json* n = obj.child("network", Need::kRequired)) {
    JsonObject no(*n, obj.pointer_of("network"), diag);
    if (no.valid()) read_network(no, p.network, link_kinds);
  }
  obj.finish();
  return diag.size() == before;
}

Json to_json(const HardwareProfile& p) {
  const ComputeProfile& c = p.compute;
  Json gemm = Json::object();
  for (const auto& [precision, name] : EnumTraits<Precision>::kNames) {
    const GemmRate& r = c.gemm_rate(precision);
    if (r.rate.raw() > 0) {
      gemm[std::string(name)] = {{"tflops", to_tflops_per_s(r.rate)}, {"source", r.source}};
    }
  }
  Json tiles = Json::array();
  for (const GemmTile& t : c.gemm_tiles)
    tiles.push_back({{"m", t.m}, {"n", t.n}, {"efficiency", t.efficiency}});
  Json compute = {{"sm_count", c.sm_count},
                  {"gemm", gemm},
                  {"gemm_tiles", tiles},
                  {"gemm_k_overhead", c.gemm_k_overhead},
                  {"gemm_shape_source", c.gemm_shape_source},
                  {"attention_forward_tflops", to_tflops_per_s(c.attention_forward)},
                  {"attention_backward_tflops", to_tflops_per_s(c.attention_backward)},
                  {"attention_half_seq", c.attention_half_seq},
                  {"attention_source", c.attention_source},
                  {"memory_bandwidth_GBps", to_GBps(c.memory_bandwidth)},
                  {"memory_source", c.memory_source},
                  {"kernel_overhead_us", us_of(c.kernel_overhead)},
                  {"kernel_overhead_source", c.kernel_overhead_source},
                  {"comm_slowdown", c.comm_slowdown},
                  {"comm_slowdown_source", c.comm_slowdown_source},
                  {"host_memory_bandwidth_GBps", to_GBps(c.host_memory_bandwidth)},
                  {"pcie_copy_GBps", to_GBps(c.pcie_copy_bandwidth)},
                  {"host_source", c.host_source}};
  Json bound = Json::object();
  for (const auto& [kind, name] : EnumTraits<OpKind>::kNames) {
    const Bandwidth b = c.memory_bound[static_cast<std::size_t>(kind)];
    if (b.raw() > 0) bound[std::string(name)] = to_GBps(b);
  }
  if (c.host_cores > 0) compute["host_cores"] = c.host_cores;
  if (c.attention_half_head_dim > 0) {
    compute["attention_half_head_dim"] = c.attention_half_head_dim;
  }
  if (c.oversubscribed_efficiency != 1.0 || !c.oversubscribed_source.empty()) {
    compute["oversubscribed_efficiency"] = c.oversubscribed_efficiency;
    compute["oversubscribed_source"] = c.oversubscribed_source;
  }
  if (!bound.empty()) {
    compute["memory_bound_GBps"] = bound;
    compute["memory_bound_source"] = c.memory_bound_source;
  }
  const NetworkProfile& n = p.network;
  Json links = Json::array();
  for (const LinkProfile& l : n.links)
    links.push_back(link_json(l, true));
  Json protocols = Json::array();
  for (const ProtocolProfile& pr : n.protocols) {
    Json steps = Json::object();
    for (std::size_t i = 0; i < pr.step_latency.size(); ++i)
      steps[kClassNames[i]] = us_of(pr.step_latency[i]);
    protocols.push_back({{"name", pr.name},
                         {"bandwidth_factor", pr.bandwidth_factor},
                         {"base_latency_us", us_of(pr.base_latency)},
                         {"step_latency_us", steps}});
  }
  const AlgorithmEfficiency& a = n.algorithm_efficiency;
  Json network = {{"links", links},
                  {"default_link", link_json(n.default_link, false)},
                  {"protocols", protocols},
                  {"protocol_source", n.protocol_source},
                  {"algorithm_efficiency",
                   {{"ring", a.ring},
                    {"tree", a.tree},
                    {"hierarchical", a.hierarchical},
                    {"nvls", a.nvls},
                    {"all_to_all", a.all_to_all},
                    {"p2p", a.p2p}}},
                  {"algorithm_source", n.algorithm_source}};
  Json out = {{"name", p.name}, {"gpus", p.gpus}};
  if (!p.description.empty()) out["description"] = p.description;
  out["source"] = p.source;
  if (!p.provenance.empty()) out["provenance"] = p.provenance;
  out["compute"] = compute;
  out["network"] = network;
  return out;
}

std::string to_json_text(const HardwareProfile& profile) {
  return as_document("profile", to_json(profile)).dump(2) + "\n";
}

Result<HardwareProfile> parse_profile(std::string_view text, std::string_view source,
                                      std::span<const std::string_view> link_kinds) {
  Diagnostics diag{std::string(source)};
  auto json = parse_json_text(text, diag);
  if (!json) return diag.to_status();
  JsonObject root(*json, "", diag);
  HardwareProfile p;
  if (root.valid()) {
    read_document_header(root, "profile");
    read_profile_fields(root, p, link_kinds);
  }
  if (!diag.empty()) return diag.to_status();
  return p;
}

void register_profile_document(DocumentTypes& types, std::vector<std::string_view> link_kinds) {
  types.add("profile", "simulator model parameters for a GPU type and its links",
            [kinds = std::move(link_kinds)](JsonObject& root, Diagnostics&) {
              HardwareProfile p;
              read_profile_fields(root, p, kinds);
            });
}

Result<std::vector<HardwareProfile>> load_builtin_profiles() {
  std::vector<HardwareProfile> out;
  for (const EmbeddedFile& f : presets::profile_files()) {
    auto p = parse_profile(f.content, "preset profiles/" + std::string(f.name));
    if (!p) return p.status();
    out.push_back(std::move(p).value());
  }
  return out;
}

const std::vector<HardwareProfile>& builtin_profiles() {
  static const std::vector<HardwareProfile> profiles = [] {
    auto p = load_builtin_profiles();
    return p ? std::move(p).value() : std::vector<HardwareProfile>{};
  }();
  return profiles;
}

Result<HardwareProfile> builtin_profile(std::string_view name) {
  const std::string wanted = lower(name);
  std::string names;
  for (const HardwareProfile& p : builtin_profiles()) {
    if (lower(p.name) == wanted) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  return Status::not_found("unknown hardware profile \"" + std::string(name) +
                           "\"; built-in profiles: " + names);
}

const HardwareProfile* builtin_profile_for(const GpuSpec& gpu) {
  for (const HardwareProfile& p : builtin_profiles()) {
    if (p.describes(gpu)) return &p;
  }
  return nullptr;
}

HardwareProfile default_profile_for(const GpuSpec& gpu) {
  if (const HardwareProfile* p = builtin_profile_for(gpu)) return *p;
  return derive_profile(gpu);
}

HardwareProfile derive_profile(const GpuSpec& gpu) {
  HardwareProfile p;
  p.name = "derived-" + lower(gpu.name);
  p.gpus = {gpu.name};
  p.description = "generic profile derived from the " + gpu.name + " datasheet";
  p.source = "derive_profile(): datasheet figures of " + gpu.name +
             " scaled by generic efficiencies (core/src/hardware_profile.cpp); no measured or "
             "preset profile describes this GPU";
  ComputeProfile& c = p.compute;
  c.sm_count = kGenericSmCount;
  for (const auto& [precision, name] : EnumTraits<Precision>::kNames) {
    if (!gpu.supports(precision)) continue;
    GemmRate& r = c.gemm[static_cast<std::size_t>(precision)];
    r.rate = gpu.peak_for(precision).scaled(kGenericGemmFraction);
    r.source = "datasheet peak x " + std::to_string(kGenericGemmFraction) + " (generic)";
  }
  c.gemm_tiles = {{128, 256, 1.0}, {128, 128, 0.9}, {64, 128, 0.75}, {64, 64, 0.55}};
  c.gemm_k_overhead = kGenericKOverhead;
  c.gemm_shape_source = "generic tile set (see the preset profiles)";
  const FlopRate half = gpu.supports(Precision::kBf16) ? gpu.peak_for(Precision::kBf16)
                                                       : gpu.peak_for(Precision::kFp16);
  c.attention_forward = half.scaled(kGenericAttentionFraction);
  c.attention_backward = c.attention_forward.scaled(kGenericAttentionBackwardRatio);
  c.attention_half_seq = 256;
  c.attention_source = "16-bit peak x generic flash-attention fractions";
  c.memory_bandwidth = gpu.hbm_bandwidth.scaled(kGenericMemoryFraction);
  c.memory_source = "datasheet HBM bandwidth x generic STREAM fraction";
  c.kernel_overhead = microseconds(kGenericKernelOverheadUs);
  c.kernel_overhead_source = "generic assumption";
  c.comm_slowdown = kGenericCommSlowdown;
  c.comm_slowdown_source = "generic assumption";
  c.host_memory_bandwidth = GBps(kGenericHostMemoryGBps);
  c.pcie_copy_bandwidth = gpu.pcie_bandwidth.scaled(kGenericPcieCopyFraction);
  c.host_source = "generic assumption";
  NetworkProfile& n = p.network;
  n.default_link = {"", kGenericLinkEfficiency, Time(0), "generic link efficiency"};
  // NCCL's protocols with its tuning model's latencies (src/graph/tuning.cc, baseLat and the
  // ring hwLat rows for NVLink, PCI and NET; quoted from memory, not re-checked).
  auto proto = [](std::string name, double factor, double base, double nvl, double pci,
                  double net) {
    return ProtocolProfile{std::move(name),
                           factor,
                           microseconds(base),
                           {microseconds(nvl), microseconds(pci), microseconds(net)}};
  };
  n.protocols = {proto("ll", 0.5, 6.6, 0.6, 1.0, 2.7), proto("ll128", 0.9375, 14.0, 1.9, 2.5, 4.0),
                 proto("simple", 1.0, 8.4, 3.4, 5.7, 14.0)};
  n.protocol_source = "NCCL tuning model latencies (generic)";
  n.algorithm_efficiency = AlgorithmEfficiency{1.0, 0.92, 1.0, 0.0, 1.0, 1.0};
  n.algorithm_source = "NCCL tuning model: tree bandwidth x 0.92 (generic)";
  return p;
}

}  // namespace planner
