// The compute model against the reference measurements and its own contract.
#include "planner/sim/compute_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "planner/core/catalog.hpp"
#include "planner/core/host_model.hpp"

namespace planner::sim {
namespace {

const HardwareProfile& preset(const char* gpu) {
  const HardwareProfile* p = builtin_profile_for(*builtin_catalog().find_gpu(gpu));
  if (p == nullptr) throw std::runtime_error(std::string("no profile for ") + gpu);
  return *p;
}

OpDesc gemm(std::int64_t m, std::int64_t n, std::int64_t k, Precision p = Precision::kBf16,
            std::int64_t batch = 1) {
  OpDesc d;
  d.kind = OpKind::kGemm;
  d.precision = p;
  d.m = m;
  d.n = n;
  d.k = k;
  d.batch = batch;
  d.flops = Flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                  static_cast<double>(batch));
  const std::int64_t e = bytes_per_element(p);
  d.bytes_read = Bytes(batch * (m * k + k * n) * e);
  d.bytes_written = Bytes(batch * m * n * e);
  return d;
}

double tflops(const ComputeModel& model, const OpDesc& d) {
  return d.flops.raw() / to_seconds(model.op_time(d, false)) / 1e12;
}

// Square GEMMs on A100 relative to 8192^3, as Azure's cuBLASLt measured them (reference data
// hardware_specs.json: 228.0, 253.7, 256.5 TFLOP/s at 4096^3, 8192^3, 16384^3).
TEST(ComputeModel, SquareGemmScalingMatchesA100Measurements) {
  const ComputeModel model(preset("A100"));
  const double r4 = tflops(model, gemm(4096, 4096, 4096));
  const double r8 = tflops(model, gemm(8192, 8192, 8192));
  const double r16 = tflops(model, gemm(16384, 16384, 16384));
  EXPECT_NEAR(r4 / r8, 228.0 / 253.7, 0.05);
  EXPECT_NEAR(r16 / r8, 256.5 / 253.7, 0.02);
  // Large GEMMs saturate at the profile's rate.
  const double rate = preset("A100").compute.gemm_rate(Precision::kBf16).rate.raw() / 1e12;
  EXPECT_GT(r16, 0.97 * rate);
  EXPECT_LE(r16, rate);
}

// Small and skinny GEMMs run far below the asymptotic rate (partial waves, padding, fixed cost).
TEST(ComputeModel, SmallAndSkinnyGemmsAreLessEfficient) {
  const ComputeModel model(preset("H100"));
  const double big = tflops(model, gemm(8192, 8192, 8192));
  EXPECT_LT(tflops(model, gemm(512, 512, 512)), 0.3 * big);
  EXPECT_LT(tflops(model, gemm(16, 8192, 8192)), 0.2 * big);  // memory-bound
  // Wave quantisation: one tile more than a full wave costs a whole extra wave.
  const HardwareProfile& p = preset("H100");
  const std::int64_t tiles_m = p.compute.sm_count / 2;  // x 2 tiles of 128 x 256 = one wave
  const Time one_wave = model.gemm_time(gemm(128 * tiles_m, 512, 8192));
  const Time one_more = model.gemm_time(gemm(128 * (tiles_m + 1), 512, 8192));
  EXPECT_GT(to_seconds(one_more), 1.5 * to_seconds(one_wave));
}

TEST(ComputeModel, PrecisionsUseTheirRates) {
  const ComputeModel model(preset("H100"));
  EXPECT_GT(tflops(model, gemm(8192, 8192, 8192, Precision::kFp8)),
            1.6 * tflops(model, gemm(8192, 8192, 8192, Precision::kBf16)));
  EXPECT_TRUE(model.check_precision(Precision::kFp8));
  const ComputeModel a100(preset("A100"));
  const Status fp8 = a100.check_precision(Precision::kFp8);
  EXPECT_FALSE(fp8);
  EXPECT_NE(fp8.message().find("no fp8 GEMM rate"), std::string::npos) << fp8.message();
}

// An fp8 GEMM whose 16-bit operand Transformer Engine quantizes first (the quantization's bytes in
// its aux) takes that kernel longer: its bytes at the HBM bandwidth and a kernel overhead.
TEST(ComputeModel, Fp8QuantizationPrecedesTheGemm) {
  const HardwareProfile& p = preset("H100");
  const ComputeModel model(p);
  OpDesc d = gemm(4096, 4096, 4096, Precision::kFp8);
  const Time bare = model.op_time(d, false);
  d.aux = 4 * 4096 * 4096;  // delayed scaling: read 2 bytes, write two 1-byte copies
  EXPECT_EQ(model.op_time(d, false),
            bare + model.memory_time(Bytes(d.aux)) + p.compute.kernel_overhead);
  // A few percent of a GEMM this deep; more of a shallow one (the cast reads the whole input).
  const double deep = to_seconds(model.op_time(d, false)) / to_seconds(bare) - 1;
  OpDesc shallow = gemm(4096, 1024, 4096, Precision::kFp8);
  const Time shallow_bare = model.op_time(shallow, false);
  shallow.aux = 4 * 4096 * 4096;
  const double cast = to_seconds(model.op_time(shallow, false)) / to_seconds(shallow_bare) - 1;
  EXPECT_GT(deep, 0.02);
  EXPECT_LT(deep, 0.25);
  EXPECT_GT(cast, 2 * deep);
}

// Memory-bound ops move their bytes at the achievable HBM bandwidth, plus the kernel overhead.
TEST(ComputeModel, MemoryBoundOps) {
  const HardwareProfile& p = preset("H100");
  const ComputeModel model(p);
  OpDesc norm;
  norm.kind = OpKind::kNorm;
  norm.bytes_read = Bytes(2'970'000'000);
  norm.bytes_written = Bytes(0);
  EXPECT_EQ(model.op_time(norm, false), milliseconds(1.0) + p.compute.kernel_overhead);
  OpDesc host = norm;
  host.kind = OpKind::kOptimizerStep;
  host.stream = Stream::kHost;
  EXPECT_EQ(model.op_time(host, false), norm.bytes_read / p.compute.host_memory_bandwidth);
}

// Attention approaches its rate at long sequences and is slower backward.
TEST(ComputeModel, AttentionSaturatesWithSequenceLength) {
  const HardwareProfile& p = preset("H100");
  const ComputeModel model(p);
  auto attn = [](std::int64_t s) {
    OpDesc d;
    d.kind = OpKind::kAttention;
    d.batch = 32;
    d.m = s;
    d.n = s;
    d.k = 128;
    d.flops = Flops(4.0 * 32 * static_cast<double>(s) * static_cast<double>(s) * 128 * 0.5);
    return d;
  };
  auto rate = [&](std::int64_t s, bool bwd) {
    const OpDesc d = attn(s);
    return d.flops.raw() / to_seconds(model.op_time(d, bwd)) / 1e12;
  };
  const double fwd = to_tflops_per_s(p.compute.attention_forward);
  EXPECT_NEAR(rate(8192, false), fwd * 8192.0 / (8192 + 256), fwd * 0.01);
  EXPECT_LT(rate(512, false), 0.7 * fwd);
  EXPECT_LT(rate(8192, true), rate(8192, false));
}

// Flash attention's rate per FLOP falls with the head dimension as d / (d + 54) relative to 128
// on the H100 (FlashAttention-3's forward: about 0.77x at 64, 1.17x at 256), and not at all on a
// profile without attention_half_head_dim.
TEST(ComputeModel, AttentionRateFollowsTheHeadDimension) {
  auto rate = [](const HardwareProfile& p, std::int64_t dim) {
    OpDesc d;
    d.kind = OpKind::kAttention;
    d.batch = 32;
    d.m = d.n = 8192;
    d.k = dim;
    d.flops = Flops(4.0 * 32 * 8192.0 * 8192.0 * static_cast<double>(dim) * 0.5);
    return d.flops.raw() / to_seconds(ComputeModel(p).op_time(d, false)) / 1e12;
  };
  const HardwareProfile& h100 = preset("H100");
  ASSERT_EQ(h100.compute.attention_half_head_dim, 54);
  const double at128 = rate(h100, 128);
  EXPECT_NEAR(to_tflops_per_s(h100.compute.attention_forward) * 8192.0 / (8192 + 256), at128,
              at128 * 0.01);
  EXPECT_NEAR(rate(h100, 64) / at128, 0.77, 0.01);
  EXPECT_NEAR(rate(h100, 256) / at128, 1.17, 0.01);
  HardwareProfile flat = h100;
  flat.compute.attention_half_head_dim = 0;
  EXPECT_NEAR(rate(flat, 64) / rate(flat, 128), 1.0, 0.01);  // the kernel overhead apart
}

// Materialised scores (batch·heads 32, 2,048 × 2,048, fp16, on V100): the same GEMMs under both
// kernels; the 2019 unfused scale, mask and softmax stream the scores 6 more times forward and 4
// more backward than Megatron's fused scale-mask-softmax, with 3 and 2 more kernels.
TEST(ComputeModel, UnfusedSoftmaxStreamsTheScoresMoreOftenThanTheFusedKernel) {
  const HardwareProfile& p = preset("V100-SXM2-32GB");
  const ComputeModel fused(p, AttentionKernel::kFusedSoftmax);
  const ComputeModel unfused(p, AttentionKernel::kUnfused);
  OpDesc d;
  d.kind = OpKind::kAttention;
  d.precision = Precision::kFp16;
  d.batch = 32;
  d.m = 2048;
  d.n = 2048;
  d.k = 128;
  const double scores = 32.0 * 2048 * 2048;
  const Time forward = unfused.op_time(d, false) - fused.op_time(d, false);
  const Time backward = unfused.op_time(d, true) - fused.op_time(d, true);
  const double bandwidth = to_GBps(p.compute.memory_bandwidth) * 1e9;
  const double overhead = to_seconds(p.compute.kernel_overhead);
  EXPECT_NEAR(to_seconds(forward), scores * 6 * 2 / bandwidth + 3 * overhead, 1e-9);
  EXPECT_NEAR(to_seconds(backward), scores * 4 * 2 / bandwidth + 2 * overhead, 1e-9);
  EXPECT_EQ(attention_kernel(AttentionImpl::kUnfused), AttentionKernel::kUnfused);
  EXPECT_EQ(attention_kernel(AttentionImpl::kFusedSoftmax), AttentionKernel::kFusedSoftmax);
  EXPECT_EQ(attention_kernel(AttentionImpl::kCudnn), AttentionKernel::kFlash);
}

// Megatron's fused scale-mask-softmax takes causal 16-bit scores only when b·np divides into its
// blocks (four rows a block for 1,024 keys): vTrain's GPT with 16 heads on tp 8 at micro-batch 1
// has b·np = 2 and runs the softmax as PyTorch ops; micro-batch 2 (b·np = 4) is fused.
// A causal fp16 attention op over 1,024 queries and keys of head dim 128, `batch` = b·np.
OpDesc causal_scores(std::int64_t batch) {
  OpDesc d;
  d.kind = OpKind::kAttention;
  d.precision = Precision::kFp16;
  d.flags = kCausal;
  d.m = 1024;
  d.n = 1024;
  d.k = 128;
  d.batch = batch;
  return d;
}

TEST(ComputeModel, FusedSoftmaxAvailabilityFollowsMegatronsKernelCheck) {
  OpDesc d = causal_scores(2);
  EXPECT_FALSE(fused_softmax_available(d));
  d.batch = 4;
  EXPECT_TRUE(fused_softmax_available(d));
  d.batch = 6;  // a multiple of 2 but not of 4
  EXPECT_FALSE(fused_softmax_available(d));
  d.batch = 4;
  d.m = d.n = 128;  // 128 keys: warps of 32 lanes, two rows a warp: 8 rows a block
  EXPECT_FALSE(fused_softmax_available(d));
  d.batch = 8;
  EXPECT_TRUE(fused_softmax_available(d));
  d.flags = 0;  // not causal: sq must divide into the blocks instead
  d.batch = 4;
  EXPECT_TRUE(fused_softmax_available(d));
  d.m = d.n = 8192;  // more keys than the kernel takes
  EXPECT_FALSE(fused_softmax_available(d));
  d.m = d.n = 1024;
  d.precision = Precision::kFp32;  // fp32 scores
  EXPECT_FALSE(fused_softmax_available(d));
  d.precision = Precision::kBf16;
  d.m = d.n = 16;  // too few keys
  EXPECT_FALSE(fused_softmax_available(d));
}

// Where the fused kernel cannot take the scores, the fp32 PyTorch softmax streams them 16 more
// times forward and 17 more backward (in 16-bit elements), with four more kernels each, and the
// host issues those kernels too; flash attention and the fused path add none.
TEST(ComputeModel, TorchSoftmaxFallbackStreamsTheScoresAndCostsTheHostKernels) {
  const HardwareProfile& p = preset("A100-SXM4-40GB");
  const ComputeModel fused(p, AttentionKernel::kFusedSoftmax);
  const ComputeModel unfused(p, AttentionKernel::kUnfused);
  const ComputeModel flash(p, AttentionKernel::kFlash);
  OpDesc d = causal_scores(4);
  EXPECT_EQ(fused.extra_host_kernels(d, false), 0);
  EXPECT_EQ(unfused.extra_host_kernels(d, false), 3);
  EXPECT_EQ(unfused.extra_host_kernels(d, true), 2);
  EXPECT_EQ(flash.extra_host_kernels(d, false), 0);
  d.batch = 2;  // b·np = 2: the PyTorch ops
  EXPECT_EQ(fused.extra_host_kernels(d, false), 4);
  EXPECT_EQ(fused.extra_host_kernels(d, true), 4);
  EXPECT_EQ(flash.extra_host_kernels(d, true), 0);
  const double scores = 2.0 * 1024 * 1024;
  const double bandwidth = to_GBps(p.compute.memory_bandwidth) * 1e9;
  const double overhead = to_seconds(p.compute.kernel_overhead);
  // The GEMMs are the same on every path: take them from the unfused op.
  const double gemms_fwd =
      to_seconds(unfused.op_time(d, false)) - (scores * (10 * 2 + 1) / bandwidth + 5 * overhead);
  const double gemms_bwd =
      to_seconds(unfused.op_time(d, true)) - (scores * (9 * 2 + 1) / bandwidth + 4 * overhead);
  EXPECT_GT(gemms_fwd, 0);
  EXPECT_NEAR(to_seconds(fused.op_time(d, false)),
              gemms_fwd + scores * (20 * 2 + 1) / bandwidth + 6 * overhead, 1e-9);
  EXPECT_NEAR(to_seconds(fused.op_time(d, true)),
              gemms_bwd + scores * (22 * 2 + 1) / bandwidth + 6 * overhead, 1e-9);
  // The host cost: one memory-bound op more per extra kernel, backward scaled like the rest.
  HostCosts c;
  c.attention = Time(37'000'000);
  c.memory_bound = Time(28'000'000);
  c.backward_factor = 1.5;
  EXPECT_EQ(host_cost(c, d, Phase::kForward, 1, fused.extra_host_kernels(d, false)),
            Time(37'000'000 + 4 * 28'000'000));
  EXPECT_EQ(host_cost(c, d, Phase::kBackwardInput, 1, fused.extra_host_kernels(d, true)),
            Time(std::llround(1.5 * (37'000'000 + 4 * 28'000'000))));
}

// An MoE router op costs the host model's router cost: a memory-bound op's in the built-in
// stacks and under --host-costs memory=..., what --host-costs router=... sets otherwise; backward
// scaled like the rest.
TEST(HostModel, MoeRouterOpCostsTheRouterCost) {
  OpDesc d;
  d.kind = OpKind::kRouter;
  d.stream = Stream::kCompute;
  const HostCosts core = host_costs(SoftwareStack::kMegatronCore);
  EXPECT_FALSE(core.router.has_value());
  EXPECT_EQ(host_cost(core, d, Phase::kForward), core.memory_bound);
  const auto set = parse_host_costs("router=600", core);
  ASSERT_TRUE(set.is_ok()) << set.status().message();
  EXPECT_EQ(set->router, microseconds(600));
  EXPECT_EQ(set->memory_bound, core.memory_bound);
  EXPECT_EQ(host_cost(*set, d, Phase::kForward), microseconds(600));
  EXPECT_EQ(
      host_cost(*set, d, Phase::kBackwardInput),
      Time(std::llround(static_cast<double>(microseconds(600).raw()) * set->backward_factor)));
  EXPECT_NE(describe(*set).find("MoE router 600 us"), std::string::npos) << describe(*set);
  EXPECT_EQ(describe(core).find("MoE router"), std::string::npos) << describe(core);
  EXPECT_FALSE(parse_host_costs("router=-1", core).is_ok());
  // Setting the memory-bound cost alone moves the router's with it; setting both keeps each.
  EXPECT_EQ(host_cost(*parse_host_costs("memory=70", core), d, Phase::kForward), microseconds(70));
  EXPECT_EQ(host_cost(*parse_host_costs("router=600,memory=70", core), d, Phase::kForward),
            microseconds(600));
  // A norm is not a router op.
  d.kind = OpKind::kNorm;
  EXPECT_EQ(host_cost(*set, d, Phase::kForward), core.memory_bound);
}

// A GEMM of an MoE layer's local experts run kernel by kernel costs the host one GEMM per expert
// (Transformer Engine's GroupedLinear issues them one by one); a batched GEMM that runs as one
// kernel (an attention core's) costs one.
TEST(HostModel, ExpertGemmsCostTheHostOneGemmEach) {
  const HostCosts core = host_costs(SoftwareStack::kMegatronCore);
  OpDesc d;
  d.kind = OpKind::kGemm;
  d.stream = Stream::kCompute;
  d.batch = 16;
  EXPECT_EQ(host_cost(core, d, Phase::kForward), core.gemm);
  d.flags = kPerGroupKernels;
  EXPECT_EQ(host_cost(core, d, Phase::kForward), Time(16 * core.gemm.raw()));
  EXPECT_EQ(host_cost(core, d, Phase::kBackwardWeight),
            Time(std::llround(static_cast<double>(16 * core.gemm.raw()) * core.backward_factor)));
  d.batch = 1;
  EXPECT_EQ(host_cost(core, d, Phase::kForward), core.gemm);
  // The stack's GEMM cost sets the experts' too.
  d.batch = 4;
  EXPECT_EQ(host_cost(*parse_host_costs("gemm=10", core), d, Phase::kForward), microseconds(40));
}

// Prediction errors (predicted / measured - 1) over a set of measurements.
struct ErrorStats {
  double abs = 0, signed_ = 0;
  int n = 0;
  void add(double predicted_s, double measured_s) {
    const double e = predicted_s / measured_s - 1;
    abs += std::abs(e);
    signed_ += e;
    ++n;
  }
  double mape() const { return 100 * abs / n; }
  double bias() const { return 100 * signed_ / n; }
};

// The H200 profile with the benchmark rates measured on the machine of tests/data/gpu (its
// sustained rates are 0.82 of them).
HardwareProfile measured_h200() {
  HardwareProfile profile = preset("H200");
  profile.compute.gemm[static_cast<std::size_t>(Precision::kBf16)].rate = tflops_per_s(772.6);
  profile.compute.gemm[static_cast<std::size_t>(Precision::kFp8)].rate = tflops_per_s(1398.4);
  return profile;
}

nlohmann::json gpu_data(const std::string& file) {
  std::ifstream in(std::string(PLANNER_TEST_DATA_DIR) + "/gpu/" + file);
  if (!in) throw std::runtime_error("missing the GPU measurements " + file);
  return nlohmann::json::parse(in);
}

// The tile model against GEMMs measured on one H200 (tests/data/gpu, bench/gpu/README.md): cuBLAS
// through PyTorch, back-to-back calls timed in a CUDA graph, 126 bf16 GEMMs (64-16,384 tokens over
// 14 layer shapes), 42 fp8 ones, and the experts' GEMMs of six MoE models as 69 batched GEMMs (4-16
// experts of 128-2,048 tokens; forward, and the weight gradient, whose inner dimension is the
// tokens). The profile's rates are set to the measured benchmark rates its sustained rates are
// 0.82 of. Measured on 2026-11-26: bf16 MAPE 13.0 % (bias +10.4 %: mid-sized GEMMs, where cuBLAS
// splits k over more SMs than the model's tiles use, run faster), fp8 5.8 % (+0.2 %), batched
// forward 8.0 % (-1.1 %), batched weight gradient 16.9 % (-15.7 %: a few hundred tokens deep, the
// tiles' fixed cost is larger than gemm_k_overhead). Refitting the tile efficiencies and the k
// overhead on these points lowered the joint error to 8.1 % but did not carry from the dense
// GEMMs to the batched ones or back (fitted on one family, the other's error rose), so the
// profiles keep their parameters; these bounds hold them to what was measured.
TEST(ComputeModel, TileModelMatchesGemmsMeasuredOnAnH200) {
  const nlohmann::json data = gpu_data("h200-2026-11-26-moe-microbench.json");
  const HardwareProfile profile = measured_h200();
  const ComputeModel model(profile);
  ErrorStats bf16, fp8, batched_fwd, batched_wgrad;
  for (const nlohmann::json& r : data.at("results")) {
    const std::string bench = r.at("bench");
    if (bench == "gemm") {
      ASSERT_EQ(r.at("timing"), "graph");
      const bool is_fp8 = r.at("dtype") == "fp8_e4m3";
      const OpDesc d =
          gemm(r.at("m"), r.at("n"), r.at("k"), is_fp8 ? Precision::kFp8 : Precision::kBf16);
      (is_fp8 ? fp8 : bf16).add(to_seconds(model.op_time(d, false)), r.at("best_s"));
    } else if (bench == "grouped") {
      const std::int64_t g = r.at("groups"), m = r.at("m"), n = r.at("n"), k = r.at("k");
      batched_fwd.add(to_seconds(model.op_time(gemm(m, n, k, Precision::kBf16, g), false)),
                      r.at("bmm_fwd_s"));
      batched_wgrad.add(to_seconds(model.op_time(gemm(n, k, m, Precision::kBf16, g), false)),
                        r.at("bmm_wgrad_s"));
    }
  }
  ASSERT_EQ(bf16.n, 126);
  ASSERT_EQ(fp8.n, 42);
  ASSERT_EQ(batched_fwd.n, 69);
  EXPECT_LT(bf16.mape(), 15.0);
  EXPECT_LT(std::abs(bf16.bias()), 12.0);
  EXPECT_LT(fp8.mape(), 8.0);
  EXPECT_LT(std::abs(fp8.bias()), 5.0);
  EXPECT_LT(batched_fwd.mape(), 10.0);
  EXPECT_LT(batched_wgrad.mape(), 20.0);
  EXPECT_LT(batched_wgrad.bias(), 0.0);  // too fast: the known shortfall above
  std::printf(
      "H200 GEMMs: bf16 %.1f %% (%+.1f), fp8 %.1f %% (%+.1f), batched forward %.1f %% (%+.1f), "
      "batched weight gradient %.1f %% (%+.1f)\n",
      bf16.mape(), bf16.bias(), fp8.mape(), fp8.bias(), batched_fwd.mape(), batched_fwd.bias(),
      batched_wgrad.mape(), batched_wgrad.bias());
}

// The experts' GEMMs as Transformer Engine's GroupedLinear runs them, measured on one H200
// (tests/data/gpu/h200-2026-11-28-te-grouped-linear.json, bench/gpu/README.md): one cuBLAS GEMM
// per expert on 4 streams, in a CUDA graph, for the experts of six MoE models (4-32 local experts
// of 128-4,096 tokens; forward, input gradient, weight gradient without the fp32 accumulation).
// The per-expert form takes longer than one batched kernel where experts have few tokens (2-3x at
// 128 tokens); the tile model of one batched kernel was 14.5 % (forward) to 17.5 % (input
// gradient) short of it, the rounds of kPerGroupKernels 9.9 % to 12.6 %. Above 1,024 tokens an
// expert, where the reference runs are, both are within a few percent.
TEST(ComputeModel, PerExpertGemmsFollowTransformerEnginesStreamsOnAnH200) {
  const nlohmann::json data = gpu_data("h200-2026-11-28-te-grouped-linear.json");
  const HardwareProfile profile = measured_h200();
  const ComputeModel model(profile);
  const char* phases[] = {"fwd", "dgrad", "wgrad"};
  ErrorStats batched[3], per_expert[3], large[3];
  for (const nlohmann::json& r : data.at("results")) {
    if (r.at("bench") != "experts") continue;
    const std::int64_t g = r.at("groups"), m = r.at("m"), n = r.at("n"), k = r.at("k");
    const OpDesc shapes[] = {gemm(m, n, k, Precision::kBf16, g), gemm(m, k, n, Precision::kBf16, g),
                             gemm(n, k, m, Precision::kBf16, g)};
    for (int p = 0; p < 3; ++p) {
      const std::string phase = phases[p];
      const double measured = r.at(p == 2 ? "s4_wgrad_noacc_s" : "s4_" + phase + "_s");
      OpDesc d = shapes[p];
      batched[p].add(to_seconds(model.op_time(d, false)), measured);
      d.flags = kPerGroupKernels;
      const double predicted = to_seconds(model.op_time(d, false));
      per_expert[p].add(predicted, measured);
      if (m >= 1024) large[p].add(predicted, measured);
    }
  }
  for (int p = 0; p < 3; ++p) {
    SCOPED_TRACE(phases[p]);
    ASSERT_GT(per_expert[p].n, 200);
    EXPECT_LT(per_expert[p].mape(), batched[p].mape());
    EXPECT_GT(per_expert[p].bias(), batched[p].bias());
    EXPECT_LT(per_expert[p].mape(), 16.0);
    EXPECT_LT(large[p].mape(), 8.0);
    EXPECT_LT(std::abs(large[p].bias()), 6.0);
    std::printf(
        "%s: one batched kernel %.1f %% (%+.1f), per expert %.1f %% (%+.1f), >= 1024 tokens "
        "%.1f %% (%+.1f)\n",
        phases[p], batched[p].mape(), batched[p].bias(), per_expert[p].mape(), per_expert[p].bias(),
        large[p].mape(), large[p].bias());
  }
  // One round of four experts is one kernel over their tiles; five experts take two rounds.
  OpDesc four = gemm(1024, 1536, 2048, Precision::kBf16, 4);
  const OpDesc batched4 = gemm(1024, 1536, 2048, Precision::kBf16, 4);
  four.flags = kPerGroupKernels;
  EXPECT_EQ(model.op_time(four, false), model.op_time(batched4, false));
  OpDesc five = gemm(1024, 1536, 2048, Precision::kBf16, 5);
  five.flags = kPerGroupKernels;
  EXPECT_EQ(model.op_time(five, false),
            model.op_time(four, false) + model.op_time(gemm(1024, 1536, 2048), false));
}

}  // namespace
}  // namespace planner::sim
