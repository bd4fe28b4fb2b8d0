// Device: where one rank's tensors live and its kernels run (host memory and OpenBLAS for the cpu
// backend; GPU memory, CUDA streams and cuBLAS for the cuda backend).
//
// The runner (runner.hpp) talks to a device only through this interface, so a backend slots in
// without touching it. Contract for implementations:
//   * Memory: allocate() returns device memory (uninitialised, 64-byte aligned) and accounts for
//   it;
//     memory() reports the bytes in use and the peak since reset_peak(). A caching allocator may
//     keep freed blocks for reuse; reserved counts them.
//   * Streams: the step program's streams (program.hpp, planner::Stream). Kernels, copies and
//     events go to the current stream (set_stream). Work on one stream runs in issue order; work on
//     different streams may overlap unless ordered by wait_event(). A host-synchronous device (cpu)
//     runs every call to completion before returning, so its streams are trivially ordered.
//   * Events: record() marks the point the current stream has reached; after synchronize(),
//     seconds() gives that point's time on the device clock, in seconds since an arbitrary origin
//     (differences are durations). Events live until reset_events(), which the runner calls once
//     per step.
//   * Precision (set_precision, before any tensor is allocated): the element type "A" of
//     activations, their gradients and the model weights the kernels read is fp32 (fp32 and tf32
//     training), bf16 or fp16 (activation_type()). Per-row statistics (norm mean/rstd, attention
//     lse/delta, cross-entropy max/sum/loss), parameter gradients ("main grads", which accumulate
//     over micro-batches), master weights and optimizer state are always fp32. Kernels compute in
//     fp32 and round once when they store an A result. Parameters below typed `const void*` /
//     `void*` are A arrays unless their comment says otherwise; `float*` ones are fp32.
//   * Kernels: row-major, the signatures and semantics of planner::kernels::cpu (see the headers
//     in kernels/include/planner/kernels/cpu/) and of planner::kernels::cuda for the A types:
//     parameter gradients accumulate, activation gradients are overwritten. Pointers are device
//     pointers. Kernels cannot fail; a backend that detects an error (including an asynchronous
//     one) reports it from the next synchronize() or Status-returning call.
#pragma once

#include <cstdint>
#include <string>

#include "planner/core/enums.hpp"
#include "planner/core/program.hpp"
#include "planner/core/status.hpp"
#include "planner/exec/communicator.hpp"
#include "planner/kernels/cpu/adam.hpp"
#include "planner/kernels/cpu/attention.hpp"
#include "planner/kernels/cpu/gemm.hpp"
#include "planner/kernels/cpu/moe.hpp"

namespace planner::exec {

using kernels::cpu::AdamConfig;
using kernels::cpu::AttentionShape;
using kernels::cpu::MoeRouteConfig;
using kernels::cpu::Transpose;

struct MemoryStats {
  std::int64_t in_use = 0;    // bytes handed out by allocate() and not yet freed
  std::int64_t peak = 0;      // the largest in_use since the last reset_peak()
  std::int64_t reserved = 0;  // bytes held from the system (in use + cached free blocks)
  std::int64_t capacity = 0;  // what the device offers this rank (0: unknown)
};

// A point on a device stream (see the header). Plain index into the device's event table.
struct Event {
  std::uint32_t id = 0;
};

// The storage type of activations and model weights for a training precision: kFloat32 for fp32
// and tf32, kBFloat16 for bf16, kFloat16 for fp16 (and fp8, which no device here runs).
DType activation_type(Precision precision);

class Device {
 public:
  virtual ~Device() = default;

  // "cpu (OpenBLAS, 1 thread)", "cuda:0 NVIDIA H100 80GB HBM3".
  virtual std::string description() const = 0;
  // Training precisions this device's kernels implement.
  virtual bool supports(Precision precision) const = 0;

  // ---- precision (see the header)
  // Selects the training precision; kInvalidInput unless supports(precision). Call it before
  // allocating tensors: it changes how A arrays are read and written.
  Status set_precision(Precision precision);
  Precision precision() const { return precision_; }
  DType activation_type() const { return exec::activation_type(precision_); }
  std::int64_t activation_bytes() const { return dtype_bytes(activation_type()); }

