// simulate() and run_program(): pipeline bubbles against the schedules' closed forms,
// representative versus full simulation, determinism across threads, out-of-memory plans, and
// every preset and parallelism feature simulating to the end.
#include "planner/sim/simulate.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <thread>
#include <vector>

#include "planner/core/catalog.hpp"
#include "planner/core/schedule.hpp"
#include "planner/sim/trace.hpp"
#include "simulator/sim_test_support.hpp"

namespace planner::sim {
namespace {

using testing::op_id;

// A pipeline program built from a schedule: every pass is one memory-bound op of 1e6 bytes (1 us
// at 1000 GB/s), activations and gradients move as empty messages between neighbouring stages on
// their own streams. With free communication the compute stream's idle time is the bubble.
StepProgram pipeline_program(const PipelineSchedule& sched) {
  const int p = sched.stages();
  const int v = sched.chunks();
  const int pv = p * v;
  StepProgram prog(ProgramInfo{p, 0, p, v, sched.microbatches(), pv, sched.kind()});
  const std::uint32_t pass = prog.intern(testing::elementwise(1'000'000));
  OpDesc send;
  send.kind = OpKind::kSend;
  send.stream = Stream::kPpSend;
  OpDesc recv = send;
  recv.kind = OpKind::kRecv;
  recv.stream = Stream::kPpRecv;
  const std::uint32_t send_d = prog.intern(send);
  const std::uint32_t recv_d = prog.intern(recv);
  for (int s = 0; s < p; ++s) {
    RankProgram& r = prog.add_rank(s, RankKind::kWorker, s);
    for (const PassItem& item : sched.stage(s)) {
      const int k = item.chunk * p + s;
      const int mb = item.microbatch;
      auto tag = [&](P2pChannel ch, int target) {
        return p2p_tag(ch, static_cast<std::uint32_t>(mb * pv + target));
      };
      auto add = [&](std::uint32_t desc, Phase ph, OpRole role, int peer, std::uint32_t t,
                     std::initializer_list<std::uint32_t> deps) {
        Op op;
        op.id = op_id(mb, ph, role, item.chunk);
        op.desc = desc;
        op.peer = peer;
        op.tag = t;
        return r.add(op, deps);
      };
      const int prev = (s + p - 1) % p;
      const int next = (s + 1) % p;
      if (item.pass == Pass::kForward) {
        std::uint32_t in = 0;
        const bool has_in = k > 0;
        if (has_in) {
          in = add(recv_d, Phase::kForward, OpRole::kPpRecvActivation, prev,
                   tag(P2pChannel::kPpActivation, k), {});
        }
        const std::uint32_t f = has_in ? add(pass, Phase::kForward, OpRole::kMlpUp, -1, 0, {in})
                                       : add(pass, Phase::kForward, OpRole::kMlpUp, -1, 0, {});
        if (k < pv - 1) {
          add(send_d, Phase::kForward, OpRole::kPpSendActivation, next,
              tag(P2pChannel::kPpActivation, k + 1), {f});
        }
      } else if (item.pass == Pass::kBackward) {
        std::uint32_t in = 0;
        const bool has_in = k < pv - 1;
        if (has_in) {
          in = add(recv_d, Phase::kBackwardInput, OpRole::kPpRecvGrad, next,
                   tag(P2pChannel::kPpGradient, k), {});
        }
        const std::uint32_t b = has_in
                                    ? add(pass, Phase::kBackwardInput, OpRole::kMlpUp, -1, 0, {in})
                                    : add(pass, Phase::kBackwardInput, OpRole::kMlpUp, -1, 0, {});
        if (k > 0) {
          add(send_d, Phase::kBackwardInput, OpRole::kPpSendGrad, prev,
              tag(P2pChannel::kPpGradient, k - 1), {b});
        }
      } else {
        add(pass, Phase::kBackwardWeight, OpRole::kMlpUp, -1, 0, {});
      }
    }
  }
  return prog;
}

// The bubble fraction of a balanced pipeline equals the schedule's closed form (schedule.hpp):
// (p−1)/(m+p−1) for GPipe and 1F1B, (p−1)/(v·m+p−1) interleaved, (p−1)/(3m+p−1) for ZB-H1.
TEST(Bubble, BalancedPipelineMatchesClosedForm) {
  struct Case {
    Schedule kind;
    int p, m, v;
  };
  const HardwareProfile profile = testing::ideal_profile(0.0, 1000.0);
  for (const Case& c : {Case{Schedule::kGpipe, 4, 8, 1}, Case{Schedule::k1F1B, 4, 8, 1},
                        Case{Schedule::k1F1B, 8, 3, 1}, Case{Schedule::kInterleaved, 4, 8, 2},
                        Case{Schedule::kZeroBubbleH1, 4, 8, 1}}) {
    auto sched = PipelineSchedule::create(c.kind, c.p, c.m, c.v);
    ASSERT_TRUE(sched) << sched.status().message();
    const StepProgram prog = pipeline_program(*sched);
    ASSERT_TRUE(check_program(prog)) << check_program(prog).message();
    auto cluster =
        testing::build(testing::parse_topology(testing::ring_topology_json(c.p, 100, 0)), 1);
    std::vector<int> gpus;
    for (int i = 0; i < c.p; ++i)
      gpus.push_back(i);
    RunContext ctx;
    ctx.cluster = cluster.get();
    ctx.gpu_of_rank = gpus;
    ctx.profile = &profile;
    auto run = run_program(prog, ctx);
    ASSERT_TRUE(run) << run.status().message();
    double idle = 0;
    for (const RankRun& r : run->ranks) {
      idle += to_seconds(r.buckets[static_cast<std::size_t>(TimeBucket::kIdle)]);
      EXPECT_EQ(r.buckets[static_cast<std::size_t>(TimeBucket::kCompute)],
                microseconds(1.0) * static_cast<std::int64_t>(sched->stage(0).size()));
    }
    const double measured = idle / c.p / to_seconds(run->makespan);
    EXPECT_NEAR(measured, bubble_fraction(c.kind, c.p, c.m, c.v), 1e-12)
        << to_string(c.kind) << " p=" << c.p << " m=" << c.m << " v=" << c.v;
  }
}

// Runs `prog` with one ideal GPU per rank and the host model `host`: the makespan, and how long
// rank 0's GPU waited for its host.
std::pair<Time, Time> run_with_host(const StepProgram& prog, int ranks, const HostCosts& host) {
  HardwareProfile profile = testing::ideal_profile(0.0, 1000.0);
  profile.compute.pcie_copy_bandwidth = GBps(64);  // a 64-byte copy: 1 ns
  auto cluster = testing::build(testing::parse_topology(testing::ring_topology_json(2, 100, 0)), 1);
  std::vector<int> gpus(static_cast<std::size_t>(ranks));
  std::iota(gpus.begin(), gpus.end(), 0);
  RunContext ctx;
  ctx.cluster = cluster.get();
  ctx.gpu_of_rank = gpus;
  ctx.profile = &profile;
  ctx.options.host = host;
  auto run = run_program(prog, ctx);
  EXPECT_TRUE(run) << run.status().message();
  return run ? std::pair{run->makespan, run->ranks[0].host_wait} : std::pair{Time(0), Time(0)};
}

// The host model (host_model.hpp): one rank runs 10 memory-bound ops of 1 us each. With no host
// the step is 10 us; with a 5 us host cost per op the GPU waits for the host and the step is the
// host's 50 us (the last op issued at 50 us, then 1 us on the GPU); with a 0.5 us cost the host
// runs ahead and hides under the GPU (10.5 us: only the first op waits). The wait is reported.
TEST(HostModel, ShortKernelsWaitForTheHost) {
  StepProgram prog(ProgramInfo{1, 0, 1, 1, 1, 10, Schedule::k1F1B});
  const std::uint32_t op = prog.intern(testing::elementwise(1'000'000));
  RankProgram& r = prog.add_rank(0, RankKind::kWorker, 0);
  for (int i = 0; i < 10; ++i) {
    Op o;
    o.id = OpId::make(i, 0, Phase::kForward, OpRole::kAttnResidual);
    o.desc = op;
    r.add(o, {});
  }
  auto step = [&](double host_us) {
    HostCosts host;
    host.memory_bound = microseconds(host_us);
    return run_with_host(prog, 1, host);
  };
  EXPECT_EQ(step(0).first, microseconds(10));
  EXPECT_EQ(step(0).second, Time(0));
  EXPECT_EQ(step(5).first, microseconds(51));
  EXPECT_EQ(step(5).second, microseconds(41));  // the first op waits 5 us, the others 4 us
  EXPECT_EQ(step(0.5).first, microseconds(10.5));
  EXPECT_EQ(step(0.5).second, microseconds(0.5));
}

// DeepSpeed's ZeRO-3 gather of 2021 (host_model.hpp, gather_member): the host synchronises with
// the GPU before the gather and then issues it tensor by tensor, one view per rank. Two ranks run
// five 10 us ops, a gather of 3 tensors (host cost 3 x (2 us + 2 ranks x 1 us) = 12 us) and a
// 10 us op that needs it. The sync waits for the five ops (50 us), the host then takes 12 us, so
// the last op starts at 62 us: 72 us, where a host that ran ahead would hide the gather (60 us).
// The GPU's 12 us wait for the host is reported.
TEST(HostModel, DeepSpeedGathersSynchroniseAndLoopOverTheRanks) {
  StepProgram prog(ProgramInfo{2, 0, 1, 1, 1, 6, Schedule::k1F1B});
  const std::uint32_t work = prog.intern(testing::elementwise(10'000'000));
  OpDesc gather = testing::collective(OpKind::kAllGather, Stream::kDpComm, 2);
  gather.aux = 3;
  const std::uint32_t g = prog.intern(gather);
  const std::int32_t group = prog.intern_group("dp", {0, 1});
  for (int rank = 0; rank < 2; ++rank) {
    RankProgram& r = prog.add_rank(rank, RankKind::kWorker, 0);
    for (int i = 0; i < 5; ++i) {
      Op o;
      o.id = OpId::make(i, 0, Phase::kForward, OpRole::kAttnResidual);
      o.desc = work;
      r.add(o, {});
    }
    Op o;
    o.id = OpId::make(5, 0, Phase::kForward, OpRole::kDpParamGather);
    o.desc = g;
    o.group = group;
    const std::uint32_t gathered = r.add(o, {});
    o.id = OpId::make(5, 0, Phase::kForward, OpRole::kAttnResidual);
    o.desc = work;
    o.group = -1;
    r.add(o, {gathered});
  }
  auto step = [&](double member_us) {
    HostCosts host;
    host.collective = microseconds(2);
    host.gather_member = microseconds(member_us);
    return run_with_host(prog, 2, host);
  };
  const auto [synced, waited] = step(1);
  EXPECT_NEAR(to_microseconds(synced), 72, 0.01);
  EXPECT_NEAR(to_microseconds(waited), 12, 0.01);
  // A stack that gathers one flat buffer: one 2 us launch, hidden under the five ops.
  EXPECT_NEAR(to_microseconds(step(0).first), 60, 0.01);
}

// Dropless MoE (host_model.hpp, OpRole::kMoeTokenCounts): the host copies the tokens per expert
// and synchronises with the compute stream before it issues the dispatch and the experts. Two
// ranks each run five 10 us ops (host 2 us each; the first starts at 2 us), the token counts (a
// 1 ns copy), and a 10 us op; a 3 MB data-parallel all-reduce (30 us on the 100 GB/s ring) follows
// the fourth op on its own stream. Running ahead, the host issues the last op at 12 us and it runs
// from 52 to 62 us. Waiting for the counts, the host issues it 2 us after they arrive: 64 us. A
// synchronisation with the compute stream does not wait for the all-reduce (42 to 72 us: the step
// is 72 us); one with the whole device (a stack whose host also synchronises before every pass)
// does: 72 + 2 + 10 = 84 us.
TEST(HostModel, DroplessTokenCountsSynchroniseTheHostWithTheComputeStream) {
  auto program = [](bool counts, bool all_reduce) {
    StepProgram prog(ProgramInfo{2, 0, 1, 1, 1, 6, Schedule::k1F1B});
    const std::uint32_t work = prog.intern(testing::elementwise(10'000'000));
    const std::uint32_t ar =
        prog.intern(testing::collective(OpKind::kAllReduce, Stream::kDpComm, 3'000'000));
    const std::uint32_t d2h =
        prog.intern(testing::collective(OpKind::kDeviceToHost, Stream::kDeviceToHost, 64));
    const std::int32_t group = prog.intern_group("dp", {0, 1});
    for (int rank = 0; rank < 2; ++rank) {
      RankProgram& r = prog.add_rank(rank, RankKind::kWorker, 0);
      std::uint32_t last = 0;
      for (int i = 0; i < 5; ++i) {
        Op o;
        o.id = OpId::make(i, 0, Phase::kForward, OpRole::kAttnResidual);
        o.desc = work;
        last = i == 0 ? r.add(o, {}) : r.add(o, {last});
        if (i == 3 && all_reduce) {
          Op g;
          g.id = OpId::make(i, 0, Phase::kForward, OpRole::kDpGradReduce);
          g.desc = ar;
          g.group = group;
          r.add(g, {last});
        }
      }
      if (counts) {
        Op c;
        c.id = OpId::make(5, 0, Phase::kForward, OpRole::kMoeTokenCounts);
        c.desc = d2h;
        r.add(c, {last});
      }
      Op o;
      o.id = OpId::make(5, 0, Phase::kForward, OpRole::kExpertUp);
      o.desc = work;
      r.add(o, {last});
    }
    return prog;
  };
  auto step = [&](bool counts, bool all_reduce, bool device_sync) {
    HostCosts host;
    host.memory_bound = microseconds(2);
    host.sync_per_pass = device_sync;  // one pass: no synchronisation of its own here
    return to_microseconds(run_with_host(program(counts, all_reduce), 2, host).first);
  };
  EXPECT_NEAR(step(false, false, false), 62, 0.01);
  EXPECT_NEAR(step(true, false, false), 64, 0.01);
  EXPECT_NEAR(step(true, true, false), 72, 0.01);
  EXPECT_NEAR(step(true, true, true), 84, 0.01);
}

// Megatron-LM's timers of 2020-2022 (host_model.hpp, sync_per_pass): the host synchronises with
// the GPU before every forward and backward pass. One rank runs the forward and the backward pass
// of two micro-batches, each pass three 10 us ops; the host takes 2 us per op. Running ahead, the
// host hides under the GPU after the first op: 2 + 12 x 10 = 122 us. Synchronised, each of the
// three later passes starts on a drained GPU that waits 2 us for its first op: 128 us.
TEST(HostModel, TimersSynchroniseBeforeEveryPass) {
  StepProgram prog(ProgramInfo{1, 0, 1, 1, 1, 2, Schedule::k1F1B});
  const std::uint32_t work = prog.intern(testing::elementwise(10'000'000));
  RankProgram& r = prog.add_rank(0, RankKind::kWorker, 0);
  for (int mb = 0; mb < 2; ++mb) {
    for (Phase ph : {Phase::kForward, Phase::kBackwardInput}) {
      for (int i = 0; i < 3; ++i) {
        Op o;
        o.id = OpId::make(i, mb, ph, OpRole::kAttnResidual);
        o.desc = work;
        r.add(o, {});
      }
    }
  }
  auto step = [&](bool sync) {
    HostCosts host;
    host.memory_bound = microseconds(2);
    host.sync_per_pass = sync;
    return run_with_host(prog, 1, host);
  };
  EXPECT_NEAR(to_microseconds(step(false).first), 122, 0.01);
  EXPECT_NEAR(to_microseconds(step(false).second), 2, 0.01);
  const auto [synced, waited] = step(true);
  EXPECT_NEAR(to_microseconds(synced), 128, 0.01);
  EXPECT_NEAR(to_microseconds(waited), 8, 0.01);
}

// A stack that synchronises on its pipeline receives (host_model.hpp, sync_on_receive:
// Megatron-LM's p2p_communication of 2020-2022, Megatron-DeepSpeed as vTrain measured it). Two
// stages run 1F1B over four micro-batches, every pass one 1 us op and its host 10 us. Running
// ahead, each stage's host issues its eight passes in 80 us while the other's does the same: the
// step is about the host's 80 us. Waiting for every receive, a stage's host cannot issue a pass
// before its input has arrived, so the host pipeline fills and drains: (4 + 2 - 1) x (10 + 10) =
// 100 us and the GPU time along the way.
TEST(HostModel, ReceivesSynchroniseTheHostSoAPipelineFillsAndDrainsOnIt) {
  auto sched = PipelineSchedule::create(Schedule::k1F1B, 2, 4, 1);
  ASSERT_TRUE(sched) << sched.status().message();
  const StepProgram prog = pipeline_program(*sched);
  auto step = [&](bool sync) {
    HostCosts host;
    host.memory_bound = microseconds(10);
    host.sync_on_receive = sync;
    return to_microseconds(run_with_host(prog, 2, host).first);
  };
  // Stage 1's last backward pass is issued at 80 us and runs after stage 0's, whose gradient
  // stage 0 then needs: 82 us.
  EXPECT_NEAR(step(false), 82, 0.01);
  // The host's 100 us, and 1 us per receive it synchronises on after the first (the GPU drains
  // the op before it): 106 us.
  EXPECT_NEAR(step(true), 106, 0.01);
}

ModelSpec small_llama(int layers = 4) {
  ModelSpec m = *builtin_catalog().find_model("llama2-7b");
  m.num_layers = layers;
  return m;
}

SimInput input_for(const std::string& topology, int nodes, ParallelConfig parallel,
                   std::int64_t gbs, const ModelSpec& model = small_llama()) {
  SimInput in;
  auto spec = topo::builtin_topologies().get(topology);
  if (!spec) throw std::runtime_error(spec.status().message());
  in.cluster = testing::build(*spec, nodes);
  in.plan.gpu = *builtin_catalog().find_gpu(spec->gpu);
  const HardwareProfile* profile = builtin_profile_for(in.plan.gpu);
  in.profile =
      std::make_shared<const HardwareProfile>(profile ? *profile : derive_profile(in.plan.gpu));
  in.plan.model = model;
  in.plan.training.seq_length = 2048;
  in.plan.training.global_batch_size = gbs;
  in.plan.parallel = parallel;
  return in;
}

SimResult simulate_ok(const SimInput& in) {
  auto r = simulate(in);
  if (!r) throw std::runtime_error(r.status().message());
  EXPECT_TRUE(r->simulated);
  return std::move(r).value();
}

// tp2 x pp2 x dp4 with sequence parallelism: the plan the determinism tests simulate.
ParallelConfig tp2_pp2_dp4_sp() {
  ParallelConfig p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 4;
  p.sequence_parallel = true;
  return p;
}

// Runs simulate(input(t)) for t = 0..n-1, each on its own thread, all at once; a failed one
// gives an empty result.
std::vector<SimResult> simulate_on_threads(int n,
                                           const std::function<const SimInput&(int)>& input) {
  std::vector<SimResult> out(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      auto r = simulate(input(t));
      if (r) out[static_cast<std::size_t>(t)] = std::move(r).value();
    });
  }
  for (std::thread& t : threads)
    t.join();
  return out;
}

