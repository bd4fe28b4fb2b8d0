// Host-side behaviour of the CUDA backend that CI checks without a GPU: how CUDA and cuBLAS errors
// become Statuses, and what the entry points say on a machine with no device.
#include "planner/kernels/cuda/check.hpp"

#include <gtest/gtest.h>

#include <string>

#include "planner/kernels/cuda/device_buffer.hpp"
#include "planner/kernels/cuda/dtype.hpp"
#include "planner/kernels/cuda/gemm.hpp"
#include "planner/kernels/cuda/stream.hpp"
#include "planner/kernels/device_info.hpp"

namespace planner::kernels::cuda {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CudaStatus, OkForSuccess) {
  EXPECT_TRUE(cuda_status(cudaSuccess, "cudaMalloc").is_ok());
  EXPECT_TRUE(cublas_status(CUBLAS_STATUS_SUCCESS, "cublasGemmEx").is_ok());
}

TEST(CudaStatus, NamesTheCallAndTheError) {
  const Status s = cuda_status(cudaErrorMemoryAllocation, "cudaMalloc(4096 bytes)");
  EXPECT_EQ(s.code(), StatusCode::kRuntime);
  EXPECT_TRUE(contains(s.message(), "cudaMalloc(4096 bytes): cudaErrorMemoryAllocation"))
      << s.message();
  EXPECT_TRUE(contains(s.message(), "out of memory")) << s.message();
  EXPECT_EQ(s.exit_code(), 1);
}

TEST(CudaStatus, NoUsableGpuIsUnavailableAndSaysTheBackendNeedsOne) {
  for (cudaError_t e : {cudaErrorNoDevice, cudaErrorInsufficientDriver,
                        cudaErrorNoKernelImageForDevice, cudaErrorStubLibrary}) {
    const Status s = cuda_status(e, "cudaGetDeviceCount");
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.message();
    EXPECT_TRUE(contains(s.message(), "cudaGetDeviceCount: ")) << s.message();
    EXPECT_TRUE(contains(s.message(), "needs an NVIDIA GPU")) << s.message();
  }
  // A launch failure on a working GPU is a runtime error.
  EXPECT_EQ(cuda_status(cudaErrorLaunchFailure, "launch of add<f32>").code(), StatusCode::kRuntime);
}

TEST(CublasStatus, MapsStatusesToCodes) {
  const Status no_gpu = cublas_status(CUBLAS_STATUS_NOT_INITIALIZED, "cublasCreate");
  EXPECT_EQ(no_gpu.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(contains(no_gpu.message(), "cublasCreate: CUBLAS_STATUS_NOT_INITIALIZED"))
      << no_gpu.message();
  EXPECT_EQ(cublas_status(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmEx").code(),
            StatusCode::kInternal);
  const Status failed = cublas_status(CUBLAS_STATUS_EXECUTION_FAILED, "cublasGemmEx(NN)");
  EXPECT_EQ(failed.code(), StatusCode::kRuntime);
  EXPECT_TRUE(contains(failed.message(), "cublasGemmEx(NN): CUBLAS_STATUS_EXECUTION_FAILED"));
}

TEST(CudaStatus, CheckMacroReturnsTheFailure) {
  const auto f = []() -> Status {
    PLANNER_CUDA_CHECK(cudaErrorInvalidValue);
    return Status::internal("not reached");
  };
  const Status s = f();
  EXPECT_EQ(s.code(), StatusCode::kRuntime);
  EXPECT_TRUE(contains(s.message(), "cudaErrorInvalidValue: cudaErrorInvalidValue")) << s.message();
}

TEST(DType, NamesAndSizes) {
  EXPECT_EQ(to_string(DType::kF32), "f32");
  EXPECT_EQ(to_string(kDTypeOf<bf16>), "bf16");
  EXPECT_EQ(to_string(kDTypeOf<fp16>), "f16");
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
}

// On a machine without a GPU (CI), the entry points fail with kUnavailable naming the call, and
// never crash or hang. With a GPU these tests do not apply.
class WithoutDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaInventory inventory = cuda_inventory();
    if (!inventory.devices.empty()) GTEST_SKIP() << "a CUDA device is present";
  }
};

TEST_F(WithoutDevice, DeviceMemorySaysTheBackendNeedsAGpu) {
  const auto buffer = DeviceBuffer<float>::allocate(1024);
  ASSERT_FALSE(buffer.is_ok());
  EXPECT_EQ(buffer.status().code(), StatusCode::kUnavailable) << buffer.status().message();
  EXPECT_TRUE(contains(buffer.status().message(), "cudaMalloc(4096 bytes)"))
      << buffer.status().message();
}

TEST_F(WithoutDevice, CublasHandleAndStreamFailCleanly) {
  const auto handle = CublasHandle::create();
  ASSERT_FALSE(handle.is_ok());
  EXPECT_TRUE(contains(handle.status().message(), "cublasCreate")) << handle.status().message();
  const auto stream = CudaStream::create();
  ASSERT_FALSE(stream.is_ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kUnavailable) << stream.status().message();
}

}  // namespace
}  // namespace planner::kernels::cuda
