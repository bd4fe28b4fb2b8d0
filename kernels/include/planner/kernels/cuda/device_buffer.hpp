// Device memory: checked raw calls, the cudaMalloc-backed MemorySource for CachingAllocator, and
// DeviceBuffer<T>, an owning array of T in device memory (from cudaMalloc or from a
// CachingAllocator).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/kernels/cuda/caching_allocator.hpp"

namespace planner::kernels::cuda {

// cudaMalloc / cudaFree, checked. A 0-byte request returns nullptr.
Result<void*> device_malloc(std::size_t bytes);
Status device_free(void* ptr);

// Enqueues a copy of `bytes` bytes on `stream`; either side may be host or device memory
// (cudaMemcpyDefault, unified addressing). With pageable host memory the call may return only
// after the copy; synchronise the stream before reading a device-to-host result.
Status copy_async(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);

// Enqueues setting `bytes` bytes at dst to zero (0.0 in every precision here).
Status zero_async(void* dst, std::size_t bytes, cudaStream_t stream);

// Waits for all work enqueued on `stream` (cudaStreamSynchronize).
Status stream_synchronize(cudaStream_t stream);

// The free-list key of a stream.
inline StreamKey stream_key(cudaStream_t stream) {
  return reinterpret_cast<StreamKey>(stream);
}

// Plain cudaMalloc / cudaFree, for CachingAllocator.
class CudaMemorySource final : public MemorySource {
 public:
  Result<void*> allocate(std::size_t bytes) override { return device_malloc(bytes); }
  Status release(void* ptr) override { return device_free(ptr); }
};

// `count` elements of T in device memory, freed (or returned to its allocator) on destruction.
// Move-only. The contents start uninitialised.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;

  // From cudaMalloc.
  static Result<DeviceBuffer> allocate(std::int64_t count) {
    if (count < 0) return Status::invalid_input("DeviceBuffer: negative element count");
    auto ptr = device_malloc(bytes_of(count));
    if (!ptr.is_ok()) return ptr.status();
    return DeviceBuffer(static_cast<T*>(*ptr), count, nullptr);
  }

  // From a caching allocator, for use on `stream` (see caching_allocator.hpp). The allocator must
  // outlive the buffer.
  static Result<DeviceBuffer> allocate(CachingAllocator& allocator, std::int64_t count,
                                       cudaStream_t stream) {
    if (count < 0) return Status::invalid_input("DeviceBuffer: negative element count");
    auto ptr = allocator.allocate(bytes_of(count), stream_key(stream));
    if (!ptr.is_ok()) return ptr.status();
    return DeviceBuffer(static_cast<T*>(*ptr), count, &allocator);
  }

  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        allocator_(std::exchange(other.allocator_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      allocator_ = std::exchange(other.allocator_, nullptr);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::int64_t size() const { return size_; }
  std::size_t bytes() const { return bytes_of(size_); }

  // Enqueues copies between this buffer and host memory (all `size()` elements).
  Status copy_from_host(const T* host, cudaStream_t stream) {
    return copy_async(data_, host, bytes(), stream);
  }
  Status copy_to_host(T* host, cudaStream_t stream) const {
    return copy_async(host, data_, bytes(), stream);
  }
  Status zero(cudaStream_t stream) { return zero_async(data_, bytes(), stream); }

  // Frees the memory now (quietly, as the destructor does).
  void reset() {
    if (data_ != nullptr) {
      if (allocator_ != nullptr) {
        (void)allocator_->deallocate(data_);
      } else {
        (void)device_free(data_);
      }
    }
    data_ = nullptr;
    size_ = 0;
    allocator_ = nullptr;
  }

 private:
  DeviceBuffer(T* data, std::int64_t size, CachingAllocator* allocator)
      : data_(data), size_(size), allocator_(allocator) {}
  static std::size_t bytes_of(std::int64_t count) {
    return static_cast<std::size_t>(count) * sizeof(T);
  }

  T* data_ = nullptr;
  std::int64_t size_ = 0;
  CachingAllocator* allocator_ = nullptr;
};

// A new cudaMalloc buffer holding a copy of `host`, complete when this returns.
template <class T>
Result<DeviceBuffer<T>> to_device(const std::vector<T>& host, cudaStream_t stream) {
  auto buffer = DeviceBuffer<T>::allocate(static_cast<std::int64_t>(host.size()));
  if (!buffer.is_ok()) return buffer.status();
  PLANNER_RETURN_IF_ERROR(buffer->copy_from_host(host.data(), stream));
  PLANNER_RETURN_IF_ERROR(stream_synchronize(stream));
  return buffer;
}

// The buffer's contents, after the work enqueued on `stream` so far.
template <class T>
Result<std::vector<T>> to_host(const DeviceBuffer<T>& buffer, cudaStream_t stream) {
  std::vector<T> host(static_cast<std::size_t>(buffer.size()));
  PLANNER_RETURN_IF_ERROR(buffer.copy_to_host(host.data(), stream));
  PLANNER_RETURN_IF_ERROR(stream_synchronize(stream));
  return host;
}

}  // namespace planner::kernels::cuda