// A symmetric cluster simulated through one rank per stage or one replica (with the other ranks'
// traffic as background) agrees with simulating every rank.
TEST(Representative, AgreesWithFullSimulation) {
  ParallelConfig within;  // data parallelism inside a node, pipeline across nodes
  within.tp = 2;
  within.pp = 2;
  within.dp = 4;
  ParallelConfig across;  // data parallelism across nodes
  across.tp = 2;
  across.dp = 8;
  ParallelConfig context;  // a context-parallel ring that one rank per stage does not simulate
  context.tp = 2;
  context.cp = 2;
  context.pp = 2;
  context.dp = 2;
  for (const ParallelConfig& parallel : {within, across, context}) {
    SimInput in = input_for("dgx-h100-superpod", 2, parallel, 32);
    in.options.ranks = RankSubset::kAll;
    const SimResult full = simulate_ok(in);
    for (RankSubset subset : {RankSubset::kOnePerStage, RankSubset::kDataParallelReplica}) {
      in.options.ranks = subset;
      const SimResult rep = simulate_ok(in);
      EXPECT_NEAR(to_seconds(rep.step_time) / to_seconds(full.step_time), 1.0, 0.005)
          << short_label(parallel) << " " << to_string(subset);
      EXPECT_LT(rep.simulated_ranks, full.simulated_ranks);
    }
    // Without the background the data-parallel traffic of the other tp ranks is missing.
    in.options.ranks = RankSubset::kOnePerStage;
    in.options.run.background = false;
    EXPECT_LE(simulate_ok(in).step_time, full.step_time);
  }
}

