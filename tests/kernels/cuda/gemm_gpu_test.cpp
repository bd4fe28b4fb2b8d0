#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gpu_test_support.hpp"
#include "planner/kernels/cpu/gemm.hpp"
#include "planner/kernels/cuda/caching_allocator.hpp"
#include "planner/kernels/cuda/gemm.hpp"

namespace planner::kernels::cuda::testing {
namespace {

// GEMM tolerances, relative to sqrt(k) * max|a| * max|b| (the scale of an inner product's
// rounding error) with inputs in [-1, 1): fp32 accumulation in another order differs by ~1e-6 of
// that; TF32 rounds the inputs to 11 significant bits (2^-11 each); a bf16/fp16 output is one
// rounding of the fp32 result (2 u_T of its magnitude, covered by the relative part).
struct GemmTolerance {
  double scaled_abs;  // times sqrt(k)
  double rel;
};

template <class TIn, class TOut>
GemmTolerance gemm_tolerance(bool tf32) {
  if (tf32) return {2e-3, 0.0};
  const double out_rel = 2 * unit_roundoff(kDTypeOf<TOut>);
  return {1e-5, std::is_same_v<TOut, float> ? 0.0 : out_rel};
}

class CudaGemm : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    handle_ = require(CublasHandle::create(), "CublasHandle::create");
  }

  // C = alpha op(A) op(B) + beta C on the GPU in (TIn, TOut) and on the CPU in fp32, from the same
  // (rounded) inputs, with padded leading dimensions.
  template <class TIn, class TOut>
  void check(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k,
             float alpha, float beta, bool tf32 = false) {
    const std::int64_t a_rows = ta == Transpose::kNo ? m : k, a_cols = ta == Transpose::kNo ? k : m;
    const std::int64_t b_rows = tb == Transpose::kNo ? k : n, b_cols = tb == Transpose::kNo ? n : k;
    const std::int64_t lda = a_cols + 3, ldb = b_cols + 1, ldc = n + 2;
    const auto a = quantize<TIn>(random_floats(a_rows * lda, 91));
    const auto b = quantize<TIn>(random_floats(b_rows * ldb, 92));
    const auto c0 = quantize<TOut>(random_floats(m * ldc, 93));
    std::vector<float> want = c0;
    cpu::gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, want.data(), ldc);
    auto da = upload<TIn>(a, stream());
    auto db = upload<TIn>(b, stream());
    auto dc = upload<TOut>(c0, stream());
    require(gemm<TIn, TOut>(handle_, ta, tb, m, n, k, alpha, da.data(), lda, db.data(), ldb, beta,
                            dc.data(), ldc, stream(), GemmOptions{tf32}));
    const auto got = download(dc, stream());
    const GemmTolerance t = gemm_tolerance<TIn, TOut>(tf32);
    const double atol = t.scaled_abs * std::sqrt(static_cast<double>(k) + 1.0);
    cpu::testing::expect_close(got, want, t.rel, atol,
                               "gemm " + std::string(ta == Transpose::kYes ? "T" : "N") +
                                   (tb == Transpose::kYes ? "T" : "N") + " " + std::to_string(m) +
                                   "x" + std::to_string(n) + "x" + std::to_string(k) + " " +
                                   std::string(to_string(kDTypeOf<TIn>)) + "->" +
                                   std::string(to_string(kDTypeOf<TOut>)));
  }

  CublasHandle handle_;
};

TEST_F(CudaGemm, AllTransposesAndPrecisionsMatchTheCpu) {
  for (const Transpose ta : {Transpose::kNo, Transpose::kYes}) {
    for (const Transpose tb : {Transpose::kNo, Transpose::kYes}) {
      check<float, float>(ta, tb, 67, 45, 129, 1.0f, 0.0f);
      check<float, float>(ta, tb, 33, 70, 300, 0.5f, 1.0f);  // accumulate, as for dW
      check<float, float>(ta, tb, 64, 64, 512, 1.0f, 0.0f, /*tf32=*/true);
      check<bf16, bf16>(ta, tb, 50, 40, 256, 1.0f, 0.0f);
      check<bf16, float>(ta, tb, 50, 40, 256, 1.0f, 1.0f);  // bf16 inputs into an fp32 main grad
      check<fp16, fp16>(ta, tb, 31, 90, 100, 1.0f, 0.0f);
      check<fp16, float>(ta, tb, 31, 90, 100, 2.0f, 1.0f);
    }
  }
}

