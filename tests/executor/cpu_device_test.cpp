// CpuDevice's emulation of 16-bit storage (cpu_device.hpp): inputs widened exactly, fp32 kernels,
// A results rounded once on store, fp32 arrays untouched; and ModelState's mixed-precision layout
// (16-bit model weights, fp32 master weights of the shard).
#include "planner/exec/cpu_device.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "exec_test_plans.hpp"
#include "planner/exec/model_state.hpp"
#include "planner/kernels/cpu/convert.hpp"
#include "planner/kernels/cpu/gemm.hpp"

namespace planner::exec {
namespace {

namespace cpu = kernels::cpu;

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = scale * std::sin(0.37f * static_cast<float>(i) + 0.1f);
  return v;
}

std::vector<std::uint16_t> to16(DType t, const std::vector<float>& x) {
  std::vector<std::uint16_t> out(x.size());
  const auto n = static_cast<std::int64_t>(x.size());
  if (t == DType::kBFloat16) {
    cpu::float_to_bf16(x.data(), n, out.data());
  } else {
    cpu::float_to_fp16(x.data(), n, out.data());
  }
  return out;
}

std::vector<float> from16(DType t, const std::vector<std::uint16_t>& x) {
  std::vector<float> out(x.size());
  const auto n = static_cast<std::int64_t>(x.size());
  if (t == DType::kBFloat16) {
    cpu::bf16_to_float(x.data(), n, out.data());
  } else {
    cpu::fp16_to_float(x.data(), n, out.data());
  }
  return out;
}

TEST(CpuDevice, SixteenBitTrainingOnlyWhenEmulating) {
  CpuDevice plain(0, 1);
  EXPECT_TRUE(plain.supports(Precision::kFp32));
  EXPECT_FALSE(plain.supports(Precision::kBf16));
  EXPECT_EQ(plain.set_precision(Precision::kBf16).code(), StatusCode::kInvalidInput);
  CpuDevice emulating(0, 1, true);
  EXPECT_TRUE(emulating.supports(Precision::kBf16));
  EXPECT_TRUE(emulating.supports(Precision::kFp16));
  EXPECT_FALSE(emulating.supports(Precision::kFp8));
  ASSERT_TRUE(emulating.set_precision(Precision::kBf16).is_ok());
  EXPECT_EQ(emulating.activation_type(), DType::kBFloat16);
  EXPECT_EQ(emulating.activation_bytes(), 2);
  EXPECT_NE(emulating.description().find("bf16 storage emulated"), std::string::npos);
}

// A 16-bit GEMM is the fp32 GEMM of the widened inputs, rounded once; its fp32-output form
// (weight gradients into main grads) is not rounded.
TEST(CpuDevice, SixteenBitGemmRoundsOnceOnStore) {
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    CpuDevice dev(0, 1, true);
    ASSERT_TRUE(
        dev.set_precision(t == DType::kBFloat16 ? Precision::kBf16 : Precision::kFp16).is_ok());
    const std::int64_t m = 5, n = 7, k = 9;
    const auto a16 = to16(t, ramp(m * k, 1.5f));
    const auto b16 = to16(t, ramp(k * n, 0.7f));
    const auto a = from16(t, a16);
    const auto b = from16(t, b16);
    std::vector<float> ref(m * n, 0.0f);
    cpu::gemm(Transpose::kNo, Transpose::kNo, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f,
              ref.data(), n);
    std::vector<std::uint16_t> c16(m * n);
    dev.gemm(Transpose::kNo, Transpose::kNo, m, n, k, 1.0f, a16.data(), k, b16.data(), n, 0.0f,
             c16.data(), n);
    EXPECT_EQ(c16, to16(t, ref));
    std::vector<float> c32(m * n, 1.0f);
    dev.gemm_fp32_out(Transpose::kNo, Transpose::kNo, m, n, k, 1.0f, a16.data(), k, b16.data(), n,
                      1.0f, c32.data(), n);
    for (std::size_t i = 0; i < c32.size(); ++i)
      EXPECT_EQ(c32[i], ref[i] + 1.0f);
  }
}