// Same input, same result and byte-identical trace, on any thread and any number of threads.
TEST(Determinism, TraceIsByteIdenticalAcrossThreads) {
  SimInput in = input_for("dgx-h100-superpod", 2, tp2_pp2_dp4_sp(), 16);
  in.options.run.trace = true;
  in.options.ranks = RankSubset::kDataParallelReplica;
  const SimResult first = simulate_ok(in);
  ASSERT_FALSE(first.trace_json.empty());
  EXPECT_EQ(simulate_ok(in).trace_json, first.trace_json);
  const std::vector<SimResult> runs =
      simulate_on_threads(4, [&](int) -> const SimInput& { return in; });
  for (std::size_t t = 0; t < runs.size(); ++t) {
    EXPECT_EQ(runs[t].step_time, first.step_time);
    EXPECT_TRUE(runs[t].trace_json == first.trace_json) << "thread " << t;
  }
}

// Simulations sharing a plan memo (as a sweep's do), on several threads, get the trace they get
// alone; so does a different plan on the same memo (its plans differ by size or copies).
TEST(Determinism, SharedPlanMemoChangesNothing) {
  const ParallelConfig a = tp2_pp2_dp4_sp();
  ParallelConfig b = a;
  b.micro_batch_size = 2;
  SimInput in_a = input_for("dgx-h100-superpod", 2, a, 16);
  SimInput in_b = input_for("dgx-h100-superpod", 2, b, 16);
  for (SimInput* in : {&in_a, &in_b}) {
    in->options.run.trace = true;
    in->options.ranks = RankSubset::kOnePerStage;
  }
  const std::string alone_a = simulate_ok(in_a).trace_json;
  const std::string alone_b = simulate_ok(in_b).trace_json;
  ASSERT_NE(alone_a, alone_b);
  auto memo = std::make_shared<PlanMemo>();
  in_a.plan_memo = memo;
  in_b.plan_memo = memo;
  EXPECT_EQ(simulate_ok(in_a).trace_json, alone_a);  // fills the memo
  const std::vector<SimResult> runs =
      simulate_on_threads(4, [&](int t) -> const SimInput& { return t % 2 == 0 ? in_a : in_b; });
  for (std::size_t t = 0; t < runs.size(); ++t)
    EXPECT_TRUE(runs[t].trace_json == (t % 2 == 0 ? alone_a : alone_b)) << "thread " << t;
}

