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
//               A GEMM flagged kPerGroupKernels (an MoE layer's experts under Transformer
//               Engine's GroupedLinear) runs one kernel per group on kGroupedGemmStreams streams:
//               rounds of that many groups, each round timed as one kernel over its groups' tiles.
//   attention   flash-style (AttentionKernel::kFlash): FLOPs / (rate · n/(n + half_seq)), rate the
//               profile's forward or backward attention rate (16-bit; fp32 attention scales it by
//               the fp32/16-bit GEMM ratio), n the key/value length of the block; max with the HBM
//               time; + overhead.
//               fused softmax (kFusedSoftmax, Megatron-LM's core attention before
//               FlashAttention): the s×s scores are materialised. Forward: QKᵀ and PV as batched
//               GEMMs of the tile model (batch·heads of m×n×d and m×d×n; the whole block is
//               computed and the causal mask applied to the scores), and the scores streamed
//               through HBM by the fused scale-mask-softmax and the attention dropout
//               (kFusedSoftmaxPasses per score element). Backward: the four GEMMs (dV = Pᵀ·dO,
//               dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q) and the dropout and softmax gradients.
//               unfused (kUnfused, Megatron-LM of 2019): the same GEMMs, with the scale, the
//               mask and the softmax as separate PyTorch kernels (kUnfusedPasses).
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
#include "planner/core/software_stack.hpp"
#include "planner/core/status.hpp"
#include "planner/core/units.hpp"

