#include <algorithm>
#include <string>

#include "cuda/attention_gemm.hpp"
#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/attention.hpp"

namespace planner::kernels::cuda {
namespace {

using detail::from_float;
using detail::kFullMask;
using detail::kNegInf;
using detail::kWarpSize;
using detail::to_float;

// A block owns kTile rows and walks tiles of kTile rows of the other side; kRowThreads threads
// share an own row, each computing kPerThread of the kTile scores of a tile (columns sub, sub + 4,
// ...) and owning the output columns sub, sub + 4, ... of the row.
constexpr int kTile = 32;
constexpr int kRowThreads = 4;
constexpr int kThreads = kTile * kRowThreads;
constexpr int kPerThread = kTile / kRowThreads;
static_assert(kWarpSize % kRowThreads == 0, "the threads of a row share a warp");

// Head dims up to this use register arrays for kSmallHeadDim / kRowThreads output columns per
// thread; larger ones (up to kMaxAttentionHeadDim) twice that.
constexpr int kSmallHeadDim = 128;

struct Geometry {
  std::int64_t heads, kv_heads, group, q_len, kv_len, q_offset, kv_offset;
  int d;
  bool causal;
  float scale;
};

Geometry geometry_of(const AttentionShape& s) {
  return Geometry{s.heads,    s.kv_heads,  s.heads / s.kv_heads,         s.q_len,  s.kv_len,
                  s.q_offset, s.kv_offset, static_cast<int>(s.head_dim), s.causal, s.scale};
}

// Shared-memory tiles are kTile rows of d floats with row stride d + 1, so that the rows a warp
// reads at one column fall into different banks.
__host__ __device__ constexpr std::size_t tile_floats(int d) {
  return static_cast<std::size_t>(kTile) * static_cast<std::size_t>(d + 1);
}
__host__ __device__ constexpr std::size_t score_floats() {
  return static_cast<std::size_t>(kTile) * (kTile + 1);
}

// dst = rows [row0, row0 + kTile) of a head's matrix (row stride ld) as float; rows at or past
// `rows` are zero.
template <class T>
__device__ void load_tile(const T* src, std::int64_t ld, std::int64_t row0, std::int64_t rows,
                          int d, float* dst) {
  for (int idx = threadIdx.x; idx < kTile * d; idx += kThreads) {
    const int r = idx / d;
    const int c = idx - r * d;
    const std::int64_t row = row0 + r;
    dst[r * (d + 1) + c] = row < rows ? to_float(src[row * ld + c]) : 0.0f;
  }
}

// s[jj] = own . other[sub + kRowThreads jj] for jj < kPerThread (own: d floats; other: a tile).
__device__ __forceinline__ void dot_rows(const float* own, const float* other, int d, int sub,
                                         float (&s)[kPerThread]) {
  const int ld = d + 1;
#pragma unroll
  for (int jj = 0; jj < kPerThread; ++jj)
    s[jj] = 0.0f;
  for (int c = 0; c < d; ++c) {
    const float x = own[c];
#pragma unroll
    for (int jj = 0; jj < kPerThread; ++jj)
      s[jj] += x * other[(sub + kRowThreads * jj) * ld + c];
  }
}

// Max and sum over the kRowThreads threads of a row (neighbouring lanes); every lane gets the same
// bits. All lanes of the warp must call these.
__device__ __forceinline__ float row_max(float v) {
  for (int offset = 1; offset < kRowThreads; offset *= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}
__device__ __forceinline__ float row_sum(float v) {
  for (int offset = 1; offset < kRowThreads; offset *= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Query i (local index, global position q_offset + i) sees key j (kv_offset + j).
__device__ __forceinline__ bool visible(const Geometry& g, std::int64_t i, std::int64_t j) {
  return i < g.q_len && j < g.kv_len && (!g.causal || g.kv_offset + j <= g.q_offset + i);
}

// Keys [0, end) can be seen by queries [i0, i0 + kTile) (all keys without causal masking).
__device__ __forceinline__ std::int64_t key_end(const Geometry& g, std::int64_t i0) {
  if (!g.causal) return g.kv_len;
  const std::int64_t tq = min(static_cast<std::int64_t>(kTile), g.q_len - i0);
  return max(std::int64_t{0}, min(g.kv_len, g.q_offset + i0 + tq - g.kv_offset));
}

// What a query-tile block (blockIdx.x: tile of kTile queries, blockIdx.y: batch * heads + head)
// reads and writes, and the row and columns this thread owns.
struct QueryTile {
  std::int64_t ld_q;       // heads * d: row stride of q, o, dout, dq
  std::int64_t ld_kv;      // kv_heads * d: row stride of k, v
  std::int64_t q_base;     // offset of (b, 0, h, 0) in q, o, dout, dq
  std::int64_t kv_base;    // offset of (b, 0, h's kv head, 0) in k, v
  std::int64_t stat_base;  // offset of (b, 0, h) in lse, delta (rows are heads apart)
  std::int64_t i0;         // the tile's first query
  std::int64_t qi;         // this thread's query
  std::int64_t j_end;      // keys [0, j_end) can be visible to the tile
  int row;                 // this thread's row in the tile
  int sub;                 // this thread's share of the row: columns sub, sub + kRowThreads, ...
};

__device__ QueryTile query_tile(const Geometry& g) {
  QueryTile t;
  const std::int64_t b = blockIdx.y / g.heads;
  const std::int64_t h = blockIdx.y % g.heads;
  t.ld_q = g.heads * g.d;
  t.ld_kv = g.kv_heads * g.d;
  t.q_base = (b * g.q_len * g.heads + h) * g.d;
  t.kv_base = (b * g.kv_len * g.kv_heads + h / g.group) * g.d;
  t.stat_base = b * g.q_len * g.heads + h;
  t.i0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  t.row = threadIdx.x / kRowThreads;
  t.sub = threadIdx.x % kRowThreads;
  t.qi = t.i0 + t.row;
  t.j_end = key_end(g, t.i0);
  return t;
}

// Forward: block (query tile, batch * heads). Online softmax over key tiles; m and l are the
// running max and sum of the row, acc its unnormalised output columns.
template <class T, int kMaxD>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(Geometry g, const T* q, const T* k, const T* v, T* o, float* lse) {
  constexpr int kCols = kMaxD / kRowThreads;
  extern __shared__ float smem[];
  const int d = g.d;
  const int ld = d + 1;
  float* sq = smem;
  float* sk = sq + tile_floats(d);
  float* sv = sk + tile_floats(d);
  float* sp = sv + tile_floats(d);
  const QueryTile t = query_tile(g);
  const int sub = t.sub;
  const float* q_row = sq + t.row * ld;
  float* p_row = sp + t.row * (kTile + 1);

  load_tile(q + t.q_base, t.ld_q, t.i0, g.q_len, d, sq);
  float acc[kCols];
#pragma unroll
  for (int cc = 0; cc < kCols; ++cc)
    acc[cc] = 0.0f;
  float m = kNegInf;
  float l = 0.0f;
  for (std::int64_t j0 = 0; j0 < t.j_end; j0 += kTile) {
    __syncthreads();  // the previous tile is no longer read (and sq is complete)
    load_tile(k + t.kv_base, t.ld_kv, j0, g.kv_len, d, sk);
    load_tile(v + t.kv_base, t.ld_kv, j0, g.kv_len, d, sv);
    __syncthreads();
    float s[kPerThread];
    dot_rows(q_row, sk, d, sub, s);
    float tile_max = kNegInf;
#pragma unroll
    for (int jj = 0; jj < kPerThread; ++jj) {
      s[jj] = visible(g, t.qi, j0 + sub + kRowThreads * jj) ? s[jj] * g.scale : kNegInf;
      tile_max = fmaxf(tile_max, s[jj]);
    }
    const float m_new = fmaxf(m, row_max(tile_max));
    float correction = 1.0f;
    float p_sum = 0.0f;
#pragma unroll
    for (int jj = 0; jj < kPerThread; ++jj) {
      s[jj] = m_new == kNegInf ? 0.0f : expf(s[jj] - m_new);  // exp(-inf) == 0 where masked
      p_sum += s[jj];
      p_row[sub + kRowThreads * jj] = s[jj];
    }
    if (m_new != kNegInf) correction = expf(m - m_new);  // 0 while m is -inf
    l = l * correction + row_sum(p_sum);
    m = m_new;
    __syncwarp();  // p_row is written and read by the row's threads, all in this warp
    const int tk = static_cast<int>(min(static_cast<std::int64_t>(kTile), t.j_end - j0));
#pragma unroll
    for (int cc = 0; cc < kCols; ++cc)
      acc[cc] *= correction;
    for (int j = 0; j < tk; ++j) {
      const float p = p_row[j];
      const float* v_row = sv + j * ld;
#pragma unroll
      for (int cc = 0; cc < kCols; ++cc) {
        const int c = sub + kRowThreads * cc;
        if (c < d) acc[cc] += p * v_row[c];
      }
    }
  }
  if (t.qi < g.q_len) {
    T* o_row = o + t.q_base + t.qi * t.ld_q;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int cc = 0; cc < kCols; ++cc) {
      const int c = sub + kRowThreads * cc;
      if (c < d) o_row[c] = from_float<T>(l > 0.0f ? acc[cc] * inv : 0.0f);
    }
    if (sub == 0) lse[t.stat_base + t.qi * g.heads] = l > 0.0f ? m + logf(l) : kNegInf;
  }
}

// Backward, dq pass: block (query tile, batch * heads); walks key tiles, recomputing P from lse and
// dP = dO V^T, and accumulates dq += dS K with dS = scale P (dP - delta).
template <class T, int kMaxD>
__global__ void __launch_bounds__(kThreads)
    backward_dq_kernel(Geometry g, const T* q, const T* k, const T* v, const T* dout,
                       const float* lse, const float* delta, T* dq) {
  constexpr int kCols = kMaxD / kRowThreads;
  extern __shared__ float smem[];
  const int d = g.d;
  const int ld = d + 1;
  float* sq = smem;
  float* sdo = sq + tile_floats(d);
  float* sk = sdo + tile_floats(d);
  float* sv = sk + tile_floats(d);
  float* sds = sv + tile_floats(d);
  const QueryTile t = query_tile(g);
  const int sub = t.sub;
  const std::int64_t qi = t.qi;
  const float row_lse = qi < g.q_len ? lse[t.stat_base + qi * g.heads] : kNegInf;
  const float row_delta = qi < g.q_len ? delta[t.stat_base + qi * g.heads] : 0.0f;
  const float* q_row = sq + t.row * ld;
  const float* do_row = sdo + t.row * ld;
  float* ds_row = sds + t.row * (kTile + 1);

  load_tile(q + t.q_base, t.ld_q, t.i0, g.q_len, d, sq);
  load_tile(dout + t.q_base, t.ld_q, t.i0, g.q_len, d, sdo);
  float acc[kCols];
#pragma unroll
  for (int cc = 0; cc < kCols; ++cc)
    acc[cc] = 0.0f;
  for (std::int64_t j0 = 0; j0 < t.j_end; j0 += kTile) {
    __syncthreads();
    load_tile(k + t.kv_base, t.ld_kv, j0, g.kv_len, d, sk);
    load_tile(v + t.kv_base, t.ld_kv, j0, g.kv_len, d, sv);
    __syncthreads();
    float s[kPerThread];
    float dp[kPerThread];
    dot_rows(q_row, sk, d, sub, s);
    dot_rows(do_row, sv, d, sub, dp);
#pragma unroll
    for (int jj = 0; jj < kPerThread; ++jj) {
      const bool seen = row_lse != kNegInf && visible(g, qi, j0 + sub + kRowThreads * jj);
      const float p = seen ? expf(s[jj] * g.scale - row_lse) : 0.0f;
      ds_row[sub + kRowThreads * jj] = seen ? g.scale * p * (dp[jj] - row_delta) : 0.0f;
    }
    __syncwarp();
    const int tk = static_cast<int>(min(static_cast<std::int64_t>(kTile), t.j_end - j0));
    for (int j = 0; j < tk; ++j) {
      const float ds = ds_row[j];
      const float* k_row = sk + j * ld;
#pragma unroll
      for (int cc = 0; cc < kCols; ++cc) {
        const int c = sub + kRowThreads * cc;
        if (c < d) acc[cc] += ds * k_row[c];
      }
    }
  }
  if (qi < g.q_len) {
    T* dq_row = dq + t.q_base + qi * t.ld_q;
#pragma unroll
    for (int cc = 0; cc < kCols; ++cc) {
      const int c = sub + kRowThreads * cc;
      if (c < d) dq_row[c] = from_float<T>(to_float(dq_row[c]) + acc[cc]);
    }
  }
}

// Backward, dk/dv pass: block (key tile, batch * kv_heads); walks the query tiles of every query
// head of the GQA group in order and accumulates dv += P^T dO and dk += dS^T Q.
template <class T, int kMaxD>
__global__ void __launch_bounds__(kThreads)
    backward_dkdv_kernel(Geometry g, const T* q, const T* k, const T* v, const T* dout,
                         const float* lse, const float* delta, T* dk, T* dv) {
  constexpr int kCols = kMaxD / kRowThreads;
  extern __shared__ float smem[];
  const int d = g.d;
  const int ld = d + 1;
  float* sk = smem;
  float* sv = sk + tile_floats(d);
  float* sq = sv + tile_floats(d);
  float* sdo = sq + tile_floats(d);
  float* sp = sdo + tile_floats(d);
  float* sds = sp + score_floats();
  float* slse = sds + score_floats();
  float* sdelta = slse + kTile;
  const std::int64_t b = blockIdx.y / g.kv_heads;
  const std::int64_t kvh = blockIdx.y % g.kv_heads;
  const std::int64_t ld_q = g.heads * d;
  const std::int64_t ld_kv = g.kv_heads * d;
  const std::int64_t kv_base = (b * g.kv_len * g.kv_heads + kvh) * d;
  const int row = threadIdx.x / kRowThreads;
  const int sub = threadIdx.x % kRowThreads;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  const std::int64_t kj = j0 + row;
  const float* k_row = sk + row * ld;
  const float* v_row = sv + row * ld;
  float* p_row = sp + row * (kTile + 1);
  float* ds_row = sds + row * (kTile + 1);
  // Queries before the tile's first key see none of it.
  const std::int64_t i_begin =
      g.causal ? max(std::int64_t{0}, min(g.q_len, g.kv_offset + j0 - g.q_offset)) : 0;

  load_tile(k + kv_base, ld_kv, j0, g.kv_len, d, sk);
  load_tile(v + kv_base, ld_kv, j0, g.kv_len, d, sv);
  float acc_k[kCols];
  float acc_v[kCols];
#pragma unroll
  for (int cc = 0; cc < kCols; ++cc) {
    acc_k[cc] = 0.0f;
    acc_v[cc] = 0.0f;
  }
  for (std::int64_t hh = 0; hh < g.group; ++hh) {
    const std::int64_t h = kvh * g.group + hh;
    const std::int64_t q_base = (b * g.q_len * g.heads + h) * d;
    const std::int64_t stat_base = b * g.q_len * g.heads + h;  // + i * heads
    for (std::int64_t i0 = i_begin; i0 < g.q_len; i0 += kTile) {
      __syncthreads();  // the previous query tile is no longer read (and sk, sv are complete)
      load_tile(q + q_base, ld_q, i0, g.q_len, d, sq);
      load_tile(dout + q_base, ld_q, i0, g.q_len, d, sdo);
      if (threadIdx.x < kTile) {
        const std::int64_t i = i0 + threadIdx.x;
        slse[threadIdx.x] = i < g.q_len ? lse[stat_base + i * g.heads] : kNegInf;
        sdelta[threadIdx.x] = i < g.q_len ? delta[stat_base + i * g.heads] : 0.0f;
      }
      __syncthreads();
      float s[kPerThread];
      float dp[kPerThread];
      dot_rows(k_row, sq, d, sub, s);
      dot_rows(v_row, sdo, d, sub, dp);
#pragma unroll
      for (int jj = 0; jj < kPerThread; ++jj) {
        const int ii = sub + kRowThreads * jj;
        const float row_lse = slse[ii];
        const bool seen = row_lse != kNegInf && visible(g, i0 + ii, kj);
        const float p = seen ? expf(s[jj] * g.scale - row_lse) : 0.0f;
        p_row[ii] = p;
        ds_row[ii] = seen ? g.scale * p * (dp[jj] - sdelta[ii]) : 0.0f;
      }
      __syncwarp();
      const int tq = static_cast<int>(min(static_cast<std::int64_t>(kTile), g.q_len - i0));
      for (int ii = 0; ii < tq; ++ii) {
        const float p = p_row[ii];
        const float ds = ds_row[ii];
        const float* q_tile_row = sq + ii * ld;
        const float* do_tile_row = sdo + ii * ld;
#pragma unroll
        for (int cc = 0; cc < kCols; ++cc) {
          const int c = sub + kRowThreads * cc;
          if (c < d) {
            acc_v[cc] += p * do_tile_row[c];
            acc_k[cc] += ds * q_tile_row[c];
          }
        }
      }
    }
  }
  if (kj < g.kv_len) {
    T* dk_row = dk + kv_base + kj * ld_kv;
    T* dv_row = dv + kv_base + kj * ld_kv;
#pragma unroll
    for (int cc = 0; cc < kCols; ++cc) {
      const int c = sub + kRowThreads * cc;
      if (c < d) {
        dk_row[c] = from_float<T>(to_float(dk_row[c]) + acc_k[cc]);
        dv_row[c] = from_float<T>(to_float(dv_row[c]) + acc_v[cc]);
      }
    }
  }
}

// Warp-per-row kernels for the combine and delta.
constexpr int kRowsPerBlock = detail::kBlockThreads / kWarpSize;

template <class T>
__global__ void __launch_bounds__(detail::kBlockThreads)
    combine_kernel(std::int64_t rows, int d, T* o, float* lse, const T* o_part,
                   const float* lse_part) {
  const std::int64_t r =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;  // uniform over the warp
  const float a = lse[r];
  const float b = lse_part[r];
  if (b == kNegInf) return;
  T* o_row = o + r * d;
  const T* part_row = o_part + r * d;
  float merged = b;
  if (a == kNegInf) {
    for (int c = lane; c < d; c += kWarpSize)
      o_row[c] = part_row[c];
  } else {
    // log(e^a + e^b) = hi + log(1 + e^(lo - hi)), with no overflow.
    const float hi = fmaxf(a, b);
    merged = hi + log1pf(expf(fminf(a, b) - hi));
    const float wa = expf(a - merged);
    const float wb = expf(b - merged);
    for (int c = lane; c < d; c += kWarpSize)
      o_row[c] = from_float<T>(to_float(o_row[c]) * wa + to_float(part_row[c]) * wb);
  }
  __syncwarp();  // every lane has read lse[r] before it changes
  if (lane == 0) lse[r] = merged;
}

template <class T>
__global__ void __launch_bounds__(detail::kBlockThreads)
    delta_kernel(std::int64_t rows, int d, const T* o, const T* dout, float* delta) {
  const std::int64_t r =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;  // uniform over the warp
  float sum = 0.0f;
  for (int c = lane; c < d; c += kWarpSize)
    sum += to_float(o[r * d + c]) * to_float(dout[r * d + c]);
  sum = detail::warp_sum(sum);
  if (lane == 0) delta[r] = sum;
}

Status check_rows(const char* kernel, std::int64_t rows, std::int64_t head_dim) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "head_dim", head_dim, 1));
  if (head_dim > kMaxAttentionHeadDim) {
    return Status::invalid_input(std::string(kernel) +
                                 ": head_dim must be <= " + std::to_string(kMaxAttentionHeadDim) +
                                 ", got " + std::to_string(head_dim));
  }
  return detail::check_grid(kernel, "rows", (rows + kRowsPerBlock - 1) / kRowsPerBlock,
                            detail::kMaxGridX);
}

// Launches a tile kernel with `smem_floats` floats of dynamic shared memory (above the default 48
// KiB the kernel has to opt in).
template <class Kernel, class... Args>
Status launch_tiles(Kernel kernel, dim3 grid, std::size_t smem_floats, cudaStream_t stream,
                    const char* name, DType type, Args... args) {
  const std::size_t bytes = smem_floats * sizeof(float);
  PLANNER_RETURN_IF_ERROR(
      cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)),
                  std::string("cudaFuncSetAttribute(") + name + ", " + std::to_string(bytes) +
                      " bytes of shared memory)"));
  kernel<<<grid, kThreads, bytes, stream>>>(args...);
  return launch_status(name, type);
}