// The trace is Chrome trace-event JSON: one process per rank, named tracks, micro-batch ids in
// the op names.
TEST(Trace, ProcessesTracksAndMicroBatches) {
  ParallelConfig parallel;
  parallel.tp = 2;
  parallel.pp = 2;
  parallel.dp = 2;
  SimInput in = input_for("dgx-h100-superpod", 1, parallel, 8);
  in.options.run.trace = true;
  const SimResult r = simulate_ok(in);
  const Json doc = Json::parse(r.trace_json);
  ASSERT_TRUE(doc.contains("traceEvents"));
  int processes = 0, compute_tracks = 0, mb3 = 0;
  for (const Json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "compute") {
      ++compute_tracks;
    }
    if (e["ph"] == "X" && e["name"].get<std::string>().find(".mb3.") != std::string::npos) ++mb3;
  }
  EXPECT_EQ(processes, 2);  // one rank per stage
  EXPECT_EQ(compute_tracks, 2);
  EXPECT_GT(mb3, 0);
}

TEST(Memory, PlanThatDoesNotFitIsReportedNotSimulated) {
  ParallelConfig parallel;
  parallel.tp = 8;
  SimInput in =
      input_for("dgx-a100-superpod", 1, parallel, 8, *builtin_catalog().find_model("gpt3-175b"));
  auto r = simulate(in);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_TRUE(r->out_of_memory.has_value());
  EXPECT_FALSE(r->simulated);
  EXPECT_EQ(r->out_of_memory->stage, 0);
  EXPECT_GT(r->out_of_memory->needed, r->out_of_memory->capacity);
  EXPECT_EQ(r->out_of_memory->capacity, gibibytes(80));
  EXPECT_EQ(r->step_time, Time(0));
  in.options.check_memory = false;  // simulated anyway when asked
  EXPECT_TRUE(simulate_ok(in).step_time > Time(0));
}

