// Device: where one rank's tensors live and its kernels run (host memory and OpenBLAS for the cpu
// backend; GPU memory, CUDA streams and cuBLAS for a cuda backend).
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
//   * Kernels: fp32, row-major, the signatures and semantics of planner::kernels::cpu (see the
//     headers in kernels/include/planner/kernels/cpu/): parameter gradients accumulate, activation
//     gradients are overwritten. Pointers are device pointers. Kernels cannot fail; a backend that
//     detects an asynchronous error reports it from the next synchronize() or Status-returning
//     call.
#pragma once

#include <cstdint>
#include <string>

#include "planner/core/enums.hpp"
#include "planner/core/program.hpp"
#include "planner/core/status.hpp"
#include "planner/kernels/cpu/adam.hpp"
#include "planner/kernels/cpu/attention.hpp"
#include "planner/kernels/cpu/gemm.hpp"

namespace planner::exec {

using kernels::cpu::AdamConfig;
using kernels::cpu::AttentionShape;
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

class Device {
 public:
  virtual ~Device() = default;

  // "cpu (OpenBLAS, 1 thread)", "cuda:0 NVIDIA H100 80GB HBM3".
  virtual std::string description() const = 0;
  // Training precisions this device's kernels implement.
  virtual bool supports(Precision precision) const = 0;

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

  // ---- kernels (planner::kernels::cpu semantics)
  virtual void gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k,
                    float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                    float beta, float* c, std::int64_t ldc) = 0;
  virtual void embedding_forward(const std::int32_t* ids, std::int64_t tokens, const float* weight,
                                 std::int64_t vocab_start, std::int64_t vocab_rows,
                                 std::int64_t dim, float* out) = 0;
  virtual void embedding_backward(const std::int32_t* ids, std::int64_t tokens, const float* dout,
                                  std::int64_t vocab_start, std::int64_t vocab_rows,
                                  std::int64_t dim, float* dweight) = 0;
  virtual void position_embedding_forward(const std::int32_t* positions, std::int64_t batch,
                                          std::int64_t seq, const float* pos_weight,
                                          std::int64_t dim, float* x) = 0;
  virtual void position_embedding_backward(const std::int32_t* positions, std::int64_t batch,
                                           std::int64_t seq, const float* dx, std::int64_t dim,
                                           float* dpos_weight) = 0;
  virtual void layernorm_forward(const float* x, const float* gamma, const float* beta,
                                 std::int64_t rows, std::int64_t dim, float eps, float* y,
                                 float* mean, float* rstd) = 0;
  virtual void layernorm_backward(const float* dy, const float* x, const float* gamma,
                                  const float* mean, const float* rstd, std::int64_t rows,
                                  std::int64_t dim, float* dx, float* dgamma, float* dbeta) = 0;
  virtual void rmsnorm_forward(const float* x, const float* gamma, std::int64_t rows,
                               std::int64_t dim, float eps, float* y, float* rstd) = 0;
  virtual void rmsnorm_backward(const float* dy, const float* x, const float* gamma,
                                const float* rstd, std::int64_t rows, std::int64_t dim, float* dx,
                                float* dgamma) = 0;
  virtual void gelu_forward(const float* x, std::int64_t n, float* y) = 0;
  virtual void gelu_backward(const float* x, const float* dy, std::int64_t n, float* dx) = 0;
  virtual void swiglu_forward(const float* gate, const float* up, std::int64_t rows,
                              std::int64_t cols, std::int64_t ld_in, float* out) = 0;
  virtual void swiglu_backward(const float* gate, const float* up, const float* dout,
                               std::int64_t rows, std::int64_t cols, std::int64_t ld_in,
                               float* dgate, float* dup) = 0;
  // Rotary embedding; `table` is a device copy of kernels::cpu::rope_table's output.
  virtual void rope_forward(const float* table, std::int64_t batch, std::int64_t seq,
                            std::int64_t heads, std::int64_t head_dim, float* x) = 0;
  virtual void rope_backward(const float* table, std::int64_t batch, std::int64_t seq,
                             std::int64_t heads, std::int64_t head_dim, float* dx) = 0;
  virtual void attention_forward(const AttentionShape& shape, const float* q, const float* k,
                                 const float* v, float* o, float* lse) = 0;
  virtual void attention_combine(std::int64_t rows, std::int64_t head_dim, float* o, float* lse,
                                 const float* o_part, const float* lse_part) = 0;
  virtual void attention_backward_delta(std::int64_t rows, std::int64_t head_dim, const float* o,
                                        const float* dout, float* delta) = 0;
  virtual void attention_backward(const AttentionShape& shape, const float* q, const float* k,
                                  const float* v, const float* dout, const float* lse,
                                  const float* delta, float* dq, float* dk, float* dv) = 0;
  virtual void cross_entropy_local_max(const float* logits, std::int64_t tokens,
                                       std::int64_t vocab_local, float* max) = 0;
  virtual void cross_entropy_local_sum_exp(const float* logits, std::int64_t tokens,
                                           std::int64_t vocab_local, const float* global_max,
                                           float* sum_exp) = 0;
  virtual void cross_entropy_local_target_logit(const float* logits, std::int64_t tokens,
                                                std::int64_t vocab_local, std::int64_t vocab_start,
                                                const std::int32_t* targets,
                                                float* target_logit) = 0;
  virtual void cross_entropy_loss(std::int64_t tokens, const float* global_max,
                                  const float* global_sum_exp, const float* global_target_logit,
                                  float* loss, float* lse) = 0;
  virtual void cross_entropy_backward(const float* logits, std::int64_t tokens,
                                      std::int64_t vocab_local, std::int64_t vocab_start,
                                      const std::int32_t* targets, const float* lse,
                                      float grad_scale, float* dlogits) = 0;
  virtual void cross_entropy_forward(const float* logits, std::int64_t tokens, std::int64_t vocab,
                                     const std::int32_t* targets, float* loss, float* lse) = 0;
  virtual void add(const float* a, const float* b, std::int64_t n, float* out) = 0;
  virtual void axpy(std::int64_t n, float alpha, const float* x, float* y) = 0;
  virtual void scale(float* x, std::int64_t n, float factor) = 0;
  virtual void bias_add(float* x, const float* bias, std::int64_t rows, std::int64_t cols) = 0;
  virtual void bias_backward(const float* dy, std::int64_t rows, std::int64_t cols,
                             float* dbias) = 0;
  // acc[0] += sum of x[i]^2 (the kernel's double accumulation); acc is device memory.
  virtual void sum_of_squares(const float* x, std::int64_t n, double* acc) = 0;
  virtual void adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n,
                         float grad_scale, const float* grad, float* param, float* exp_avg,
                         float* exp_avg_sq) = 0;
  // out[i] = static_cast<int32_t>(in[i]) (token ids arrive as int64, as Megatron sends them).
  virtual void narrow_int64(const std::int64_t* in, std::int64_t n, std::int32_t* out) = 0;
};

}  // namespace planner::exec
