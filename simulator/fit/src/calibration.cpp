#include "planner/fit/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "planner/sim/collectives.hpp"
#include "planner/sim/compute_model.hpp"
#include "planner/sim/fabric.hpp"
#include "planner/topo/link_kind.hpp"

namespace planner::fit {
namespace {

// The probe rate the compute features are evaluated at: 1 TFLOP/s keeps the times of the largest
// GEMMs (1e15 FLOPs) and of the smallest (1e3 FLOPs) inside the picosecond clock.
constexpr double kProbeFlopRate = 1e12;
// Bandwidth of the probe's memory roof: high enough that no op is memory-bound in the probe.
constexpr double kProbeUnboundedBandwidth = 1e30;
// Step latency of the network probe that counts an algorithm's steps.
constexpr double kProbeStepLatencyUs = 1.0;
// Columns are scaled to unit norm, so pivots are O(1); one below this belongs to a column the
// others already explain (no information of its own), which is left at 0.
constexpr double kPivotEpsilon = 1e-12;

bool is_memory_bound(OpKind k) {
  return is_compute(k) && k != OpKind::kGemm && k != OpKind::kAttention && k != OpKind::kRouter;
}

double secs(Time t) {
  return to_seconds(t);
}

// Weighted linear least squares: minimises Σ (a_i·x - b_i)² over the columns not pinned (pinned
// columns are 0). Normal equations with partial pivoting; columns without information stay 0.
std::vector<double> least_squares(const std::vector<std::vector<double>>& a,
                                  const std::vector<double>& b, const std::vector<bool>& pinned) {
  const std::size_t n = pinned.size();
  std::vector<std::size_t> cols;
  for (std::size_t j = 0; j < n; ++j) {
    if (!pinned[j]) cols.push_back(j);
  }
  const std::size_t m = cols.size();
  // Columns are scaled to unit norm for conditioning (features span 1e-12 .. 1e3 seconds).
  std::vector<double> scale(m, 0.0);
  for (std::size_t c = 0; c < m; ++c) {
    for (const auto& row : a)
      scale[c] += row[cols[c]] * row[cols[c]];
    scale[c] = scale[c] > 0 ? std::sqrt(scale[c]) : 1.0;
  }
  std::vector<std::vector<double>> ata(m, std::vector<double>(m + 1, 0.0));
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (std::size_t r = 0; r < m; ++r) {
      const double ar = a[i][cols[r]] / scale[r];
      for (std::size_t c = 0; c < m; ++c)
        ata[r][c] += ar * a[i][cols[c]] / scale[c];
      ata[r][m] += ar * b[i];
    }
  }
  for (std::size_t p = 0; p < m; ++p) {
    std::size_t best = p;
    for (std::size_t r = p + 1; r < m; ++r) {
      if (std::abs(ata[r][p]) > std::abs(ata[best][p])) best = r;
    }
    std::swap(ata[p], ata[best]);
    if (std::abs(ata[p][p]) < kPivotEpsilon) continue;
    for (std::size_t r = 0; r < m; ++r) {
      if (r == p) continue;
      const double f = ata[r][p] / ata[p][p];
      for (std::size_t c = p; c <= m; ++c)
        ata[r][c] -= f * ata[p][c];
    }
  }
  std::vector<double> x(n, 0.0);
  for (std::size_t p = 0; p < m; ++p) {
    if (std::abs(ata[p][p]) >= kPivotEpsilon) x[cols[p]] = ata[p][m] / ata[p][p] / scale[p];
  }
  return x;
}

// Least squares whose solution is non-negative in `non_negative` columns: a negative one is pinned
// at 0 and the rest refitted, until none is.
std::vector<double> fit_non_negative(const std::vector<std::vector<double>>& a,
                                     const std::vector<double>& b, std::vector<bool> pinned) {
  while (true) {
    std::vector<double> x = least_squares(a, b, pinned);
    std::size_t worst = pinned.size();
    for (std::size_t j = 0; j < x.size(); ++j) {
      if (!pinned[j] && x[j] < 0 && (worst == pinned.size() || x[j] < x[worst])) worst = j;
    }
    if (worst == pinned.size()) return x;
    pinned[worst] = true;
  }
}

// Robust refit: points whose relative residual exceeds this many times the median residual (a
// preempted batch on a shared machine, a cache effect the model does not have) are left out of a
// second fit, as in one step of iteratively trimmed least squares.
constexpr double kOutlierFactor = 3.0;
// Residuals below this are noise-free already; no point is an outlier relative to them.
constexpr double kResidualFloor = 0.02;

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

// fit_non_negative(), then again without the outliers of the first fit.
std::vector<double> fit_robust(const std::vector<std::vector<double>>& a,
                               const std::vector<double>& b, const std::vector<bool>& pinned) {
  std::vector<double> x = fit_non_negative(a, b, pinned);
  std::vector<double> residual(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    double r = -b[i];
    for (std::size_t j = 0; j < x.size(); ++j)
      r += a[i][j] * x[j];
    residual[i] = std::abs(r);
  }
  const double limit = kOutlierFactor * std::max(kResidualFloor, median_of(residual));
  std::vector<std::vector<double>> ka;
  std::vector<double> kb;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (residual[i] <= limit) {
      ka.push_back(a[i]);
      kb.push_back(b[i]);
    }
  }
  if (ka.size() == a.size()) return x;
  // A column whose points were all left out keeps no information: pin it.
  std::vector<bool> kp = pinned;
  for (std::size_t j = 0; j < kp.size(); ++j) {
    bool any = false;
    for (const auto& row : ka)
      any = any || row[j] != 0;
    kp[j] = kp[j] || !any;
  }
  return fit_non_negative(ka, kb, kp);
}

