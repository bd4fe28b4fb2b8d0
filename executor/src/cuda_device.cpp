#include "cuda_device.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "planner/core/units.hpp"
#include "planner/kernels/cuda/activation.hpp"
#include "planner/kernels/cuda/adam.hpp"
#include "planner/kernels/cuda/attention.hpp"
#include "planner/kernels/cuda/check.hpp"
#include "planner/kernels/cuda/cross_entropy.hpp"
#include "planner/kernels/cuda/elementwise.hpp"
#include "planner/kernels/cuda/embedding.hpp"
#include "planner/kernels/cuda/loss_scale.hpp"
#include "planner/kernels/cuda/moe.hpp"
#include "planner/kernels/cuda/norm.hpp"
#include "planner/kernels/cuda/rope.hpp"

namespace planner::exec {
namespace {

namespace kc = kernels::cuda;

// Pinned host memory through which copies to and from the host go in chunks: pageable copies may
// block the host inside the CUDA runtime, where no deadline applies.
constexpr std::size_t kStagingBytes = std::size_t{64} << 20;
// The first GPU generation with bf16 tensor cores (Ampere, sm_80).
constexpr int kBf16MinComputeMajor = 8;

template <class T>
struct Tag {
  using type = T;
};

template <class T>
const T* in(const void* p) {
  return static_cast<const T*>(p);
}
template <class T>
T* out(void* p) {
  return static_cast<T*>(p);
}

std::string gib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f GiB",
                static_cast<double>(bytes) / static_cast<double>(kGiB));
  return text;
}

// A CUDA event the host waits for, with the device's Watch.
class EventWork final : public AsyncWork {
 public:
  EventWork(cudaEvent_t event, CudaDevice::Watch* watch) : event_(event), watch_(watch) {}
  Result<bool> done() override {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) return false;
    return kc::cuda_status(e, "cudaEventQuery");
  }
  Status health() override { return watch_ != nullptr ? watch_->health() : Status::ok(); }
  void abort() override {
    if (watch_ != nullptr) watch_->abort();
  }

 private:
  cudaEvent_t event_;
  CudaDevice::Watch* watch_;
};

}  // namespace

// ---- set-up

CudaDevice::CudaDevice(int index, std::int64_t capacity, double timeout_s)
    : index_(index), capacity_(capacity), timeout_s_(timeout_s) {}

Result<std::unique_ptr<CudaDevice>> CudaDevice::create(int index, std::int64_t capacity,
                                                       double timeout_s) {
  PLANNER_RETURN_IF_ERROR(kc::set_device(index));
  auto device = std::unique_ptr<CudaDevice>(new CudaDevice(index, capacity, timeout_s));
  PLANNER_RETURN_IF_ERROR(device->init());
  return device;
}

Status CudaDevice::init() {
  cudaDeviceProp prop{};
  PLANNER_RETURN_IF_ERROR(
      kc::cuda_status(cudaGetDeviceProperties(&prop, index_), "cudaGetDeviceProperties"));
  name_ = prop.name;
  total_memory_ = static_cast<std::int64_t>(prop.totalGlobalMem);
  cc_major_ = prop.major;
  cc_minor_ = prop.minor;
  allocator_ = std::make_unique<kc::CachingAllocator>(source_);
  PLANNER_ASSIGN_OR_RETURN(sum_workspace_,
                           kc::device_malloc(kc::kSumOfSquaresWorkspace * sizeof(double)));
  PLANNER_RETURN_IF_ERROR(kc::cuda_status(cudaMallocHost(&staging_, kStagingBytes),
                                          "cudaMallocHost (staging for host copies)"));
  PLANNER_ASSIGN_OR_RETURN(host_done_, kc::CudaEvent::create(false));
  return Status::ok();
}

CudaDevice::~CudaDevice() {
  // Blocks of pending batches go back only when every stream passed them; after an error (or a
  // wait that does not end) they are left to the process's end rather than risk a blocking call.
  watch_ = nullptr;
  if (error_.is_ok() && reclaim(true).is_ok()) {
    allocator_.reset();
    (void)kc::device_free(sum_workspace_);
    if (staging_ != nullptr) (void)cudaFreeHost(staging_);
  } else {
    (void)allocator_.release();
  }
}

// ---- errors, streams, events