template <class T, int kMaxD>
Status forward(const Geometry& g, std::int64_t batch, const T* q, const T* k, const T* v, T* o,
               float* lse, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((g.q_len + kTile - 1) / kTile),
                  static_cast<unsigned>(batch * g.heads));
  return launch_tiles(forward_kernel<T, kMaxD>, grid, 3 * tile_floats(g.d) + score_floats(), stream,
                      "attention_forward", kDTypeOf<T>, g, q, k, v, o, lse);
}

template <class T, int kMaxD>
Status backward(const Geometry& g, std::int64_t batch, const T* q, const T* k, const T* v,
                const T* dout, const float* lse, const float* delta, T* dq, T* dk, T* dv,
                cudaStream_t stream) {
  if (g.kv_len > 0) {
    const dim3 grid(static_cast<unsigned>((g.kv_len + kTile - 1) / kTile),
                    static_cast<unsigned>(batch * g.kv_heads));
    PLANNER_RETURN_IF_ERROR(launch_tiles(
        backward_dkdv_kernel<T, kMaxD>, grid, 4 * tile_floats(g.d) + 2 * score_floats() + 2 * kTile,
        stream, "attention_backward_dkdv", kDTypeOf<T>, g, q, k, v, dout, lse, delta, dk, dv));
  }
  if (g.q_len > 0) {
    const dim3 grid(static_cast<unsigned>((g.q_len + kTile - 1) / kTile),
                    static_cast<unsigned>(batch * g.heads));
    PLANNER_RETURN_IF_ERROR(launch_tiles(
        backward_dq_kernel<T, kMaxD>, grid, 4 * tile_floats(g.d) + score_floats(), stream,
        "attention_backward_dq", kDTypeOf<T>, g, q, k, v, dout, lse, delta, dq));
  }
  return Status::ok();
}