// The base profile with the compute model's parameters set for feature evaluation: rate 1 TFLOP/s
// for every precision, no k overhead, no memory roof, no kernel overhead.
HardwareProfile compute_probe(const HardwareProfile& base) {
  HardwareProfile p = base;
  ComputeProfile& c = p.compute;
  for (GemmRate& r : c.gemm)
    r.rate = FlopRate(kProbeFlopRate);
  c.gemm_k_overhead = 0;
  c.attention_forward = FlopRate(kProbeFlopRate);
  c.attention_backward = FlopRate(kProbeFlopRate);
  c.memory_bandwidth = Bandwidth(kProbeUnboundedBandwidth);
  c.memory_bound = {};
  c.kernel_overhead = Time(0);
  return p;
}

// The base profile with an ideal network: link efficiency 1 and no profile latency for every
// link kind, efficiency 1 for every algorithm, one protocol without latency (or `step_us` per
// step for every link class).
HardwareProfile network_probe(const HardwareProfile& base, double step_us) {
  HardwareProfile p = base;
  NetworkProfile& n = p.network;
  for (LinkProfile& l : n.links) {
    l.efficiency = 1.0;
    l.latency = Time(0);
  }
  n.default_link.efficiency = 1.0;
  n.default_link.latency = Time(0);
  ProtocolProfile proto;
  proto.name = "simple";
  proto.bandwidth_factor = 1.0;
  proto.base_latency = Time(0);
  for (Time& t : proto.step_latency)
    t = microseconds(step_us);
  n.protocols = {proto};
  AlgorithmEfficiency& e = n.algorithm_efficiency;
  e.ring = e.tree = e.hierarchical = e.all_to_all = e.p2p = 1.0;
  e.nvls = 0.0;
  return p;
}

std::vector<int> first_gpus(int n) {
  std::vector<int> g(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    g[static_cast<std::size_t>(i)] = i;
  return g;
}

Time comm_estimate(const HardwareProfile& profile, const topo::Cluster& cluster,
                   const CalibrationPoint& p) {
  const sim::Fabric fabric = sim::Fabric::build(cluster, profile);
  sim::CollectivePlanner planner(cluster, profile, fabric, std::nullopt);
  const int n = std::max(2, p.group_size);
  if (p.desc.kind == OpKind::kSend || p.desc.kind == OpKind::kRecv) {
    return planner.p2p(0, 1, p.desc.comm_bytes).estimate;
  }
  const std::vector<int> gpus = first_gpus(n);
  return planner.collective(p.desc.kind, p.desc.comm_bytes, gpus).estimate;
}

// The algorithm family whose efficiency a communication point measures.
// A compute point measured with more ranks computing at once than the host has cores.
bool oversubscribed(const CalibrationPoint& p, int host_cores) {
  return host_cores > 0 && !is_communication(p.desc.kind) && p.group_size > host_cores;
}

enum class Family { kP2p, kRing, kAllToAll };
Family family(OpKind k) {
  switch (k) {
    case OpKind::kSend:
    case OpKind::kRecv:
      return Family::kP2p;
    case OpKind::kAllToAll:
      return Family::kAllToAll;
    default:
      return Family::kRing;
  }
}

}  // namespace