void CudaDevice::fail(Status status) {
  if (error_.is_ok() && !status.is_ok()) error_ = std::move(status);
}

void CudaDevice::check(Status status) {
  fail(std::move(status));
}

cudaStream_t CudaDevice::current() {
  const auto i = static_cast<std::size_t>(stream_);
  if (program_streams_.size() <= i) program_streams_.resize(i + 1);
  if (program_streams_[i].get() == nullptr) {
    Result<kc::CudaStream> created = kc::CudaStream::create();
    if (!created.is_ok()) {
      fail(created.status());
      return nullptr;
    }
    program_streams_[i] = std::move(created).value();
    add_stream(program_streams_[i].get());
  }
  return program_streams_[i].get();
}

kc::CublasHandle* CudaDevice::cublas() {
  const auto i = static_cast<std::size_t>(stream_);
  if (cublas_.size() <= i) cublas_.resize(i + 1);
  if (cublas_[i].empty()) {
    Result<kc::CublasHandle> created = kc::CublasHandle::create();
    if (!created.is_ok()) {
      fail(created.status());
      return nullptr;
    }
    cublas_[i] = std::move(created).value();
  }
  return &cublas_[i];
}

CudaDevice::StreamState* CudaDevice::state_of(cudaStream_t stream) {
  for (StreamState& st : streams_) {
    if (st.stream == stream) return &st;
  }
  return nullptr;
}

void CudaDevice::add_stream(cudaStream_t stream) {
  if (state_of(stream) == nullptr) streams_.push_back({stream, 0, 0, nullptr});
}

void CudaDevice::remove_stream(cudaStream_t stream) {
  std::erase_if(streams_, [&](const StreamState& st) { return st.stream == stream; });
}

void CudaDevice::note_work(cudaStream_t stream) {
  if (StreamState* st = state_of(stream)) st->work = ++work_counter_;
}

Event CudaDevice::reserve_event() {
  if (used_ == events_.size()) {
    Result<kc::CudaEvent> created = kc::CudaEvent::create(true);
    if (!created.is_ok()) {
      fail(created.status());
      return Event{0};
    }
    events_.push_back(std::move(created).value());
  }
  return Event{used_++};
}

Status CudaDevice::record_at(Event event, cudaStream_t stream) {
  if (event.id >= events_.size()) return error_;
  return events_[event.id].record(stream);
}

Event CudaDevice::record_on(cudaStream_t stream) {
  const Event e = reserve_event();
  check(record_at(e, stream));
  return e;
}

Event CudaDevice::record() {
  cudaStream_t s = current();
  const Event e = reserve_event();
  if (s != nullptr) check(record_at(e, s));
  return e;
}

void CudaDevice::wait_event(Event event) {
  cudaStream_t s = current();
  if (s == nullptr || event.id >= events_.size()) return;
  check(events_[event.id].make_wait(s));
}

void CudaDevice::reset_events() {
  used_ = 0;
  times_.clear();
}

double CudaDevice::seconds(Event event) const {
  return event.id < times_.size() ? times_[event.id] : 0.0;
}

Status CudaDevice::wait_event_on_host(cudaEvent_t event, std::string_view what) {
  if (watch_ != nullptr) PLANNER_RETURN_IF_ERROR(watch_->before_host_wait());
  EventWork work(event, watch_);
  return wait_bounded(work, Deadline::after(timeout_s_), what, timeout_s_);
}

Status CudaDevice::synchronize() {
  PLANNER_RETURN_IF_ERROR(error_);
  for (StreamState& st : streams_) {
    if (st.work == 0) continue;
    PLANNER_RETURN_IF_ERROR(host_done_.record(st.stream));
    PLANNER_RETURN_IF_ERROR(wait_event_on_host(host_done_.get(), "synchronising the GPU"));
  }
  times_.assign(used_, 0.0);
  for (std::uint32_t i = 1; i < used_; ++i) {
    float ms = 0;
    PLANNER_RETURN_IF_ERROR(kc::cuda_status(
        cudaEventElapsedTime(&ms, events_[0].get(), events_[i].get()), "cudaEventElapsedTime"));
    times_[i] = static_cast<double>(ms) * 1e-3;
  }
  PLANNER_RETURN_IF_ERROR(reclaim(false));
  return error_;
}

