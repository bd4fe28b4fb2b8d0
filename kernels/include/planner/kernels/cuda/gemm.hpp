// GEMMs through cuBLAS (cublasGemmEx, cublasGemmStridedBatchedEx) with the row-major conventions of
// cpu/gemm.hpp, and the cuBLAS handle that owns its workspace.
//
// Precisions (TIn for A and B, TOut for C; accumulation is always fp32, CUBLAS_COMPUTE_32F):
//   float -> float       fp32; with GemmOptions::allow_tf32 the inputs are rounded to TF32
//                        (10-bit mantissa) on the tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32)
//   bf16  -> bf16/float  tensor cores, fp32 accumulation (float output for fp32 main-grad dW)
//   fp16  -> fp16/float  the same
// cuBLAS is column-major; a row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T,
// so the wrapper swaps the operands and passes the same leading dimensions.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "planner/core/status.hpp"
#include "planner/kernels/cpu/gemm.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

using Transpose = cpu::Transpose;

// A cuBLAS handle with its own workspace. cuBLAS resets a handle's workspace whenever its stream
// changes (cublasSetStream), so the handle re-binds both when a GEMM runs on another stream. One
// handle per host thread and device; move-only.
class CublasHandle {
 public:
  // 32 MiB: cuBLAS's recommended workspace on Hopper (cuBLAS documentation, "cublasSetWorkspace").
  static constexpr std::size_t kDefaultWorkspaceBytes = std::size_t{32} << 20;

  CublasHandle() = default;  // holds no handle; gemm() on it fails with kInternal
  // cublasCreate (kUnavailable without a GPU) and a workspace from cudaMalloc.
  static Result<CublasHandle> create(std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~CublasHandle();
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }
  bool empty() const { return handle_ == nullptr; }

  // Makes later cuBLAS calls on this handle run on `stream`, with this handle's workspace.
  Status bind(cudaStream_t stream);

 private:
  void reset();

  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  bool bound_ = false;
};

struct GemmOptions {
  // fp32 GEMMs only: let cuBLAS use TF32 tensor cores (about 8x the fp32 rate, ~1e-3 relative
  // error per product instead of ~1e-7).
  bool allow_tf32 = false;
};

// Checks a GEMM's sizes and leading dimensions against cpu::gemm's contract and cuBLAS's 32-bit
// limits; kInvalidInput names the argument. (Host only; gemm() calls it first.)
Status check_gemm_arguments(Transpose trans_a, Transpose trans_b, std::int64_t m, std::int64_t n,
                            std::int64_t k, std::int64_t lda, std::int64_t ldb, std::int64_t ldc);

// C = alpha * op(A) * op(B) + beta * C on `stream`, exactly the contract of cpu::gemm (row-major,
// m == 0 or n == 0 does nothing, k == 0 scales C by beta, beta == 0 ignores C's old contents).
// Instantiated for (TIn, TOut) = (float, float), (bf16, bf16), (bf16, float), (fp16, fp16),
// (fp16, float).
template <class TIn, class TOut>
Status gemm(CublasHandle& handle, Transpose trans_a, Transpose trans_b, std::int64_t m,
            std::int64_t n, std::int64_t k, float alpha, const TIn* a, std::int64_t lda,
            const TIn* b, std::int64_t ldb, float beta, TOut* c, std::int64_t ldc,
            cudaStream_t stream, GemmOptions options = {});

// `batch` GEMMs as cpu::gemm_strided_batched (strides in elements; 0 reuses an operand).
template <class TIn, class TOut>
Status gemm_strided_batched(CublasHandle& handle, Transpose trans_a, Transpose trans_b,
                            std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                            const TIn* a, std::int64_t lda, std::int64_t stride_a, const TIn* b,
                            std::int64_t ldb, std::int64_t stride_b, float beta, TOut* c,
                            std::int64_t ldc, std::int64_t stride_c, std::int64_t batch,
                            cudaStream_t stream, GemmOptions options = {});

// cuBLAS's version number (e.g. 130100 for 13.1.0), from cublasGetProperty; 0 when unknown.
int cublas_version();

}  // namespace planner::kernels::cuda