std::optional<double> ParameterChange::relative_change() const {
  if (before == 0) return std::nullopt;
  return (after - before) / before;
}

Time model_time(const HardwareProfile& profile, const topo::Cluster& cluster,
                const CalibrationPoint& p) {
  if (is_communication(p.desc.kind)) return comm_estimate(profile, cluster, p);
  const Time alone = sim::ComputeModel(profile).op_time(p.desc, p.backward);
  const ComputeProfile& c = profile.compute;
  if (!oversubscribed(p, c.host_cores)) return alone;
  return Time(std::llround(static_cast<double>(alone.raw()) * p.group_size / c.host_cores /
                           c.oversubscribed_efficiency));
}

Result<FitReport> fit_profile(const HardwareProfile& base, const topo::Cluster& cluster,
                              std::span<const CalibrationPoint> points, const FitOptions& options) {
  const auto link_kind = parse_enum<topo::LinkKind>(options.link_kind);
  if (!link_kind) {
    return Status::invalid_input("unknown link kind \"" + options.link_kind + "\": expected " +
                                 enum_choices<topo::LinkKind>());
  }
  FitReport report;
  report.profile = base;
  HardwareProfile& out = report.profile;
  if (!options.name.empty()) out.name = options.name;
  if (!options.description.empty()) out.description = options.description;
  if (!options.source.empty()) out.source = options.source;
  auto change = [&](std::string name, std::string unit, double before, double after,
                    std::int64_t n) {
    report.changes.push_back({std::move(name), std::move(unit), before, after, n});
  };

  // ---- compute: columns [gemm rate per precision..., k overhead, bandwidth per memory-bound
  // kind..., attention forward, attention backward, kernel overhead]
  constexpr std::size_t kPrec = kNumPrecisions;
  constexpr std::size_t kKinds = EnumTraits<OpKind>::kNames.size();
  const std::size_t col_k = kPrec;
  const std::size_t col_mem = col_k + 1;
  const std::size_t col_fwd = col_mem + kKinds;
  const std::size_t col_bwd = col_fwd + 1;
  const std::size_t col_ovh = col_bwd + 1;
  const std::size_t ncols = col_ovh + 1;
  const HardwareProfile probe = compute_probe(base);
  const sim::ComputeModel probe_model(probe);
  std::vector<std::vector<double>> rows;
  std::vector<double> rhs;
  std::vector<std::int64_t> support(ncols, 0);
  int gemm_precisions = 0;
  std::array<bool, kPrec> has_precision{};
  for (const CalibrationPoint& p : points) {
    const OpKind k = p.desc.kind;
    if (is_communication(k) || p.measured <= Time(0)) continue;
    if (oversubscribed(p, options.host_cores)) continue;
    std::vector<double> row(ncols, 0.0);
    const double t = secs(p.measured);
    if (k == OpKind::kGemm) {
      const auto prec = static_cast<std::size_t>(p.desc.precision);
      const double g = secs(probe_model.gemm_time(p.desc)) * kProbeFlopRate;  // FLOPs
      row[prec] = g;
      row[col_k] = p.desc.k > 0 ? g / static_cast<double>(p.desc.k) : 0.0;
      ++support[prec];
      ++support[col_k];
      has_precision[prec] = true;
    } else if (k == OpKind::kAttention) {
      const std::size_t col = p.backward ? col_bwd : col_fwd;
      row[col] = secs(probe_model.attention_time(p.desc, p.backward)) * kProbeFlopRate;
      ++support[col];
    } else if (is_memory_bound(k) && p.desc.stream != Stream::kHost) {
      const std::size_t col = col_mem + static_cast<std::size_t>(k);
      row[col] = static_cast<double>((p.desc.bytes_read + p.desc.bytes_written).raw());
      ++support[col];
    } else {
      continue;
    }
    row[col_ovh] = 1.0;
    ++support[col_ovh];
    for (double& v : row)
      v /= t;
    rows.push_back(std::move(row));
    rhs.push_back(1.0);
  }
  for (bool b : has_precision)
    gemm_precisions += b ? 1 : 0;
  if (!rows.empty()) {
    std::vector<bool> pinned(ncols, false);
    for (std::size_t j = 0; j < ncols; ++j)
      pinned[j] = support[j] == 0;
    // One k overhead for all precisions: fitted only when one precision was measured.
    if (gemm_precisions != 1) pinned[col_k] = true;
    const std::vector<double> x = fit_robust(rows, rhs, pinned);
    ComputeProfile& c = out.compute;
    const ComputeProfile& b = base.compute;
    std::size_t main_precision = kPrec;
    for (std::size_t prec = 0; prec < kPrec; ++prec) {
      if (support[prec] == 0 || x[prec] <= 0) continue;
      main_precision = prec;
      const double rate = 1.0 / x[prec];
      change("compute.gemm." + std::string(to_string(static_cast<Precision>(prec))), "TFLOP/s",
             to_tflops_per_s(b.gemm[prec].rate), rate / 1e12, support[prec]);
      c.gemm[prec].rate = FlopRate(rate);
      c.gemm[prec].source = "planner calibrate: weighted least-squares fit to " +
                            std::to_string(support[prec]) + " measured GEMMs";
    }
    if (support[col_k] > 0 && main_precision < kPrec && gemm_precisions == 1) {
      const int k0 = static_cast<int>(std::llround(x[col_k] / x[main_precision]));
      change("compute.gemm_k_overhead", "elements", b.gemm_k_overhead, k0, support[col_k]);
      c.gemm_k_overhead = k0;
      c.gemm_shape_source = base.compute.gemm_shape_source +
                            "; gemm_k_overhead fitted by planner calibrate (fixed cost per output "
                            "element in elements of k)";
    }
    std::string bound_kinds;
    double fastest_bound = 0;
    for (std::size_t kind = 0; kind < kKinds; ++kind) {
      const std::size_t col = col_mem + kind;
      if (support[col] == 0 || x[col] <= 0) continue;
      const double gbps = 1e-9 / x[col];
      const std::string name(to_string(static_cast<OpKind>(kind)));
      change("compute.memory_bound." + name, "GB/s",
             to_GBps(b.memory_bandwidth_for(static_cast<OpKind>(kind))), gbps, support[col]);
      c.memory_bound[kind] = GBps(gbps);
      bound_kinds += (bound_kinds.empty() ? "" : ", ") + name;
      fastest_bound = std::max(fastest_bound, gbps);
    }
    if (!bound_kinds.empty()) {
      c.memory_bound_source = "planner calibrate: bytes read + written / time of the measured " +
                              bound_kinds + " kernels, weighted least-squares fit";
      // The roof for GEMMs and attention: the fastest memory-bound kernel measured.
      change("compute.memory_bandwidth", "GB/s", to_GBps(b.memory_bandwidth), fastest_bound, 0);
      c.memory_bandwidth = GBps(fastest_bound);
      c.memory_source = "planner calibrate: the fastest measured memory-bound kernel";
    }
    auto set_attention = [&](std::size_t col, FlopRate& rate, const char* name) {
      if (support[col] == 0 || x[col] <= 0) return;
      change(name, "TFLOP/s", to_tflops_per_s(rate), 1.0 / x[col] / 1e12, support[col]);
      rate = FlopRate(1.0 / x[col]);
      c.attention_source =
          "planner calibrate: weighted least-squares fit to the measured "
          "attention kernels";
    };
    set_attention(col_fwd, c.attention_forward, "compute.attention_forward");
    set_attention(col_bwd, c.attention_backward, "compute.attention_backward");
    if (support[col_ovh] > 0) {
      change("compute.kernel_overhead", "us", to_seconds(b.kernel_overhead) * 1e6, x[col_ovh] * 1e6,
             support[col_ovh]);
      c.kernel_overhead = Time(std::llround(x[col_ovh] * 1e12));
      c.kernel_overhead_source = "planner calibrate: the intercept of the compute fit";
    }
  }

  // ---- oversubscription: processor sharing's prediction over the measured time
  if (options.host_cores > 0) {
    ComputeProfile& c = out.compute;
    change("compute.host_cores", "cores", base.compute.host_cores, options.host_cores, 0);
    c.host_cores = options.host_cores;
    std::vector<double> ratios;
    c.oversubscribed_efficiency = 1.0;
    for (const CalibrationPoint& p : points) {
      if (!oversubscribed(p, options.host_cores) || p.measured <= Time(0)) continue;
      ratios.push_back(secs(model_time(out, cluster, p)) / secs(p.measured));
    }
    if (!ratios.empty()) {
      // Above 1 (faster than ideal sharing) is noise in the unshared points: no loss measured.
      const double eff = std::min(1.0, median_of(ratios));
      change("compute.oversubscribed_efficiency", "", base.compute.oversubscribed_efficiency, eff,
             static_cast<std::int64_t>(ratios.size()));
      c.oversubscribed_efficiency = eff;
      c.oversubscribed_source = "planner calibrate: median over " + std::to_string(ratios.size()) +
                                " compute kernels run by more ranks than the host's " +
                                std::to_string(options.host_cores) +
                                " cores at once of (processor sharing's time / the measured time)";
    } else {
      c.oversubscribed_efficiency = base.compute.oversubscribed_efficiency;
    }
  }

  // ---- network: columns [base latency, step latency, v_p2p, v_ring, v_all_to_all]
  const HardwareProfile flat = network_probe(base, 0.0);
  const HardwareProfile stepped = network_probe(base, kProbeStepLatencyUs);
  std::vector<std::vector<double>> nrows;
  std::vector<double> nrhs;
  std::array<std::int64_t, 5> nsupport{};
  for (const CalibrationPoint& p : points) {
    if (!is_communication(p.desc.kind) || p.measured <= Time(0)) continue;
    if (std::max(2, p.group_size) > cluster.num_gpus()) continue;
    CalibrationPoint empty = p;
    empty.desc.comm_bytes = Bytes(0);
    const double lat0 = secs(comm_estimate(flat, cluster, empty));
    const double steps =
        (secs(comm_estimate(stepped, cluster, empty)) - lat0) / (kProbeStepLatencyUs * 1e-6);
    const double wire = secs(comm_estimate(flat, cluster, p)) - lat0;
    const double t = secs(p.measured);
    std::vector<double> row(5, 0.0);
    row[0] = 1.0;
    row[1] = steps;
    row[2 + static_cast<std::size_t>(family(p.desc.kind))] = wire;
    ++nsupport[0];
    ++nsupport[1];
    ++nsupport[2 + static_cast<std::size_t>(family(p.desc.kind))];
    for (double& v : row)
      v /= t;
    nrows.push_back(std::move(row));
    nrhs.push_back((t - lat0) / t);
  }
  if (!nrows.empty()) {
    std::vector<bool> pinned(5, false);
    for (std::size_t j = 0; j < 5; ++j)
      pinned[j] = nsupport[j] == 0;
    const std::vector<double> x = fit_robust(nrows, nrhs, pinned);
    NetworkProfile& n = out.network;
    const NetworkProfile& b = base.network;
    const LinkProfile& before_link = base.link(options.link_kind);
    // Link efficiency from point-to-point messages, else from whichever family was measured.
    double v_link = 0;
    for (std::size_t f = 2; f < 5 && v_link <= 0; ++f)
      v_link = x[f];
    if (v_link > 0) {
      LinkProfile link;
      link.kind = options.link_kind;
      link.efficiency = 1.0 / v_link;
      link.latency = Time(0);
      link.source = "planner calibrate: 1 / the fitted wire-time factor of " +
                    std::string(x[2] > 0 ? "send/recv" : "collective") +
                    " messages (latency folded into the protocol's step latency)";
      change("network.links." + options.link_kind + ".efficiency", "", before_link.efficiency,
             link.efficiency, nsupport[2]);
      auto it = std::find_if(n.links.begin(), n.links.end(),
                             [&](const LinkProfile& l) { return l.kind == options.link_kind; });
      if (it != n.links.end()) {
        *it = link;
      } else {
        n.links.push_back(link);
      }
      AlgorithmEfficiency& e = n.algorithm_efficiency;
      if (x[3] > 0) {
        change("network.algorithm_efficiency.ring", "", b.algorithm_efficiency.ring, v_link / x[3],
               nsupport[3]);
        e.ring = v_link / x[3];
      }
      if (x[4] > 0) {
        change("network.algorithm_efficiency.all_to_all", "", b.algorithm_efficiency.all_to_all,
               v_link / x[4], nsupport[4]);
        e.all_to_all = v_link / x[4];
      }
      e.p2p = 1.0;
      n.algorithm_source =
          "planner calibrate: fitted wire-time factors of the measured collectives relative to "
          "send/recv (ring: all-reduce, all-gather, reduce-scatter, broadcast; all_to_all)";
    }
    const auto cls = static_cast<std::size_t>([&] {
      switch (topo::link_class(*link_kind)) {
        case topo::LinkClass::kNvlink:
          return LinkClassLatency::kNvlink;
        case topo::LinkClass::kNetwork:
          return LinkClassLatency::kNetwork;
        default:
          return LinkClassLatency::kPcie;
      }
    }());
    // The protocol the collective planner picks by default before calibration.
    const ProtocolProfile* old_proto = nullptr;
    for (const ProtocolProfile& pr : b.protocols) {
      if (pr.name == "simple") old_proto = &pr;
    }
    ProtocolProfile proto;
    proto.name = "simple";
    proto.bandwidth_factor = 1.0;
    proto.base_latency = Time(std::llround(x[0] * 1e12));
    proto.step_latency = old_proto != nullptr ? old_proto->step_latency : proto.step_latency;
    proto.step_latency[cls] = Time(std::llround(x[1] * 1e12));
    change("network.protocols.simple.base_latency", "us",
           old_proto ? to_seconds(old_proto->base_latency) * 1e6 : 0.0, x[0] * 1e6, nsupport[0]);
    change("network.protocols.simple.step_latency." + std::string(cls == 0   ? "nvlink"
                                                                  : cls == 1 ? "pcie"
                                                                             : "network"),
           "us", old_proto ? to_seconds(old_proto->step_latency[cls]) * 1e6 : 0.0, x[1] * 1e6,
           nsupport[1]);
    n.protocols = {proto};
    n.protocol_source =
        "planner calibrate: one protocol (payload only, as MPI and NCCL's Simple move it); base "
        "and per-step latency fitted to the measured collectives and messages";
  }
  if (rows.empty() && nrows.empty()) {
    return Status::invalid_input(
        "no calibration measurements to fit (every point was empty or "
        "of an unknown kind)");
  }

  // ---- how well the fitted models reproduce the points
  std::map<std::string, std::vector<double>> errors;
  for (const CalibrationPoint& p : points) {
    if (p.measured <= Time(0)) continue;
    if (is_communication(p.desc.kind) && std::max(2, p.group_size) > cluster.num_gpus()) continue;
    const double predicted = secs(model_time(out, cluster, p));
    const double measured = secs(p.measured);
    const std::string name = oversubscribed(p, out.compute.host_cores)
                                 ? benchmark_name(p) + " (" + std::to_string(p.group_size) +
                                       " ranks on " + std::to_string(out.compute.host_cores) +
                                       " cores)"
                                 : benchmark_name(p);
    errors[name].push_back(std::abs(predicted - measured) / measured);
  }
  for (auto& [name, e] : errors) {
    FitQuality q;
    q.benchmark = name;
    q.points = static_cast<std::int64_t>(e.size());
    q.max_abs_error = *std::max_element(e.begin(), e.end());
    q.median_abs_error = median_of(e);
    report.quality.push_back(std::move(q));
  }
  return report;
}

std::vector<CalibrationPoint> join_measured_ops(const StepProgram& program,
                                                std::span<const MeasuredOp> ops) {
  std::map<std::pair<int, std::string_view>, Time> mean;
  for (const MeasuredOp& m : ops)
    mean[{m.rank, m.op_id}] = m.mean;
  std::vector<CalibrationPoint> points;
  for (const RankProgram& rp : program.ranks()) {
    for (const Op& op : rp.ops()) {
      const OpDesc& d = program.desc(op);
      if (is_communication(d.kind) || d.stream == Stream::kHost) continue;
      const std::string id = to_string(op.id);
      const auto it = mean.find({rp.rank(), id});
      if (it == mean.end()) continue;
      CalibrationPoint p;
      p.desc = d;
      p.backward = op.id.phase() == Phase::kBackwardInput;
      p.measured = it->second;
      points.push_back(p);
    }
  }
  return points;
}

}  // namespace planner::fit
