#include "planner/kernels/cuda/check.hpp"

#include <string>

namespace planner::kernels::cuda {
namespace {

constexpr std::string_view kNeedsGpu =
    "; the cuda backend needs an NVIDIA GPU with a working driver (the cpu backend runs anywhere)";

bool means_no_usable_gpu(cudaError_t error) {
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady:
      return true;
    default:
      return false;
  }
}

// "<call>: <name> (<description>)".
std::string describe(std::string_view call, const char* name, const char* description) {
  std::string message(call);
  message += ": ";
  message += name;
  message += " (";
  message += description;
  message += ")";
  return message;
}

}  // namespace

Status cuda_status(cudaError_t error, std::string_view call) {
  if (error == cudaSuccess) return Status::ok();
  std::string message = describe(call, cudaGetErrorName(error), cudaGetErrorString(error));
  if (means_no_usable_gpu(error)) {
    message += kNeedsGpu;
    return Status::unavailable(std::move(message));
  }
  return Status::runtime(std::move(message));
}

Status cublas_status(cublasStatus_t status, std::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::ok();
  std::string message = describe(call, cublasGetStatusName(status), cublasGetStatusString(status));
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      message += kNeedsGpu;
      return Status::unavailable(std::move(message));
    case CUBLAS_STATUS_INVALID_VALUE:
      return Status::internal(std::move(message));
    default:
      return Status::runtime(std::move(message));
  }
}

Status launch_status(std::string_view kernel) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return Status::ok();
  return cuda_status(error, "launch of " + std::string(kernel));
}

Status launch_status(std::string_view kernel, DType type) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return Status::ok();
  return cuda_status(error,
                     "launch of " + std::string(kernel) + "<" + std::string(to_string(type)) + ">");
}

}  // namespace planner::kernels::cuda
