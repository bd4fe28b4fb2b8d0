// Argument checks of the CUDA kernels: they run on the host before anything is enqueued, so CI
// checks them without a GPU (null device pointers are never touched). Empty problems return ok
// without launching anything.
#include <gtest/gtest.h>

#include <string>

#include "planner/kernels/cuda/activation.hpp"
#include "planner/kernels/cuda/adam.hpp"
#include "planner/kernels/cuda/attention.hpp"
#include "planner/kernels/cuda/cross_entropy.hpp"
#include "planner/kernels/cuda/elementwise.hpp"
#include "planner/kernels/cuda/embedding.hpp"
#include "planner/kernels/cuda/gemm.hpp"
#include "planner/kernels/cuda/loss_scale.hpp"
#include "planner/kernels/cuda/norm.hpp"
#include "planner/kernels/cuda/rng.hpp"
#include "planner/kernels/cuda/rope.hpp"

namespace planner::kernels::cuda {
namespace {

constexpr cudaStream_t kStream = nullptr;

void expect_invalid(const Status& s, const std::string& mentions) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput) << s.message();
  EXPECT_NE(s.message().find(mentions), std::string::npos)
      << "'" << s.message() << "' should mention '" << mentions << "'";
}

AttentionShape valid_shape() {
  AttentionShape s;
  s.batch = 2;
  s.heads = 8;
  s.kv_heads = 2;
  s.head_dim = 128;
  s.q_len = 100;
  s.kv_len = 100;
  s.scale = cpu::attention_default_scale(128);
  return s;
}

TEST(CudaArguments, AttentionShape) {
  EXPECT_TRUE(check_attention_shape(valid_shape()).is_ok());
  AttentionShape s = valid_shape();
  s.kv_heads = 3;
  expect_invalid(check_attention_shape(s), "kv_heads (3) must divide heads (8)");
  s = valid_shape();
  s.head_dim = 257;
  expect_invalid(check_attention_shape(s), "head_dim must be <= 256, got 257");
  s.head_dim = 256;  // the largest supported, e.g. Gemma; Megatron's 1T model uses 160
  EXPECT_TRUE(check_attention_shape(s).is_ok());
  s = valid_shape();
  s.q_offset = -1;
  expect_invalid(check_attention_shape(s), "q_offset must be >= 0");
  s = valid_shape();
  s.batch = 10000;  // 80000 (batch, head) blocks > gridDim.y
  expect_invalid(check_attention_shape(s), "batch * heads needs 80000 thread blocks");
  s = valid_shape();
  s.heads = 0;
  expect_invalid(attention_forward<float>(s, nullptr, nullptr, nullptr, nullptr, nullptr, kStream),
                 "heads must be >= 1");
  expect_invalid(attention_backward<bf16>(s, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                          nullptr, nullptr, nullptr, kStream),
                 "heads must be >= 1");
  expect_invalid(attention_combine<fp16>(10, 300, nullptr, nullptr, nullptr, nullptr, kStream),
                 "head_dim must be <= 256");
  expect_invalid(attention_backward_delta<float>(-1, 64, nullptr, nullptr, nullptr, kStream),
                 "rows must be >= 0");
}

TEST(CudaArguments, EmptyProblemsDoNothing) {
  AttentionShape s = valid_shape();
  s.q_len = 0;
  EXPECT_TRUE(
      attention_forward<float>(s, nullptr, nullptr, nullptr, nullptr, nullptr, kStream).is_ok());
  s.batch = 0;
  EXPECT_TRUE(attention_backward<float>(s, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                        nullptr, nullptr, nullptr, kStream)
                  .is_ok());
  EXPECT_TRUE(add<float>(nullptr, nullptr, 0, nullptr, kStream).is_ok());
  EXPECT_TRUE(gelu_forward<bf16>(nullptr, 0, nullptr, kStream).is_ok());
  EXPECT_TRUE(layernorm_forward<fp16>(nullptr, nullptr, nullptr, 0, 64, 1e-5f, nullptr, nullptr,
                                      nullptr, kStream)
                  .is_ok());
  EXPECT_TRUE(embedding_backward<float>(nullptr, 0, nullptr, 0, 10, 8, nullptr, kStream).is_ok());
  EXPECT_TRUE(
      cross_entropy_forward<float>(nullptr, 0, 10, nullptr, nullptr, nullptr, kStream).is_ok());
  CublasHandle empty;
  const Status empty_gemm = gemm<float, float>(empty, Transpose::kNo, Transpose::kNo, 0, 5, 5, 1.0f,
                                               nullptr, 5, nullptr, 5, 0.0f, nullptr, 5, kStream);
  EXPECT_TRUE(empty_gemm.is_ok());
}

