// RAII owners of CUDA streams and events, and device selection. Creation returns a Result; the
// destructors release quietly (a destructor cannot report, and a release only fails when the
// context is already broken, which the next checked call reports).
#pragma once

#include <cuda_runtime_api.h>

#include "planner/core/status.hpp"

namespace planner::kernels::cuda {

// Makes `device` current for this host thread (cudaSetDevice).
Status set_device(int device);

// Waits for all work on the current device (cudaDeviceSynchronize).
Status device_synchronize();

// A non-blocking stream: it does not synchronise with the legacy default stream.
class CudaStream {
 public:
  CudaStream() = default;  // holds no stream
  static Result<CudaStream> create();
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  // Waits until all work enqueued so far on the stream has finished.
  Status synchronize() const;

 private:
  explicit CudaStream(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream_ = nullptr;
};

// An event, with timing (for measuring ops) or without (cheaper, for ordering streams).
class CudaEvent {
 public:
  CudaEvent() = default;  // holds no event
  static Result<CudaEvent> create(bool timing = true);
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  // Captures the work enqueued on `stream` so far.
  Status record(cudaStream_t stream);
  // Makes later work on `stream` wait for the recorded work (cudaStreamWaitEvent).
  Status make_wait(cudaStream_t stream) const;
  // Blocks the host until the recorded work has finished.
  Status synchronize() const;
  // Milliseconds between `start` and this event, both recorded with timing and completed.
  Result<float> elapsed_ms_since(const CudaEvent& start) const;

 private:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  cudaEvent_t event_ = nullptr;
};

}  // namespace planner::kernels::cuda
