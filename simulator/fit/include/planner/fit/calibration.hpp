// Calibration: fits a hardware profile's compute and network parameters to measured operations.
//
// A measurement is a CalibrationPoint: an op of the step program's vocabulary (an OpDesc, as the
// lowering describes it) and the wall time it took. Microbenchmarks (`planner calibrate`) produce
// points for GEMMs, attention, memory-bound kernels and collectives; executed runs produce them
// from their per-op measurements (`planner calibrate --from-runs`). Both go through fit_profile(),
// which fits the simulator's own models (compute_model.hpp, collectives.hpp), evaluated with probe
// profiles, so that a fitted parameter means exactly what the simulator does with it.
//
// Compute: every compute point's time is linear in the unknowns
//     t = u_gemm[p] · G + u_k · G/k + u_mem[kind] · B + u_fwd · A_f + u_bwd · A_b + overhead
// where G is the GEMM model's time at 1 TFLOP/s without k overhead (its tile and wave quantisation
// included), B the bytes the op reads and writes, A the attention model's time at 1 TFLOP/s.
// The fit is weighted least squares on relative error (rows divided by the measured time); a
// parameter whose coefficient comes out negative is pinned at 0 and the rest refitted. Results:
// the GEMM rate per precision, gemm_k_overhead, the attention rates, memory_bandwidth (and a
// bandwidth per memory-bound op kind, compute.memory_bound, for kinds measured), kernel_overhead.
//
// Oversubscription (CPU hosts, FitOptions::host_cores > 0): compute points whose group_size (the
// ranks computing at once on the host) exceeds the host's cores are left out of the fit above.
// Processor sharing predicts each of them at model time × group_size / cores; the host's
// oversubscribed_efficiency is the median of that prediction over the measured time (at most 1).
//
// Network: a collective or send over `group_size` consecutive ranks of `cluster` (the first GPUs),
// its time split by the collective planner with probe profiles into
//     t = lat0 + base + steps · step_latency + W · v[algorithm]
// where lat0 is the topology's own link latency, steps the algorithm's step count and W the wire
// time at the topology's link bandwidth (efficiency 1). Weighted least squares as above gives the
// protocol's base and step latency (class of the link kind), the link efficiency (1 / v[p2p]) and
// the algorithm efficiencies relative to it (ring from all-reduce, all-gather, reduce-scatter and
// broadcast; all_to_all from all-to-all). The calibrated profile has one protocol, "simple" with
// bandwidth factor 1 (MPI and NCCL's Simple move payload only).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/calibration_point.hpp"
#include "planner/core/hardware_profile.hpp"
#include "planner/core/program.hpp"
#include "planner/core/status.hpp"
#include "planner/core/units.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::fit {

// One measured op of an executed run: its rank, its op id (to_string(OpId)) and the mean wall time
// of the op over the run's measured (not warm-up) steps.
struct MeasuredOp {
  int rank = 0;
  std::string op_id;
  Time mean;
};

// The predicted/measured join: every compute op of `program` (the executed plan lowered as the
// executor lowered it) with a measurement in `ops` (matched on rank and op id), as a calibration
// point. Communication and host ops are left out: their wall time includes waiting for the other
// ranks.
std::vector<CalibrationPoint> join_measured_ops(const StepProgram& program,
                                                std::span<const MeasuredOp> ops);

// A fitted parameter and how far the fit moved it from the base profile's value.
struct ParameterChange {
  std::string name;  // "compute.gemm.fp32", "network.links.shared-memory.efficiency", ...
  std::string unit;  // "TFLOP/s", "GB/s", "us", "" (a fraction)
  double before = 0;
  double after = 0;
  std::int64_t points = 0;  // points that determined it
  // (after - before) / before; nullopt when before is 0.
  std::optional<double> relative_change() const;
};

// How well the fitted models reproduce the points of one benchmark.
struct FitQuality {
  std::string benchmark;
  std::int64_t points = 0;
  double median_abs_error = 0;  // |predicted - measured| / measured
  double max_abs_error = 0;
};

struct FitOptions {
  // The topology link kind the collectives crossed (its efficiency and the step latency of its
  // class are fitted).
  std::string link_kind;
  // Cores of the host the compute points were measured on (0: not a CPU host). Set as the
  // profile's host_cores; compute points with more ranks computing at once fit its
  // oversubscribed_efficiency.
  int host_cores = 0;
  // Name, description and source of the fitted profile (kept from the base when empty).
  std::string name;
  std::string description;
  std::string source;
};

struct FitReport {
  HardwareProfile profile;
  std::vector<ParameterChange> changes;
  std::vector<FitQuality> quality;
};

// Fits `base` to `points` (see the header). Parameters no point informs keep base's values.
// `cluster` must hold at least as many GPUs as the largest group. kInvalidInput when there are no
// usable points or the link kind is unknown.
Result<FitReport> fit_profile(const HardwareProfile& base, const topo::Cluster& cluster,
                              std::span<const CalibrationPoint> points, const FitOptions& options);

// The fitted model's time for a point (compute model or collective planner estimate); a compute
// point with more ranks computing at once than the profile's host_cores runs at the shared rate.
Time model_time(const HardwareProfile& profile, const topo::Cluster& cluster,
                const CalibrationPoint& point);

}  // namespace planner::fit