TEST(CudaArguments, Gemm) {
  EXPECT_TRUE(check_gemm_arguments(Transpose::kNo, Transpose::kNo, 4, 5, 6, 6, 5, 5).is_ok());
  EXPECT_TRUE(check_gemm_arguments(Transpose::kYes, Transpose::kYes, 4, 5, 6, 4, 6, 5).is_ok());
  expect_invalid(check_gemm_arguments(Transpose::kNo, Transpose::kNo, 4, 5, 6, 5, 5, 5),
                 "lda must be in [6,");
  expect_invalid(check_gemm_arguments(Transpose::kYes, Transpose::kNo, 4, 5, 6, 3, 5, 5),
                 "lda must be in [4,");
  expect_invalid(check_gemm_arguments(Transpose::kNo, Transpose::kYes, 4, 5, 6, 6, 5, 5),
                 "ldb must be in [6,");
  expect_invalid(check_gemm_arguments(Transpose::kNo, Transpose::kNo, 4, 5, 6, 6, 5, 4),
                 "ldc must be in [5,");
  expect_invalid(check_gemm_arguments(Transpose::kNo, Transpose::kNo, -1, 5, 6, 6, 5, 5),
                 "m must be in [0,");
  expect_invalid(
      check_gemm_arguments(Transpose::kNo, Transpose::kNo, std::int64_t{1} << 31, 5, 6, 6, 5, 5),
      "m must be in [0, 2147483647]");
  CublasHandle empty;
  const Status s = gemm<bf16, float>(empty, Transpose::kNo, Transpose::kNo, 4, 5, 6, 1.0f, nullptr,
                                     6, nullptr, 5, 0.0f, nullptr, 5, kStream);
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.message();
  EXPECT_NE(s.message().find("empty CublasHandle"), std::string::npos) << s.message();
  expect_invalid(gemm_strided_batched<float, float>(empty, Transpose::kNo, Transpose::kNo, 4, 5, 6,
                                                    1.0f, nullptr, 6, -1, nullptr, 5, 0, 0.0f,
                                                    nullptr, 5, 20, 3, kStream),
                 "strides must be >= 0");
}

TEST(CudaArguments, ElementwiseActivationNormAndLoss) {
  expect_invalid(add<float>(nullptr, nullptr, -1, nullptr, kStream), "add: n must be >= 0, got -1");
  expect_invalid(axpy<bf16>(-2, 1.0f, nullptr, nullptr, kStream), "axpy: n must be >= 0");
  expect_invalid(bias_backward<float>(nullptr, 3, -1, nullptr, kStream), "cols must be >= 0");
  expect_invalid(sum_of_squares<float>(nullptr, -1, nullptr, nullptr, kStream), "n must be >= 0");
  expect_invalid(swiglu_forward<float>(nullptr, nullptr, 4, 8, 7, nullptr, kStream),
                 "ld_in must be >= 8, got 7");
  expect_invalid(layernorm_forward<float>(nullptr, nullptr, nullptr, 4, 0, 1e-5f, nullptr, nullptr,
                                          nullptr, kStream),
                 "dim must be >= 1");
  expect_invalid(
      rmsnorm_backward<bf16>(nullptr, nullptr, nullptr, nullptr, -3, 8, nullptr, nullptr, kStream),
      "rows must be >= 0");
  expect_invalid(cross_entropy_forward<float>(nullptr, 4, 0, nullptr, nullptr, nullptr, kStream),
                 "vocab must be >= 1");
  expect_invalid(cross_entropy_local_max<fp16>(nullptr, -1, 10, nullptr, kStream),
                 "tokens must be >= 0");
  expect_invalid(unscale_and_check<fp16>(nullptr, -1, 1.0f, nullptr, kStream), "n must be >= 0");
  AdamConfig config;
  expect_invalid(
      adam_step<float>(config, 0, 10, 1.0f, nullptr, nullptr, nullptr, nullptr, nullptr, kStream),
      "adam_step: step must be >= 1, got 0");
}

TEST(CudaArguments, EmbeddingRopeAndRng) {
  expect_invalid(embedding_forward<float>(nullptr, -1, nullptr, 0, 10, 8, nullptr, kStream),
                 "tokens must be >= 0");
  expect_invalid(rope_forward<float>(nullptr, 1, 4, 2, 7, nullptr, kStream),
                 "head_dim must be even, got 7");
  expect_invalid(rope_table(nullptr, 4, 8, 0.0, nullptr, kStream), "theta must be > 0");
  expect_invalid(fill_tokens(1, 2, 0, 10, 0, nullptr, kStream), "vocab must be >= 1");
  expect_invalid(fill_tokens(1, 2, 0, 10, std::int64_t{1} << 31, nullptr, kStream),
                 "vocab must be <= 2^31 - 1");
  expect_invalid(fill_normal_block(1, 2, 10, 0, 6, 2, 5, 0.0f, 1.0f, nullptr, kStream),
                 "full_cols must be >= 11, got 10");
}

}  // namespace
}  // namespace planner::kernels::cuda