TEST(Simulate, ReportIsConsistent) {
  ParallelConfig parallel;
  parallel.tp = 4;
  parallel.pp = 2;
  parallel.dp = 2;
  parallel.sequence_parallel = true;
  parallel.recompute = Recompute::kSelective;
  SimInput in = input_for("dgx-a100-superpod", 2, parallel, 16);
  const SimResult r = simulate_ok(in);
  EXPECT_GT(r.mfu, 0.05);
  EXPECT_LT(r.mfu, r.hfu);
  EXPECT_LT(r.hfu, 1.0);
  EXPECT_NEAR(r.tokens_per_second, 16 * 2048 / to_seconds(r.step_time), 1e-6);
  // Every rank's buckets add up to the step time.
  for (const RankRun& rank : r.ranks) {
    Time sum{0};
    for (Time t : rank.buckets)
      sum += t;
    EXPECT_EQ(sum, r.step_time);
  }
  Time path{0};
  for (Time t : r.critical_buckets)
    path += t;
  EXPECT_EQ(path, r.step_time);
  EXPECT_FALSE(r.critical_path.empty());
  EXPECT_GE(r.bubble_fraction, r.schedule_bubble * 0.5);
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_GT(r.stages[0].peak_memory, Bytes(0));
  EXPECT_GT(r.exposed(TimeBucket::kTp), Time(0));
}