bool use_gemm(const AttentionShape& s, AttentionAlgorithm algorithm) {
  if (algorithm == AttentionAlgorithm::kAuto) return s.q_len * s.kv_len >= kGemmMinScores;
  return algorithm == AttentionAlgorithm::kGemm;
}

}  // namespace

Status check_attention_shape(const AttentionShape& s) {
  const char* kernel = "attention";
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "batch", s.batch, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "heads", s.heads, 1));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "kv_heads", s.kv_heads, 1));
  if (s.heads % s.kv_heads != 0) {
    return Status::invalid_input("attention: kv_heads (" + std::to_string(s.kv_heads) +
                                 ") must divide heads (" + std::to_string(s.heads) + ")");
  }
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "head_dim", s.head_dim, 1));
  if (s.head_dim > kMaxAttentionHeadDim) {
    return Status::invalid_input(
        "attention: head_dim must be <= " + std::to_string(kMaxAttentionHeadDim) + ", got " +
        std::to_string(s.head_dim));
  }
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "q_len", s.q_len, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "kv_len", s.kv_len, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "q_offset", s.q_offset, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "kv_offset", s.kv_offset, 0));
  PLANNER_RETURN_IF_ERROR(
      detail::check_grid(kernel, "batch * heads", s.batch * s.heads, detail::kMaxGridY));
  PLANNER_RETURN_IF_ERROR(
      detail::check_grid(kernel, "query tiles", (s.q_len + kTile - 1) / kTile, detail::kMaxGridX));
  return detail::check_grid(kernel, "key tiles", (s.kv_len + kTile - 1) / kTile, detail::kMaxGridX);
}

