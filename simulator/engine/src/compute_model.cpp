#include "planner/sim/compute_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "planner/sim/model_registry.hpp"

namespace planner::sim {
namespace {

double ceil_div(double a, double b) {
  return std::ceil(a / b);
}

// The head dimension of the profiles' attention rates (ComputeProfile::attention_half_head_dim).
constexpr double kRateHeadDim = 128;

Time from_seconds(double s) {
  return Time(std::llround(s * 1e12));
}

}  // namespace

Status ComputeModel::check_precision(Precision precision) const {
  if (profile_->compute.gemm_rate(precision).rate.raw() > 0) return Status::ok();
  return Status::invalid_input("hardware profile \"" + profile_->name + "\" has no " +
                               std::string(to_string(precision)) +
                               " GEMM rate; the GPU may not support that precision");
}

Time ComputeModel::memory_time(Bytes bytes) const {
  return bytes / profile_->compute.memory_bandwidth;
}

Time ComputeModel::gemm_time(const OpDesc& d) const {
  implements(SimModel::kGemmTileRoofline);
  const Time quantize = fp8_quantize_time(d);
  if ((d.flags & kPerGroupKernels) != 0 && d.batch > 1) return per_group_gemm_time(d) + quantize;
  return gemm_kernel_time(d, d.batch) + quantize;
}

// Transformer Engine's quantization of a GEMM's 16-bit operand to fp8 before it: its HBM traffic
// (a GEMM's aux, program.hpp) at the memory bandwidth, and one kernel overhead.
Time ComputeModel::fp8_quantize_time(const OpDesc& d) const {
  if (d.aux <= 0) return Time(0);
  implements(SimModel::kFp8Quantize);
  return memory_time(Bytes(d.aux)) + profile_->compute.kernel_overhead;
}

// One GEMM kernel over `batch` groups of d's shape (d.batch groups in d's bytes): the fastest of
// the profile's tile shapes, waves of tiles over the SMs, at least the HBM time, plus the kernel
// overhead.
Time ComputeModel::gemm_kernel_time(const OpDesc& d, std::int64_t batch) const {
  const ComputeProfile& c = profile_->compute;
  const double rate = c.gemm_rate(d.precision).rate.raw();
  const double per_sm = rate / static_cast<double>(c.sm_count);
  double best = std::numeric_limits<double>::infinity();
  for (const GemmTile& t : c.gemm_tiles) {
    const double tiles = ceil_div(static_cast<double>(d.m), t.m) *
                         ceil_div(static_cast<double>(d.n), t.n) * static_cast<double>(batch);
    const double waves = ceil_div(tiles, c.sm_count);
    const double wave_flops = 2.0 * t.m * t.n * static_cast<double>(d.k + c.gemm_k_overhead);
    best = std::min(best, waves * wave_flops / (per_sm * t.efficiency));
  }
  const double share =
      static_cast<double>(batch) / static_cast<double>(std::max<std::int64_t>(1, d.batch));
  const Bytes bytes(
      std::llround(static_cast<double>((d.bytes_read + d.bytes_written).raw()) * share));
  return std::max(from_seconds(best), memory_time(bytes)) + c.kernel_overhead;
}

// Transformer Engine's GroupedLinear (Megatron-core's TEGroupedMLP, NeMo) runs an MoE layer's
// experts' GEMMs as one cuBLAS GEMM per local expert, the i-th on stream i % 4
// (nvte_multi_stream_cublas_gemm, NVTE_NUM_GEMM_STREAMS = 4), the streams joined after the last:
// up to four experts' kernels share the SMs at a time. Each round of kGroupedGemmStreams experts
// is timed as one kernel over their tiles: small experts fill fewer waves than one batched kernel
// would, and each round pays the kernel overhead once (the streams' kernels overlap).
Time ComputeModel::per_group_gemm_time(const OpDesc& d) const {
  implements(SimModel::kPerExpertGemms);
  // Every full round takes the same time; a last round holds the experts left over.
  const std::int64_t rounds = d.batch / kGroupedGemmStreams, left = d.batch % kGroupedGemmStreams;
  Time t = rounds > 0 ? gemm_kernel_time(d, kGroupedGemmStreams) * rounds : Time(0);
  if (left > 0) t += gemm_kernel_time(d, left);
  return t;
}

bool fused_softmax_available(const OpDesc& d) {
  const std::int64_t sq = d.m, sk = d.n, batches = d.batch;
  if (bytes_per_element(d.precision) != 2 || sk <= 16 || sk > kFusedSoftmaxMaxKeys || sq % 4 != 0 ||
      sk % 4 != 0 || batches % 4 != 0) {
    return false;
  }
  std::int64_t pow2 = 1;
  while (pow2 < sk)
    pow2 *= 2;
  constexpr std::int64_t kWarpSize = 32, kThreadsPerBlock = 128;
  const std::int64_t warp = std::min(pow2, kWarpSize);
  const std::int64_t per_block = (kThreadsPerBlock / warp) * (pow2 <= 128 ? 2 : 1);
  return (d.flags & kCausal) != 0 ? batches % per_block == 0 : sq % per_block == 0;
}

ScorePasses ComputeModel::score_passes(const OpDesc& d, bool backward) const {
  if (attention_ == AttentionKernel::kUnfused) return backward ? kUnfusedBackward : kUnfusedForward;
  if (fused_softmax_available(d)) return backward ? kFusedSoftmaxBackward : kFusedSoftmaxForward;
  if (bytes_per_element(d.precision) == 4) {
    return backward ? kTorchSoftmaxFp32Backward : kTorchSoftmaxFp32Forward;
  }
  return backward ? kTorchSoftmaxBackward : kTorchSoftmaxForward;
}

int ComputeModel::extra_host_kernels(const OpDesc& d, bool backward) const {
  if (d.kind != OpKind::kAttention || attention_ == AttentionKernel::kFlash) return 0;
  const ScorePasses fused = backward ? kFusedSoftmaxBackward : kFusedSoftmaxForward;
  return std::max(0, score_passes(d, backward).kernels - fused.kernels);
}

Time ComputeModel::attention_time(const OpDesc& d, bool backward) const {
  return attention_ == AttentionKernel::kFlash ? flash_attention_time(d, backward)
                                               : unfused_attention_time(d, backward);
}

Time ComputeModel::unfused_attention_time(const OpDesc& d, bool backward) const {
  implements(SimModel::kUnfusedAttention);
  const ComputeProfile& c = profile_->compute;
  const double e = bytes_per_element(d.precision);
  // One batched GEMM of the attention (rows × cols, inner dimension `inner`).
  auto gemm = [&](std::int64_t rows, std::int64_t cols, std::int64_t inner) {
    OpDesc g;
    g.kind = OpKind::kGemm;
    g.precision = d.precision;
    g.m = rows;
    g.n = cols;
    g.k = inner;
    g.batch = d.batch;
    const double b = static_cast<double>(d.batch) * e;
    g.bytes_read = Bytes(std::llround(b * static_cast<double>(rows * inner + inner * cols)));
    g.bytes_written = Bytes(std::llround(b * static_cast<double>(rows * cols)));
    return gemm_time(g);
  };
  const std::int64_t s_q = d.m, s_kv = d.n, dim = d.k;
  const double scores =
      static_cast<double>(d.batch) * static_cast<double>(s_q) * static_cast<double>(s_kv);
  Time t(0);
  const ScorePasses passes = score_passes(d, backward);
  if (!backward) {
    t = gemm(s_q, s_kv, dim) + gemm(s_q, dim, s_kv);  // QKᵀ, PV
  } else {
    t = gemm(s_kv, dim, s_q) + gemm(s_q, s_kv, dim) + gemm(s_q, dim, s_kv) +
        gemm(s_kv, dim, s_q);  // dV, dP, dQ, dK
  }
  // The GEMMs' own score traffic is inside their roofline; the softmax and dropout kernels (and,
  // unfused, the scale and mask kernels) stream the rest.
  const double per_score = passes.elements * e + kDropoutMaskBytes;
  return t + memory_time(Bytes(std::llround(scores * per_score))) +
         c.kernel_overhead * passes.kernels;
}

Time ComputeModel::flash_attention_time(const OpDesc& d, bool backward) const {
  implements(SimModel::kFlashAttention);
  const ComputeProfile& c = profile_->compute;
  double rate = (backward ? c.attention_backward : c.attention_forward).raw();
  if (bytes_per_element(d.precision) == 4) {
    // The attention rates are 16-bit; fp32 attention runs at the fp32/16-bit GEMM ratio.
    const double half = std::max(c.gemm_rate(Precision::kBf16).rate.raw(),
                                 c.gemm_rate(Precision::kFp16).rate.raw());
    const double full = c.gemm_rate(d.precision).rate.raw();
    if (half > 0 && full > 0) rate *= full / half;
  }
  const double n = static_cast<double>(d.n);
  const double saturation = n / (n + static_cast<double>(c.attention_half_seq));
  // The head dimension (d.k) relative to 128, where the rates were measured
  // (attention_half_head_dim).
  double head = 1.0;
  if (c.attention_half_head_dim > 0 && d.k > 0) {
    const double h0 = static_cast<double>(c.attention_half_head_dim);
    const double dim = static_cast<double>(d.k);
    head = (dim / (dim + h0)) / (kRateHeadDim / (kRateHeadDim + h0));
  }
  const Time compute = from_seconds(d.flops.raw() / (rate * saturation * head));
  return std::max(compute, memory_time(d.bytes_read + d.bytes_written)) + c.kernel_overhead;
}

Time ComputeModel::op_time(const OpDesc& d, bool backward) const {
  implements(SimModel::kKernelOverhead);
  const ComputeProfile& c = profile_->compute;
  switch (d.kind) {
    case OpKind::kGemm:
      return gemm_time(d);
    case OpKind::kAttention:
      return attention_time(d, backward);
    case OpKind::kHostToDevice:
    case OpKind::kDeviceToHost:
      return d.comm_bytes / c.pcie_copy_bandwidth;
    default:
      break;
  }
  const Bytes traffic = d.bytes_read + d.bytes_written;
  implements(SimModel::kHost);
  if (d.stream == Stream::kHost) return traffic / c.host_memory_bandwidth;
  implements(SimModel::kMemoryBound);
  implements(SimModel::kMemoryBoundPerKind);
  return traffic / c.memory_bandwidth_for(d.kind) + c.kernel_overhead;
}

}  // namespace planner::sim
