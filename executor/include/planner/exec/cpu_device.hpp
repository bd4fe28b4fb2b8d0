// CpuDevice: the cpu backend's Device. Tensors in host memory from a caching allocator, kernels
// from planner::kernels::cpu (GEMMs through OpenBLAS), every call synchronous on the calling
// thread, so its streams are one queue and an event is the host clock (steady_clock) when it was
// recorded.
//
// The CPU kernels compute in fp32 only. With `emulate_low_precision` the device also accepts bf16
// and fp16 training by emulating their storage: A arrays (device.hpp) hold 16-bit values
// (kernels/cpu/convert.hpp), each kernel widens its inputs exactly to fp32, runs the fp32 kernel
// and rounds its A outputs once on store, which is the numerical contract of the CUDA kernels.
// It exists so that the mixed-precision runner (16-bit activations and messages, fp32 master
// weights and main grads, fp16 loss scaling) runs and is tested without a GPU; it is slower than
// fp32 (every call converts) and says "emulated" in its description.
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
  CpuDevice(std::int64_t capacity, int blas_threads, bool emulate_low_precision = false);
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
            const void* a, std::int64_t lda, const void* b, std::int64_t ldb, float beta, void* c,
            std::int64_t ldc) override;
  void gemm_fp32_out(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k,
                     float alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
                     float beta, float* c, std::int64_t ldc) override;
  void embedding_forward(const std::int32_t* ids, std::int64_t tokens, const void* weight,
                         std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                         void* out) override;
  void embedding_backward(const std::int32_t* ids, std::int64_t tokens, const void* dout,
                          std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                          float* dweight) override;
  void position_embedding_forward(const std::int32_t* positions, std::int64_t batch,
                                  std::int64_t seq, const void* pos_weight, std::int64_t dim,
                                  void* x) override;
  void position_embedding_backward(const std::int32_t* positions, std::int64_t batch,
                                   std::int64_t seq, const void* dx, std::int64_t dim,
                                   float* dpos_weight) override;
  void layernorm_forward(const void* x, const void* gamma, const void* beta, std::int64_t rows,
                         std::int64_t dim, float eps, void* y, float* mean, float* rstd) override;
  void layernorm_backward(const void* dy, const void* x, const void* gamma, const float* mean,
                          const float* rstd, std::int64_t rows, std::int64_t dim, void* dx,
                          float* dgamma, float* dbeta) override;
  void rmsnorm_forward(const void* x, const void* gamma, std::int64_t rows, std::int64_t dim,
                       float eps, void* y, float* rstd) override;
  void rmsnorm_backward(const void* dy, const void* x, const void* gamma, const float* rstd,
                        std::int64_t rows, std::int64_t dim, void* dx, float* dgamma) override;
  void gelu_forward(const void* x, std::int64_t n, void* y) override;
  void gelu_backward(const void* x, const void* dy, std::int64_t n, void* dx) override;
  void swiglu_forward(const void* gate, const void* up, std::int64_t rows, std::int64_t cols,
                      std::int64_t ld_in, void* out) override;
  void swiglu_backward(const void* gate, const void* up, const void* dout, std::int64_t rows,
                       std::int64_t cols, std::int64_t ld_in, void* dgate, void* dup) override;
  void rope_forward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                    std::int64_t head_dim, void* x) override;
  void rope_backward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                     std::int64_t head_dim, void* dx) override;
  void attention_forward(const AttentionShape& shape, const void* q, const void* k, const void* v,
                         void* o, float* lse) override;
  void attention_combine(std::int64_t rows, std::int64_t head_dim, void* o, float* lse,
                         const void* o_part, const float* lse_part) override;
  void attention_backward_delta(std::int64_t rows, std::int64_t head_dim, const void* o,
                                const void* dout, float* delta) override;
  void attention_backward(const AttentionShape& shape, const void* q, const void* k, const void* v,
                          const void* dout, const float* lse, const float* delta, void* dq,
                          void* dk, void* dv) override;
  void cross_entropy_local_max(const void* logits, std::int64_t tokens, std::int64_t vocab_local,
                               float* max) override;
  void cross_entropy_local_sum_exp(const void* logits, std::int64_t tokens,
                                   std::int64_t vocab_local, const float* global_max,
                                   float* sum_exp) override;
  void cross_entropy_local_target_logit(const void* logits, std::int64_t tokens,
                                        std::int64_t vocab_local, std::int64_t vocab_start,
                                        const std::int32_t* targets, float* target_logit) override;
  void cross_entropy_loss(std::int64_t tokens, const float* global_max, const float* global_sum_exp,
                          const float* global_target_logit, float* loss, float* lse) override;
  void cross_entropy_backward(const void* logits, std::int64_t tokens, std::int64_t vocab_local,
                              std::int64_t vocab_start, const std::int32_t* targets,
                              const float* lse, float grad_scale, void* dlogits) override;
  void cross_entropy_forward(const void* logits, std::int64_t tokens, std::int64_t vocab,
                             const std::int32_t* targets, float* loss, float* lse) override;
  void add(const void* a, const void* b, std::int64_t n, void* out) override;
  void bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols) override;
  void bias_backward(const void* dy, std::int64_t rows, std::int64_t cols, float* dbias) override;
  void axpy(std::int64_t n, float alpha, const float* x, float* y) override;
  void scale(float* x, std::int64_t n, float factor) override;
  void accumulate_sum(const float* x, std::int64_t n, float* acc) override;
  void sum_of_squares(const float* x, std::int64_t n, double* acc) override;
  void unscale_and_check(float* x, std::int64_t n, float inv_scale,
                         std::int32_t* found_nonfinite) override;
  void adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n, float grad_scale,
                 const float* grad, float* param, float* exp_avg, float* exp_avg_sq,
                 void* model_param) override;
  void to_activation_type(const float* x, std::int64_t n, void* y) override;
  void narrow_int64(const std::int64_t* in, std::int64_t n, std::int32_t* out) override;
  void moe_route(const void* logits, std::int64_t rows, const MoeRouteConfig& config, float* scores,
                 std::int32_t* experts, float* weights) override;
  void moe_route_backward(const float* scores, const std::int32_t* experts, const float* weights,
                          const float* dweights, std::int64_t rows, const MoeRouteConfig& config,
                          void* dlogits) override;
  void gather_rows(const void* src, const std::int32_t* index, std::int64_t rows, std::int64_t cols,
                   void* dst) override;
  void moe_combine(const void* src, const std::int32_t* pos, const float* weights,
                   std::int64_t rows, std::int64_t k, std::int64_t cols, bool accumulate,
                   void* dst) override;
  void moe_combine_backward(const void* dy, const void* src, const std::int32_t* pos,
                            const float* weights, std::int64_t rows, std::int64_t k,
                            std::int64_t cols, void* dsrc, float* dweights) override;

 private:
  std::int64_t capacity_ = 0;
  int blas_threads_ = 1;
  bool emulate_ = false;
  Stream stream_ = Stream::kCompute;
  std::vector<double> events_;
  // Freed blocks by size (bytes rounded up to the alignment), reused before asking the system.
  std::unordered_map<std::int64_t, std::vector<void*>> free_blocks_;
  MemoryStats stats_;
};

}  // namespace planner::exec
