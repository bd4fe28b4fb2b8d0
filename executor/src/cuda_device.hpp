// CudaDevice: the cuda backend's Device (device.hpp) on one GPU, with planner::kernels::cuda.
// Private to executor/ (it includes the CUDA runtime); built only with the CUDA toolkit.
//
//   Memory   a kernels::cuda::CachingAllocator over cudaMalloc. A freed block is reused only
//            after every stream that may still touch it has passed the point of the free: each
//            deallocate() joins a batch guarded by one event per stream with work since the last
//            batch (the device's program streams and the registered communicator streams), and
//            the batch returns to the cache once those events completed. In use and peak count
//            the blocks of pending batches too (they still occupy the GPU).
//   Streams  one non-blocking CUDA stream per program stream (created on first use); the
//            communicators register their own streams (add_stream) so frees and synchronize()
//            cover them.
//   Events   timing events from a pool, recorded on the current stream (or any, record_on); after
//            synchronize() seconds() is the elapsed time from the step's first event.
//   Waits    every host wait (synchronize, copies to and from the host) polls a CUDA event with
//            the backend's Watch (NCCL's asynchronous errors) and a deadline; on an error or
//            timeout the Watch aborts the communicators (bounded_wait.hpp).
//   Errors   kernels cannot fail in the Device interface: the first failed launch or CUDA call is
//            kept and returned by the next Status-returning call (sticky).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "planner/exec/bounded_wait.hpp"
#include "planner/exec/device.hpp"
#include "planner/kernels/cuda/caching_allocator.hpp"
#include "planner/kernels/cuda/device_buffer.hpp"
#include "planner/kernels/cuda/gemm.hpp"
#include "planner/kernels/cuda/stream.hpp"

namespace planner::exec {

class CudaDevice final : public Device {
 public:
  // What the device's host waits consult besides the CUDA event (the backend implements it).
  class Watch {
   public:
    virtual ~Watch() = default;
    // Called before the host blocks: issue work that was held back (grouped sends/receives).
    virtual Status before_host_wait() = 0;
    // The communicators' asynchronous errors.
    virtual Status health() = 0;
    // Ends every communicator (ncclCommAbort).
    virtual void abort() = 0;
  };

  // Makes GPU `index` current for this thread; capacity: bytes this rank may hold (0: the GPU's
  // memory); timeout_s bounds every host wait.
  static Result<std::unique_ptr<CudaDevice>> create(int index, std::int64_t capacity,
                                                    double timeout_s);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  // ---- for the backend
  void set_watch(Watch* watch) { watch_ = watch; }
  int index() const { return index_; }
  // The CUDA stream of the current program stream.
  cudaStream_t current();
  // A stream whose work frees and synchronize() must cover (a communicator's).
  void add_stream(cudaStream_t stream);
  void remove_stream(cudaStream_t stream);
  // Notes that work was enqueued on `stream` (frees after this wait for it).
  void note_work(cudaStream_t stream);
  // A timing event recorded on `stream`, in the events table.
  Event record_on(cudaStream_t stream);
  // A timing event of the table, not yet recorded (the backend records it later, record_at).
  Event reserve_event();
  Status record_at(Event event, cudaStream_t stream);
  cudaEvent_t event(Event event) const { return events_[event.id].get(); }
  // The first error since the device was created (sticky), or ok.
  const Status& status() const { return error_; }
  // Keeps the first error.
  void fail(Status status);
  // Waits until `event` completed, polling the Watch, bounded by the device's timeout.
  Status wait_event_on_host(cudaEvent_t event, std::string_view what);
  double timeout_s() const { return timeout_s_; }

  // ---- Device
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
  void wait_event(Event event) override;
  Status synchronize() override;
  double seconds(Event event) const override;
  void reset_events() override;

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
  struct StreamState {
    cudaStream_t stream = nullptr;
    std::uint64_t work = 0;    // the work counter when work was last enqueued on it
    std::uint64_t marked = 0;  // the work counter covered by `mark`
    std::shared_ptr<kernels::cuda::CudaEvent> mark;
  };
  // Blocks freed together, reusable once every stream passed its mark.
  struct FreeBatch {
    std::uint64_t counter = 0;  // the work counter when the batch opened
    std::vector<std::shared_ptr<kernels::cuda::CudaEvent>> marks;
    std::vector<void*> blocks;
  };

  CudaDevice(int index, std::int64_t capacity, double timeout_s);
  Status init();
  // Runs a kernel (a callable taking a type tag of the activation type and returning a Status)
  // on the current stream, keeping its error.
  template <class Fn>
  void launch(Fn&& fn);
  void check(Status status);
  StreamState* state_of(cudaStream_t stream);
  // The current program stream's cuBLAS handle (nullptr after a failure, kept in the error).
  kernels::cuda::CublasHandle* cublas();
  // Returns the blocks of completed batches to the allocator (all batches: waits for them).
  Status reclaim(bool wait);
  Status staged_copy(void* dst, const void* src, std::int64_t bytes, bool to_host);

  int index_ = 0;
  std::string name_;
  std::int64_t total_memory_ = 0;
  int cc_major_ = 0;
  int cc_minor_ = 0;
  std::int64_t capacity_ = 0;
  double timeout_s_ = 60;
  Watch* watch_ = nullptr;
  Status error_ = Status::ok();

  Stream stream_ = Stream::kCompute;
  std::vector<kernels::cuda::CudaStream> program_streams_;  // by planner::Stream, created lazily
  std::vector<StreamState> streams_;                        // program and registered streams
  std::uint64_t work_counter_ = 0;

  kernels::cuda::CudaMemorySource source_;
  std::unique_ptr<kernels::cuda::CachingAllocator> allocator_;
  std::deque<FreeBatch> pending_;
  // One cuBLAS handle (and workspace) per program stream that runs GEMMs, created on first use:
  // a workspace shared by two streams could be used by both at once.
  std::vector<kernels::cuda::CublasHandle> cublas_;
  void* sum_workspace_ = nullptr;  // kernels::cuda::kSumOfSquaresWorkspace doubles
  void* staging_ = nullptr;        // pinned host memory for copies to and from the host
  kernels::cuda::CudaEvent host_done_;

  std::vector<kernels::cuda::CudaEvent> events_;  // the table; [0, used_) recorded this step
  std::uint32_t used_ = 0;
  std::vector<double> times_;  // seconds of each event after synchronize()
};

}  // namespace planner::exec
