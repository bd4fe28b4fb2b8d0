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
//   attention   flash-style (AttentionKernel::kFlash): FLOPs / (rate · n/(n + half_seq)), rate the
//               profile's forward or backward attention rate (16-bit; fp32 attention scales it by
//               the fp32/16-bit GEMM ratio), n the key/value length of the block; max with the HBM
//               time; + overhead.
//               unfused (kUnfused, Megatron-LM's core attention before FlashAttention): the s×s
//               scores are materialised. Forward: QKᵀ and PV as batched GEMMs of the tile model
//               (batch·heads of m×n×d and m×d×n; the whole block is computed and the causal mask
//               applied to the scores), and the scores streamed through HBM by the fused
//               scale-mask-softmax and the attention dropout (kUnfusedForwardScorePasses per
//               score element). Backward: the four GEMMs (dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K,
//               dK = dSᵀ·Q) and the dropout and softmax gradients (kUnfusedBackwardScorePasses).
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

#include <cstdint>

#include "planner/core/hardware_profile.hpp"
#include "planner/core/program.hpp"
#include "planner/core/status.hpp"
#include "planner/core/units.hpp"

namespace planner::sim {

// How attention runs: flash-style (no s×s tensor, FlashAttention and its successors) or unfused
// (the scores materialised in HBM, as frameworks did before FlashAttention, Dao et al. 2022).
enum class AttentionKernel : std::uint8_t { kFlash, kUnfused };

// Unfused attention's softmax and dropout kernels, in HBM passes over the score matrix of
// 16-bit elements of e bytes (the GEMMs' own reads and writes of the scores are in their
// rooflines). Forward: the fused scale-mask-softmax reads and writes the scores (2e), dropout reads
// them and writes its output (2e) and a 1-byte mask: 4e + 1. Backward: the dropout gradient reads
// dP and the mask and writes (2e + 1), the softmax gradient reads the saved softmax output and the
// gradient and writes dS (3e): 5e + 1. The saved tensors are Korthikanti et al.'s 5·a·s/h term
// (softmax output, mask, dropout output; arXiv:2205.05198 §4.1).
inline constexpr double kUnfusedForwardScorePasses = 4;
inline constexpr double kUnfusedBackwardScorePasses = 5;
inline constexpr double kDropoutMaskBytes = 1;
// Kernels per unfused attention pass besides its GEMMs: softmax and dropout (forward); dropout
// and softmax gradients (backward).
inline constexpr int kUnfusedExtraKernels = 2;

class ComputeModel {
 public:
  explicit ComputeModel(const HardwareProfile& profile,
                        AttentionKernel attention = AttentionKernel::kFlash)
      : profile_(&profile), attention_(attention) {}

  // Fails when the profile cannot time ops of this precision (no GEMM rate).
  Status check_precision(Precision precision) const;

  // Duration of a compute, host or copy op (not collectives or send/recv). `backward` selects the
  // backward attention rate.
  Time op_time(const OpDesc& desc, bool backward) const;

  Time gemm_time(const OpDesc& desc) const;
  Time attention_time(const OpDesc& desc, bool backward) const;
  Time memory_time(Bytes bytes) const;

 private:
  Time flash_attention_time(const OpDesc& desc, bool backward) const;
  Time unfused_attention_time(const OpDesc& desc, bool backward) const;

  const HardwareProfile* profile_;
  AttentionKernel attention_;
};

}  // namespace planner::sim