// ---- memory

Status CudaDevice::reclaim(bool wait) {
  while (!pending_.empty()) {
    FreeBatch& batch = pending_.front();
    for (const auto& mark : batch.marks) {
      const cudaError_t e = cudaEventQuery(mark->get());
      if (e == cudaErrorNotReady) {
        if (!wait) return Status::ok();
        PLANNER_RETURN_IF_ERROR(wait_event_on_host(mark->get(), "waiting for freed GPU memory"));
      } else if (e != cudaSuccess) {
        return kc::cuda_status(e, "cudaEventQuery (freed GPU memory)");
      }
    }
    for (void* block : batch.blocks)
      PLANNER_RETURN_IF_ERROR(allocator_->deallocate(block));
    pending_.pop_front();
  }
  return Status::ok();
}

Result<void*> CudaDevice::allocate(std::int64_t bytes, const char* what) {
  PLANNER_RETURN_IF_ERROR(error_);
  PLANNER_RETURN_IF_ERROR(reclaim(false));
  const auto size =
      static_cast<std::int64_t>(kc::CachingAllocator::size_class(static_cast<std::size_t>(bytes)));
  auto in_use = [&] { return static_cast<std::int64_t>(allocator_->stats().in_use_bytes); };
  if (capacity_ > 0 && in_use() + size > capacity_) {
    PLANNER_RETURN_IF_ERROR(reclaim(true));  // blocks still waiting for their streams
    if (in_use() + size > capacity_) {
      return Status::runtime(std::string("out of GPU memory allocating ") + what + " (" +
                             std::to_string(bytes) + " bytes): " + gib(in_use()) +
                             " in use of the rank's " + gib(capacity_));
    }
  }
  Result<void*> p = allocator_->allocate(static_cast<std::size_t>(bytes), 0);
  if (!p.is_ok() && !pending_.empty()) {
    PLANNER_RETURN_IF_ERROR(reclaim(true));
    p = allocator_->allocate(static_cast<std::size_t>(bytes), 0);
  }
  if (!p.is_ok()) {
    return p.status().with_context(std::string("out of GPU memory allocating ") + what + " (" +
                                   gib(in_use()) + " in use)");
  }
  return *p;
}

void CudaDevice::deallocate(void* ptr, std::int64_t) {
  if (ptr == nullptr) return;
  if (pending_.empty() || pending_.back().counter != work_counter_) {
    FreeBatch batch;
    batch.counter = work_counter_;
    for (StreamState& st : streams_) {
      if (st.work == 0) continue;  // never used: nothing to wait for
      if (!st.mark || st.work > st.marked) {
        Result<kc::CudaEvent> ev = kc::CudaEvent::create(false);
        if (!ev.is_ok()) {
          fail(ev.status());
          return;  // the block is leaked rather than reused too early
        }
        check(ev->record(st.stream));
        st.mark = std::make_shared<kc::CudaEvent>(std::move(ev).value());
        st.marked = st.work;
      }
      batch.marks.push_back(st.mark);
    }
    pending_.push_back(std::move(batch));
  }
  pending_.back().blocks.push_back(ptr);
}

MemoryStats CudaDevice::memory() const {
  const kc::AllocatorStats a = allocator_->stats();
  MemoryStats m;
  m.in_use = static_cast<std::int64_t>(a.in_use_bytes);
  m.peak = static_cast<std::int64_t>(a.peak_in_use_bytes);
  m.reserved = static_cast<std::int64_t>(a.reserved_bytes);
  m.capacity = capacity_ > 0 ? capacity_ : total_memory_;
  return m;
}

void CudaDevice::reset_peak() {
  allocator_->reset_peak();
}

void CudaDevice::copy(void* dst, const void* src, std::int64_t bytes) {
  if (bytes <= 0 || dst == src) return;
  cudaStream_t s = current();
  if (s == nullptr) return;
  check(kc::copy_async(dst, src, static_cast<std::size_t>(bytes), s));
  note_work(s);
}

void CudaDevice::zero(void* dst, std::int64_t bytes) {
  if (bytes <= 0) return;
  cudaStream_t s = current();
  if (s == nullptr) return;
  check(kc::zero_async(dst, static_cast<std::size_t>(bytes), s));
  note_work(s);
}

