// DeviceBuffer: device memory owned by the executor, returned to its Device when destroyed.
#pragma once

#include <cstdint>
#include <utility>

#include "planner/core/status.hpp"
#include "planner/exec/device.hpp"

namespace planner::exec {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `what` names the tensor in out-of-memory errors.
  static Result<DeviceBuffer> allocate(Device& device, std::int64_t bytes, const char* what) {
    PLANNER_ASSIGN_OR_RETURN(void* p, device.allocate(bytes, what));
    return DeviceBuffer(&device, p, bytes);
  }
  static Result<DeviceBuffer> floats(Device& device, std::int64_t count, const char* what) {
    return allocate(device, count * static_cast<std::int64_t>(sizeof(float)), what);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : device_(o.device_), data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = o.device_;
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = o.bytes_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  void reset() {
    if (data_ != nullptr) device_->deallocate(data_, bytes_);
    data_ = nullptr;
    bytes_ = 0;
  }
  bool empty() const { return data_ == nullptr; }
  std::int64_t bytes() const { return bytes_; }
  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }
  double* f64() const { return static_cast<double*>(data_); }
  std::int32_t* i32() const { return static_cast<std::int32_t*>(data_); }
  std::int64_t* i64() const { return static_cast<std::int64_t*>(data_); }

 private:
  DeviceBuffer(Device* device, void* data, std::int64_t bytes)
      : device_(device), data_(data), bytes_(bytes) {}
  Device* device_ = nullptr;
  void* data_ = nullptr;
  std::int64_t bytes_ = 0;
};

}  // namespace planner::exec
