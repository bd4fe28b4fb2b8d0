#include "planner/kernels/cuda/gemm.hpp"

#include <library_types.h>

#include <climits>
#include <string>
#include <type_traits>
#include <utility>

#include "cuda/matrix_scale.hpp"
#include "planner/kernels/cuda/check.hpp"

namespace planner::kernels::cuda {
namespace {

constexpr std::int64_t kCublasIntMax = INT_MAX;  // cuBLAS takes 32-bit sizes and strides

template <class T>
cudaDataType_t cuda_data_type();
template <>
cudaDataType_t cuda_data_type<float>() {
  return CUDA_R_32F;
}
template <>
cudaDataType_t cuda_data_type<bf16>() {
  return CUDA_R_16BF;
}
template <>
cudaDataType_t cuda_data_type<fp16>() {
  return CUDA_R_16F;
}

cublasOperation_t to_cublas(Transpose t) {
  return t == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

template <class TIn>
cublasComputeType_t compute_type(GemmOptions options) {
  if constexpr (std::is_same_v<TIn, float>) {
    return options.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  } else {
    return CUBLAS_COMPUTE_32F;
  }
}

Status check_range(const char* name, std::int64_t value, std::int64_t min) {
  if (value < min || value > kCublasIntMax) {
    return Status::invalid_input("gemm: " + std::string(name) + " must be in [" +
                                 std::to_string(min) + ", " + std::to_string(kCublasIntMax) +
                                 "], got " + std::to_string(value));
  }
  return Status::ok();
}

std::string gemm_name(const char* call, Transpose ta, Transpose tb, std::int64_t m, std::int64_t n,
                      std::int64_t k) {
  return std::string(call) + "(" + (ta == Transpose::kYes ? "T" : "N") +
         (tb == Transpose::kYes ? "T" : "N") + ", m=" + std::to_string(m) +
         ", n=" + std::to_string(n) + ", k=" + std::to_string(k) + ")";
}

}  // namespace

Result<CublasHandle> CublasHandle::create(std::size_t workspace_bytes) {
  CublasHandle handle;
  PLANNER_CUBLAS_CHECK(cublasCreate(&handle.handle_));
  // Reductions in the compute type (fp32), never in a 16-bit output type.
  PLANNER_CUBLAS_CHECK(cublasSetMathMode(
      handle.handle_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  if (workspace_bytes > 0) {
    PLANNER_RETURN_IF_ERROR(
        cuda_status(cudaMalloc(&handle.workspace_, workspace_bytes),
                    "cudaMalloc(" + std::to_string(workspace_bytes) + " bytes, cuBLAS workspace)"));
    handle.workspace_bytes_ = workspace_bytes;
  }
  return handle;
}

CublasHandle::~CublasHandle() {
  reset();
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      workspace_(std::exchange(other.workspace_, nullptr)),
      workspace_bytes_(std::exchange(other.workspace_bytes_, 0)),
      stream_(std::exchange(other.stream_, nullptr)),
      bound_(std::exchange(other.bound_, false)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
    workspace_ = std::exchange(other.workspace_, nullptr);
    workspace_bytes_ = std::exchange(other.workspace_bytes_, 0);
    stream_ = std::exchange(other.stream_, nullptr);
    bound_ = std::exchange(other.bound_, false);
  }
  return *this;
}

void CublasHandle::reset() {
  if (handle_ != nullptr) (void)cublasDestroy(handle_);
  if (workspace_ != nullptr) (void)cudaFree(workspace_);
  handle_ = nullptr;
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  stream_ = nullptr;
  bound_ = false;
}

Status CublasHandle::bind(cudaStream_t stream) {
  if (handle_ == nullptr) return Status::internal("cuBLAS call on an empty CublasHandle");
  if (bound_ && stream == stream_) return Status::ok();
  PLANNER_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  // cublasSetStream resets the workspace to cuBLAS's default pool.
  if (workspace_ != nullptr) {
    PLANNER_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, workspace_bytes_));
  }
  stream_ = stream;
  bound_ = true;
  return Status::ok();
}

Status check_gemm_arguments(Transpose trans_a, Transpose trans_b, std::int64_t m, std::int64_t n,
                            std::int64_t k, std::int64_t lda, std::int64_t ldb, std::int64_t ldc) {
  PLANNER_RETURN_IF_ERROR(check_range("m", m, 0));
  PLANNER_RETURN_IF_ERROR(check_range("n", n, 0));
  PLANNER_RETURN_IF_ERROR(check_range("k", k, 0));
  if (m == 0 || n == 0) return Status::ok();
  const std::int64_t a_cols = trans_a == Transpose::kNo ? k : m;
  const std::int64_t b_cols = trans_b == Transpose::kNo ? n : k;
  PLANNER_RETURN_IF_ERROR(check_range("lda", lda, a_cols > 1 ? a_cols : 1));
  PLANNER_RETURN_IF_ERROR(check_range("ldb", ldb, b_cols > 1 ? b_cols : 1));
  PLANNER_RETURN_IF_ERROR(check_range("ldc", ldc, n));
  return Status::ok();
}

template <class TIn, class TOut>
Status gemm(CublasHandle& handle, Transpose trans_a, Transpose trans_b, std::int64_t m,
            std::int64_t n, std::int64_t k, float alpha, const TIn* a, std::int64_t lda,
            const TIn* b, std::int64_t ldb, float beta, TOut* c, std::int64_t ldc,
            cudaStream_t stream, GemmOptions options) {
  PLANNER_RETURN_IF_ERROR(check_gemm_arguments(trans_a, trans_b, m, n, k, lda, ldb, ldc));
  if (m == 0 || n == 0) return Status::ok();
  if (k == 0) return detail::scale_matrix(m, n, ldc, beta, c, stream);
  PLANNER_RETURN_IF_ERROR(handle.bind(stream));
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  return cublas_status(
      cublasGemmEx(handle.get(), to_cublas(trans_b), to_cublas(trans_a), static_cast<int>(n),
                   static_cast<int>(m), static_cast<int>(k), &alpha, b, cuda_data_type<TIn>(),
                   static_cast<int>(ldb), a, cuda_data_type<TIn>(), static_cast<int>(lda), &beta, c,
                   cuda_data_type<TOut>(), static_cast<int>(ldc), compute_type<TIn>(options),
                   CUBLAS_GEMM_DEFAULT),
      gemm_name("cublasGemmEx", trans_a, trans_b, m, n, k));
}

template <class TIn, class TOut>
Status gemm_strided_batched(CublasHandle& handle, Transpose trans_a, Transpose trans_b,
                            std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                            const TIn* a, std::int64_t lda, std::int64_t stride_a, const TIn* b,
                            std::int64_t ldb, std::int64_t stride_b, float beta, TOut* c,
                            std::int64_t ldc, std::int64_t stride_c, std::int64_t batch,
                            cudaStream_t stream, GemmOptions options) {
  PLANNER_RETURN_IF_ERROR(check_gemm_arguments(trans_a, trans_b, m, n, k, lda, ldb, ldc));
  PLANNER_RETURN_IF_ERROR(check_range("batch", batch, 0));
  if (stride_a < 0 || stride_b < 0 || stride_c < 0) {
    return Status::invalid_input("gemm_strided_batched: strides must be >= 0");
  }
  if (m == 0 || n == 0 || batch == 0) return Status::ok();
  if (k == 0) {
    for (std::int64_t i = 0; i < batch; ++i)
      PLANNER_RETURN_IF_ERROR(detail::scale_matrix(m, n, ldc, beta, c + i * stride_c, stream));
    return Status::ok();
  }
  PLANNER_RETURN_IF_ERROR(handle.bind(stream));
  return cublas_status(
      cublasGemmStridedBatchedEx(
          handle.get(), to_cublas(trans_b), to_cublas(trans_a), static_cast<int>(n),
          static_cast<int>(m), static_cast<int>(k), &alpha, b, cuda_data_type<TIn>(),
          static_cast<int>(ldb), static_cast<long long>(stride_b), a, cuda_data_type<TIn>(),
          static_cast<int>(lda), static_cast<long long>(stride_a), &beta, c, cuda_data_type<TOut>(),
          static_cast<int>(ldc), static_cast<long long>(stride_c), static_cast<int>(batch),
          compute_type<TIn>(options), CUBLAS_GEMM_DEFAULT),
      gemm_name("cublasGemmStridedBatchedEx", trans_a, trans_b, m, n, k));
}

int cublas_version() {
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) {
    return 0;
  }
  return major * 10000 + minor * 100 + patch;
}

#define PLANNER_INSTANTIATE(TIn, TOut)                                                             \
  template Status gemm<TIn, TOut>(CublasHandle&, Transpose, Transpose, std::int64_t, std::int64_t, \
                                  std::int64_t, float, const TIn*, std::int64_t, const TIn*,       \
                                  std::int64_t, float, TOut*, std::int64_t, cudaStream_t,          \
                                  GemmOptions);                                                    \
  template Status gemm_strided_batched<TIn, TOut>(                                                 \
      CublasHandle&, Transpose, Transpose, std::int64_t, std::int64_t, std::int64_t, float,        \
      const TIn*, std::int64_t, std::int64_t, const TIn*, std::int64_t, std::int64_t, float,       \
      TOut*, std::int64_t, std::int64_t, std::int64_t, cudaStream_t, GemmOptions);
PLANNER_INSTANTIATE(float, float)
PLANNER_INSTANTIATE(bf16, bf16)
PLANNER_INSTANTIATE(bf16, float)
PLANNER_INSTANTIATE(fp16, fp16)
PLANNER_INSTANTIATE(fp16, float)
#undef PLANNER_INSTANTIATE

}  // namespace planner::kernels::cuda
