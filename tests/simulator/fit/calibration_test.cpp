// Calibration: points round-trip through their stored form, a fit to measurements generated from
// known parameters recovers them, and ranks sharing a host's cores compute at the shared rate.
#include "planner/fit/calibration.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "planner/core/catalog.hpp"
#include "planner/core/lowering.hpp"
#include "planner/sim/profiles.hpp"
#include "planner/sim/simulate.hpp"
#include "simulator/sim_test_support.hpp"

namespace planner::fit {
namespace {

const HardwareProfile& cpu_preset() {
  static const HardwareProfile p = *builtin_profile("cpu-host");
  return p;
}

CalibrationPoint gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  CalibrationPoint p;
  p.desc.kind = OpKind::kGemm;
  p.desc.precision = Precision::kFp32;
  p.desc.m = m;
  p.desc.n = n;
  p.desc.k = k;
  p.desc.flops = Flops(2.0 * static_cast<double>(m * n * k));
  p.desc.bytes_read = Bytes((m * k + k * n) * 4);
  p.desc.bytes_written = Bytes(m * n * 4);
  return p;
}

CalibrationPoint memory(OpKind kind, std::int64_t bytes) {
  CalibrationPoint p;
  p.desc.kind = kind;
  p.desc.precision = Precision::kFp32;
  p.desc.bytes_read = Bytes(bytes);
  p.desc.bytes_written = Bytes(bytes / 2);
  return p;
}

CalibrationPoint attention(std::int64_t seq, bool backward) {
  CalibrationPoint p;
  p.desc.kind = OpKind::kAttention;
  p.desc.precision = Precision::kFp32;
  p.desc.flags = kCausal;
  p.desc.batch = 8;
  p.desc.m = seq;
  p.desc.n = seq;
  p.desc.k = 32;
  p.desc.flops = Flops(2.0 * 8 * seq * seq * 32 * (backward ? 2 : 1));
  p.desc.bytes_read = Bytes(3 * 8 * seq * 32 * 4);
  p.desc.bytes_written = Bytes(8 * seq * 32 * 4);
  p.backward = backward;
  return p;
}

CalibrationPoint comm(OpKind kind, std::int64_t bytes, int ranks) {
  CalibrationPoint p;
  p.desc.kind = kind;
  p.desc.precision = Precision::kFp32;
  p.desc.stream = Stream::kDpComm;
  p.desc.comm_bytes = Bytes(bytes);
  p.group_size = ranks;
  return p;
}

// The parameters the synthetic machine has (none equal to the preset's).
HardwareProfile truth() {
  HardwareProfile t = cpu_preset();
  ComputeProfile& c = t.compute;
  c.gemm[static_cast<std::size_t>(Precision::kFp32)].rate = tflops_per_s(0.072);
  c.gemm_k_overhead = 24;
  c.attention_forward = tflops_per_s(0.031);
  c.attention_backward = tflops_per_s(0.027);
  c.memory_bound[static_cast<std::size_t>(OpKind::kNorm)] = GBps(9.0);
  c.memory_bound[static_cast<std::size_t>(OpKind::kActivation)] = GBps(2.5);
  c.memory_bound[static_cast<std::size_t>(OpKind::kOptimizerStep)] = GBps(14.0);
  c.memory_bandwidth = GBps(14.0);
  c.kernel_overhead = microseconds(3.0);
  NetworkProfile& n = t.network;
  for (LinkProfile& l : n.links) {
    if (l.kind == "shared-memory") {
      l.efficiency = 0.6;
      l.latency = Time(0);
    }
  }
  n.algorithm_efficiency.ring = 0.8;
  n.algorithm_efficiency.all_to_all = 0.7;
  ProtocolProfile proto;
  proto.name = "simple";
  proto.bandwidth_factor = 1.0;
  proto.base_latency = microseconds(4.0);
  proto.step_latency = {Time(0), microseconds(1.5), Time(0)};
  n.protocols = {proto};
  return t;
}

std::vector<CalibrationPoint> synthetic(const HardwareProfile& t, const topo::Cluster& cluster) {
  std::vector<CalibrationPoint> pts;
  for (std::int64_t m : {64, 512, 2048}) {
    for (std::int64_t n : {128, 1536}) {
      for (std::int64_t k : {32, 128, 512})
        pts.push_back(gemm(m, n, k));
    }
  }
  for (std::int64_t seq : {64, 256}) {
    pts.push_back(attention(seq, false));
    pts.push_back(attention(seq, true));
  }
  for (OpKind kind : {OpKind::kNorm, OpKind::kActivation, OpKind::kOptimizerStep}) {
    for (std::int64_t bytes : {64 * kKiB, kMiB, 16 * kMiB})
      pts.push_back(memory(kind, bytes));
  }
  for (int ranks : {2, 3, 4}) {
    for (OpKind kind : {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kReduceScatter,
                        OpKind::kAllToAll, OpKind::kBroadcast}) {
      for (std::int64_t bytes = kKiB; bytes <= 16 * kMiB; bytes *= 4)
        pts.push_back(comm(kind, bytes, ranks));
    }
  }
  for (std::int64_t bytes = kKiB; bytes <= 16 * kMiB; bytes *= 4)
    pts.push_back(comm(OpKind::kSend, bytes, 2));
  for (CalibrationPoint& p : pts)
    p.measured = model_time(t, cluster, p);
  return pts;
}

double param(const FitReport& r, const std::string& name) {
  for (const ParameterChange& c : r.changes) {
    if (c.name == name) return c.after;
  }
  ADD_FAILURE() << "no fitted parameter " << name;
  return 0;
}

TEST(Calibration, ShapeRoundTripsThroughText) {
  CalibrationPoint p = attention(128, true);
  p.desc.aux = 4;
  p.measured = microseconds(12.5);
  const std::string shape = encode_shape(p);
  auto back = decode_point(benchmark_name(p), shape, Precision::kFp32, 1, p.measured);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->desc, p.desc);
  EXPECT_TRUE(back->backward);
  EXPECT_EQ(benchmark_name(p), "attention_backward");
  auto c = decode_point("all_reduce", "comm=4096,stream=5", Precision::kFp32, 4, Time(1));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->desc.kind, OpKind::kAllReduce);
  EXPECT_EQ(c->desc.comm_bytes, Bytes(4096));
  EXPECT_EQ(c->group_size, 4);
  EXPECT_FALSE(decode_point("gemm", "m=12,q=3", Precision::kFp32, 1, Time(1)));
  EXPECT_FALSE(decode_point("gemm", "m=x", Precision::kFp32, 1, Time(1)));
  EXPECT_FALSE(decode_point("warp_drive", "", Precision::kFp32, 1, Time(1)));
}