// Every topology preset simulates a small plan with the profile of its GPU.
TEST(Presets, EveryTopologySimulates) {
  for (const topo::TopologySpec& spec : topo::builtin_topologies().all()) {
    ParallelConfig parallel;
    parallel.tp = std::min(spec.gpus_per_node(), 4);
    parallel.pp = 2;
    const int nodes = std::max(2, spec.nvlink_domain ? spec.nvlink_domain->nodes : 2);
    parallel.dp = nodes * spec.gpus_per_node() / (parallel.tp * parallel.pp);
    // cpu-host ranks have 4 GiB each and train in fp32: a small GPT instead of the 8B llama.
    const bool cpu = spec.gpu == "cpu-host";
    SimInput in = cpu ? input_for(spec.name, nodes, parallel, parallel.dp * 2,
                                  *builtin_catalog().find_model("gpt-tiny"))
                      : input_for(spec.name, nodes, parallel, parallel.dp * 2);
    if (cpu) {
      in.plan.training.precision = Precision::kFp32;
      in.plan.training.seq_length = 256;
    }
    if (!cpu && !in.plan.gpu.supports(Precision::kBf16))
      in.plan.training.precision = Precision::kFp16;
    auto r = simulate(in);
    ASSERT_TRUE(r) << spec.name << ": " << r.status().message();
    EXPECT_TRUE(r->simulated) << spec.name;
    EXPECT_GT(r->mfu, 0.0) << spec.name;
    EXPECT_LT(r->mfu, 1.0) << spec.name;
  }
}

// One training step on each 100,000-GPU-class preset, built at its full size: a 4-layer Llama 2
// 7B with tp 8 inside the NVLink domains, pp 2 and dp 1,024 (16,384 GPUs: three of the H100
// cluster's islands, 228 of the GB200 racks); one rank per stage simulated, the others' traffic
// loading the fabric as background. (bench_scale times a step over the whole of each.)
TEST(Presets, HundredThousandGpuClustersSimulateAStep) {
  for (const char* name : {"h100-rail-100k", "gb200-nvl72-100k"}) {
    const topo::TopologySpec spec = *topo::builtin_topologies().get(name);
    ParallelConfig parallel;
    parallel.tp = 8;
    parallel.pp = 2;
    parallel.dp = 1024;
    parallel.sequence_parallel = true;
    parallel.zero_stage = 1;
    SimInput in = input_for(name, spec.default_nodes, parallel, parallel.dp);
    EXPECT_GT(in.cluster->num_gpus(), 98000) << name;
    const SimResult r = simulate_ok(in);
    EXPECT_GT(r.mfu, 0.0) << name;
    EXPECT_LT(r.mfu, 1.0) << name;
    // The data-parallel gradient reduction crosses the fabric and is not hidden entirely.
    EXPECT_GT(r.exposed(TimeBucket::kDp), Time(0)) << name;
  }
}

// Parallelism features simulate to the end in representative and full mode.
TEST(Features, EveryFeatureRunsToTheEnd) {
  struct Case {
    const char* what;
    ParallelConfig parallel;
    ModelSpec model;
  };
  std::vector<Case> cases;
  auto base = [] {
    ParallelConfig p;
    p.tp = 2;
    p.pp = 2;
    p.dp = 2;
    return p;
  };
  {
    ParallelConfig p = base();
    p.cp = 2;
    p.dp = 1;
    cases.push_back({"cp", p, small_llama()});
  }
  {
    ParallelConfig p = base();
    p.schedule = Schedule::kInterleaved;
    p.virtual_stages = 2;
    cases.push_back({"interleaved", p, small_llama()});
  }
  {
    ParallelConfig p = base();
    p.schedule = Schedule::kZeroBubbleH1;
    p.zero_stage = 1;
    p.sequence_parallel = true;
    cases.push_back({"zb-h1 zero1 sp", p, small_llama()});
  }
  {
    ParallelConfig p = base();
    p.zero_stage = 3;
    p.recompute = Recompute::kFull;
    cases.push_back({"zero3 full recompute", p, small_llama()});
  }
  {
    ParallelConfig p = base();
    p.schedule = Schedule::kDualPipeV;
    p.virtual_stages = 2;
    p.zero_stage = 1;
    cases.push_back({"dualpipev", p, small_llama()});
    p.tp = 1;
    p.pp = 4;
    p.dp = 1;
    cases.push_back({"dualpipev pp4", p, small_llama(8)});
  }
  {
    ParallelConfig p = base();
    p.ep = 2;
    p.sequence_parallel = true;
    ModelSpec m = *builtin_catalog().find_model("mixtral-8x7b");
    m.num_layers = 2;
    cases.push_back({"moe ep", p, m});
  }
  {
    ParallelConfig p = base();
    p.offload = Offload::kOptimizer;
    p.zero_stage = 1;
    cases.push_back({"offload", p, small_llama()});
  }
  {
    ParallelConfig p = base();
    p.pp = 1;
    p.dp = 4;
    p.dp_sync = DpSync::kParameterServer;
    p.param_servers = 2;
    cases.push_back({"parameter server", p, small_llama()});
  }
  for (const Case& c : cases) {
    for (RankSubset subset : {RankSubset::kOnePerStage, RankSubset::kAll}) {
      SimInput in = input_for("dgx-h100-superpod", 2, c.parallel, 8, c.model);
      in.options.ranks = subset;
      in.options.check_memory = false;
      auto r = simulate(in);
      ASSERT_TRUE(r) << c.what << ": " << r.status().message();
      EXPECT_GT(r->step_time, Time(0)) << c.what;
    }
  }
}

