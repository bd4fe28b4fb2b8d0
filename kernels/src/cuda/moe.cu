#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/moe.hpp"

#include <string>

namespace planner::kernels::cuda {
namespace {

using detail::from_float;
using detail::kBlockThreads;
using detail::to_float;

// The largest experts a routing thread handles (its chosen experts and group scores live in
// registers / local memory).
constexpr int kMaxTopK = 64;
constexpr int kMaxGroups = 64;

// Index of the largest of values[0, count) not yet in taken[0, n) and allowed, ties to the lower.
__device__ int arg_best(const float* values, int count, const int* taken, int n,
                        const unsigned long long* allowed_groups, int per_group) {
  int best = -1;
  for (int e = 0; e < count; ++e) {
    if (allowed_groups != nullptr) {
      const int g = e / per_group;
      if ((allowed_groups[g / 64] & (1ull << (g % 64))) == 0) continue;
    }
    bool used = false;
    for (int i = 0; i < n && !used; ++i)
      used = taken[i] == e;
    if (used) continue;
    if (best < 0 || values[e] > values[best]) best = e;
  }
  return best;
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    route_kernel(const T* logits, std::int64_t rows, MoeRouteConfig c, float* scores,
                 std::int32_t* experts, float* weights) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const int n = c.experts;
  const T* x = logits + r * n;
  float* s = scores + r * n;
  if (c.sigmoid) {
    for (int e = 0; e < n; ++e)
      s[e] = 1.0f / (1.0f + expf(-to_float(x[e])));
  } else {
    float mx = to_float(x[0]);
    for (int e = 1; e < n; ++e)
      mx = fmaxf(mx, to_float(x[e]));
    float sum = 0;
    for (int e = 0; e < n; ++e) {
      s[e] = expf(to_float(x[e]) - mx);
      sum += s[e];
    }
    for (int e = 0; e < n; ++e)
      s[e] /= sum;
  }
  const int groups = c.groups < 1 ? 1 : c.groups;
  const int per_group = n / groups;
  unsigned long long allowed[1] = {~0ull};
  const unsigned long long* mask = nullptr;
  if (groups > 1 && c.group_top_k < groups) {
    float group_score[kMaxGroups];
    for (int g = 0; g < groups; ++g) {
      const float* gs = s + g * per_group;
      int top[2] = {-1, -1};
      top[0] = arg_best(gs, per_group, top, 0, nullptr, 1);
      if (c.sigmoid) {
        top[1] = per_group > 1 ? arg_best(gs, per_group, top, 1, nullptr, 1) : -1;
        group_score[g] = gs[top[0]] + (top[1] >= 0 ? gs[top[1]] : 0.0f);
      } else {
        group_score[g] = gs[top[0]];
      }
    }
    int chosen[kMaxGroups];
    allowed[0] = 0;
    for (int i = 0; i < c.group_top_k; ++i) {
      chosen[i] = arg_best(group_score, groups, chosen, i, nullptr, 1);
      allowed[0] |= 1ull << chosen[i];
    }
    mask = allowed;
  }
  int pick[kMaxTopK];
  float total = 0;
  for (int j = 0; j < c.top_k; ++j) {
    pick[j] = arg_best(s, n, pick, j, mask, per_group);
    total += s[pick[j]];
  }
  for (int j = 0; j < c.top_k; ++j) {
    experts[r * c.top_k + j] = pick[j];
    weights[r * c.top_k + j] = s[pick[j]] / total;
  }
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    route_backward_kernel(const float* scores, const std::int32_t* experts, const float* weights,
                          const float* dweights, std::int64_t rows, MoeRouteConfig c, T* dlogits) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const int n = c.experts;
  const int k = c.top_k;
  const float* s = scores + r * n;
  const std::int32_t* idx = experts + r * k;
  const float* w = weights + r * k;
  const float* dw = dweights + r * k;
  T* dx = dlogits + r * n;
  float total = 0, dot = 0;
  for (int j = 0; j < k; ++j) {
    total += s[idx[j]];
    dot += dw[j] * w[j];
  }
  if (c.sigmoid) {
    for (int e = 0; e < n; ++e)
      dx[e] = from_float<T>(0.0f);
    for (int j = 0; j < k; ++j) {
      const float se = s[idx[j]];
      dx[idx[j]] = from_float<T>((dw[j] - dot) / total * se * (1.0f - se));
    }
    return;
  }
  float inner = 0;
  for (int j = 0; j < k; ++j)
    inner += (dw[j] - dot) / total * s[idx[j]];
  for (int e = 0; e < n; ++e) {
    float v = -s[e] * inner;
    for (int j = 0; j < k; ++j) {
      if (idx[j] == e) v += s[e] * (dw[j] - dot) / total;
    }
    dx[e] = from_float<T>(v);
  }
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    combine_kernel(const T* src, const std::int32_t* pos, const float* w, std::int64_t k,
                   std::int64_t cols, bool accumulate, T* dst) {
  const std::int64_t t = blockIdx.x;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float acc = accumulate ? to_float(dst[t * cols + c]) : 0.0f;
    for (std::int64_t j = 0; j < k; ++j) {
      const float weight = w != nullptr ? w[t * k + j] : 1.0f;
      acc += weight * to_float(src[static_cast<std::int64_t>(pos[t * k + j]) * cols + c]);
    }
    dst[t * cols + c] = from_float<T>(acc);
  }
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    combine_backward_kernel(const T* dy, const T* src, const std::int32_t* pos, const float* w,
                            std::int64_t k, std::int64_t cols, T* dsrc, float* dw) {
  __shared__ float scratch[kBlockThreads / detail::kWarpSize];
  const std::int64_t t = blockIdx.x;
  for (std::int64_t j = 0; j < k; ++j) {
    const std::int64_t p = pos[t * k + j];
    const float weight = w[t * k + j];
    float dot = 0;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = to_float(dy[t * cols + c]);
      dsrc[p * cols + c] = from_float<T>(weight * g);
      dot += g * to_float(src[p * cols + c]);
    }
    dot = detail::block_sum(dot, scratch);
    if (threadIdx.x == 0) dw[t * k + j] = dot;
    __syncthreads();
  }
}

Status check_route(const char* kernel, std::int64_t rows, const MoeRouteConfig& c) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "experts", c.experts, 1));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "top_k", c.top_k, 1));
  if (c.top_k > kMaxTopK || c.top_k > c.experts || c.groups > kMaxGroups ||
      (c.groups > 1 && c.experts % c.groups != 0)) {
    return Status::invalid_input(
        std::string(kernel) + ": top_k " + std::to_string(c.top_k) + " and groups " +
        std::to_string(c.groups) + " of " + std::to_string(c.experts) +
        " experts are out of range (top_k <= " + std::to_string(kMaxTopK) +
        ", groups <= " + std::to_string(kMaxGroups) + " dividing the experts)");
  }
  return Status::ok();
}