void CudaDevice::copy_2d(void* dst, std::int64_t dst_pitch, const void* src, std::int64_t src_pitch,
                         std::int64_t width, std::int64_t rows) {
  if (rows <= 0 || width <= 0) return;
  cudaStream_t s = current();
  if (s == nullptr) return;
  check(kc::cuda_status(
      cudaMemcpy2DAsync(dst, static_cast<std::size_t>(dst_pitch), src,
                        static_cast<std::size_t>(src_pitch), static_cast<std::size_t>(width),
                        static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, s),
      "cudaMemcpy2DAsync"));
  note_work(s);
}

Status CudaDevice::staged_copy(void* dst, const void* src, std::int64_t bytes, bool to_host) {
  PLANNER_RETURN_IF_ERROR(error_);
  cudaStream_t s = current();
  PLANNER_RETURN_IF_ERROR(error_);
  for (std::int64_t at = 0; at < bytes;) {
    const auto chunk = static_cast<std::size_t>(
        std::min<std::int64_t>(bytes - at, static_cast<std::int64_t>(kStagingBytes)));
    auto* d = static_cast<std::byte*>(dst) + at;
    const auto* h = static_cast<const std::byte*>(src) + at;
    if (to_host) {
      PLANNER_RETURN_IF_ERROR(kc::copy_async(staging_, h, chunk, s));
    } else {
      std::memcpy(staging_, h, chunk);
      PLANNER_RETURN_IF_ERROR(kc::copy_async(d, staging_, chunk, s));
    }
    note_work(s);
    PLANNER_RETURN_IF_ERROR(host_done_.record(s));
    PLANNER_RETURN_IF_ERROR(wait_event_on_host(
        host_done_.get(), to_host ? "a copy from the GPU to the host" : "a copy to the GPU"));
    if (to_host) std::memcpy(d, staging_, chunk);
    at += static_cast<std::int64_t>(chunk);
  }
  return Status::ok();
}

Status CudaDevice::copy_to_host(void* host_dst, const void* src, std::int64_t bytes) {
  return staged_copy(host_dst, src, bytes, true);
}

Status CudaDevice::copy_from_host(void* dst, const void* host_src, std::int64_t bytes) {
  return staged_copy(dst, host_src, bytes, false);
}

// ---- description

std::string CudaDevice::description() const {
  char text[160];
  std::snprintf(text, sizeof(text), "cuda:%d %s (%.1f GiB, sm_%d%d)", index_, name_.c_str(),
                static_cast<double>(total_memory_) / static_cast<double>(kGiB), cc_major_,
                cc_minor_);
  return text;
}

bool CudaDevice::supports(Precision precision) const {
  switch (precision) {
    case Precision::kFp32:
    case Precision::kTf32:
    case Precision::kFp16:
      return true;
    case Precision::kBf16:
      return cc_major_ >= kBf16MinComputeMajor;
    case Precision::kFp8:
      return false;
  }
  return false;
}

// ---- kernels

template <class Fn>
void CudaDevice::launch(Fn&& fn) {
  if (!error_.is_ok()) return;  // after a failure nothing more is issued; the error is reported
  cudaStream_t s = current();
  if (s == nullptr) return;
  Status st;
  switch (activation_type()) {
    case DType::kBFloat16:
      st = fn(Tag<kc::bf16>{}, s);
      break;
    case DType::kFloat16:
      st = fn(Tag<kc::fp16>{}, s);
      break;
    default:
      st = fn(Tag<float>{}, s);
      break;
  }
  check(std::move(st));
  note_work(s);
}

