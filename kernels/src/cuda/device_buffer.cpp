#include "planner/kernels/cuda/device_buffer.hpp"

#include <string>

#include "planner/kernels/cuda/check.hpp"

namespace planner::kernels::cuda {

Result<void*> device_malloc(std::size_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  void* ptr = nullptr;
  PLANNER_RETURN_IF_ERROR(
      cuda_status(cudaMalloc(&ptr, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)"));
  return ptr;
}

Status device_free(void* ptr) {
  return cuda_status(cudaFree(ptr), "cudaFree");
}

Status copy_async(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return Status::ok();
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream),
                     "cudaMemcpyAsync(" + std::to_string(bytes) + " bytes)");
}

Status zero_async(void* dst, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return Status::ok();
  return cuda_status(cudaMemsetAsync(dst, 0, bytes, stream),
                     "cudaMemsetAsync(" + std::to_string(bytes) + " bytes)");
}

Status stream_synchronize(cudaStream_t stream) {
  return cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

}  // namespace planner::kernels::cuda