TEST(Calibration, FitRecoversKnownParameters) {
  const auto cluster = sim::testing::preset_cluster("cpu-host", 1);
  const HardwareProfile t = truth();
  const std::vector<CalibrationPoint> pts = synthetic(t, *cluster);
  FitOptions o;
  o.link_kind = "shared-memory";
  o.name = "fitted";
  auto fit = fit_profile(cpu_preset(), *cluster, pts, o);
  ASSERT_TRUE(fit) << fit.status().message();
  const ComputeProfile& c = fit->profile.compute;
  auto near = [](double got, double want) { return std::abs(got - want) <= 0.01 * std::abs(want); };
  EXPECT_PRED2(near, to_tflops_per_s(c.gemm_rate(Precision::kFp32).rate), 0.072);
  EXPECT_NEAR(c.gemm_k_overhead, 24, 1);
  EXPECT_PRED2(near, to_tflops_per_s(c.attention_forward), 0.031);
  EXPECT_PRED2(near, to_tflops_per_s(c.attention_backward), 0.027);
  EXPECT_PRED2(near, to_GBps(c.memory_bandwidth_for(OpKind::kNorm)), 9.0);
  EXPECT_PRED2(near, to_GBps(c.memory_bandwidth_for(OpKind::kActivation)), 2.5);
  EXPECT_PRED2(near, to_GBps(c.memory_bandwidth_for(OpKind::kOptimizerStep)), 14.0);
  EXPECT_PRED2(near, to_microseconds(c.kernel_overhead), 3.0);
  const NetworkProfile& n = fit->profile.network;
  EXPECT_PRED2(near, fit->profile.link("shared-memory").efficiency, 0.6);
  EXPECT_PRED2(near, n.algorithm_efficiency.ring, 0.8);
  EXPECT_PRED2(near, n.algorithm_efficiency.all_to_all, 0.7);
  ASSERT_EQ(n.protocols.size(), 1u);
  EXPECT_PRED2(near, to_microseconds(n.protocols[0].base_latency), 4.0);
  EXPECT_PRED2(near, to_microseconds(n.protocols[0].step(LinkClassLatency::kPcie)), 1.5);
  // The report says how far each parameter moved from the preset, and the fit is exact.
  EXPECT_PRED2(near, param(*fit, "compute.gemm.fp32"), 0.072);
  for (const FitQuality& q : fit->quality)
    EXPECT_LT(q.max_abs_error, 0.01) << q.benchmark;
  EXPECT_EQ(fit->profile.name, "fitted");
  // The fitted profile is a valid profile document.
  auto again = parse_profile(to_json_text(fit->profile), "fitted.json");
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(to_json(*again), to_json(fit->profile));
}

