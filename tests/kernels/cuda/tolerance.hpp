// How closely a CUDA kernel must match the CPU kernel, per kind of kernel and precision, with the
// reasoning. Both sides get identical inputs (values are rounded to the element type first, so the
// CPU reference sees exactly what the GPU sees); what remains is
//   (1) the fp32 arithmetic: the same formulas in another order (sums split over threads and
//       warps, dot products in tiles) and other exp/tanh/log implementations (the CPU's Cephes exp
//       and CUDA's expf/tanhf/logf are each within 2 ulp), and
//   (2) rounding the fp32 result once to the output type T.
// (2) is at most the unit roundoff u_T = 2^-p of T relative (bf16 p = 8, fp16 p = 11), plus, for
// fp16 results in the subnormal range (below 2^-14), half a subnormal step, 2^-25, absolute. We
// allow 2 u_T: one rounding, and a neighbour when (1) moves the fp32 value across a rounding
// boundary. Outputs stored in fp32 (statistics, lse, loss, parameter gradients) get (1) only.
#pragma once

#include <cmath>

#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda::testing {

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

enum class KernelKind {
  kExact,        // same operations in the same order (no FMA on either side): bit-identical in fp32
  kElementwise,  // pointwise with exp/tanh (GeLU, SwiGLU, softmax backward): a few fp32 ulps
  kReduction,    // row or column sums of up to ~10^4 terms in another order: ~sqrt(n) ulps
  kAttention,    // tiled dot products, online softmax and two GEMM-like accumulations per output
};

// Unit roundoff of each element type.
inline double unit_roundoff(DType type) {
  switch (type) {
    case DType::kBF16:
      return std::ldexp(1.0, -8);
    case DType::kF16:
      return std::ldexp(1.0, -11);
    case DType::kF32:
      break;
  }
  return std::ldexp(1.0, -24);
}

// The fp32 part (1), for outputs of O(1) magnitude (the tests' inputs are uniform in [-1, 1) or
// standard-normal-like).
inline Tolerance fp32_tolerance(KernelKind kind) {
  switch (kind) {
    case KernelKind::kExact:
      return {0.0, 0.0};
    case KernelKind::kElementwise:
      return {1e-5, 1e-6};
    case KernelKind::kReduction:
      return {1e-5, 1e-5};
    case KernelKind::kAttention:
      // The CPU kernel itself is held to 1e-4 relative / 2e-5 absolute against a double reference
      // (tests/kernels/attention_test.cpp), so two fp32 kernels can differ by twice that.
      return {2e-4, 5e-5};
  }
  return {};
}

// Tolerance of an output stored in `type` (kExact outputs in bf16/fp16 are one rounding of a
// bit-identical fp32 value, so they must equal the host's rounding: zero tolerance too).
inline Tolerance tolerance(KernelKind kind, DType type) {
  Tolerance t = fp32_tolerance(kind);
  if (type == DType::kF32 || kind == KernelKind::kExact) return t;
  t.rtol += 2 * unit_roundoff(type);
  if (type == DType::kF16) t.atol += std::ldexp(1.0, -25);
  return t;
}

}  // namespace planner::kernels::cuda::testing