// One step of Qwen3-30B-A3B cut to `layers` layers, on as many DGX H100 nodes as `p` needs,
// memory unchecked.
SimResult qwen3_moe_step(int layers, const ParallelConfig& p, std::int64_t gbs) {
  ModelSpec m = *builtin_catalog().find_model("qwen3-30b-a3b");
  m.num_layers = layers;
  SimInput in = input_for("dgx-h100-superpod", static_cast<int>(p.world_size() / 8), p, gbs, m);
  in.options.check_memory = false;
  return simulate_ok(in);
}

// An MoE plan whose expert-parallel group spans two nodes: sending each token once per node
// (hierarchical all-to-all) cuts the all-to-all time the compute waits for; Qwen3-30B-A3B's
// top-8 of 128 experts reach both nodes almost always, so the network carries about 2 of every
// 8 copies' worth of bytes, the rest forwarded over NVLink once per GPU.
TEST(Simulate, HierarchicalAllToAllCutsTheExposedExpertTraffic) {
  // Qwen3-30B with dp = ep = `gpus` on DGX H100 nodes, sending its tokens as `a2a` says.
  auto run = [&](int gpus, MoeA2a a2a) {
    ParallelConfig p;
    p.dp = gpus;
    p.ep = gpus;
    p.moe_a2a = a2a;
    return qwen3_moe_step(2, p, gpus);
  };
  const SimResult nccl = run(16, MoeA2a::kNccl);
  const SimResult hier = run(16, MoeA2a::kHierarchical);
  const Time ep_nccl = nccl.exposed(TimeBucket::kEp);
  const Time ep_hier = hier.exposed(TimeBucket::kEp);
  EXPECT_GT(ep_nccl, Time(0));
  EXPECT_LT(to_seconds(ep_hier), 0.5 * to_seconds(ep_nccl));
  EXPECT_LT(hier.step_time, nccl.step_time);
  // Inside one node only the NVLink leg, a token once per GPU instead of once per expert: less.
  EXPECT_LT(run(8, MoeA2a::kHierarchical).exposed(TimeBucket::kEp),
            run(8, MoeA2a::kNccl).exposed(TimeBucket::kEp));
}

// Megatron-core's EP all-to-all overlap (moe_a2a_overlap): each steady-state forward pass runs
// merged with the backward pass of another micro-batch, so one's all-to-alls run under the
// other's compute. Qwen3-30B-A3B with ep 16 across two DGX H100 nodes, four micro-batches: with
// one stage (1F1B) and with two stages of two chunks (interleaved), the all-to-all time the compute
// waits for falls by more than a third, and the step with it.
TEST(Simulate, AllToAllOverlapHidesTheExpertTrafficUnderTheOtherPass) {
  auto run = [&](int pp, bool overlap) {
    ParallelConfig p;
    p.pp = pp;
    p.dp = 16 / pp;
    p.ep = 16 / pp;
    if (pp > 1) {
      p.virtual_stages = 2;
      p.schedule = Schedule::kInterleaved;
    }
    p.moe_a2a_overlap = overlap;
    return qwen3_moe_step(4, p, 4 * p.dp);
  };
  for (int pp : {1, 2}) {
    const SimResult apart = run(pp, false);
    const SimResult merged = run(pp, true);
    EXPECT_GT(apart.exposed(TimeBucket::kEp), Time(0)) << "pp " << pp;
    EXPECT_LT(to_seconds(merged.exposed(TimeBucket::kEp)),
              0.67 * to_seconds(apart.exposed(TimeBucket::kEp)))
        << "pp " << pp;
    EXPECT_LT(merged.step_time, apart.step_time) << "pp " << pp;
  }
}

// Only the all-to-alls run under the other pass: the merged passes' segments run one after another
// on the compute stream with their tensor-parallel collectives (Transformer Engine issues them
// there), so a forward pass's tp collectives never hide under the backward pass's compute.
// Qwen3-30B-A3B, tp 2 with sequence parallelism, ep 8 on two DGX H100 nodes: with the overlap the
// all-to-all time the compute waits for falls by more than a third while the tp time it waits for
// does not fall (it fell by 9 % when the other pass's compute ran under it).
TEST(Simulate, AllToAllOverlapHidesNoTensorParallelTraffic) {
  auto run = [&](bool overlap) {
    ParallelConfig p;
    p.tp = 2;
    p.sequence_parallel = true;
    p.dp = 8;
    p.ep = 8;
    p.moe_a2a_overlap = overlap;
    return qwen3_moe_step(4, p, 4 * p.dp);
  };
  const SimResult apart = run(false);
  const SimResult merged = run(true);
  EXPECT_LT(to_seconds(merged.exposed(TimeBucket::kEp)),
            0.67 * to_seconds(apart.exposed(TimeBucket::kEp)));
  EXPECT_GT(apart.exposed(TimeBucket::kTp), Time(0));
  EXPECT_GE(to_seconds(merged.exposed(TimeBucket::kTp)),
            0.97 * to_seconds(apart.exposed(TimeBucket::kTp)));
  EXPECT_LT(merged.step_time, apart.step_time);
}