TEST(CpuDevice, InPlaceAndAccumulatingOutputsKeepTheirValues) {
  CpuDevice dev(0, 1, true);
  ASSERT_TRUE(dev.set_precision(Precision::kBf16).is_ok());
  const DType t = DType::kBFloat16;
  // bias_add is in place: x[r, c] += bias[c], rounded.
  auto x16 = to16(t, ramp(12, 3.0f));
  const auto bias16 = to16(t, ramp(4, 0.01f));
  const auto x = from16(t, x16);
  const auto bias = from16(t, bias16);
  dev.bias_add(x16.data(), bias16.data(), 3, 4);
  for (std::size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(from16(t, {x16[i]})[0], from16(t, to16(t, {x[i] + bias[i % 4]}))[0]);
  // bias_backward reads 16-bit gradients into an fp32 sum that is not rounded.
  std::vector<float> dbias(4, 0.5f);
  dev.bias_backward(x16.data(), 3, 4, dbias.data());
  const auto xs = from16(t, x16);
  for (int c = 0; c < 4; ++c)
    EXPECT_EQ(dbias[static_cast<std::size_t>(c)], 0.5f + xs[static_cast<std::size_t>(c)] +
                                                      xs[static_cast<std::size_t>(4 + c)] +
                                                      xs[static_cast<std::size_t>(8 + c)]);
}

TEST(CpuDevice, AdamUpdatesFp32MastersAndRefreshesTheModelCopy) {
  CpuDevice dev(0, 1, true);
  ASSERT_TRUE(dev.set_precision(Precision::kFp16).is_ok());
  std::vector<float> grad = ramp(8, 0.1f), param = ramp(8, 1.0f), m(8, 0.0f), v(8, 0.0f);
  std::vector<float> ref_param = param, ref_m = m, ref_v = v;
  AdamConfig cfg;
  cpu::adam_step(cfg, 1, 8, 1.0f, grad.data(), ref_param.data(), ref_m.data(), ref_v.data());
  std::vector<std::uint16_t> model(8);
  dev.adam_step(cfg, 1, 8, 1.0f, grad.data(), param.data(), m.data(), v.data(), model.data());
  EXPECT_EQ(param, ref_param);
  EXPECT_EQ(model, to16(DType::kFloat16, ref_param));
  // Loss scaling's unscale-and-check on fp32 main grads: flags inf, never clears.
  std::int32_t flag = 0;
  dev.unscale_and_check(grad.data(), 8, 0.5f, &flag);
  EXPECT_EQ(flag, 0);
  grad[3] = INFINITY;
  dev.unscale_and_check(grad.data(), 8, 0.5f, &flag);
  EXPECT_EQ(flag, 1);
}

// Mixed precision: 16-bit model weights hold the fp32 initial values rounded, and the fp32
// masters cover this rank's ZeRO shard only.
TEST(ModelStateMixed, SixteenBitWeightsAndShardedFp32Masters) {
  class Half final : public Communicator {
   public:
    explicit Half(int rank) : rank_(rank) {}
    const std::string& axes() const override { return axes_; }
    const std::vector<int>& ranks() const override { return ranks_; }
    int rank() const override { return rank_; }
    Result<Ticket> all_reduce(void*, std::int64_t, DType, ReduceOp, std::string_view) override {
      return Status::internal("unused");
    }
    Result<Ticket> all_gather(const void*, void*, std::int64_t, DType, std::string_view) override {
      return Status::internal("unused");
    }
    Result<Ticket> reduce_scatter(const void*, void*, std::int64_t, DType, ReduceOp,
                                  std::string_view) override {
      return Status::internal("unused");
    }
    Result<Ticket> all_to_all(const void*, void*, std::int64_t, DType, std::string_view) override {
      return Status::internal("unused");
    }
    Result<Ticket> all_to_all_v(const void*, const std::vector<std::int64_t>&, void*,
                                const std::vector<std::int64_t>&, DType,
                                std::string_view) override {
      return Status::internal("unused");
    }
    Result<Ticket> broadcast(void*, std::int64_t, DType, int, std::string_view) override {
      return Status::internal("unused");
    }
    Result<Ticket> send(const void*, std::int64_t, DType, int, std::uint32_t,
                        std::string_view) override {
      return Status::internal("unused");
    }
    Result<Ticket> recv(void*, std::int64_t, DType, int, std::uint32_t, std::string_view) override {
      return Status::internal("unused");
    }

   private:
    std::string axes_ = "dp";
    std::vector<int> ranks_ = {0, 1};
    int rank_;
  };
  ModelState::Config c;
  c.model = testing::gpt_test_model();
  c.seed = 5;
  CpuDevice dev32(0, 1);
  auto fp32 = ModelState::create(dev32, c);
  ASSERT_TRUE(fp32) << fp32.status().message();
  for (int rank : {0, 1}) {
    Half dp(rank);
    ModelState::Config mc = c;
    mc.parallel.dp = 2;
    mc.parallel.zero_stage = 1;
    mc.dp = &dp;
    mc.weight_type = DType::kBFloat16;
    CpuDevice dev(0, 1, true);
    ASSERT_TRUE(dev.set_precision(Precision::kBf16).is_ok());
    auto mixed = ModelState::create(dev, mc);
    ASSERT_TRUE(mixed) << mixed.status().message();
    EXPECT_TRUE((*mixed)->mixed());
    for (std::size_t g = 0; g < (*mixed)->groups().size(); ++g) {
      const ParamGroup& grp = (*mixed)->groups()[g];
      const ParamGroup& ref = (*fp32)->groups()[g];
      ASSERT_EQ(grp.elements, ref.elements);
      EXPECT_TRUE(grp.sharded);
      EXPECT_EQ(grp.param.bytes(), std::max<std::int64_t>(1, grp.shard()) * 4);
      EXPECT_EQ(grp.model.bytes(), grp.padded * 2);
      const auto* w = static_cast<const std::uint16_t*>(grp.model.data());
      for (std::int64_t i = 0; i < grp.elements; ++i)
        ASSERT_EQ(w[i], cpu::float_to_bf16(ref.param.f32()[i])) << i;
      for (std::int64_t i = grp.shard_begin; i < grp.shard_end; ++i)
        ASSERT_EQ((*mixed)->master(grp)[i - grp.shard_begin], ref.param.f32()[i]) << i;
    }
    EXPECT_EQ((*mixed)->param(0), nullptr);  // no full fp32 weights in mixed precision
  }
}

}  // namespace
}  // namespace planner::exec
