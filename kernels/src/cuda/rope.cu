// Compiled with --fmad=false (kernels/CMakeLists.txt): the rotation rounds like the CPU kernel's.
#include "cuda/device_common.cuh"
#include "planner/kernels/cuda/rope.hpp"

namespace planner::kernels::cuda {
namespace {

using detail::from_float;
using detail::to_float;

Status check_rope(const char* kernel, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                  std::int64_t head_dim) {
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "batch", batch, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "seq", seq, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "heads", heads, 0));
  PLANNER_RETURN_IF_ERROR(detail::check_at_least(kernel, "head_dim", head_dim, 2));
  if (head_dim % 2 != 0) {
    return Status::invalid_input(std::string(kernel) + ": head_dim must be even, got " +
                                 std::to_string(head_dim));
  }
  return Status::ok();
}

// One thread per rotated pair; sign -1 applies the inverse rotation.
template <class T>
Status rotate(const char* kernel, const float* table, std::int64_t batch, std::int64_t seq,
              std::int64_t heads, std::int64_t head_dim, float sign, T* x, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_rope(kernel, batch, seq, heads, head_dim));
  const std::int64_t half = head_dim / 2;
  return detail::launch_elementwise(
      batch * seq * heads * half,
      [=] __device__(std::int64_t i) {
        const std::int64_t p = i % half;
        const std::int64_t head = i / half;  // (b * seq + s) * heads + h
        const std::int64_t s = (head / heads) % seq;
        T* lo = x + head * head_dim;
        const float cos_v = table[s * head_dim + p];
        const float sin_v = sign * table[s * head_dim + half + p];
        const float a = to_float(lo[p]);
        const float c = to_float(lo[p + half]);
        lo[p] = from_float<T>(a * cos_v - c * sin_v);
        lo[p + half] = from_float<T>(c * cos_v + a * sin_v);
      },
      stream, kernel, kDTypeOf<T>);
}

}  // namespace

Status rope_table(const std::int32_t* positions, std::int64_t seq, std::int64_t head_dim,
                  double theta, float* table, cudaStream_t stream) {
  PLANNER_RETURN_IF_ERROR(check_rope("rope_table", 1, seq, 1, head_dim));
  if (!(theta > 0)) return Status::invalid_input("rope_table: theta must be > 0");
  const std::int64_t half = head_dim / 2;
  return detail::launch_elementwise(
      seq * half,
      [=] __device__(std::int64_t i) {
        const std::int64_t s = i / half;
        const std::int64_t p = i % half;
        const double inv_freq =
            pow(theta, -2.0 * static_cast<double>(p) / static_cast<double>(head_dim));
        const double angle = static_cast<double>(positions[s]) * inv_freq;
        table[s * head_dim + p] = static_cast<float>(cos(angle));
        table[s * head_dim + half + p] = static_cast<float>(sin(angle));
      },
      stream, "rope_table", DType::kF32);
}

template <class T>
Status rope_forward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                    std::int64_t head_dim, T* x, cudaStream_t stream) {
  return rotate("rope_forward", table, batch, seq, heads, head_dim, 1.0f, x, stream);
}

template <class T>
Status rope_backward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                     std::int64_t head_dim, T* dx, cudaStream_t stream) {
  return rotate("rope_backward", table, batch, seq, heads, head_dim, -1.0f, dx, stream);
}

#define PLANNER_INSTANTIATE(T)                                                             \
  template Status rope_forward<T>(const float*, std::int64_t, std::int64_t, std::int64_t,  \
                                  std::int64_t, T*, cudaStream_t);                         \
  template Status rope_backward<T>(const float*, std::int64_t, std::int64_t, std::int64_t, \
                                   std::int64_t, T*, cudaStream_t);
PLANNER_INSTANTIATE(float)
PLANNER_INSTANTIATE(bf16)
PLANNER_INSTANTIATE(fp16)
#undef PLANNER_INSTANTIATE

}  // namespace planner::kernels::cuda