// The EP all-to-all overlap where the merged pairs used to make the stages wait on each other
// forever: chunks of dense layers beside chunks of MoE layers (a dense layer's pass has no
// all-to-all to cut it at, so its pipeline messages moved differently from its partner's; GLM-4.5
// and DeepSeek-V3 open with dense layers), and fewer than 2p micro-batches, where a pair's
// backward needs the next stage's pair, which needs this pair's forward. Every plan simulates; the
// first merges its steady state and hides all-to-all time; with 2 and 3 micro-batches on 2 stages
// the pairs that can run merged do, and the step is no slower than without the overlap.
TEST(Simulate, AllToAllOverlapNeverDeadlocksTheStages) {
  auto run = [&](int first_dense, std::int64_t microbatches, bool overlap) {
    ModelSpec m = *builtin_catalog().find_model("qwen3-30b-a3b");
    m.num_layers = 8;
    m.moe->first_dense_layers = first_dense;
    ParallelConfig p;
    p.pp = 2;
    p.dp = 8;
    p.ep = 8;
    p.virtual_stages = 4;  // chunks of one layer: layers 0-2 dense, the rest MoE
    p.schedule = Schedule::kInterleaved;
    p.moe_a2a_overlap = overlap;
    SimInput in = input_for("dgx-h100-superpod", 2, p, microbatches * p.dp, m);
    in.options.check_memory = false;
    return simulate_ok(in);
  };
  const SimResult dense_apart = run(3, 8, false);
  const SimResult dense_merged = run(3, 8, true);
  EXPECT_LT(dense_merged.exposed(TimeBucket::kEp), dense_apart.exposed(TimeBucket::kEp));
  EXPECT_LT(dense_merged.step_time, dense_apart.step_time);
  for (std::int64_t m : {2, 3}) {
    const SimResult apart = run(0, m, false);
    const SimResult merged = run(0, m, true);
    EXPECT_LE(merged.step_time, apart.step_time) << m << " micro-batches";
  }
}

// The interleaved schedule with micro-batches that are not a multiple of pp (Megatron-core's last
// group of p + m mod p): the stages' sends and receives used to come in orders that waited on
// each other forever (2 stages of 3 chunks with 5 micro-batches; 3 stages of 4 chunks with 8).
// Every such plan simulates, and takes longer with more micro-batches.
TEST(Simulate, InterleavedWithAnyNumberOfMicroBatches) {
  for (const auto& [pp, v] : {std::pair{2, 3}, std::pair{3, 4}}) {
    Time previous(0);
    for (int m = pp; m <= 3 * pp + 2; ++m) {
      ParallelConfig p;
      p.pp = pp;
      p.dp = 2;
      p.schedule = Schedule::kInterleaved;
      p.virtual_stages = v;
      SimInput in = input_for("dgx-h100-superpod", 1, p, 2 * m, small_llama(12));
      in.options.check_memory = false;
      const SimResult r = simulate_ok(in);
      EXPECT_GT(r.step_time, previous) << "pp " << pp << " v " << v << " m " << m;
      previous = r.step_time;
    }
  }
}

// DeepSeek's DualPipeV on Qwen3-30B-A3B with ep 8 across two DGX H100 nodes, pp 2, eight
// micro-batches: its merged forward-and-backward chunks hide all-to-all time that ZB-H1 (the same
// split backward, one pass at a time) leaves exposed, and the step is shorter.
TEST(Simulate, DualPipeVHidesExpertTrafficUnderTheOtherChunk) {
  auto run = [&](Schedule s) {
    ParallelConfig p;
    p.pp = 2;
    p.dp = 8;
    p.ep = 8;
    p.schedule = s;
    p.virtual_stages = s == Schedule::kDualPipeV ? 2 : 1;
    return qwen3_moe_step(4, p, 8 * p.dp);
  };
  const SimResult zb = run(Schedule::kZeroBubbleH1);
  const SimResult v = run(Schedule::kDualPipeV);
  EXPECT_GT(zb.exposed(TimeBucket::kEp), Time(0));
  EXPECT_LT(to_seconds(v.exposed(TimeBucket::kEp)), 0.8 * to_seconds(zb.exposed(TimeBucket::kEp)));
  EXPECT_LT(v.step_time, zb.step_time);
}

TEST(Simulate, RejectsTooSmallClusterAndMissingPrecision) {
  ParallelConfig parallel;
  parallel.tp = 8;
  parallel.dp = 2;
  SimInput in = input_for("dgx-h100-superpod", 1, parallel, 8);
  auto r = simulate(in);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "the plan needs 16 GPUs (16 workers) but the cluster has 8");
  parallel.dp = 1;
  SimInput fp8 = input_for("dgx-a100-superpod", 1, parallel, 8);
  fp8.plan.training.precision = Precision::kFp8;
  fp8.options.check_memory = false;
  auto f = simulate(fp8);
  ASSERT_FALSE(f);
  EXPECT_NE(f.status().message().find("no fp8 GEMM rate"), std::string::npos)
      << f.status().message();
}

}  // namespace
}  // namespace planner::sim