void CudaDevice::gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k,
                      float alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
                      float beta, void* c, std::int64_t ldc) {
  kc::GemmOptions options;
  options.allow_tf32 = precision() == Precision::kTf32;
  kc::CublasHandle* handle = cublas();
  if (handle == nullptr) return;
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::gemm<T, T>(*handle, ta, tb, m, n, k, alpha, in<T>(a), lda, in<T>(b), ldb, beta,
                          out<T>(c), ldc, s, options);
  });
}
void CudaDevice::gemm_fp32_out(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n,
                               std::int64_t k, float alpha, const void* a, std::int64_t lda,
                               const void* b, std::int64_t ldb, float beta, float* c,
                               std::int64_t ldc) {
  kc::GemmOptions options;
  options.allow_tf32 = precision() == Precision::kTf32;
  kc::CublasHandle* handle = cublas();
  if (handle == nullptr) return;
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::gemm<T, float>(*handle, ta, tb, m, n, k, alpha, in<T>(a), lda, in<T>(b), ldb, beta,
                              c, ldc, s, options);
  });
}
void CudaDevice::embedding_forward(const std::int32_t* ids, std::int64_t tokens, const void* weight,
                                   std::int64_t vocab_start, std::int64_t vocab_rows,
                                   std::int64_t dim, void* o) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::embedding_forward<T>(ids, tokens, in<T>(weight), vocab_start, vocab_rows, dim,
                                    out<T>(o), s);
  });
}
void CudaDevice::embedding_backward(const std::int32_t* ids, std::int64_t tokens, const void* dout,
                                    std::int64_t vocab_start, std::int64_t vocab_rows,
                                    std::int64_t dim, float* dweight) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::embedding_backward<T>(ids, tokens, in<T>(dout), vocab_start, vocab_rows, dim,
                                     dweight, s);
  });
}
void CudaDevice::position_embedding_forward(const std::int32_t* positions, std::int64_t batch,
                                            std::int64_t seq, const void* pos_weight,
                                            std::int64_t dim, void* x) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::position_embedding_forward<T>(positions, batch, seq, in<T>(pos_weight), dim,
                                             out<T>(x), s);
  });
}
void CudaDevice::position_embedding_backward(const std::int32_t* positions, std::int64_t batch,
                                             std::int64_t seq, const void* dx, std::int64_t dim,
                                             float* dpos_weight) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::position_embedding_backward<T>(positions, batch, seq, in<T>(dx), dim, dpos_weight,
                                              s);
  });
}
void CudaDevice::layernorm_forward(const void* x, const void* gamma, const void* beta,
                                   std::int64_t rows, std::int64_t dim, float eps, void* y,
                                   float* mean, float* rstd) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::layernorm_forward<T>(in<T>(x), in<T>(gamma), in<T>(beta), rows, dim, eps, out<T>(y),
                                    mean, rstd, s);
  });
}
void CudaDevice::layernorm_backward(const void* dy, const void* x, const void* gamma,
                                    const float* mean, const float* rstd, std::int64_t rows,
                                    std::int64_t dim, void* dx, float* dgamma, float* dbeta) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::layernorm_backward<T>(in<T>(dy), in<T>(x), in<T>(gamma), mean, rstd, rows, dim,
                                     out<T>(dx), dgamma, dbeta, s);
  });
}
void CudaDevice::rmsnorm_forward(const void* x, const void* gamma, std::int64_t rows,
                                 std::int64_t dim, float eps, void* y, float* rstd) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::rmsnorm_forward<T>(in<T>(x), in<T>(gamma), rows, dim, eps, out<T>(y), rstd, s);
  });
}
void CudaDevice::rmsnorm_backward(const void* dy, const void* x, const void* gamma,
                                  const float* rstd, std::int64_t rows, std::int64_t dim, void* dx,
                                  float* dgamma) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::rmsnorm_backward<T>(in<T>(dy), in<T>(x), in<T>(gamma), rstd, rows, dim, out<T>(dx),
                                   dgamma, s);
  });
}
void CudaDevice::gelu_forward(const void* x, std::int64_t n, void* y) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::gelu_forward<T>(in<T>(x), n, out<T>(y), s);
  });
}
void CudaDevice::gelu_backward(const void* x, const void* dy, std::int64_t n, void* dx) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::gelu_backward<T>(in<T>(x), in<T>(dy), n, out<T>(dx), s);
  });
}
void CudaDevice::swiglu_forward(const void* gate, const void* up, std::int64_t rows,
                                std::int64_t cols, std::int64_t ld_in, void* o) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::swiglu_forward<T>(in<T>(gate), in<T>(up), rows, cols, ld_in, out<T>(o), s);
  });
}
void CudaDevice::swiglu_backward(const void* gate, const void* up, const void* dout,
                                 std::int64_t rows, std::int64_t cols, std::int64_t ld_in,
                                 void* dgate, void* dup) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::swiglu_backward<T>(in<T>(gate), in<T>(up), in<T>(dout), rows, cols, ld_in,
                                  out<T>(dgate), out<T>(dup), s);
  });
}
void CudaDevice::rope_forward(const float* table, std::int64_t batch, std::int64_t seq,
                              std::int64_t heads, std::int64_t head_dim, void* x) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::rope_forward<T>(table, batch, seq, heads, head_dim, out<T>(x), s);
  });
}
void CudaDevice::rope_backward(const float* table, std::int64_t batch, std::int64_t seq,
                               std::int64_t heads, std::int64_t head_dim, void* dx) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::rope_backward<T>(table, batch, seq, heads, head_dim, out<T>(dx), s);
  });
}
void CudaDevice::attention_forward(const AttentionShape& shape, const void* q, const void* k,
                                   const void* v, void* o, float* lse) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::attention_forward<T>(shape, in<T>(q), in<T>(k), in<T>(v), out<T>(o), lse, s);
  });
}
void CudaDevice::attention_combine(std::int64_t rows, std::int64_t head_dim, void* o, float* lse,
                                   const void* o_part, const float* lse_part) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::attention_combine<T>(rows, head_dim, out<T>(o), lse, in<T>(o_part), lse_part, s);
  });
}
void CudaDevice::attention_backward_delta(std::int64_t rows, std::int64_t head_dim, const void* o,
                                          const void* dout, float* delta) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::attention_backward_delta<T>(rows, head_dim, in<T>(o), in<T>(dout), delta, s);
  });
}
void CudaDevice::attention_backward(const AttentionShape& shape, const void* q, const void* k,
                                    const void* v, const void* dout, const float* lse,
                                    const float* delta, void* dq, void* dk, void* dv) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::attention_backward<T>(shape, in<T>(q), in<T>(k), in<T>(v), in<T>(dout), lse, delta,
                                     out<T>(dq), out<T>(dk), out<T>(dv), s);
  });
}
void CudaDevice::cross_entropy_local_max(const void* logits, std::int64_t tokens,
                                         std::int64_t vocab_local, float* max) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::cross_entropy_local_max<T>(in<T>(logits), tokens, vocab_local, max, s);
  });
}
void CudaDevice::cross_entropy_local_sum_exp(const void* logits, std::int64_t tokens,
                                             std::int64_t vocab_local, const float* global_max,
                                             float* sum_exp) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::cross_entropy_local_sum_exp<T>(in<T>(logits), tokens, vocab_local, global_max,
                                              sum_exp, s);
  });
}
void CudaDevice::cross_entropy_local_target_logit(const void* logits, std::int64_t tokens,
                                                  std::int64_t vocab_local,
                                                  std::int64_t vocab_start,
                                                  const std::int32_t* targets,
                                                  float* target_logit) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::cross_entropy_local_target_logit<T>(in<T>(logits), tokens, vocab_local, vocab_start,
                                                   targets, target_logit, s);
  });
}
void CudaDevice::cross_entropy_loss(std::int64_t tokens, const float* global_max,
                                    const float* global_sum_exp, const float* global_target_logit,
                                    float* loss, float* lse) {
  launch([&](auto, cudaStream_t s) {
    return kc::cross_entropy_loss(tokens, global_max, global_sum_exp, global_target_logit, loss,
                                  lse, s);
  });
}
void CudaDevice::cross_entropy_backward(const void* logits, std::int64_t tokens,
                                        std::int64_t vocab_local, std::int64_t vocab_start,
                                        const std::int32_t* targets, const float* lse,
                                        float grad_scale, void* dlogits) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::cross_entropy_backward<T>(in<T>(logits), tokens, vocab_local, vocab_start, targets,
                                         lse, grad_scale, out<T>(dlogits), s);
  });
}
void CudaDevice::cross_entropy_forward(const void* logits, std::int64_t tokens, std::int64_t vocab,
                                       const std::int32_t* targets, float* loss, float* lse) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::cross_entropy_forward<T>(in<T>(logits), tokens, vocab, targets, loss, lse, s);
  });
}
void CudaDevice::add(const void* a, const void* b, std::int64_t n, void* o) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::add<T>(in<T>(a), in<T>(b), n, out<T>(o), s);
  });
}
void CudaDevice::bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::bias_add<T>(out<T>(x), in<T>(bias), rows, cols, s);
  });
}
void CudaDevice::bias_backward(const void* dy, std::int64_t rows, std::int64_t cols, float* dbias) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::bias_backward<T>(in<T>(dy), rows, cols, dbias, s);
  });
}
void CudaDevice::axpy(std::int64_t n, float alpha, const float* x, float* y) {
  launch([&](auto, cudaStream_t s) { return kc::axpy<float>(n, alpha, x, y, s); });
}
void CudaDevice::scale(float* x, std::int64_t n, float factor) {
  launch([&](auto, cudaStream_t s) { return kc::scale<float>(x, n, factor, s); });
}
void CudaDevice::accumulate_sum(const float* x, std::int64_t n, float* acc) {
  // A column sum over n rows of one column.
  launch([&](auto, cudaStream_t s) { return kc::bias_backward<float>(x, n, 1, acc, s); });
}
void CudaDevice::sum_of_squares(const float* x, std::int64_t n, double* acc) {
  launch([&](auto, cudaStream_t s) {
    return kc::sum_of_squares<float>(x, n, static_cast<double*>(sum_workspace_), acc, s, true);
  });
}
void CudaDevice::unscale_and_check(float* x, std::int64_t n, float inv_scale,
                                   std::int32_t* found_nonfinite) {
  launch([&](auto, cudaStream_t s) {
    return kc::unscale_and_check<float>(x, n, inv_scale, found_nonfinite, s);
  });
}
void CudaDevice::adam_step(const AdamConfig& config, std::int64_t step, std::int64_t n,
                           float grad_scale, const float* grad, float* param, float* exp_avg,
                           float* exp_avg_sq, void* model_param) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    if (model_param == nullptr) {
      return kc::adam_step<float>(config, step, n, grad_scale, grad, param, exp_avg, exp_avg_sq,
                                  static_cast<float*>(nullptr), s);
    }
    return kc::adam_step<T>(config, step, n, grad_scale, grad, param, exp_avg, exp_avg_sq,
                            out<T>(model_param), s);
  });
}
void CudaDevice::to_activation_type(const float* x, std::int64_t n, void* y) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      return kc::copy_async(y, x, static_cast<std::size_t>(n) * sizeof(float), s);
    } else {
      return kc::convert<float, T>(x, n, out<T>(y), s);
    }
  });
}
void CudaDevice::narrow_int64(const std::int64_t* in64, std::int64_t n, std::int32_t* out32) {
  launch([&](auto, cudaStream_t s) { return kc::narrow_int64(in64, n, out32, s); });
}
void CudaDevice::moe_route(const void* logits, std::int64_t rows, const MoeRouteConfig& config,
                           float* scores, std::int32_t* experts, float* weights) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::moe_route<T>(in<T>(logits), rows, config, scores, experts, weights, s);
  });
}
void CudaDevice::moe_route_backward(const float* scores, const std::int32_t* experts,
                                    const float* weights, const float* dweights, std::int64_t rows,
                                    const MoeRouteConfig& config, void* dlogits) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::moe_route_backward<T>(scores, experts, weights, dweights, rows, config,
                                     out<T>(dlogits), s);
  });
}
void CudaDevice::gather_rows(const void* src, const std::int32_t* index, std::int64_t rows,
                             std::int64_t cols, void* dst) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::gather_rows<T>(in<T>(src), index, rows, cols, out<T>(dst), s);
  });
}
void CudaDevice::moe_combine(const void* src, const std::int32_t* pos, const float* weights,
                             std::int64_t rows, std::int64_t k, std::int64_t cols, bool accumulate,
                             void* dst) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::moe_combine<T>(in<T>(src), pos, weights, rows, k, cols, accumulate, out<T>(dst), s);
  });
}
void CudaDevice::moe_combine_backward(const void* dy, const void* src, const std::int32_t* pos,
                                      const float* weights, std::int64_t rows, std::int64_t k,
                                      std::int64_t cols, void* dsrc, float* dweights) {
  launch([&](auto tag, cudaStream_t s) {
    using T = typename decltype(tag)::type;
    return kc::moe_combine_backward<T>(in<T>(dy), in<T>(src), pos, weights, rows, k, cols,
                                       out<T>(dsrc), dweights, s);
  });
}

}  // namespace planner::exec