// Kernels run by 4 ranks on 2 cores at 0.8 of processor sharing's throughput: the fit leaves them
// out of the compute rates and recovers the efficiency from them.
TEST(Calibration, FitRecoversTheOversubscribedEfficiency) {
  const auto cluster = sim::testing::preset_cluster("cpu-host", 1);
  HardwareProfile t = truth();
  t.compute.host_cores = 2;
  t.compute.oversubscribed_efficiency = 0.8;
  std::vector<CalibrationPoint> pts = synthetic(t, *cluster);
  for (CalibrationPoint& p : pts) {
    if (!is_communication(p.desc.kind)) p.group_size = 2;
  }
  for (CalibrationPoint p : {gemm(512, 384, 128), gemm(2048, 384, 512), attention(128, false),
                             memory(OpKind::kNorm, kMiB)}) {
    p.group_size = 4;
    p.measured = model_time(t, *cluster, p);
    // Four ranks on two cores at 0.8: 2.5 times a kernel's time with a core of its own.
    CalibrationPoint alone = p;
    alone.group_size = 2;
    EXPECT_NEAR(static_cast<double>(p.measured.raw()) /
                    static_cast<double>(model_time(t, *cluster, alone).raw()),
                2.5, 1e-6);
    pts.push_back(p);
  }
  FitOptions o;
  o.link_kind = "shared-memory";
  o.host_cores = 2;
  auto fit = fit_profile(cpu_preset(), *cluster, pts, o);
  ASSERT_TRUE(fit) << fit.status().message();
  const ComputeProfile& c = fit->profile.compute;
  EXPECT_EQ(c.host_cores, 2);
  EXPECT_NEAR(c.oversubscribed_efficiency, 0.8, 0.008);
  EXPECT_NEAR(to_tflops_per_s(c.gemm_rate(Precision::kFp32).rate), 0.072, 0.00072);
  EXPECT_NEAR(param(*fit, "compute.oversubscribed_efficiency"), 0.8, 0.008);
  for (const FitQuality& q : fit->quality)
    EXPECT_LT(q.max_abs_error, 0.01) << q.benchmark;
  // Without oversubscribed points the efficiency stays the base's (ideal sharing).
  std::erase_if(pts, [](const CalibrationPoint& p) { return p.group_size == 4; });
  auto plain = fit_profile(cpu_preset(), *cluster, pts, o);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->profile.compute.oversubscribed_efficiency, 1.0);
}

