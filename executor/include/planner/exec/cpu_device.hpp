// CpuDevice: the cpu backend's Device. Tensors in host memory from a caching allocator, kernels
// from planner::kernels::cpu (GEMMs through OpenBLAS), every call synchronous on the calling
// thread, so its streams are one queue and an event is the host clock (steady_clock) when it was
// recorded.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/exec/device.hpp"

namespace planner::exec {

class CpuDevice final : public Device {
 public:
  // capacity: bytes this rank may hold (0: unlimited); allocate() fails beyond it, as a GPU's
  // memory would. blas_threads >= 1 is passed to OpenBLAS (set_blas_threads).
  CpuDevice(std::int64_t capacity, int blas_threads);
  ~CpuDevice() override;
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  std::string description() const override;
  bool supports(Precision precision) const override;

  Result<void*> allocate(std::int64_t bytes, const char* what) override;
  void deallocate(void* ptr, std::int64_t bytes) override;
  MemoryStats memory() const override;
  void reset_peak() override;
  void copy(void* dst, const void* src, std::int64_t bytes) override;
  void zero(void* dst, std::int64_t bytes) override;
  void copy_2d(void* dst, std::int64_t dst_pitch, const void* src, std::int64_t src_pitch,
               std::int64_t width, std::int64_t rows) override;
  Status copy_to_host(void* host_dst, const void* src, std::int64_t bytes) override;
  Status copy_from_host(void* dst, const void* host_src, std::int64_t bytes) override;

  void set_stream(Stream stream) override { stream_ = stream; }
  Stream stream() const override { return stream_; }
  Event record() override;
  void wait_event(Event) override {}
  Status synchronize() override { return Status::ok(); }
  double seconds(Event event) const override;
  void reset_events() override { events_.clear(); }
  // The host clock now, in the events' time base (the backend records ticket completions with it).
  double now() const;

  void gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
            float* c, std::int64_t ldc) override;
  void embedding_forward(const std::int32_t* ids, std::int64_t tokens, const float* weight,
                         std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                         float* out) override;
  void embedding_backward(const std::int32_t* ids, std::int64_t tokens, const float* dout,
                          std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                          float* dweight) override;
  void position_embedding_forward(const std::int32_t* positions, std::int64_t batch,
                                  std::int64_t seq, const float* pos_weight, std::int64_t dim,
                                  float* x) override;
  void position_embedding_backward(const std::int32_t* positions, std::int64_t batch,
                                   std::int64_t seq, const float* dx, std::int64_t dim,
                                   float* dpos_weight) override;
  void layernorm_forward(const float* x, const float* gamma, const float* beta, std::int64_t rows,
                         std::int64_t dim, float eps, float* y, float* mean, float* rstd) override;
  void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                          const float* rstd, std::int64_t rows, std::int64_t dim, float* dx,
                          float* dgamma, float* dbeta) override;
  void rmsnorm_forward(const float* x, const float* gamma, std::int64_t rows, std::int64_t dim,
                       float eps, float* y, float* rstd) override;
  void rmsnorm_backward(const float* dy, const float* x, const float* gamma, const float* rstd,
                        std::int64_t rows, std::int64_t dim, float* dx, float* dgamma) override;
  void gelu_forward(const float* x, std::int64_t n, float* y) override;
  void gelu_backward(const float* x, const float* dy, std::int64_t n, float* dx) override;
  void swiglu_forward(const float* gate, const float* up, std::int64_t rows, std::int64_t cols,
                      std::int64_t ld_in, float* out) override;
  void swiglu_backward(const float* gate, const float* up, const float* dout, std::int64_t rows,
                       std::int64_t cols, std::int64_t ld_in, float* dgate, float* dup) override;
  void rope_forward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                    std::int64_t head_dim, float* x) override;
  void rope_backward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                     std::int64_t head_dim, float* dx) override;
  void attention_forward(const AttentionShape& shape, const float* q, const float* k,
                         const float* v, float* o, float* lse) override;
  void attention_combine(std::int64_t rows, std::int64_t head_dim, float* o, float* lse,
                         const float* o_part, const float* lse_part) override;
  void attention_backward_delta(std::int64_t rows, std::int64_t head_dim, const float* o,
                                const float* dout, float* delta) override;
  void attention_backward(const AttentionShape& shape, const float* q, const float* k,
                          const float* v, const float* dout, const float* lse, const float* delta,
                          float* dq, float* dk, float* dv) override;
  void cross_entropy_local_max(const float* logits, std::int64_t tokens, std::int64_t vocab_local,
                               float* max) override;
  void cross_entropy_local_sum_exp(const float* logits, std::int64_t tokens,
                                   std::int64_t vocab_local, const float* global_max,
                                   float* sum_exp) override;
  void cross_entropy_local_target_logit(const float* logits, std::int64_t tokens,
                                        std::int64_t vocab_local, std::int64_t vocab_start,
                                        const std::int32_t* targets, float* target_logit) override;
  void cross_entropy_loss(std::int64_t tokens, const float* global_max, const float* global_sum_exp,
                          const float* global_target_logit, float* loss, float* lse) override;
  void cross_entropy_backward(const float* logits, std::int64_t tokens, std::int64_t vocab_local,
                              std::int64_t vocab_start, const std::int32_t* targets,
                              const float* lse, float grad_scale, float* dlogits) override;
  void cross_entropy_forward(const float* logits, std::int64_t tokens, std::int64_t vocab,
                             const std::int32_t* targets, float* loss, float* lse) override;
  void add(const float* a, const float* b, std::int64_t n, float* out) override;
  void axpy(std::int64_t n, float alpha, const float* x, float* y) override;
  void scale(float* x, std::int64_t n, float factor) override;
  void bias_add(float* x, const float* bias, std::int64_t rows, std::int64_t cols) override;
  void bias_backward(const float* dy, std::int64_t rows, std::int64_t cols, float* dbias) override;
  void sum_of_squares(const float* x, std::int64_t n, double* acc) override;
  void adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n, float grad_scale,
                 const float* grad, float* param, float* exp_avg, float* exp_avg_sq) override;
  void narrow_int64(const std::int64_t* in, std::int64_t n, std::int32_t* out) override;

 private:
  std::int64_t capacity_ = 0;
  int blas_threads_ = 1;
  Stream stream_ = Stream::kCompute;
  std::vector<double> events_;
  // Freed blocks by size (bytes rounded up to the alignment), reused before asking the system.
  std::unordered_map<std::int64_t, std::vector<void*>> free_blocks_;
  MemoryStats stats_;
};

}  // namespace planner::exec
