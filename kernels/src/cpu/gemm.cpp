#include "planner/kernels/cpu/gemm.hpp"

#include <cblas.h>

#include <cassert>
#include <climits>

namespace planner::kernels::cpu {
namespace {

CBLAS_TRANSPOSE to_cblas(Transpose t) {
  return t == Transpose::kYes ? CblasTrans : CblasNoTrans;
}

// cblas takes 32-bit ints (the LP64 OpenBLAS shipped by Debian).
blasint to_blasint(std::int64_t v) {
  assert(v >= 0 && v <= INT_MAX);
  return static_cast<blasint>(v);
}

}  // namespace

void gemm(Transpose trans_a, Transpose trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc) {
  assert(m >= 0 && n >= 0 && k >= 0);
  if (m == 0 || n == 0) return;
  assert(lda >= (trans_a == Transpose::kNo ? k : m) && lda >= 1);
  assert(ldb >= (trans_b == Transpose::kNo ? n : k) && ldb >= 1);
  assert(ldc >= n);
  cblas_sgemm(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), to_blasint(m), to_blasint(n),
              to_blasint(k), alpha, a, to_blasint(lda), b, to_blasint(ldb), beta, c,
              to_blasint(ldc));
}

void gemm_strided_batched(Transpose trans_a, Transpose trans_b, std::int64_t m, std::int64_t n,
                          std::int64_t k, float alpha, const float* a, std::int64_t lda,
                          std::int64_t stride_a, const float* b, std::int64_t ldb,
                          std::int64_t stride_b, float beta, float* c, std::int64_t ldc,
                          std::int64_t stride_c, std::int64_t batch) {
  assert(batch >= 0);
  for (std::int64_t i = 0; i < batch; ++i) {
    gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
         c + i * stride_c, ldc);
  }
}

double gemm_flops(std::int64_t m, std::int64_t n, std::int64_t k) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

void set_blas_threads(int threads) {
  assert(threads >= 1);
  openblas_set_num_threads(threads);
}

int blas_threads() {
  return openblas_get_num_threads();
}

}  // namespace planner::kernels::cpu
