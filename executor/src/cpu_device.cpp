#include "planner/exec/cpu_device.hpp"

#include "planner/core/units.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "planner/kernels/cpu/activation.hpp"
#include "planner/kernels/cpu/convert.hpp"
#include "planner/kernels/cpu/cross_entropy.hpp"
#include "planner/kernels/cpu/elementwise.hpp"
#include "planner/kernels/cpu/embedding.hpp"
#include "planner/kernels/cpu/loss_scale.hpp"
#include "planner/kernels/cpu/moe.hpp"
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

// fp32 values stored as `type` (fp32, or the rounded bf16 / fp16 bits).
void store_as(DType type, const float* x, std::int64_t n, void* y) {
  switch (type) {
    case DType::kBFloat16:
      cpu::float_to_bf16(x, n, static_cast<std::uint16_t*>(y));
      return;
    case DType::kFloat16:
      cpu::float_to_fp16(x, n, static_cast<std::uint16_t*>(y));
      return;
    default:
      if (x != y) std::memmove(y, x, static_cast<std::size_t>(n) * sizeof(float));
      return;
  }
}

// The fp32 view of an A array (device.hpp) that a CPU kernel reads or writes: the array itself
// when A is fp32, else a widened copy (`load`: of the array's values; otherwise uninitialised, for
// outputs the kernel overwrites), which store() rounds back into the array.
class View {
 public:
  View(DType type, const void* p, std::int64_t n, bool load = true) : type_(type), n_(n) {
    if (type_ == DType::kFloat32) {
      ptr_ = static_cast<float*>(const_cast<void*>(p));
      return;
    }
    copy_.resize(static_cast<std::size_t>(n));
    ptr_ = copy_.data();
    if (!load) return;
    const auto* bits = static_cast<const std::uint16_t*>(p);
    if (type_ == DType::kBFloat16) {
      cpu::bf16_to_float(bits, n, ptr_);
    } else {
      cpu::fp16_to_float(bits, n, ptr_);
    }
  }
  float* get() const { return ptr_; }
  void store(void* dst) const {
    if (type_ != DType::kFloat32) store_as(type_, ptr_, n_, dst);
  }

 private:
  DType type_;
  std::int64_t n_;
  std::vector<float> copy_;
  float* ptr_ = nullptr;
};

// Elements spanned by a row-major rows x cols matrix with leading dimension ld, and by GEMM
// operands as stored (cpu/gemm.hpp: A is m x k, or k x m when transposed; B is k x n or n x k).
std::int64_t extent(std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
}
std::int64_t extent_a(Transpose ta, std::int64_t m, std::int64_t k, std::int64_t lda) {
  return ta == Transpose::kNo ? extent(m, k, lda) : extent(k, m, lda);
}
std::int64_t extent_b(Transpose tb, std::int64_t n, std::int64_t k, std::int64_t ldb) {
  return tb == Transpose::kNo ? extent(k, n, ldb) : extent(n, k, ldb);
}

std::string gib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f GiB",
                static_cast<double>(bytes) / static_cast<double>(kGiB));
  return text;
}

}  // namespace

CpuDevice::CpuDevice(std::int64_t capacity, int blas_threads, bool emulate_low_precision)
    : capacity_(capacity),
      blas_threads_(std::max(1, blas_threads)),
      emulate_(emulate_low_precision) {
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
  std::string text = "cpu (OpenBLAS, " + std::to_string(blas_threads_) +
                     (blas_threads_ == 1 ? " thread" : " threads");
  if (activation_type() != DType::kFloat32) {
    text += std::string(", ") + std::string(to_string(precision())) +
            " storage emulated: fp32 compute, rounded on store";
  }
  return text + ")";
}