  // ---- memory
  // Fails (StatusCode::kRuntime, naming `what` and the sizes) when the device is out of memory.
  virtual Result<void*> allocate(std::int64_t bytes, const char* what) = 0;
  virtual void deallocate(void* ptr, std::int64_t bytes) = 0;
  virtual MemoryStats memory() const = 0;
  virtual void reset_peak() = 0;
  // Copies on the current stream. The host copies return once the data has arrived.
  virtual void copy(void* dst, const void* src, std::int64_t bytes) = 0;
  virtual void zero(void* dst, std::int64_t bytes) = 0;
  // `rows` rows of `width` bytes from src (rows `src_pitch` bytes apart) to dst (`dst_pitch`
  // apart), as cudaMemcpy2D: splits a fused QKV projection into Q, K and V and joins their
  // gradients.
  virtual void copy_2d(void* dst, std::int64_t dst_pitch, const void* src, std::int64_t src_pitch,
                       std::int64_t width, std::int64_t rows) = 0;
  virtual Status copy_to_host(void* host_dst, const void* src, std::int64_t bytes) = 0;
  virtual Status copy_from_host(void* dst, const void* host_src, std::int64_t bytes) = 0;

  // ---- streams and events
  virtual void set_stream(Stream stream) = 0;
  virtual Stream stream() const = 0;
  virtual Event record() = 0;
  // Work issued later on the current stream starts after `event` has been reached.
  virtual void wait_event(Event event) = 0;
  virtual Status synchronize() = 0;
  // The time of a recorded event (after synchronize()), seconds on the device clock.
  virtual double seconds(Event event) const = 0;
  virtual void reset_events() = 0;