unsigned row_blocks(std::int64_t rows) {
  return static_cast<unsigned>((rows + kBlockThreads - 1) / kBlockThreads);
}

}  // namespace

template <class T>
Status moe_route(const T* logits, std::int64_t rows, const MoeRouteConfig& config, float* scores,
                 std::int32_t* experts, float* weights, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_route("moe_route", rows, config));
  if (rows == 0) return Status::ok();
  route_kernel<T><<<row_blocks(rows), kBlockThreads, 0, stream>>>(logits, rows, config, scores,
                                                                  experts, weights);
  return launch_status("moe_route", kDTypeOf<T>);
}

template <class T>
Status moe_route_backward(const float* scores, const std::int32_t* experts, const float* weights,
                          const float* dweights, std::int64_t rows, const MoeRouteConfig& config,
                          T* dlogits, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_route("moe_route_backward", rows, config));
  if (rows == 0) return Status::ok();
  route_backward_kernel<T><<<row_blocks(rows), kBlockThreads, 0, stream>>>(
      scores, experts, weights, dweights, rows, config, dlogits);
  return launch_status("moe_route_backward", kDTypeOf<T>);
}

template <class T>
Status gather_rows(const T* src, const std::int32_t* index, std::int64_t rows, std::int64_t cols,
                   T* dst, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("gather_rows", "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("gather_rows", "cols", cols, 0));
  return detail::launch_elementwise(
      rows * cols,
      [=] __device__(std::int64_t i) {
        const std::int64_t r = i / cols;
        dst[i] = src[static_cast<std::int64_t>(index[r]) * cols + i % cols];
      },
      stream, "gather_rows", kDTypeOf<T>);
}

template <class T>
Status moe_combine(const T* src, const std::int32_t* pos, const float* weights, std::int64_t rows,
                   std::int64_t k, std::int64_t cols, bool accumulate, T* dst,
                   cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("moe_combine", "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_grid("moe_combine", "rows", rows, detail::kMaxGridX));
  if (rows == 0 || cols == 0) return Status::ok();
  combine_kernel<T><<<static_cast<unsigned>(rows), kBlockThreads, 0, stream>>>(
      src, pos, weights, k, cols, accumulate, dst);
  return launch_status("moe_combine", kDTypeOf<T>);
}

template <class T>
Status moe_combine_backward(const T* dy, const T* src, const std::int32_t* pos,
                            const float* weights, std::int64_t rows, std::int64_t k,
                            std::int64_t cols, T* dsrc, float* dweights, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("moe_combine_backward", "rows", rows, 0));
  PLANNER_RETURN_IF_ERROR(
      detail::check_grid("moe_combine_backward", "rows", rows, detail::kMaxGridX));
  if (rows == 0) return Status::ok();
  combine_backward_kernel<T><<<static_cast<unsigned>(rows), kBlockThreads, 0, stream>>>(
      dy, src, pos, weights, k, cols, dsrc, dweights);
  return launch_status("moe_combine_backward", kDTypeOf<T>);
}

#define PLANNER_INSTANTIATE(T)                                                                   \
  template Status moe_route<T>(const T*, std::int64_t, const MoeRouteConfig&, float*,            \
                               std::int32_t*, float*, cudaStream_t);                             \
  template Status moe_route_backward<T>(const float*, const std::int32_t*, const float*,         \
                                        const float*, std::int64_t, const MoeRouteConfig&, T*,   \
                                        cudaStream_t);                                           \
  template Status gather_rows<T>(const T*, const std::int32_t*, std::int64_t, std::int64_t, T*,  \
                                 cudaStream_t);                                                  \
  template Status moe_combine<T>(const T*, const std::int32_t*, const float*, std::int64_t,      \
                                 std::int64_t, std::int64_t, bool, T*, cudaStream_t);            \
  template Status moe_combine_backward<T>(const T*, const T*, const std::int32_t*, const float*, \
                                          std::int64_t, std::int64_t, std::int64_t, T*, float*,  \
                                          cudaStream_t);
PLANNER_INSTANTIATE(float)
PLANNER_INSTANTIATE(bf16)
PLANNER_INSTANTIATE(fp16)
#undef PLANNER_INSTANTIATE

}  // namespace planner::kernels::cuda