bool CpuDevice::supports(Precision precision) const {
  if (precision == Precision::kFp32) return true;
  return emulate_ && (precision == Precision::kBf16 || precision == Precision::kFp16);
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
                     float alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
                     float beta, void* c, std::int64_t ldc) {
  const DType t = activation_type();
  const View va(t, a, extent_a(ta, m, k, lda));
  const View vb(t, b, extent_b(tb, n, k, ldb));
  // C's old values matter when beta != 0, and its gaps between rows when ldc > n.
  View vc(t, c, extent(m, n, ldc), beta != 0.0f || ldc != n);
  cpu::gemm(ta, tb, m, n, k, alpha, va.get(), lda, vb.get(), ldb, beta, vc.get(), ldc);
  vc.store(c);
}
void CpuDevice::gemm_fp32_out(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n,
                              std::int64_t k, float alpha, const void* a, std::int64_t lda,
                              const void* b, std::int64_t ldb, float beta, float* c,
                              std::int64_t ldc) {
  const DType t = activation_type();
  const View va(t, a, extent_a(ta, m, k, lda));
  const View vb(t, b, extent_b(tb, n, k, ldb));
  cpu::gemm(ta, tb, m, n, k, alpha, va.get(), lda, vb.get(), ldb, beta, c, ldc);
}
void CpuDevice::embedding_forward(const std::int32_t* ids, std::int64_t tokens, const void* weight,
                                  std::int64_t vocab_start, std::int64_t vocab_rows,
                                  std::int64_t dim, void* out) {
  const DType t = activation_type();
  const View w(t, weight, vocab_rows * dim);
  View o(t, out, tokens * dim, false);
  cpu::embedding_forward(ids, tokens, w.get(), vocab_start, vocab_rows, dim, o.get());
  o.store(out);
}
void CpuDevice::embedding_backward(const std::int32_t* ids, std::int64_t tokens, const void* dout,
                                   std::int64_t vocab_start, std::int64_t vocab_rows,
                                   std::int64_t dim, float* dweight) {
  const View d(activation_type(), dout, tokens * dim);
  cpu::embedding_backward(ids, tokens, d.get(), vocab_start, vocab_rows, dim, dweight);
}
void CpuDevice::position_embedding_forward(const std::int32_t* positions, std::int64_t batch,
                                           std::int64_t seq, const void* pos_weight,
                                           std::int64_t dim, void* x) {
  const DType t = activation_type();
  std::int64_t rows = 0;
  for (std::int64_t i = 0; i < seq; ++i)
    rows = std::max<std::int64_t>(rows, positions[i] + 1);
  const View w(t, pos_weight, rows * dim);
  View vx(t, x, batch * seq * dim);
  cpu::position_embedding_forward(positions, batch, seq, w.get(), dim, vx.get());
  vx.store(x);
}
void CpuDevice::position_embedding_backward(const std::int32_t* positions, std::int64_t batch,
                                            std::int64_t seq, const void* dx, std::int64_t dim,
                                            float* dpos_weight) {
  const View d(activation_type(), dx, batch * seq * dim);
  cpu::position_embedding_backward(positions, batch, seq, d.get(), dim, dpos_weight);
}
void CpuDevice::layernorm_forward(const void* x, const void* gamma, const void* beta,
                                  std::int64_t rows, std::int64_t dim, float eps, void* y,
                                  float* mean, float* rstd) {
  const DType t = activation_type();
  const View vx(t, x, rows * dim);
  const View g(t, gamma, dim);
  const View b(t, beta, dim);
  View vy(t, y, rows * dim, false);
  cpu::layernorm_forward(vx.get(), g.get(), b.get(), rows, dim, eps, vy.get(), mean, rstd);
  vy.store(y);
}
void CpuDevice::layernorm_backward(const void* dy, const void* x, const void* gamma,
                                   const float* mean, const float* rstd, std::int64_t rows,
                                   std::int64_t dim, void* dx, float* dgamma, float* dbeta) {
  const DType t = activation_type();
  const View vdy(t, dy, rows * dim);
  const View vx(t, x, rows * dim);
  const View g(t, gamma, dim);
  View vdx(t, dx, rows * dim, false);
  cpu::layernorm_backward(vdy.get(), vx.get(), g.get(), mean, rstd, rows, dim, vdx.get(), dgamma,
                          dbeta);
  vdx.store(dx);
}
void CpuDevice::rmsnorm_forward(const void* x, const void* gamma, std::int64_t rows,
                                std::int64_t dim, float eps, void* y, float* rstd) {
  const DType t = activation_type();
  const View vx(t, x, rows * dim);
  const View g(t, gamma, dim);
  View vy(t, y, rows * dim, false);
  cpu::rmsnorm_forward(vx.get(), g.get(), rows, dim, eps, vy.get(), rstd);
  vy.store(y);
}
void CpuDevice::rmsnorm_backward(const void* dy, const void* x, const void* gamma,
                                 const float* rstd, std::int64_t rows, std::int64_t dim, void* dx,
                                 float* dgamma) {
  const DType t = activation_type();
  const View vdy(t, dy, rows * dim);
  const View vx(t, x, rows * dim);
  const View g(t, gamma, dim);
  View vdx(t, dx, rows * dim, false);
  cpu::rmsnorm_backward(vdy.get(), vx.get(), g.get(), rstd, rows, dim, vdx.get(), dgamma);
  vdx.store(dx);
}
void CpuDevice::gelu_forward(const void* x, std::int64_t n, void* y) {
  const DType t = activation_type();
  const View vx(t, x, n);
  View vy(t, y, n, false);
  cpu::gelu_forward(vx.get(), n, vy.get());
  vy.store(y);
}
void CpuDevice::gelu_backward(const void* x, const void* dy, std::int64_t n, void* dx) {
  const DType t = activation_type();
  const View vx(t, x, n);
  const View vdy(t, dy, n);
  View vdx(t, dx, n, false);
  cpu::gelu_backward(vx.get(), vdy.get(), n, vdx.get());
  vdx.store(dx);
}
void CpuDevice::swiglu_forward(const void* gate, const void* up, std::int64_t rows,
                               std::int64_t cols, std::int64_t ld_in, void* out) {
  const DType t = activation_type();
  const View g(t, gate, extent(rows, cols, ld_in));
  const View u(t, up, extent(rows, cols, ld_in));
  View o(t, out, rows * cols, false);
  cpu::swiglu_forward(g.get(), u.get(), rows, cols, ld_in, o.get());
  o.store(out);
}
void CpuDevice::swiglu_backward(const void* gate, const void* up, const void* dout,
                                std::int64_t rows, std::int64_t cols, std::int64_t ld_in,
                                void* dgate, void* dup) {
  const DType t = activation_type();
  const View g(t, gate, extent(rows, cols, ld_in));
  const View u(t, up, extent(rows, cols, ld_in));
  const View d(t, dout, rows * cols);
  View dg(t, dgate, extent(rows, cols, ld_in));
  View du(t, dup, extent(rows, cols, ld_in));
  cpu::swiglu_backward(g.get(), u.get(), d.get(), rows, cols, ld_in, dg.get(), du.get());
  dg.store(dgate);
  du.store(dup);
}
void CpuDevice::rope_forward(const float* table, std::int64_t batch, std::int64_t seq,
                             std::int64_t heads, std::int64_t head_dim, void* x) {
  View vx(activation_type(), x, batch * seq * heads * head_dim);
  cpu::rope_forward(table, batch, seq, heads, head_dim, vx.get());
  vx.store(x);
}
void CpuDevice::rope_backward(const float* table, std::int64_t batch, std::int64_t seq,
                              std::int64_t heads, std::int64_t head_dim, void* dx) {
  View vdx(activation_type(), dx, batch * seq * heads * head_dim);
  cpu::rope_backward(table, batch, seq, heads, head_dim, vdx.get());
  vdx.store(dx);
}
void CpuDevice::attention_forward(const AttentionShape& shape, const void* q, const void* k,
                                  const void* v, void* o, float* lse) {
  const DType t = activation_type();
  const std::int64_t q_elems = shape.batch * shape.q_len * shape.heads * shape.head_dim;
  const std::int64_t kv_elems = shape.batch * shape.kv_len * shape.kv_heads * shape.head_dim;
  const View vq(t, q, q_elems);
  const View vk(t, k, kv_elems);
  const View vv(t, v, kv_elems);
  View vo(t, o, q_elems, false);
  cpu::attention_forward(shape, vq.get(), vk.get(), vv.get(), vo.get(), lse);
  vo.store(o);
}
void CpuDevice::attention_combine(std::int64_t rows, std::int64_t head_dim, void* o, float* lse,
                                  const void* o_part, const float* lse_part) {
  const DType t = activation_type();
  View vo(t, o, rows * head_dim);
  const View vp(t, o_part, rows * head_dim);
  cpu::attention_combine(rows, head_dim, vo.get(), lse, vp.get(), lse_part);
  vo.store(o);
}
void CpuDevice::attention_backward_delta(std::int64_t rows, std::int64_t head_dim, const void* o,
                                         const void* dout, float* delta) {
  const DType t = activation_type();
  const View vo(t, o, rows * head_dim);
  const View vd(t, dout, rows * head_dim);
  cpu::attention_backward_delta(rows, head_dim, vo.get(), vd.get(), delta);
}
void CpuDevice::attention_backward(const AttentionShape& shape, const void* q, const void* k,
                                   const void* v, const void* dout, const float* lse,
                                   const float* delta, void* dq, void* dk, void* dv) {
  const DType t = activation_type();
  const std::int64_t q_elems = shape.batch * shape.q_len * shape.heads * shape.head_dim;
  const std::int64_t kv_elems = shape.batch * shape.kv_len * shape.kv_heads * shape.head_dim;
  const View vq(t, q, q_elems);
  const View vk(t, k, kv_elems);
  const View vv(t, v, kv_elems);
  const View vd(t, dout, q_elems);
  View vdq(t, dq, q_elems);
  View vdk(t, dk, kv_elems);
  View vdv(t, dv, kv_elems);
  cpu::attention_backward(shape, vq.get(), vk.get(), vv.get(), vd.get(), lse, delta, vdq.get(),
                          vdk.get(), vdv.get());
  vdq.store(dq);
  vdk.store(dk);
  vdv.store(dv);
}
void CpuDevice::cross_entropy_local_max(const void* logits, std::int64_t tokens,
                                        std::int64_t vocab_local, float* max) {
  const View l(activation_type(), logits, tokens * vocab_local);
  cpu::cross_entropy_local_max(l.get(), tokens, vocab_local, max);
}
void CpuDevice::cross_entropy_local_sum_exp(const void* logits, std::int64_t tokens,
                                            std::int64_t vocab_local, const float* global_max,
                                            float* sum_exp) {
  const View l(activation_type(), logits, tokens * vocab_local);
  cpu::cross_entropy_local_sum_exp(l.get(), tokens, vocab_local, global_max, sum_exp);
}
void CpuDevice::cross_entropy_local_target_logit(const void* logits, std::int64_t tokens,
                                                 std::int64_t vocab_local, std::int64_t vocab_start,
                                                 const std::int32_t* targets, float* target_logit) {
  const View l(activation_type(), logits, tokens * vocab_local);
  cpu::cross_entropy_local_target_logit(l.get(), tokens, vocab_local, vocab_start, targets,
                                        target_logit);
}
void CpuDevice::cross_entropy_loss(std::int64_t tokens, const float* global_max,
                                   const float* global_sum_exp, const float* global_target_logit,
                                   float* loss, float* lse) {
  cpu::cross_entropy_loss(tokens, global_max, global_sum_exp, global_target_logit, loss, lse);
}
void CpuDevice::cross_entropy_backward(const void* logits, std::int64_t tokens,
                                       std::int64_t vocab_local, std::int64_t vocab_start,
                                       const std::int32_t* targets, const float* lse,
                                       float grad_scale, void* dlogits) {
  const DType t = activation_type();
  const View l(t, logits, tokens * vocab_local);
  View d(t, dlogits, tokens * vocab_local, false);
  cpu::cross_entropy_backward(l.get(), tokens, vocab_local, vocab_start, targets, lse, grad_scale,
                              d.get());
  d.store(dlogits);
}
void CpuDevice::cross_entropy_forward(const void* logits, std::int64_t tokens, std::int64_t vocab,
                                      const std::int32_t* targets, float* loss, float* lse) {
  const View l(activation_type(), logits, tokens * vocab);
  cpu::cross_entropy_forward(l.get(), tokens, vocab, targets, loss, lse);
}
void CpuDevice::add(const void* a, const void* b, std::int64_t n, void* out) {
  const DType t = activation_type();
  const View va(t, a, n);
  const View vb(t, b, n);
  View vo(t, out, n, false);
  cpu::add(va.get(), vb.get(), n, vo.get());
  vo.store(out);
}
void CpuDevice::bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols) {
  const DType t = activation_type();
  View vx(t, x, rows * cols);
  const View b(t, bias, cols);
  cpu::bias_add(vx.get(), b.get(), rows, cols);
  vx.store(x);
}
void CpuDevice::bias_backward(const void* dy, std::int64_t rows, std::int64_t cols, float* dbias) {
  const View d(activation_type(), dy, rows * cols);
  cpu::bias_backward(d.get(), rows, cols, dbias);
}
void CpuDevice::axpy(std::int64_t n, float alpha, const float* x, float* y) {
  cpu::axpy(n, alpha, x, y);
}
void CpuDevice::scale(float* x, std::int64_t n, float factor) {
  cpu::scale(x, n, factor);
}
void CpuDevice::accumulate_sum(const float* x, std::int64_t n, float* acc) {
  cpu::bias_backward(x, n, 1, acc);  // a column sum over n rows of one column
}
void CpuDevice::sum_of_squares(const float* x, std::int64_t n, double* acc) {
  *acc += cpu::sum_of_squares(x, n);
}
void CpuDevice::unscale_and_check(float* x, std::int64_t n, float inv_scale,
                                  std::int32_t* found_nonfinite) {
  if (!cpu::unscale_and_check(x, n, inv_scale)) *found_nonfinite = 1;
}
void CpuDevice::adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n,
                          float grad_scale, const float* grad, float* param, float* exp_avg,
                          float* exp_avg_sq, void* model_param) {
  cpu::adam_step(config, step, n, grad_scale, grad, param, exp_avg, exp_avg_sq);
  if (model_param != nullptr) to_activation_type(param, n, model_param);
}
void CpuDevice::to_activation_type(const float* x, std::int64_t n, void* y) {
  store_as(activation_type(), x, n, y);
}
void CpuDevice::narrow_int64(const std::int64_t* in, std::int64_t n, std::int32_t* out) {
  for (std::int64_t i = 0; i < n; ++i)
    out[i] = static_cast<std::int32_t>(in[i]);
}
void CpuDevice::moe_route(const void* logits, std::int64_t rows, const MoeRouteConfig& config,
                          float* scores, std::int32_t* experts, float* weights) {
  const View x(activation_type(), logits, rows * config.experts);
  cpu::moe_route(x.get(), rows, config, scores, experts, weights);
}
void CpuDevice::moe_route_backward(const float* scores, const std::int32_t* experts,
                                   const float* weights, const float* dweights, std::int64_t rows,
                                   const MoeRouteConfig& config, void* dlogits) {
  View d(activation_type(), dlogits, rows * config.experts, false);
  cpu::moe_route_backward(scores, experts, weights, dweights, rows, config, d.get());
  d.store(dlogits);
}
void CpuDevice::gather_rows(const void* src, const std::int32_t* index, std::int64_t rows,
                            std::int64_t cols, void* dst) {
  // A row copy: exact in any storage type.
  const std::int64_t width = cols * activation_bytes();
  const auto* from = static_cast<const std::byte*>(src);
  auto* to = static_cast<std::byte*>(dst);
  for (std::int64_t i = 0; i < rows; ++i) {
    std::memcpy(to + i * width, from + static_cast<std::int64_t>(index[i]) * width,
                static_cast<std::size_t>(width));
  }
}
void CpuDevice::moe_combine(const void* src, const std::int32_t* pos, const float* weights,
                            std::int64_t rows, std::int64_t k, std::int64_t cols, bool accumulate,
                            void* dst) {
  const DType t = activation_type();
  const View in(t, src, rows * k * cols);
  View out(t, dst, rows * cols, accumulate);
  cpu::moe_combine(in.get(), pos, weights, rows, k, cols, accumulate, out.get());
  out.store(dst);
}
void CpuDevice::moe_combine_backward(const void* dy, const void* src, const std::int32_t* pos,
                                     const float* weights, std::int64_t rows, std::int64_t k,
                                     std::int64_t cols, void* dsrc, float* dweights) {
  const DType t = activation_type();
  const View g(t, dy, rows * cols);
  const View in(t, src, rows * k * cols);
  View out(t, dsrc, rows * k * cols, false);
  cpu::moe_combine_backward(g.get(), in.get(), pos, weights, rows, k, cols, out.get(), dweights);
  out.store(dsrc);
}

}  // namespace planner::exec
