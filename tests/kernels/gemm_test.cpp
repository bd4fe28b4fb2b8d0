#include "planner/kernels/cpu/gemm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_support.hpp"

namespace planner::kernels::cpu {
namespace {

using testing::random_floats;

// C = alpha op(A) op(B) + beta C in double, same layout rules as gemm().
std::vector<double> reference_gemm(Transpose ta, Transpose tb, int m, int n, int k, double alpha,
                                   const std::vector<float>& a, int lda,
                                   const std::vector<float>& b, int ldb, double beta,
                                   const std::vector<float>& c, int ldc) {
  std::vector<double> out(c.begin(), c.end());
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) {
        const double av = ta == Transpose::kNo ? a[i * lda + p] : a[p * lda + i];
        const double bv = tb == Transpose::kNo ? b[p * ldb + j] : b[j * ldb + p];
        s += av * bv;
      }
      out[i * ldc + j] = alpha * s + (beta == 0 ? 0.0 : beta * c[i * ldc + j]);
    }
  }
  return out;
}

TEST(Gemm, AllTransposesWithPaddedLeadingDimensions) {
  const int m = 13, n = 7, k = 21;
  for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
    for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
      const int lda = (ta == Transpose::kNo ? k : m) + 3;
      const int ldb = (tb == Transpose::kNo ? n : k) + 5;
      const int ldc = n + 2;
      const auto a =
          random_floats(static_cast<std::size_t>((ta == Transpose::kNo ? m : k) * lda), 1);
      const auto b =
          random_floats(static_cast<std::size_t>((tb == Transpose::kNo ? k : n) * ldb), 2);
      auto c = random_floats(static_cast<std::size_t>(m * ldc), 3);
      const auto want = reference_gemm(ta, tb, m, n, k, 0.75, a, lda, b, ldb, -0.5, c, ldc);
      gemm(ta, tb, m, n, k, 0.75f, a.data(), lda, b.data(), ldb, -0.5f, c.data(), ldc);
      testing::expect_close(c, want, 1e-5, 1e-5, "gemm");
    }
  }
}

TEST(Gemm, BetaZeroIgnoresNaNInC) {
  const int m = 4, n = 5, k = 3;
  const auto a = random_floats(m * k, 4);
  const auto b = random_floats(k * n, 5);
  std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
  gemm(Transpose::kNo, Transpose::kNo, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  const auto want = reference_gemm(Transpose::kNo, Transpose::kNo, m, n, k, 1, a, k, b, n, 0,
                                   std::vector<float>(m * n, 0.0f), n);
  testing::expect_close(c, want, 1e-6, 1e-6, "beta = 0");
}

TEST(Gemm, EmptyProblems) {
  std::vector<float> c = {1, 2, 3, 4};
  gemm(Transpose::kNo, Transpose::kNo, 0, 2, 2, 1.0f, nullptr, 2, nullptr, 2, 0.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{1, 2, 3, 4}));
  // k == 0: C = beta C.
  const std::vector<float> unused(4, 1.0f);
  gemm(Transpose::kNo, Transpose::kNo, 2, 2, 0, 1.0f, unused.data(), 1, unused.data(), 2, 2.0f,
       c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{2, 4, 6, 8}));
}

TEST(Gemm, StridedBatchedMatchesLoopAndSharesAZeroStrideOperand) {
  const int m = 6, n = 9, k = 5, batch = 3;
  const auto a = random_floats(static_cast<std::size_t>(batch * m * k), 6);
  const auto w = random_floats(static_cast<std::size_t>(n * k), 7);  // shared, used transposed
  auto c = random_floats(static_cast<std::size_t>(batch * m * n), 8);
  std::vector<double> want;
  for (int i = 0; i < batch; ++i) {
    const std::vector<float> ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
    const std::vector<float> ci(c.begin() + i * m * n, c.begin() + (i + 1) * m * n);
    const auto r =
        reference_gemm(Transpose::kNo, Transpose::kYes, m, n, k, 1.0, ai, k, w, k, 1.0, ci, n);
    want.insert(want.end(), r.begin(), r.end());
  }
  gemm_strided_batched(Transpose::kNo, Transpose::kYes, m, n, k, 1.0f, a.data(), k, m * k, w.data(),
                       k, 0, 1.0f, c.data(), n, m * n, batch);
  testing::expect_close(c, want, 1e-5, 1e-5, "strided batched");
}

TEST(Gemm, FlopCountAndThreadControl) {
  EXPECT_DOUBLE_EQ(gemm_flops(2, 3, 4), 48.0);
  const int before = blas_threads();
  set_blas_threads(1);
  EXPECT_EQ(blas_threads(), 1);
  set_blas_threads(before);
  EXPECT_EQ(blas_threads(), before);
}

}  // namespace
}  // namespace planner::kernels::cpu
