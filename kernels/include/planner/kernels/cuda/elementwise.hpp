// Elementwise kernels and reductions on the GPU, mirroring cpu/elementwise.hpp. Conventions in
// dtype.hpp; T is float, bf16 or fp16 (computed in fp32, rounded once on store). In fp32, add,
// axpy, scale and bias_add round exactly like the CPU kernels (no fused multiply-add), so their
// results are bit-identical to cpu::.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "planner/core/status.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

// out[i] = a[i] + b[i] for i < n; out may be a or b.
template <class T>
Status add(const T* a, const T* b, std::int64_t n, T* out, cudaStream_t stream);

// y[i] += alpha * x[i] for i < n.
template <class T>
Status axpy(std::int64_t n, float alpha, const T* x, T* y, cudaStream_t stream);

// x[i] *= factor for i < n.
template <class T>
Status scale(T* x, std::int64_t n, float factor, cudaStream_t stream);

// x[r, c] += bias[c] for x of shape rows x cols.
template <class T>
Status bias_add(T* x, const T* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream);

// dbias[c] += sum over r of dy[r, c] (fp32 accumulation into an fp32 gradient). Deterministic:
// each column is summed by 32 row lanes (lane l takes rows l, l + 32, ... in ascending order) whose
// partial sums are added in lane order.
template <class T>
Status bias_backward(const T* dy, std::int64_t rows, std::int64_t cols, float* dbias,
                     cudaStream_t stream);

// Partial sums sum_of_squares() needs room for (doubles), and how many blocks produce them.
inline constexpr int kSumOfSquaresWorkspace = 1024;

// *result = sum of x[i]^2 for i < n (with `accumulate`: *result += that sum), accumulated in
// double: kSumOfSquaresWorkspace blocks each sum a fixed strided slice into workspace[block], then
// one block adds those in a fixed tree. `workspace` and `result` are device memory; the result
// stays on the device until copied.
template <class T>
Status sum_of_squares(const T* x, std::int64_t n, double* workspace, double* result,
                      cudaStream_t stream, bool accumulate = false);

// out[i] = static_cast<std::int32_t>(in[i]) for i < n (token ids arrive as int64).
Status narrow_int64(const std::int64_t* in, std::int64_t n, std::int32_t* out, cudaStream_t stream);

// y[i] = x[i] converted (round to nearest even when narrowing), for i < n. Instantiated for
// float <-> bf16 and float <-> fp16, e.g. to refresh bf16 model weights from fp32 master weights.
template <class TIn, class TOut>
Status convert(const TIn* x, std::int64_t n, TOut* y, cudaStream_t stream);

}  // namespace planner::kernels::cuda
