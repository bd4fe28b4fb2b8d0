
#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/cross_entropy.hpp"

namespace planner::kernels::cuda {
namespace {

using detail::block_max;
using detail::block_sum;
using detail::from_float;
using detail::kBlockThreads;
using detail::kNegInf;
using detail::to_float;

template <class T>
__device__ float block_row_max(const T* row, std::int64_t n, float* scratch) {
  float m = kNegInf;
  for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x)
    m = fmaxf(m, to_float(row[v]));  // fmaxf skips NaN, like the CPU's max
  return block_max(m, scratch);
}

template <class T>
__device__ float block_row_sum_exp(const T* row, std::int64_t n, float shift, float* scratch) {
  float s = 0.0f;
  for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x)
    s += expf(to_float(row[v]) - shift);
  return block_sum(s, scratch);
}

template <class T>
__device__ float target_logit_of(const T* row, std::int64_t vocab_local, std::int64_t vocab_start,
                                 std::int32_t target) {
  const std::int64_t col = static_cast<std::int64_t>(target) - vocab_start;
  return col >= 0 && col < vocab_local ? to_float(row[col]) : 0.0f;
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    local_max_kernel(const T* logits, std::int64_t vocab_local, float* max) {
  __shared__ float scratch[detail::kWarpSize];
  const std::int64_t t = blockIdx.x;
  const float m = block_row_max(logits + t * vocab_local, vocab_local, scratch);
  if (threadIdx.x == 0) max[t] = m;
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    local_sum_exp_kernel(const T* logits, std::int64_t vocab_local, const float* global_max,
                         float* sum_exp) {
  __shared__ float scratch[detail::kWarpSize];
  const std::int64_t t = blockIdx.x;
  const float s = block_row_sum_exp(logits + t * vocab_local, vocab_local, global_max[t], scratch);
  if (threadIdx.x == 0) sum_exp[t] = s;
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    forward_kernel(const T* logits, std::int64_t vocab, const std::int32_t* targets, float* loss,
                   float* lse) {
  __shared__ float scratch[detail::kWarpSize];
  const std::int64_t t = blockIdx.x;
  const T* row = logits + t * vocab;
  const float m = block_row_max(row, vocab, scratch);
  const float s = block_row_sum_exp(row, vocab, m, scratch);
  if (threadIdx.x == 0) {
    const float l = m + logf(s);
    lse[t] = l;
    loss[t] = l - target_logit_of(row, vocab, 0, targets[t]);
  }
}

Status check_logits(const char* kernel, std::int64_t tokens, std::int64_t vocab_local) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "tokens", tokens, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "vocab_local", vocab_local, 0));
  return detail::check_grid(kernel, "tokens", tokens, detail::kMaxGridX);
}

}  // namespace

template <class T>
Status cross_entropy_local_max(const T* logits, std::int64_t tokens, std::int64_t vocab_local,
                               float* max, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_logits("cross_entropy_local_max", tokens, vocab_local));
  if (tokens == 0) return Status::ok();
  local_max_kernel<<<static_cast<unsigned>(tokens), kBlockThreads, 0, stream>>>(logits, vocab_local,
                                                                                max);
  return launch_status("cross_entropy_local_max", kDTypeOf<T>);
}

template <class T>
Status cross_entropy_local_sum_exp(const T* logits, std::int64_t tokens, std::int64_t vocab_local,
                                   const float* global_max, float* sum_exp, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_logits("cross_entropy_local_sum_exp", tokens, vocab_local));
  if (tokens == 0) return Status::ok();
  local_sum_exp_kernel<<<static_cast<unsigned>(tokens), kBlockThreads, 0, stream>>>(
      logits, vocab_local, global_max, sum_exp);
  return launch_status("cross_entropy_local_sum_exp", kDTypeOf<T>);
}

template <class T>
Status cross_entropy_local_target_logit(const T* logits, std::int64_t tokens,
                                        std::int64_t vocab_local, std::int64_t vocab_start,
                                        const std::int32_t* targets, float* target_logit,
                                        cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_logits("cross_entropy_local_target_logit", tokens, vocab_local));
  return detail::launch_elementwise(
      tokens,
      [=] __device__(std::int64_t t) {
        target_logit[t] =
            target_logit_of(logits + t * vocab_local, vocab_local, vocab_start, targets[t]);
      },
      stream, "cross_entropy_local_target_logit", kDTypeOf<T>);
}

Status cross_entropy_loss(std::int64_t tokens, const float* global_max, const float* global_sum_exp,
                          const float* global_target_logit, float* loss, float* lse,
                          cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("cross_entropy_loss", "tokens", tokens, 0));
  return detail::launch_elementwise(
      tokens,
      [=] __device__(std::int64_t t) {
        const float l = global_max[t] + logf(global_sum_exp[t]);
        lse[t] = l;
        loss[t] = l - global_target_logit[t];
      },
      stream, "cross_entropy_loss", DType::kF32);
}

template <class T>
Status cross_entropy_backward(const T* logits, std::int64_t tokens, std::int64_t vocab_local,
                              std::int64_t vocab_start, const std::int32_t* targets,
                              const float* lse, float grad_scale, T* dlogits, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_logits("cross_entropy_backward", tokens, vocab_local));
  return detail::launch_elementwise(
      tokens * vocab_local,
      [=] __device__(std::int64_t i) {
        const std::int64_t t = i / vocab_local;
        const std::int64_t v = i % vocab_local;
        const float p = expf(to_float(logits[i]) - lse[t]);
        const bool is_target = vocab_start + v == static_cast<std::int64_t>(targets[t]);
        dlogits[i] = from_float<T>(grad_scale * (is_target ? p - 1.0f : p));
      },
      stream, "cross_entropy_backward", kDTypeOf<T>);
}

template <class T>
Status cross_entropy_forward(const T* logits, std::int64_t tokens, std::int64_t vocab,
                             const std::int32_t* targets, float* loss, float* lse,
                             cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_logits("cross_entropy_forward", tokens, vocab));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least("cross_entropy_forward", "vocab", vocab, 1));
  if (tokens == 0) return Status::ok();
  forward_kernel<<<static_cast<unsigned>(tokens), kBlockThreads, 0, stream>>>(logits, vocab,
                                                                              targets, loss, lse);
  return launch_status("cross_entropy_forward", kDTypeOf<T>);
}

#define PLANNER_INSTANTIATE(T)                                                                   \
  template Status cross_entropy_local_max<T>(const T*, std::int64_t, std::int64_t, float*,       \
                                             cudaStream_t);                                      \
  template Status cross_entropy_local_sum_exp<T>(const T*, std::int64_t, std::int64_t,           \
                                                 const float*, float*, cudaStream_t);            \
  template Status cross_entropy_local_target_logit<T>(const T*, std::int64_t, std::int64_t,      \
                                                      std::int64_t, const std::int32_t*, float*, \
                                                      cudaStream_t);                             \
  template Status cross_entropy_backward<T>(const T*, std::int64_t, std::int64_t, std::int64_t,  \
                                            const std::int32_t*, const float*, float, T*,        \
                                            cudaStream_t);                                       \
  template Status cross_entropy_forward<T>(const T*, std::int64_t, std::int64_t,                 \
                                           const std::int32_t*, float*, float*, cudaStream_t);
PLANNER_INSTANTIATE(float)
PLANNER_INSTANTIATE(bf16)
PLANNER_INSTANTIATE(fp16)
#undef PLANNER_INSTANTIATE

}  // namespace planner::kernels::cuda
