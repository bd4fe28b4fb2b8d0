// Element types of planner::kernels::cuda and the conventions every CUDA kernel follows.
//
// Conventions (as planner::kernels::cpu, see cpu/gemm.hpp, plus what a GPU adds):
// - Pointers are device pointers unless a parameter says otherwise; sizes and strides are in
//   elements (std::int64_t), row-major, with the CPU kernels' layouts.
// - Every kernel is a free function that enqueues work on the given stream and returns at once; it
//   returns a Status: kInvalidInput for arguments that break the contract (checked on the host
//   before anything is enqueued), or the failed CUDA call (see check.hpp). Results are ready when
//   the stream has run to that point.
// - Precisions: T is float, bf16 or fp16 for activations, their gradients and model weights read by
//   the forward pass; all arithmetic and every reduction happen in fp32. Per-row statistics (mean,
//   rstd, lse, delta, loss) and parameter gradients (dgamma, dbeta, dbias, embedding gradients,
//   Adam's grad) are fp32, so gradients of micro-batches accumulate in fp32 "main grad" buffers,
//   and master weights and Adam state are fp32.
// - Same overwrite/accumulate rules as the CPU: activation gradients are written, except
//   attention's dq/dk/dv, which accumulate; parameter gradients accumulate (+=).
// - Deterministic: no atomics whose order changes a value; every reduction sums in an order fixed
//   by the code and the launch shape, so the same inputs give bit-identical results run to run.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <string_view>

namespace planner::kernels::cuda {

using bf16 = __nv_bfloat16;  // 8 exponent bits, 8 significant bits (unit roundoff 2^-8)
using fp16 = __half;         // 5 exponent bits, 11 significant bits (unit roundoff 2^-11)

enum class DType { kF32, kBF16, kF16 };

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType kValue = DType::kF32;
};
template <>
struct DTypeOf<bf16> {
  static constexpr DType kValue = DType::kBF16;
};
template <>
struct DTypeOf<fp16> {
  static constexpr DType kValue = DType::kF16;
};

template <class T>
inline constexpr DType kDTypeOf = DTypeOf<T>::kValue;

// "f32", "bf16" or "f16".
std::string_view to_string(DType type);

// Bytes of one element.
std::size_t dtype_size(DType type);

}  // namespace planner::kernels::cuda
