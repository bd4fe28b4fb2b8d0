// Device-side building blocks shared by the .cu files of planner::kernels::cuda: fp32 loads and
// stores of every element type, fixed-order warp and block reductions, a grid-stride elementwise
// launcher, and argument checks. Internal to planner::kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>

#include "planner/core/status.hpp"
#include "planner/kernels/cuda/check.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda::detail {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kWarpSize = 32;

// Threads per block of the elementwise and row kernels: 8 warps, enough to hide memory latency
// with several blocks per SM.
constexpr int kBlockThreads = 256;

// Most blocks an elementwise launch starts; each thread then loops with a grid stride. 2^20 blocks
// of 256 threads cover 2^28 elements per pass, far beyond what any GPU keeps resident.
constexpr std::int64_t kMaxElementwiseBlocks = std::int64_t{1} << 20;

__device__ __forceinline__ float to_float(float x) {
  return x;
}
__device__ __forceinline__ float to_float(bf16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float to_float(fp16 x) {
  return __half2float(x);
}

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ fp16 from_float<fp16>(float x) {
  return __float2half_rn(x);
}

// Sum over the 32 lanes by an xor butterfly; every lane gets the same bits (addition is
// commutative, and each step adds the same two values on both partners).
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Block-wide sum (kind == sum) or max over all threads of a 1-D block of blockDim.x threads (a
// multiple of 32, at most 1024), returned to every thread: warps reduce, warp 0 reduces the warp
// results. `scratch` holds 32 values of V in shared memory. Contains __syncthreads: every thread of
// the block must call it.
template <class V, class Op>
__device__ V block_reduce(V v, V identity, Op op, V* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : identity;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

struct SumOp {
  template <class V>
  __device__ V operator()(V a, V b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, 0.0f, SumOp{}, scratch);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce(v, kNegInf, MaxOp{}, scratch);
}

// Calls op(i) for every i < n, one thread per index with a grid stride.
template <class Op>
__global__ void __launch_bounds__(kBlockThreads) elementwise_kernel(std::int64_t n, Op op) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    op(i);
}

inline std::int64_t blocks_for(std::int64_t n, std::int64_t threads) {
  const std::int64_t blocks = (n + threads - 1) / threads;
  return blocks < 1 ? 1 : (blocks > kMaxElementwiseBlocks ? kMaxElementwiseBlocks : blocks);
}

// Enqueues op(i) for i < n on `stream` (nothing for n == 0).
template <class Op>
void enqueue_elementwise(std::int64_t n, Op op, cudaStream_t stream) {
  if (n == 0) return;
  elementwise_kernel<<<static_cast<unsigned>(blocks_for(n, kBlockThreads)), kBlockThreads, 0,
                       stream>>>(n, op);
}

// enqueue_elementwise, then the launch's status naming the kernel and its element type.
template <class Op>
Status launch_elementwise(std::int64_t n, Op op, cudaStream_t stream, const char* kernel,
                          DType type) {
  enqueue_elementwise(n, op, stream);
  return n == 0 ? Status::ok() : launch_status(kernel, type);
}

// The same for a kernel without an element type (e.g. integer outputs).
template <class Op>
Status launch_elementwise(std::int64_t n, Op op, cudaStream_t stream, const char* kernel) {
  enqueue_elementwise(n, op, stream);
  return n == 0 ? Status::ok() : launch_status(kernel);
}

// Column sums of a rows x cols matrix given by term(r, c) -> float2, accumulated in fp32:
// out_x[c] += sum_r term(r, c).x and, when out_y is not null, out_y[c] += sum_r term(r, c).y.
// A block is 32 columns x kColumnLanes row lanes; lane l sums rows l, l + kColumnLanes, ... in
// ascending order, then the lanes' sums are added in lane order: deterministic, no atomics, and a
// warp reads 32 consecutive columns of one row.
constexpr int kColumnLanes = 32;

template <class Term>
__global__ void __launch_bounds__(kWarpSize* kColumnLanes)
    column_sum_kernel(std::int64_t rows, std::int64_t cols, Term term, float* out_x, float* out_y) {
  __shared__ float partial_x[kColumnLanes][kWarpSize + 1];
  __shared__ float partial_y[kColumnLanes][kWarpSize + 1];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kWarpSize + threadIdx.x;
  float sum_x = 0.0f;
  float sum_y = 0.0f;
  if (c < cols) {
    for (std::int64_t r = threadIdx.y; r < rows; r += kColumnLanes) {
      const float2 v = term(r, c);
      sum_x += v.x;
      sum_y += v.y;
    }
  }
  partial_x[threadIdx.y][threadIdx.x] = sum_x;
  partial_y[threadIdx.y][threadIdx.x] = sum_y;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total_x = 0.0f;
    float total_y = 0.0f;
    for (int lane = 0; lane < kColumnLanes; ++lane) {
      total_x += partial_x[lane][threadIdx.x];
      total_y += partial_y[lane][threadIdx.x];
    }
    out_x[c] += total_x;
    if (out_y != nullptr) out_y[c] += total_y;
  }
}

template <class Term>
Status launch_column_sum(std::int64_t rows, std::int64_t cols, Term term, float* out_x,
                         float* out_y, cudaStream_t stream, const char* kernel, DType type) {
  if (rows == 0 || cols == 0) return Status::ok();
  const dim3 block(kWarpSize, kColumnLanes);
  const auto blocks = static_cast<unsigned>((cols + kWarpSize - 1) / kWarpSize);
  column_sum_kernel<<<blocks, block, 0, stream>>>(rows, cols, term, out_x, out_y);
  return launch_status(kernel, type);
}

// kInvalidInput "<kernel>: <name> must be >= <min>, got <value>" when value < min.
inline Status check_at_least(const char* kernel, const char* name, std::int64_t value,
                             std::int64_t min) {
  if (value >= min) return Status::ok();
  return Status::invalid_input(std::string(kernel) + ": " + name + " must be >= " +
                               std::to_string(min) + ", got " + std::to_string(value));
}

// CUDA's limit on gridDim.y and gridDim.z.
constexpr std::int64_t kMaxGridY = 65535;
// CUDA's limit on gridDim.x.
constexpr std::int64_t kMaxGridX = 2147483647;

// kInvalidInput when a grid dimension would exceed CUDA's limit.
inline Status check_grid(const char* kernel, const char* what, std::int64_t blocks,
                         std::int64_t limit) {
  if (blocks <= limit) return Status::ok();
  return Status::invalid_input(std::string(kernel) + ": " + what + " needs " +
                               std::to_string(blocks) + " thread blocks, more than CUDA's " +
                               std::to_string(limit));
}

}  // namespace planner::kernels::cuda::detail