namespace planner::sim {

// How attention runs: flash-style (no s×s tensor, FlashAttention and its successors), or with the
// scores materialised in HBM, as frameworks did before FlashAttention (Dao et al. 2022): through
// Megatron's fused scale-mask-softmax kernel (2020-), or through separate PyTorch kernels for the
// scale, the mask and the softmax (Megatron-LM of 2019).
enum class AttentionKernel : std::uint8_t { kFlash, kFusedSoftmax, kUnfused };

// The kernel the simulator runs for a stated attention implementation.
constexpr AttentionKernel attention_kernel(AttentionImpl a) {
  if (is_flash_style(a)) return AttentionKernel::kFlash;
  return a == AttentionImpl::kUnfused ? AttentionKernel::kUnfused : AttentionKernel::kFusedSoftmax;
}

// A materialised-scores pass's kernels besides its GEMMs, in HBM passes over the score matrix of
// 16-bit elements of e bytes (the GEMMs' own reads and writes of the scores are in their
// rooflines) plus the 1-byte dropout mask, and in kernels.
struct ScorePasses {
  double elements;  // reads and writes of e-byte score elements per score
  int kernels;
};
// Fused softmax, forward: the scale-mask-softmax reads and writes the scores (2e), dropout reads
// them and writes its output (2e) and the mask: 4e + 1, two kernels. Backward: the dropout
// gradient reads dP and the mask and writes (2e + 1), the softmax gradient reads the saved softmax
// output and the gradient and writes dS (3e): 5e + 1, two kernels. The saved tensors are
// Korthikanti et al.'s 5·a·s/h term (softmax output, mask, dropout output; arXiv:2205.05198 §4.1).
inline constexpr ScorePasses kFusedSoftmaxForward{4, 2};
inline constexpr ScorePasses kFusedSoftmaxBackward{5, 2};
// Unfused (Megatron-LM 2019, mpu/transformer.py: scores / sqrt(d), then scores · mask −
// 10000 · (1 − mask), then torch.nn.Softmax, then dropout), forward: the scale, the mask's
// multiply and subtract and the softmax each read and write the scores (8e), dropout as above
// (2e): 10e + 1, five kernels. Backward: dropout (2e + 1) and softmax (3e) gradients as above, the
// mask's and the scale's gradients each read and write (4e; the subtract's is the identity):
// 9e + 1, four kernels. The saved tensors are the same (the mask multiply keeps only the mask).
inline constexpr ScorePasses kUnfusedForward{10, 5};
inline constexpr ScorePasses kUnfusedBackward{9, 4};
// Megatron's fallback when its fused kernel cannot take the scores (fused_softmax_available):
// FusedScaleMaskSoftmax.forward_torch_softmax with the softmax in fp32 (Megatron's default with
// query-key layer scaling), for 16-bit scores (e = 2 bytes, fp32 = 2e): forward the cast to fp32
// (e + 2e), the scale (4e), masked_fill (4e), torch.nn.Softmax (4e), the cast back (2e + e) and
// dropout (2e + 1): 20e + 1, six kernels. Backward their gradients in reverse: dropout (2e + 1),
// the casts (3e each), the softmax (reads its fp32 output and gradient, writes: 6e), the mask and
// the scale (4e each): 22e + 1, six kernels. 32-bit scores skip the casts: the unfused passes
// without the mask's second kernel (8e + 1 and 9e + 1, four kernels each).
inline constexpr ScorePasses kTorchSoftmaxForward{20, 6};
inline constexpr ScorePasses kTorchSoftmaxBackward{22, 6};
inline constexpr ScorePasses kTorchSoftmaxFp32Forward{8, 4};
inline constexpr ScorePasses kTorchSoftmaxFp32Backward{9, 4};
inline constexpr double kDropoutMaskBytes = 1;

// Whether Megatron's fused scale-mask-softmax kernel takes an attention op's scores
// (FusedScaleMaskSoftmax.is_kernel_available, megatron/model/fused_softmax.py of Megatron-LM and
// Megatron-DeepSpeed): 16-bit scores, 16 < sk <= kFusedSoftmaxMaxKeys, sq and sk multiples of 4,
// b·np (the op's batch: micro-batch × local heads) a multiple of 4 and of the kernel's batches
// per block (get_batch_per_block: 128 threads in warps of min(2^ceil(log2 sk), 32) lanes, two
// rows a warp when 2^ceil(log2 sk) <= 128) for the causal kernel, sq a multiple of it otherwise.
// Otherwise Megatron runs the softmax as PyTorch ops (kTorchSoftmax*): tp 8 with 16 heads at
// micro-batch 1 (b·np = 2) does.
// 4,096 in Megatron-LM and Megatron-DeepSpeed of the fused-softmax era (2,048 earlier);
// Megatron-core later raised it to 16,384.
inline constexpr std::int64_t kFusedSoftmaxMaxKeys = 4096;
bool fused_softmax_available(const OpDesc& attention);

// The streams Transformer Engine spreads the per-expert GEMMs of a GroupedLinear layer over
// (nvte_multi_stream_cublas_gemm; NVTE_NUM_GEMM_STREAMS, default 4).
inline constexpr std::int64_t kGroupedGemmStreams = 4;

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

  // The kernels an attention op launches beyond those of the kernel its stack's host costs were
  // measured with (flash, or Megatron's fused softmax: one program op each): the unfused and the
  // PyTorch-fallback softmax's extra scale, mask, cast and softmax kernels, each one more op for
  // the host to issue. Zero for flash-style attention and for other ops.
  int extra_host_kernels(const OpDesc& desc, bool backward) const;

 private:
  // The score passes besides the GEMMs of a materialised-scores attention op.
  ScorePasses score_passes(const OpDesc& desc, bool backward) const;
  Time flash_attention_time(const OpDesc& desc, bool backward) const;
  Time gemm_kernel_time(const OpDesc& desc, std::int64_t batch) const;
  Time per_group_gemm_time(const OpDesc& desc) const;
  // Transformer Engine's fp8 quantization before a GEMM (its aux bytes; zero when none).
  Time fp8_quantize_time(const OpDesc& desc) const;
  Time unfused_attention_time(const OpDesc& desc, bool backward) const;

  const HardwareProfile* profile_;
  AttentionKernel attention_;
};

}  // namespace planner::sim
