// Compiled with --fmad=false (kernels/CMakeLists.txt), like elementwise.cu.
#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/embedding.hpp"

namespace planner::kernels::cuda {
namespace {

using detail::from_float;
using detail::kBlockThreads;
using detail::kFullMask;
using detail::kWarpSize;
using detail::to_float;

constexpr int kWarpsPerBlock = kBlockThreads / kWarpSize;

// dst[ids[s] - start, :] += src[(b * n + s), :] for b < batch, s < n with ids[s] in [start, start +
// rows), in the order b outer, s inner. One block per slot s: the block of the first slot holding
// an id owns that row and walks all slots with it; other blocks return at once.
template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    scatter_add_rows_kernel(const std::int32_t* ids, std::int64_t n, std::int64_t batch,
                            std::int64_t start, std::int64_t rows, const T* src, std::int64_t dim,
                            float* dst) {
  __shared__ std::int64_t matches[kBlockThreads];
  __shared__ int warp_offset[kWarpsPerBlock + 1];
  const std::int64_t slot = blockIdx.x;
  const std::int32_t id = ids[slot];
  const std::int64_t row = static_cast<std::int64_t>(id) - start;
  if (row < 0 || row >= rows) return;  // uniform over the block
  // Does an earlier slot hold the same id? Then that slot's block owns the row.
  for (std::int64_t t0 = 0; t0 < slot; t0 += kBlockThreads) {
    const std::int64_t t = t0 + threadIdx.x;
    if (__syncthreads_or(t < slot && ids[t] == id)) return;
  }
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  float* out = dst + row * dim;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t0 = slot; t0 < n; t0 += kBlockThreads) {
      // Compact the matching slots of this chunk into `matches`, in ascending order.
      const std::int64_t t = t0 + threadIdx.x;
      const bool match = t < n && ids[t] == id;
      const unsigned ballot = __ballot_sync(kFullMask, match);
      __syncthreads();  // the previous chunk's matches have been used
      if (lane == 0) warp_offset[warp + 1] = __popc(ballot);
      __syncthreads();
      if (threadIdx.x == 0) {
        warp_offset[0] = 0;
        for (int w = 0; w < kWarpsPerBlock; ++w)
          warp_offset[w + 1] += warp_offset[w];
      }
      __syncthreads();
      if (match) matches[warp_offset[warp] + __popc(ballot & ((1u << lane) - 1u))] = t;
      __syncthreads();
      const int count = warp_offset[kWarpsPerBlock];
      if (count == 0) continue;  // uniform over the block
      for (std::int64_t c = threadIdx.x; c < dim; c += kBlockThreads) {
        float acc = out[c];
        for (int m = 0; m < count; ++m)
          acc += to_float(src[(b * n + matches[m]) * dim + c]);
        out[c] = acc;
      }
    }
  }
}

Status check_table(const char* kernel, std::int64_t slots, std::int64_t rows, std::int64_t dim) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "tokens", slots, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "dim", dim, 0));
  return detail::check_grid(kernel, "tokens", slots, detail::kMaxGridX);
}

template <class T>
Status scatter_add_rows(const char* kernel, const std::int32_t* ids, std::int64_t n,
                        std::int64_t batch, std::int64_t start, std::int64_t rows, const T* src,
                        std::int64_t dim, float* dst, cudaStream_t stream) {
  if (n == 0 || batch == 0 || dim == 0) return Status::ok();
  scatter_add_rows_kernel<<<static_cast<unsigned>(n), kBlockThreads, 0, stream>>>(
      ids, n, batch, start, rows, src, dim, dst);
  return launch_status(kernel, kDTypeOf<T>);
}

}  // namespace

template <class T>
Status embedding_forward(const std::int32_t* ids, std::int64_t tokens, const T* weight,
                         std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                         T* out, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_table("embedding_forward", tokens, vocab_rows, dim));
  return detail::launch_elementwise(
      tokens * dim,
      [=] __device__(std::int64_t i) {
        const std::int64_t row = static_cast<std::int64_t>(ids[i / dim]) - vocab_start;
        out[i] = row >= 0 && row < vocab_rows ? weight[row * dim + i % dim] : from_float<T>(0.0f);
      },
      stream, "embedding_forward", kDTypeOf<T>);
}

template <class T>
Status embedding_backward(const std::int32_t* ids, std::int64_t tokens, const T* dout,
                          std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                          float* dweight, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_table("embedding_backward", tokens, vocab_rows, dim));
  return scatter_add_rows("embedding_backward", ids, tokens, 1, vocab_start, vocab_rows, dout, dim,
                          dweight, stream);
}

template <class T>
Status position_embedding_forward(const std::int32_t* positions, std::int64_t batch,
                                  std::int64_t seq, const T* pos_weight, std::int64_t dim, T* x,
                                  cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("position_embedding_forward", "batch", batch, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("position_embedding_forward", "seq", seq, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("position_embedding_forward", "dim", dim, 0));
  return detail::launch_elementwise(
      batch * seq * dim,
      [=] __device__(std::int64_t i) {
        const std::int64_t s = (i / dim) % seq;
        const T w = pos_weight[static_cast<std::int64_t>(positions[s]) * dim + i % dim];
        x[i] = from_float<T>(to_float(x[i]) + to_float(w));
      },
      stream, "position_embedding_forward", kDTypeOf<T>);
}

template <class T>
Status position_embedding_backward(const std::int32_t* positions, std::int64_t batch,
                                   std::int64_t seq, const T* dx, std::int64_t dim,
                                   float* dpos_weight, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_table("position_embedding_backward", seq, 0, dim));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("position_embedding_backward", "batch", batch, 0));
  // Every position is a row of the table: start 0 and no upper bound.
  return scatter_add_rows("position_embedding_backward", positions, seq, batch, 0,
                          std::int64_t{1} << 31, dx, dim, dpos_weight, stream);
}

#define PLANNER_INSTANTIATE(T)                                                                     \
  template Status embedding_forward<T>(const std::int32_t*, std::int64_t, const T*, std::int64_t,  \
                                       std::int64_t, std::int64_t, T*, cudaStream_t);              \
  template Status embedding_backward<T>(const std::int32_t*, std::int64_t, const T*, std::int64_t, \
                                        std::int64_t, std::int64_t, float*, cudaStream_t);         \
  template Status position_embedding_forward<T>(const std::int32_t*, std::int64_t, std::int64_t,   \
                                                const T*, std::int64_t, T*, cudaStream_t);         \
  template Status position_embedding_backward<T>(const std::int32_t*, std::int64_t, std::int64_t,  \
                                                 const T*, std::int64_t, float*, cudaStream_t);
PLANNER_INSTANTIATE(float)
PLANNER_INSTANTIATE(bf16)
PLANNER_INSTANTIATE(fp16)
#undef PLANNER_INSTANTIATE

}  // namespace planner::kernels::cuda
