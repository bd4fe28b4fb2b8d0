#include "planner/kernels/cuda/stream.hpp"

#include <utility>

#include "planner/kernels/cuda/check.hpp"

namespace planner::kernels::cuda {

Status set_device(int device) {
  return cuda_status(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

Status device_synchronize() {
  return cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize()");
}

Result<CudaStream> CudaStream::create() {
  cudaStream_t stream = nullptr;
  PLANNER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return CudaStream(stream);
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

Status CudaStream::synchronize() const {
  return cuda_status(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

Result<CudaEvent> CudaEvent::create(bool timing) {
  cudaEvent_t event = nullptr;
  PLANNER_CUDA_CHECK(
      cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
  return CudaEvent(event);
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

Status CudaEvent::record(cudaStream_t stream) {
  return cuda_status(cudaEventRecord(event_, stream), "cudaEventRecord");
}

Status CudaEvent::make_wait(cudaStream_t stream) const {
  return cuda_status(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent");
}

Status CudaEvent::synchronize() const {
  return cuda_status(cudaEventSynchronize(event_), "cudaEventSynchronize");
}

Result<float> CudaEvent::elapsed_ms_since(const CudaEvent& start) const {
  float ms = 0;
  PLANNER_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

}  // namespace planner::kernels::cuda