TEST_F(CudaGemm, KZeroScalesCAndBetaZeroIgnoresNan) {
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  auto dc = upload<float>(c, stream());
  require(gemm<float, float>(handle_, Transpose::kNo, Transpose::kNo, 2, 3, 0, 1.0f, nullptr, 1,
                             nullptr, 3, 0.5f, dc.data(), 3, stream()));
  EXPECT_EQ(download(dc, stream()), (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
  auto nan_c = upload<float>(std::vector<float>(6, NAN), stream());
  require(gemm<float, float>(handle_, Transpose::kNo, Transpose::kNo, 2, 3, 0, 1.0f, nullptr, 1,
                             nullptr, 3, 0.0f, nan_c.data(), 3, stream()));
  EXPECT_EQ(download(nan_c, stream()), std::vector<float>(6, 0.0f));
  // beta == 0 with k > 0: the NaN in C is ignored too.
  const auto a = random_floats(2 * 4, 94), b = random_floats(4 * 3, 95);
  auto da = upload<float>(a, stream());
  auto db = upload<float>(b, stream());
  auto dnan = upload<float>(std::vector<float>(6, NAN), stream());
  require(gemm<float, float>(handle_, Transpose::kNo, Transpose::kNo, 2, 3, 4, 1.0f, da.data(), 4,
                             db.data(), 3, 0.0f, dnan.data(), 3, stream()));
  std::vector<float> want(6, 0.0f);
  cpu::gemm(Transpose::kNo, Transpose::kNo, 2, 3, 4, 1.0f, a.data(), 4, b.data(), 3, 0.0f,
            want.data(), 3);
  cpu::testing::expect_close(download(dnan, stream()), want, 0.0, 1e-5, "beta 0");
}

TEST_F(CudaGemm, StridedBatchedWithASharedOperand) {
  // Four problems sharing one B (stride 0), as with one weight applied to micro-batch slices.
  const std::int64_t batch = 4, m = 20, n = 30, k = 40;
  const auto a = quantize<bf16>(random_floats(batch * m * k, 96));
  const auto b = quantize<bf16>(random_floats(k * n, 97));
  std::vector<float> want(batch * m * n, 0.0f);
  cpu::gemm_strided_batched(Transpose::kNo, Transpose::kNo, m, n, k, 1.0f, a.data(), k, m * k,
                            b.data(), n, 0, 0.0f, want.data(), n, m * n, batch);
  auto da = upload<bf16>(a, stream());
  auto db = upload<bf16>(b, stream());
  auto dc = zeros<float>(batch * m * n, stream());
  require(gemm_strided_batched<bf16, float>(handle_, Transpose::kNo, Transpose::kNo, m, n, k, 1.0f,
                                            da.data(), k, m * k, db.data(), n, 0, 0.0f, dc.data(),
                                            n, m * n, batch, stream()));
  cpu::testing::expect_close(download(dc, stream()), want, 0.0, 1e-5 * std::sqrt(k), "batched");
}

TEST_F(CudaGemm, HandleFollowsTheStream) {
  // The same handle on a second stream re-binds (cublasSetStream + workspace) and still computes.
  CudaStream other = require(CudaStream::create());
  const auto a = random_floats(8 * 8, 98);
  auto da = upload<float>(a, stream());
  auto dc = zeros<float>(64, stream());
  require(stream_synchronize(stream()));  // the zeroing must not race the other stream's GEMM
  require(gemm<float, float>(handle_, Transpose::kNo, Transpose::kNo, 8, 8, 8, 1.0f, da.data(), 8,
                             da.data(), 8, 0.0f, dc.data(), 8, other.get()));
  require(other.synchronize());
  std::vector<float> want(64, 0.0f);
  cpu::gemm(Transpose::kNo, Transpose::kNo, 8, 8, 8, 1.0f, a.data(), 8, a.data(), 8, 0.0f,
            want.data(), 8);
  cpu::testing::expect_close(download(dc, stream()), want, 0.0, 1e-5, "other stream");
  EXPECT_GT(cublas_version(), 0);
}

using CudaMemory = GpuTest;

TEST_F(CudaMemory, CachingAllocatorOnTheDevice) {
  CudaMemorySource source;
  CachingAllocator allocator(source);
  const std::int64_t n = 3 << 20;  // 12 MiB of floats
  const auto host = random_floats(n, 99);
  void* first = nullptr;
  {
    auto buffer = require(DeviceBuffer<float>::allocate(allocator, n, stream()));
    first = buffer.data();
    require(buffer.copy_from_host(host.data(), stream()));
    EXPECT_EQ(require(to_host(buffer, stream())), host);
    EXPECT_EQ(allocator.stats().in_use_bytes, CachingAllocator::size_class(n * sizeof(float)));
  }
  EXPECT_EQ(allocator.stats().in_use_bytes, 0u);
  auto again = require(DeviceBuffer<float>::allocate(allocator, n, stream()));
  EXPECT_EQ(again.data(), first) << "the cached block is reused";
  EXPECT_EQ(allocator.stats().source_allocations, 1);
  EXPECT_EQ(allocator.stats().peak_in_use_bytes, CachingAllocator::size_class(n * sizeof(float)));
  again.reset();
  require(allocator.release_cached());
  EXPECT_EQ(allocator.stats().reserved_bytes, 0u);
}

TEST_F(CudaMemory, EventsTimeWork) {
  CudaEvent start = require(CudaEvent::create());
  CudaEvent stop = require(CudaEvent::create());
  auto buffer = require(DeviceBuffer<float>::allocate(1 << 24));
  require(start.record(stream()));
  for (int i = 0; i < 10; ++i)
    require(buffer.zero(stream()));
  require(stop.record(stream()));
  require(stop.synchronize());
  const float ms = require(stop.elapsed_ms_since(start));
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 10000.0f);
}

}  // namespace
}  // namespace planner::kernels::cuda::testing
