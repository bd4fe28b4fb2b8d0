#include "planner/exec/cpu_device.hpp"

#include "planner/core/units.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "planner/kernels/cpu/activation.hpp"
#include "planner/kernels/cpu/cross_entropy.hpp"
#include "planner/kernels/cpu/elementwise.hpp"
#include "planner/kernels/cpu/embedding.hpp"
#include "planner/kernels/cpu/norm.hpp"
#include "planner/kernels/cpu/rope.hpp"

namespace planner::exec {
namespace {

namespace cpu = kernels::cpu;

// Cache-line alignment: every block starts on a 64-byte boundary (what AVX-512 loads prefer).
constexpr std::int64_t kAlignment = 64;

std::int64_t rounded(std::int64_t bytes) {
  return std::max<std::int64_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
}

std::string gib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f GiB",
                static_cast<double>(bytes) / static_cast<double>(kGiB));
  return text;
}

}  // namespace

CpuDevice::CpuDevice(std::int64_t capacity, int blas_threads)
    : capacity_(capacity), blas_threads_(std::max(1, blas_threads)) {
  cpu::set_blas_threads(blas_threads_);
  stats_.capacity = capacity_;
}

CpuDevice::~CpuDevice() {
  for (auto& [size, blocks] : free_blocks_) {
    for (void* p : blocks)
      std::free(p);
  }
}

std::string CpuDevice::description() const {
  return "cpu (OpenBLAS, " + std::to_string(blas_threads_) +
         (blas_threads_ == 1 ? " thread)" : " threads)");
}

bool CpuDevice::supports(Precision precision) const {
  return precision == Precision::kFp32;
}

Result<void*> CpuDevice::allocate(std::int64_t bytes, const char* what) {
  const std::int64_t size = rounded(bytes);
  if (capacity_ > 0 && stats_.in_use + size > capacity_) {
    return Status::runtime(std::string("out of device memory allocating ") + what + " (" +
                           std::to_string(bytes) + " bytes): " + gib(stats_.in_use) +
                           " in use of the rank's " + gib(capacity_));
  }
  void* p = nullptr;
  auto it = free_blocks_.find(size);
  if (it != free_blocks_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    p = std::aligned_alloc(static_cast<std::size_t>(kAlignment), static_cast<std::size_t>(size));
    if (p == nullptr) {
      return Status::runtime(std::string("host allocation of ") + std::to_string(size) +
                             " bytes for " + what + " failed");
    }
    stats_.reserved += size;
  }
  stats_.in_use += size;
  stats_.peak = std::max(stats_.peak, stats_.in_use);
  return p;
}

void CpuDevice::deallocate(void* ptr, std::int64_t bytes) {
  if (ptr == nullptr) return;
  const std::int64_t size = rounded(bytes);
  stats_.in_use -= size;
  free_blocks_[size].push_back(ptr);
}

MemoryStats CpuDevice::memory() const {
  return stats_;
}

void CpuDevice::reset_peak() {
  stats_.peak = stats_.in_use;
}

void CpuDevice::copy(void* dst, const void* src, std::int64_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, static_cast<std::size_t>(bytes));
}

void CpuDevice::zero(void* dst, std::int64_t bytes) {
  if (bytes > 0) std::memset(dst, 0, static_cast<std::size_t>(bytes));
}

void CpuDevice::copy_2d(void* dst, std::int64_t dst_pitch, const void* src, std::int64_t src_pitch,
                        std::int64_t width, std::int64_t rows) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(d + r * dst_pitch, s + r * src_pitch, static_cast<std::size_t>(width));
}

Status CpuDevice::copy_to_host(void* host_dst, const void* src, std::int64_t bytes) {
  copy(host_dst, src, bytes);
  return Status::ok();
}

Status CpuDevice::copy_from_host(void* dst, const void* host_src, std::int64_t bytes) {
  copy(dst, host_src, bytes);
  return Status::ok();
}

double CpuDevice::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Event CpuDevice::record() {
  events_.push_back(now());
  return Event{static_cast<std::uint32_t>(events_.size() - 1)};
}

double CpuDevice::seconds(Event event) const {
  return events_[event.id];
}