TEST(Calibration, FitWithoutPointsFails) {
  const auto cluster = sim::testing::preset_cluster("cpu-host", 1);
  FitOptions o;
  o.link_kind = "shared-memory";
  EXPECT_FALSE(fit_profile(cpu_preset(), *cluster, {}, o));
  o.link_kind = "carrier-pigeon";
  const std::vector<CalibrationPoint> pts = {gemm(64, 64, 64)};
  EXPECT_FALSE(fit_profile(cpu_preset(), *cluster, pts, o));
}

// Four data-parallel ranks on a host with 2 cores: compute takes twice as long as on 4 cores.
TEST(Calibration, RanksSharingHostCoresComputeAtTheSharedRate) {
  sim::SimInput in;
  in.plan.model = *builtin_catalog().find_model("gpt-tiny");
  in.plan.gpu = *builtin_catalog().find_gpu("cpu-host");
  in.plan.cluster.nodes = 1;
  in.plan.cluster.gpus_per_node = 4;
  in.plan.cluster.gpu = "cpu-host";
  in.plan.training.global_batch_size = 8;
  in.plan.training.seq_length = 64;
  in.plan.training.precision = Precision::kFp32;
  in.plan.parallel.tp = 1;
  in.plan.parallel.pp = 1;
  in.plan.parallel.dp = 4;
  in.plan.parallel.micro_batch_size = 2;
  in.cluster = sim::testing::preset_cluster("cpu-host", 1);
  in.options.ranks = RankSubset::kAll;
  double efficiency = 1.0;
  auto run = [&](int cores) {
    HardwareProfile p = cpu_preset();
    p.compute.host_cores = cores;
    p.compute.oversubscribed_efficiency = efficiency;
    in.profile = std::make_shared<const HardwareProfile>(p);
    auto r = simulate(in);
    EXPECT_TRUE(r) << r.status().message();
    return r ? r->mean_buckets[static_cast<std::size_t>(sim::TimeBucket::kCompute)] : Time(0);
  };
  const Time alone = run(0);
  const Time shared = run(2);
  EXPECT_GT(alone, Time(0));
  EXPECT_NEAR(static_cast<double>(shared.raw()) / static_cast<double>(alone.raw()), 2.0, 0.01);
  EXPECT_EQ(run(4), alone);
  // Switching between the ranks costs a fifth of the cores' throughput: 2 / 0.8 = 2.5 times.
  efficiency = 0.8;
  EXPECT_NEAR(static_cast<double>(run(2).raw()) / static_cast<double>(alone.raw()), 2.5, 0.01);
  EXPECT_EQ(run(4), alone);
}

TEST(JoinMeasuredOps, ComputeOpsMatchOnRankAndOpId) {
  Plan plan;
  plan.model = builtin_catalog().model("gpt-tiny").value();
  plan.gpu = builtin_catalog().gpu("cpu-host").value();
  plan.training.seq_length = 64;
  plan.training.global_batch_size = 2;
  plan.training.precision = Precision::kFp32;
  plan.parallel.dp = 2;
  plan.cluster.gpu = plan.gpu.name;
  plan.cluster.gpus_per_node = 2;
  auto program = lower(plan, LowerOptions{});
  ASSERT_TRUE(program) << program.status().message();
  std::vector<MeasuredOp> ops;
  std::size_t compute = 0;
  for (const RankProgram& rp : program->ranks()) {
    for (const Op& op : rp.ops()) {
      const OpDesc& d = program->desc(op);
      ops.push_back({rp.rank(), to_string(op.id), microseconds(7)});
      if (!is_communication(d.kind) && d.stream != Stream::kHost) ++compute;
    }
  }
  ops.push_back({0, "no-such-op", microseconds(1)});  // measured, but not in the program
  const std::vector<CalibrationPoint> points = join_measured_ops(*program, ops);
  ASSERT_EQ(points.size(), compute);
  for (const CalibrationPoint& p : points) {
    EXPECT_FALSE(is_communication(p.desc.kind));
    EXPECT_EQ(p.measured, microseconds(7));
  }
  // Nothing measured, nothing joined.
  EXPECT_TRUE(join_measured_ops(*program, {}).empty());
}

}  // namespace
}  // namespace planner::fit