template <class T>
Status attention_forward(const AttentionShape& shape, const T* q, const T* k, const T* v, T* o,
                         float* lse, cudaStream_t stream, AttentionAlgorithm algorithm) {
  PLANNER_RETURN_IF_ERROR(check_attention_shape(shape));
  if (shape.batch == 0 || shape.q_len == 0) return Status::ok();
  if (use_gemm(shape, algorithm)) {
    return detail::attention_forward_gemm<T>(shape, q, k, v, o, lse, stream);
  }
  const Geometry g = geometry_of(shape);
  return shape.head_dim <= kSmallHeadDim
             ? forward<T, kSmallHeadDim>(g, shape.batch, q, k, v, o, lse, stream)
             : forward<T, kMaxAttentionHeadDim>(g, shape.batch, q, k, v, o, lse, stream);
}

template <class T>
Status attention_combine(std::int64_t rows, std::int64_t head_dim, T* o, float* lse,
                         const T* o_part, const float* lse_part, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_rows("attention_combine", rows, head_dim));
  if (rows == 0) return Status::ok();
  combine_kernel<<<static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock),
                   detail::kBlockThreads, 0, stream>>>(rows, static_cast<int>(head_dim), o, lse,
                                                       o_part, lse_part);
  return launch_status("attention_combine", kDTypeOf<T>);
}