  // ---- kernels (planner::kernels::cpu semantics; A arrays as void*, see the header)
  // C = alpha op(A) op(B) + beta C with a, b and c of the activation type, fp32 accumulation.
  virtual void gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k,
                    float alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
                    float beta, void* c, std::int64_t ldc) = 0;
  // The same with an fp32 C (weight gradients accumulating into the fp32 main grads).
  virtual void gemm_fp32_out(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n,
                             std::int64_t k, float alpha, const void* a, std::int64_t lda,
                             const void* b, std::int64_t ldb, float beta, float* c,
                             std::int64_t ldc) = 0;
  virtual void embedding_forward(const std::int32_t* ids, std::int64_t tokens, const void* weight,
                                 std::int64_t vocab_start, std::int64_t vocab_rows,
                                 std::int64_t dim, void* out) = 0;
  virtual void embedding_backward(const std::int32_t* ids, std::int64_t tokens, const void* dout,
                                  std::int64_t vocab_start, std::int64_t vocab_rows,
                                  std::int64_t dim, float* dweight) = 0;
  virtual void position_embedding_forward(const std::int32_t* positions, std::int64_t batch,
                                          std::int64_t seq, const void* pos_weight,
                                          std::int64_t dim, void* x) = 0;
  virtual void position_embedding_backward(const std::int32_t* positions, std::int64_t batch,
                                           std::int64_t seq, const void* dx, std::int64_t dim,
                                           float* dpos_weight) = 0;
  virtual void layernorm_forward(const void* x, const void* gamma, const void* beta,
                                 std::int64_t rows, std::int64_t dim, float eps, void* y,
                                 float* mean, float* rstd) = 0;
  virtual void layernorm_backward(const void* dy, const void* x, const void* gamma,
                                  const float* mean, const float* rstd, std::int64_t rows,
                                  std::int64_t dim, void* dx, float* dgamma, float* dbeta) = 0;
  virtual void rmsnorm_forward(const void* x, const void* gamma, std::int64_t rows,
                               std::int64_t dim, float eps, void* y, float* rstd) = 0;
  virtual void rmsnorm_backward(const void* dy, const void* x, const void* gamma, const float* rstd,
                                std::int64_t rows, std::int64_t dim, void* dx, float* dgamma) = 0;
  virtual void gelu_forward(const void* x, std::int64_t n, void* y) = 0;
  virtual void gelu_backward(const void* x, const void* dy, std::int64_t n, void* dx) = 0;
  virtual void swiglu_forward(const void* gate, const void* up, std::int64_t rows,
                              std::int64_t cols, std::int64_t ld_in, void* out) = 0;
  virtual void swiglu_backward(const void* gate, const void* up, const void* dout,
                               std::int64_t rows, std::int64_t cols, std::int64_t ld_in,
                               void* dgate, void* dup) = 0;
  // Rotary embedding; `table` (fp32) is a device copy of kernels::cpu::rope_table's output.
  virtual void rope_forward(const float* table, std::int64_t batch, std::int64_t seq,
                            std::int64_t heads, std::int64_t head_dim, void* x) = 0;
  virtual void rope_backward(const float* table, std::int64_t batch, std::int64_t seq,
                             std::int64_t heads, std::int64_t head_dim, void* dx) = 0;
  virtual void attention_forward(const AttentionShape& shape, const void* q, const void* k,
                                 const void* v, void* o, float* lse) = 0;
  virtual void attention_combine(std::int64_t rows, std::int64_t head_dim, void* o, float* lse,
                                 const void* o_part, const float* lse_part) = 0;
  virtual void attention_backward_delta(std::int64_t rows, std::int64_t head_dim, const void* o,
                                        const void* dout, float* delta) = 0;
  virtual void attention_backward(const AttentionShape& shape, const void* q, const void* k,
                                  const void* v, const void* dout, const float* lse,
                                  const float* delta, void* dq, void* dk, void* dv) = 0;
  virtual void cross_entropy_local_max(const void* logits, std::int64_t tokens,
                                       std::int64_t vocab_local, float* max) = 0;
  virtual void cross_entropy_local_sum_exp(const void* logits, std::int64_t tokens,
                                           std::int64_t vocab_local, const float* global_max,
                                           float* sum_exp) = 0;
  virtual void cross_entropy_local_target_logit(const void* logits, std::int64_t tokens,
                                                std::int64_t vocab_local, std::int64_t vocab_start,
                                                const std::int32_t* targets,
                                                float* target_logit) = 0;
  virtual void cross_entropy_loss(std::int64_t tokens, const float* global_max,
                                  const float* global_sum_exp, const float* global_target_logit,
                                  float* loss, float* lse) = 0;
  virtual void cross_entropy_backward(const void* logits, std::int64_t tokens,
                                      std::int64_t vocab_local, std::int64_t vocab_start,
                                      const std::int32_t* targets, const float* lse,
                                      float grad_scale, void* dlogits) = 0;
  virtual void cross_entropy_forward(const void* logits, std::int64_t tokens, std::int64_t vocab,
                                     const std::int32_t* targets, float* loss, float* lse) = 0;
  virtual void add(const void* a, const void* b, std::int64_t n, void* out) = 0;
  virtual void bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols) = 0;
  virtual void bias_backward(const void* dy, std::int64_t rows, std::int64_t cols,
                             float* dbias) = 0;
  // fp32: y += alpha x and x *= factor (optimizer arithmetic on main grads, masters and moments).
  virtual void axpy(std::int64_t n, float alpha, const float* x, float* y) = 0;
  virtual void scale(float* x, std::int64_t n, float factor) = 0;
  // fp32: acc[0] += the sum of x[0, n) (token losses into a micro-batch's loss sum).
  virtual void accumulate_sum(const float* x, std::int64_t n, float* acc) = 0;
  // fp32: acc[0] += sum of x[i]^2 (the kernel's double accumulation); acc is device memory.
  virtual void sum_of_squares(const float* x, std::int64_t n, double* acc) = 0;
  // fp32 main grads: x[i] *= inv_scale, and *found_nonfinite (device int32) = 1 when some x[i]
  // was inf or NaN (never cleared here): fp16 loss scaling (kernels/cpu/loss_scale.hpp).
  virtual void unscale_and_check(float* x, std::int64_t n, float inv_scale,
                                 std::int32_t* found_nonfinite) = 0;
  // Adam on fp32 master weights and moments; when model_param is not null it also receives the
  // updated weights as A values (mixed precision's model copy).
  virtual void adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n,
                         float grad_scale, const float* grad, float* param, float* exp_avg,
                         float* exp_avg_sq, void* model_param) = 0;
  // y[i] = x[i] as an A value (model weights from fp32 master weights).
  virtual void to_activation_type(const float* x, std::int64_t n, void* y) = 0;
  // out[i] = static_cast<int32_t>(in[i]) (token ids arrive as int64, as Megatron sends them).
  virtual void narrow_int64(const std::int64_t* in, std::int64_t n, std::int32_t* out) = 0;
  // Mixture of experts (kernels/cpu/moe.hpp): routing of A logits to fp32 scores, int32 experts
  // and fp32 weights, and its gradient (A dlogits); row gathers and the weighted combine of A rows.
  virtual void moe_route(const void* logits, std::int64_t rows, const MoeRouteConfig& config,
                         float* scores, std::int32_t* experts, float* weights) = 0;
  virtual void moe_route_backward(const float* scores, const std::int32_t* experts,
                                  const float* weights, const float* dweights, std::int64_t rows,
                                  const MoeRouteConfig& config, void* dlogits) = 0;
  virtual void gather_rows(const void* src, const std::int32_t* index, std::int64_t rows,
                           std::int64_t cols, void* dst) = 0;
  virtual void moe_combine(const void* src, const std::int32_t* pos, const float* weights,
                           std::int64_t rows, std::int64_t k, std::int64_t cols, bool accumulate,
                           void* dst) = 0;
  virtual void moe_combine_backward(const void* dy, const void* src, const std::int32_t* pos,
                                    const float* weights, std::int64_t rows, std::int64_t k,
                                    std::int64_t cols, void* dsrc, float* dweights) = 0;

 private:
  Precision precision_ = Precision::kFp32;
};

}  // namespace planner::exec
