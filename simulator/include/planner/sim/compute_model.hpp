// The compute model: how long one compute op of the step program takes on one GPU, alone.
//
//   GEMM        tile/wave-quantised roofline. For each tile shape (tm × tn) of the profile, a GEMM
//               C[batch][m][n] runs tiles = ⌈m/tm⌉·⌈n/tn⌉·batch output tiles in
//               waves = ⌈tiles / sm_count⌉ waves; one wave takes 2·tm·tn·(k + k_overhead) FLOPs per
//               SM at (rate / sm_count)·efficiency(tile), rate being the profile's asymptotic GEMM
//               rate for the op's precision. The fastest tile wins (as a GEMM library's heuristic
//               picks one). Time = max(that, (bytes read + written) / HBM bandwidth) + the kernel
//               overhead. Large, well-shaped GEMMs reach `rate`; small or skinny ones lose to
//               partial waves, padding and the fixed k cost, or become memory-bound.
//   attention   flash-style: FLOPs / (rate · n/(n + half_seq)), rate the profile's forward or
//               backward attention rate (16-bit; fp32 attention scales it by the fp32/16-bit GEMM
//               ratio), n the key/value length of the block; max with the HBM time; + overhead.
//   memory-bound norms, activations, residual adds, embedding, loss, router top-k and the
//               optimizer on the GPU: (bytes read + written) / HBM bandwidth + overhead; a
//               calibrated profile's bandwidth for the op kind (memory_bound_GBps) replaces the
//               HBM bandwidth for that kind.
//   host        ops on the host stream (offloaded optimizer, parameter-server aggregation): bytes /
//               host memory bandwidth.
//   copies      host↔device copies: bytes / PCIe copy bandwidth.
// Communication sharing the SMs is not part of these times: the program runner slows compute by
// the profile's comm_slowdown while a communication kernel runs on the same GPU.
#pragma once

#include "planner/core/hardware_profile.hpp"
#include "planner/core/program.hpp"
#include "planner/core/status.hpp"
#include "planner/core/units.hpp"

namespace planner::sim {

class ComputeModel {
 public:
  explicit ComputeModel(const HardwareProfile& profile) : profile_(&profile) {}

  // Fails when the profile cannot time ops of this precision (no GEMM rate).
  Status check_precision(Precision precision) const;

  // Duration of a compute, host or copy op (not collectives or send/recv). `backward` selects the
  // backward attention rate.
  Time op_time(const OpDesc& desc, bool backward) const;

  Time gemm_time(const OpDesc& desc) const;
  Time attention_time(const OpDesc& desc, bool backward) const;
  Time memory_time(Bytes bytes) const;

 private:
  const HardwareProfile* profile_;
};

}  // namespace planner::sim
