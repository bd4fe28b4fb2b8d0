// Single-precision GEMM on the CPU through OpenBLAS (cblas_sgemm), and control of OpenBLAS's
// threads.
//
// Conventions shared by all of planner::kernels::cpu (a CUDA version mirrors these signatures):
// - fp32 data on raw pointers, row-major, sizes and strides in elements (std::int64_t); a leading
//   dimension `ld` is the distance in elements between the starts of consecutive rows.
// - Outputs and saved state live in caller-provided buffers. Activation gradients are written
//   (overwritten), except attention_backward's, which accumulate for context parallelism; parameter
//   gradients are accumulated (+=), so micro-batches add up in place.
// - Preconditions are the caller's contract (checked by assert in debug builds); kernels cannot
//   fail and keep no state between calls.
// - Deterministic: the same inputs and the same OpenBLAS thread count give bit-identical results;
//   every reduction sums in an order fixed by the code, never by the data or thread timing.
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

enum class Transpose { kNo, kYes };

// C = alpha * op(A) * op(B) + beta * C, with op(A) of shape m x k, op(B) of shape k x n, C of shape
// m x n.
//   A: m x k with lda >= k when trans_a == kNo; k x m with lda >= m when kYes.
//   B: k x n with ldb >= n when trans_b == kNo; n x k with ldb >= k when kYes.
//   C: m x n with ldc >= n. With beta == 0, C is overwritten (its old contents, even NaN, are
//   ignored).
// m, n, k >= 0; m == 0 or n == 0 does nothing; k == 0 scales C by beta. C must not overlap A or B.
void gemm(Transpose trans_a, Transpose trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc);

// `batch` independent GEMMs as above; problem i uses a + i * stride_a, b + i * stride_b and
// c + i * stride_c (strides in elements; stride 0 reuses one operand for every problem, e.g. a
// shared weight). The C matrices must not overlap each other.
void gemm_strided_batched(Transpose trans_a, Transpose trans_b, std::int64_t m, std::int64_t n,
                          std::int64_t k, float alpha, const float* a, std::int64_t lda,
                          std::int64_t stride_a, const float* b, std::int64_t ldb,
                          std::int64_t stride_b, float beta, float* c, std::int64_t ldc,
                          std::int64_t stride_c, std::int64_t batch);

// Floating-point operations of one GEMM as above: 2 m n k (multiply and add counted separately).
double gemm_flops(std::int64_t m, std::int64_t n, std::int64_t k);

// Number of threads OpenBLAS uses for every later BLAS call in this process (threads >= 1). Several
// ranks on one node should share its cores: e.g. two MPI ranks on two cores each call
// set_blas_threads(1), otherwise each rank's GEMMs start one thread per core and they
// oversubscribe.
void set_blas_threads(int threads);
int blas_threads();

}  // namespace planner::kernels::cpu
