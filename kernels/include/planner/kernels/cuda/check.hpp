// Checked CUDA runtime and cuBLAS calls: every failure becomes a planner::Status that names the
// call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string_view>

#include "planner/core/status.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

// Ok for cudaSuccess; otherwise "<call>: <error name> (<description>)". Errors meaning that this
// machine has no usable GPU (no device, no or too old a driver, no kernel image for the GPU's
// architecture) are kUnavailable and say that the cuda backend needs a GPU; the rest are kRuntime.
Status cuda_status(cudaError_t error, std::string_view call);

// Ok for CUBLAS_STATUS_SUCCESS; otherwise "<call>: <status name> (<description>)". Not initialised
// (cublasCreate without a GPU) and architecture mismatches are kUnavailable; invalid values are
// kInternal (arguments are validated before every call, so one reaching cuBLAS is a bug); the rest
// are kRuntime.
Status cublas_status(cublasStatus_t status, std::string_view call);

// The status of the last kernel launch from this thread (cudaGetLastError, which also clears a
// non-sticky error), naming the kernel: call it right after a <<<...>>> launch.
Status launch_status(std::string_view kernel);
// The same, naming the kernel with its element type, e.g. "launch of add<bf16>".
Status launch_status(std::string_view kernel, DType type);

}  // namespace planner::kernels::cuda

// Returns from the enclosing function with the Status of a failed CUDA runtime call, e.g.
// PLANNER_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream)).
#define PLANNER_CUDA_CHECK(call) \
  PLANNER_RETURN_IF_ERROR(::planner::kernels::cuda::cuda_status((call), #call))

// The same for a cuBLAS call.
#define PLANNER_CUBLAS_CHECK(call) \
  PLANNER_RETURN_IF_ERROR(::planner::kernels::cuda::cublas_status((call), #call))