template <class T>
Status attention_backward_delta(std::int64_t rows, std::int64_t head_dim, const T* o, const T* dout,
                                float* delta, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_rows("attention_backward_delta", rows, head_dim));
  if (rows == 0) return Status::ok();
  delta_kernel<<<static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock),
                 detail::kBlockThreads, 0, stream>>>(rows, static_cast<int>(head_dim), o, dout,
                                                     delta);
  return launch_status("attention_backward_delta", kDTypeOf<T>);
}

template <class T>
Status attention_backward(const AttentionShape& shape, const T* q, const T* k, const T* v,
                          const T* dout, const float* lse, const float* delta, T* dq, T* dk, T* dv,
                          cudaStream_t stream, AttentionAlgorithm algorithm) {
  PLANNER_RETURN_IF_ERROR(check_attention_shape(shape));
  if (shape.batch == 0) return Status::ok();
  if (use_gemm(shape, algorithm)) {
    return detail::attention_backward_gemm<T>(shape, q, k, v, dout, lse, delta, dq, dk, dv, stream);
  }
  const Geometry g = geometry_of(shape);
  return shape.head_dim <= kSmallHeadDim
             ? backward<T, kSmallHeadDim>(g, shape.batch, q, k, v, dout, lse, delta, dq, dk, dv,
                                          stream)
             : backward<T, kMaxAttentionHeadDim>(g, shape.batch, q, k, v, dout, lse, delta, dq, dk,
                                                 dv, stream);
}

#define PLANNER_INSTANTIATE(T)                                                                  \
  template Status attention_forward<T>(const AttentionShape&, const T*, const T*, const T*, T*, \
                                       float*, cudaStream_t, AttentionAlgorithm);               \
  template Status attention_combine<T>(std::int64_t, std::int64_t, T*, float*, const T*,        \
                                       const float*, cudaStream_t);                             \
  template Status attention_backward_delta<T>(std::int64_t, std::int64_t, const T*, const T*,   \
                                              float*, cudaStream_t);                            \
  template Status attention_backward<T>(const AttentionShape&, const T*, const T*, const T*,    \
                                        const T*, const float*, const float*, T*, T*, T*,       \
                                        cudaStream_t, AttentionAlgorithm);
PLANNER_INSTANTIATE(float)
PLANNER_INSTANTIATE(bf16)
PLANNER_INSTANTIATE(fp16)
#undef PLANNER_INSTANTIATE

}  // namespace planner::kernels::cuda