void CpuDevice::gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k,
                     float alpha, const float* a, std::int64_t lda, const float* b,
                     std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  cpu::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void CpuDevice::embedding_forward(const std::int32_t* ids, std::int64_t tokens, const float* weight,
                                  std::int64_t vocab_start, std::int64_t vocab_rows,
                                  std::int64_t dim, float* out) {
  cpu::embedding_forward(ids, tokens, weight, vocab_start, vocab_rows, dim, out);
}
void CpuDevice::embedding_backward(const std::int32_t* ids, std::int64_t tokens, const float* dout,
                                   std::int64_t vocab_start, std::int64_t vocab_rows,
                                   std::int64_t dim, float* dweight) {
  cpu::embedding_backward(ids, tokens, dout, vocab_start, vocab_rows, dim, dweight);
}
void CpuDevice::position_embedding_forward(const std::int32_t* positions, std::int64_t batch,
                                           std::int64_t seq, const float* pos_weight,
                                           std::int64_t dim, float* x) {
  cpu::position_embedding_forward(positions, batch, seq, pos_weight, dim, x);
}
void CpuDevice::position_embedding_backward(const std::int32_t* positions, std::int64_t batch,
                                            std::int64_t seq, const float* dx, std::int64_t dim,
                                            float* dpos_weight) {
  cpu::position_embedding_backward(positions, batch, seq, dx, dim, dpos_weight);
}
void CpuDevice::layernorm_forward(const float* x, const float* gamma, const float* beta,
                                  std::int64_t rows, std::int64_t dim, float eps, float* y,
                                  float* mean, float* rstd) {
  cpu::layernorm_forward(x, gamma, beta, rows, dim, eps, y, mean, rstd);
}
void CpuDevice::layernorm_backward(const float* dy, const float* x, const float* gamma,
                                   const float* mean, const float* rstd, std::int64_t rows,
                                   std::int64_t dim, float* dx, float* dgamma, float* dbeta) {
  cpu::layernorm_backward(dy, x, gamma, mean, rstd, rows, dim, dx, dgamma, dbeta);
}
void CpuDevice::rmsnorm_forward(const float* x, const float* gamma, std::int64_t rows,
                                std::int64_t dim, float eps, float* y, float* rstd) {
  cpu::rmsnorm_forward(x, gamma, rows, dim, eps, y, rstd);
}
void CpuDevice::rmsnorm_backward(const float* dy, const float* x, const float* gamma,
                                 const float* rstd, std::int64_t rows, std::int64_t dim, float* dx,
                                 float* dgamma) {
  cpu::rmsnorm_backward(dy, x, gamma, rstd, rows, dim, dx, dgamma);
}
void CpuDevice::gelu_forward(const float* x, std::int64_t n, float* y) {
  cpu::gelu_forward(x, n, y);
}
void CpuDevice::gelu_backward(const float* x, const float* dy, std::int64_t n, float* dx) {
  cpu::gelu_backward(x, dy, n, dx);
}
void CpuDevice::swiglu_forward(const float* gate, const float* up, std::int64_t rows,
                               std::int64_t cols, std::int64_t ld_in, float* out) {
  cpu::swiglu_forward(gate, up, rows, cols, ld_in, out);
}
void CpuDevice::swiglu_backward(const float* gate, const float* up, const float* dout,
                                std::int64_t rows, std::int64_t cols, std::int64_t ld_in,
                                float* dgate, float* dup) {
  cpu::swiglu_backward(gate, up, dout, rows, cols, ld_in, dgate, dup);
}
void CpuDevice::rope_forward(const float* table, std::int64_t batch, std::int64_t seq,
                             std::int64_t heads, std::int64_t head_dim, float* x) {
  cpu::rope_forward(table, batch, seq, heads, head_dim, x);
}
void CpuDevice::rope_backward(const float* table, std::int64_t batch, std::int64_t seq,
                              std::int64_t heads, std::int64_t head_dim, float* dx) {
  cpu::rope_backward(table, batch, seq, heads, head_dim, dx);
}
void CpuDevice::attention_forward(const AttentionShape& shape, const float* q, const float* k,
                                  const float* v, float* o, float* lse) {
  cpu::attention_forward(shape, q, k, v, o, lse);
}
void CpuDevice::attention_combine(std::int64_t rows, std::int64_t head_dim, float* o, float* lse,
                                  const float* o_part, const float* lse_part) {
  cpu::attention_combine(rows, head_dim, o, lse, o_part, lse_part);
}
void CpuDevice::attention_backward_delta(std::int64_t rows, std::int64_t head_dim, const float* o,
                                         const float* dout, float* delta) {
  cpu::attention_backward_delta(rows, head_dim, o, dout, delta);
}
void CpuDevice::attention_backward(const AttentionShape& shape, const float* q, const float* k,
                                   const float* v, const float* dout, const float* lse,
                                   const float* delta, float* dq, float* dk, float* dv) {
  cpu::attention_backward(shape, q, k, v, dout, lse, delta, dq, dk, dv);
}
void CpuDevice::cross_entropy_local_max(const float* logits, std::int64_t tokens,
                                        std::int64_t vocab_local, float* max) {
  cpu::cross_entropy_local_max(logits, tokens, vocab_local, max);
}
void CpuDevice::cross_entropy_local_sum_exp(const float* logits, std::int64_t tokens,
                                            std::int64_t vocab_local, const float* global_max,
                                            float* sum_exp) {
  cpu::cross_entropy_local_sum_exp(logits, tokens, vocab_local, global_max, sum_exp);
}
void CpuDevice::cross_entropy_local_target_logit(const float* logits, std::int64_t tokens,
                                                 std::int64_t vocab_local, std::int64_t vocab_start,
                                                 const std::int32_t* targets, float* target_logit) {
  cpu::cross_entropy_local_target_logit(logits, tokens, vocab_local, vocab_start, targets,
                                        target_logit);
}
void CpuDevice::cross_entropy_loss(std::int64_t tokens, const float* global_max,
                                   const float* global_sum_exp, const float* global_target_logit,
                                   float* loss, float* lse) {
  cpu::cross_entropy_loss(tokens, global_max, global_sum_exp, global_target_logit, loss, lse);
}
void CpuDevice::cross_entropy_backward(const float* logits, std::int64_t tokens,
                                       std::int64_t vocab_local, std::int64_t vocab_start,
                                       const std::int32_t* targets, const float* lse,
                                       float grad_scale, float* dlogits) {
  cpu::cross_entropy_backward(logits, tokens, vocab_local, vocab_start, targets, lse, grad_scale,
                              dlogits);
}
void CpuDevice::cross_entropy_forward(const float* logits, std::int64_t tokens, std::int64_t vocab,
                                      const std::int32_t* targets, float* loss, float* lse) {
  cpu::cross_entropy_forward(logits, tokens, vocab, targets, loss, lse);
}
void CpuDevice::add(const float* a, const float* b, std::int64_t n, float* out) {
  cpu::add(a, b, n, out);
}
void CpuDevice::axpy(std::int64_t n, float alpha, const float* x, float* y) {
  cpu::axpy(n, alpha, x, y);
}
void CpuDevice::scale(float* x, std::int64_t n, float factor) {
  cpu::scale(x, n, factor);
}
void CpuDevice::bias_add(float* x, const float* bias, std::int64_t rows, std::int64_t cols) {
  cpu::bias_add(x, bias, rows, cols);
}
void CpuDevice::bias_backward(const float* dy, std::int64_t rows, std::int64_t cols, float* dbias) {
  cpu::bias_backward(dy, rows, cols, dbias);
}
void CpuDevice::sum_of_squares(const float* x, std::int64_t n, double* acc) {
  *acc += cpu::sum_of_squares(x, n);
}
void CpuDevice::adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n,
                          float grad_scale, const float* grad, float* param, float* exp_avg,
                          float* exp_avg_sq) {
  cpu::adam_step(config, step, n, grad_scale, grad, param, exp_avg, exp_avg_sq);
}
void CpuDevice::narrow_int64(const std::int64_t* in, std::int64_t n, std::int32_t* out) {
  for (std::int64_t i = 0; i < n; ++i)
    out[i] = static_cast<std::int32_t>(in[i]);
}

}  // namespace planner::exec
