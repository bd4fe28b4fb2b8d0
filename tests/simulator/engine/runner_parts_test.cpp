// The program runner's parts on their own: the communication matcher, the compute units and the
// passes that account a run's time.
#include <gtest/gtest.h>

#include <vector>

#include "planner/sim/comm_matcher.hpp"
#include "planner/sim/compute_units.hpp"
#include "planner/sim/engine.hpp"
#include "planner/sim/time_accounting.hpp"
#include "simulator/sim_test_support.hpp"

namespace planner::sim {
namespace {

using testing::op_id;

// ---- CommMatcher

// Four ranks; ranks 0 and 1 lowered (2 and 3 are not). Rank 0: an all-reduce over {0, 1, 2}, a
// send to rank 1, a send to rank 2 and a receive from rank 3 with the same tag (a ring through
// unlowered neighbours). Rank 1: the all-reduce and the receive from rank 0.
struct MatcherProgram {
  StepProgram program{ProgramInfo{4, 0, 1, 1, 1, 1, Schedule::k1F1B}};
  std::vector<std::int32_t> rank_index{0, 1, -1, -1};
  MatcherProgram() {
    const std::int32_t group = program.intern_group("dp", {0, 1, 2});
    const std::uint32_t ar =
        program.intern(testing::collective(OpKind::kAllReduce, Stream::kDpComm, 1024));
    OpDesc send = testing::collective(OpKind::kSend, Stream::kCpSend, 64);
    OpDesc recv = testing::collective(OpKind::kRecv, Stream::kCpRecv, 64);
    const std::uint32_t send_d = program.intern(send);
    const std::uint32_t recv_d = program.intern(recv);
    const std::uint32_t tag = p2p_tag(P2pChannel::kCpKvForward, 7);
    auto op = [](std::uint32_t desc, OpRole role, std::int32_t grp, int peer, std::uint32_t t) {
      Op o;
      o.id = op_id(0, Phase::kForward, role);
      o.desc = desc;
      o.group = grp;
      o.peer = peer;
      o.tag = t;
      return o;
    };
    RankProgram& r0 = program.add_rank(0, RankKind::kWorker, 0);
    r0.add(op(ar, OpRole::kDpGradReduce, group, -1, 0), {});
    r0.add(op(send_d, OpRole::kPpSendActivation, -1, 1, 1), {});
    r0.add(op(send_d, OpRole::kCpKvSend, -1, 2, tag), {});
    r0.add(op(recv_d, OpRole::kCpKvRecv, -1, 3, tag), {});
    RankProgram& r1 = program.add_rank(1, RankKind::kWorker, 0);
    r1.add(op(ar, OpRole::kDpGradReduce, group, -1, 0), {});
    r1.add(op(recv_d, OpRole::kPpRecvActivation, -1, 0, 1), {});
  }
};

TEST(CommMatcher, CollectiveStartsWhenEveryLoweredMemberArrived) {
  MatcherProgram p;
  CommMatcher matcher(p.program, p.rank_index);
  std::vector<MatchId> ready;
  matcher.arrive({1, 0}, ready);
  EXPECT_TRUE(ready.empty());  // rank 0 has not arrived; rank 2 was not lowered
  matcher.arrive({0, 0}, ready);
  ASSERT_EQ(ready.size(), 1u);
  const Match& m = matcher.match(ready[0]);
  EXPECT_EQ(m.members, (std::vector<RankOp>{{1, 0}, {0, 0}}));
  EXPECT_EQ(m.trigger, (RankOp{0, 0}));
  EXPECT_FALSE(m.mirrored);
}

TEST(CommMatcher, SendAndReceiveStartTogether) {
  MatcherProgram p;
  CommMatcher matcher(p.program, p.rank_index);
  std::vector<MatchId> ready;
  matcher.arrive({1, 1}, ready);  // the receive is posted first
  EXPECT_TRUE(ready.empty());
  matcher.arrive({0, 1}, ready);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(matcher.match(ready[0]).members, (std::vector<RankOp>{{1, 1}, {0, 1}}));
  EXPECT_EQ(matcher.match(ready[0]).trigger, (RankOp{0, 1}));
  matcher.release(ready[0]);
}

// The receive from the unlowered rank 3 mirrors rank 0's own send to the unlowered rank 2: it
// waits for that send and starts with it, and the send starts at once.
TEST(CommMatcher, ReceiveFromUnloweredPeerStartsWithTheMirroredSend) {
  MatcherProgram p;
  CommMatcher matcher(p.program, p.rank_index);
  std::vector<MatchId> ready;
  matcher.arrive({0, 3}, ready);
  EXPECT_TRUE(ready.empty());
  matcher.arrive({0, 2}, ready);
  ASSERT_EQ(ready.size(), 2u);
  const Match& recv = matcher.match(ready[0]);
  EXPECT_EQ(recv.members, (std::vector<RankOp>{{0, 3}}));
  EXPECT_EQ(recv.trigger, (RankOp{0, 2}));
  EXPECT_TRUE(recv.mirrored);
  const Match& send = matcher.match(ready[1]);
  EXPECT_EQ(send.members, (std::vector<RankOp>{{0, 2}}));
  EXPECT_FALSE(send.mirrored);
}

TEST(CommMatcher, ReceiveAfterItsMirroredSendStartsAtOnce) {
  MatcherProgram p;
  CommMatcher matcher(p.program, p.rank_index);
  std::vector<MatchId> ready;
  matcher.arrive({0, 2}, ready);
  ASSERT_EQ(ready.size(), 1u);
  ready.clear();
  matcher.arrive({0, 3}, ready);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(matcher.match(ready[0]).members, (std::vector<RankOp>{{0, 3}}));
}

// ---- ComputeUnits

// Runs the engine until no event is left; returns (unit, time) of every completion in order.
std::vector<std::pair<std::uint32_t, Time>> run_units(Engine& engine, ComputeUnits& units) {
  std::vector<std::pair<std::uint32_t, Time>> done;
  Event e;
  while (engine.next(e)) {
    units.finish(e.a);
    done.emplace_back(e.a, e.time);
  }
  return done;
}

TEST(ComputeUnits, CommunicationSlowsTheUnitsOwnKernel) {
  ComputeProfile profile;
  profile.comm_slowdown = 0.5;
  Engine engine;
  ComputeUnits units(engine, 0, profile);
  const std::uint32_t gpu = units.add(0);
  const std::uint32_t other = units.add(0);  // a GPU on the same node: not affected
  units.start(gpu, Time(1000), 7);
  units.start(other, Time(1000), 8);
  // At 400 ps a collective starts on the first GPU: 600 ps of work left at half speed.
  engine.schedule(Time(400), 99);
  Event e;
  ASSERT_TRUE(engine.next(e));
  units.comm_started(gpu);
  // It stops at 1000 ps: 300 ps of work left at full speed.
  engine.schedule(Time(1000), 99);
  ASSERT_TRUE(engine.next(e));
  ASSERT_EQ(e.kind, 0u);  // the other GPU finishes at 1000 ps first (scheduled earlier)
  EXPECT_EQ(units.finish(e.a), 8u);
  ASSERT_TRUE(engine.next(e));
  EXPECT_EQ(e.kind, 99u);
  units.comm_stopped(gpu);
  const auto done = run_units(engine, units);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0], std::make_pair(gpu, Time(1300)));
}

// Three CPU ranks on a host of two cores (efficiency 0.5) run at 2/3 · 0.5 = 1/3 of a core each
// while all three compute; when two finish, the third runs alone at full speed.
TEST(ComputeUnits, RanksOfAHostShareItsCores) {
  ComputeProfile profile;
  profile.host_cores = 2;
  profile.oversubscribed_efficiency = 0.5;
  Engine engine;
  ComputeUnits units(engine, 0, profile);
  const std::uint32_t a = units.add(0), b = units.add(0), c = units.add(0);
  const std::uint32_t elsewhere = units.add(1);  // another node's cores
  units.start(a, Time(1000), 0);
  units.start(b, Time(1000), 1);
  units.start(c, Time(2000), 2);
  units.start(elsewhere, Time(500), 3);
  const auto done = run_units(engine, units);
  ASSERT_EQ(done.size(), 4u);
  EXPECT_EQ(done[0], std::make_pair(elsewhere, Time(500)));
  EXPECT_EQ(done[1], std::make_pair(a, Time(3000)));
  EXPECT_EQ(done[2], std::make_pair(b, Time(3000)));
  EXPECT_EQ(done[3], std::make_pair(c, Time(4000)));
  EXPECT_FALSE(units.busy(c));
}

// ---- time accounting

// One rank: compute [0, 10) and [30, 40); tp [5, 20); dp [15, 35); step 50.
RankOpTimes accounted_rank(StepProgram& program) {
  const std::uint32_t gemm = program.intern(testing::elementwise(1));
  const std::uint32_t tp =
      program.intern(testing::collective(OpKind::kAllReduce, Stream::kTpComm, 1));
  const std::uint32_t dp =
      program.intern(testing::collective(OpKind::kAllReduce, Stream::kDpComm, 1));
  RankProgram& r = program.add_rank(0, RankKind::kWorker, 0);
  auto add = [&](std::uint32_t desc, int slot, std::initializer_list<std::uint32_t> deps) {
    Op o;
    o.id = op_id(0, Phase::kForward, OpRole::kMlpUp, slot);
    o.desc = desc;
    return r.add(o, deps);
  };
  add(gemm, 0, {});      // 0: compute [0, 10)
  add(tp, 1, {0});       // 1: tp [5, 20)
  add(dp, 2, {});        // 2: dp [15, 35)
  add(gemm, 3, {1, 2});  // 3: compute [30, 40), released by op 1 (ends 20) and op 2 (ends 35)
  RankOpTimes t;
  t.program = &r;
  t.stream_ops[static_cast<std::size_t>(Stream::kCompute)] = {0, 3};
  t.stream_ops[static_cast<std::size_t>(Stream::kTpComm)] = {1};
  t.stream_ops[static_cast<std::size_t>(Stream::kDpComm)] = {2};
  t.start = {Time(0), Time(5), Time(15), Time(30)};
  t.end = {Time(10), Time(20), Time(35), Time(40)};
  t.started_by.assign(4, kNoOp);
  return t;
}

TEST(TimeAccounting, BucketsChargeComputeThenAxesInOrderThenIdle) {
  StepProgram program(ProgramInfo{1, 0, 1, 1, 1, 1, Schedule::k1F1B});
  const RankOpTimes t = accounted_rank(program);
  const auto b = bucket_times(t, Time(50));
  EXPECT_EQ(b[static_cast<std::size_t>(TimeBucket::kCompute)], Time(20));
  EXPECT_EQ(b[static_cast<std::size_t>(TimeBucket::kTp)], Time(10));    // [10, 20)
  EXPECT_EQ(b[static_cast<std::size_t>(TimeBucket::kDp)], Time(10));    // [20, 30)
  EXPECT_EQ(b[static_cast<std::size_t>(TimeBucket::kIdle)], Time(10));  // [40, 50)
}

// The path from the last op: op 3 (released at 35 by op 2: charged 5), op 2 (no predecessor on
// its stream, no dependencies: charged 35 from the start).
TEST(TimeAccounting, CriticalPathFollowsTheLatestRelease) {
  StepProgram program(ProgramInfo{1, 0, 1, 1, 1, 1, Schedule::k1F1B});
  const RankOpTimes t = accounted_rank(program);
  const CriticalPath path = critical_path(program, std::span<const RankOpTimes>(&t, 1), 10);
  EXPECT_EQ(path.buckets[static_cast<std::size_t>(TimeBucket::kCompute)], Time(5));
  EXPECT_EQ(path.buckets[static_cast<std::size_t>(TimeBucket::kDp)], Time(35));
  ASSERT_EQ(path.top.size(), 2u);  // by time
  EXPECT_EQ(path.top[0].label, "fwd.mlp_up all_reduce");
  EXPECT_EQ(path.top[0].time, Time(35));
  EXPECT_EQ(path.top[1].label, "fwd.mlp_up elementwise");
}

// A context-parallel ring through an unsimulated neighbour: compute [0, 30), then the send to the
// next neighbour [30, 40); the receive from the previous one was posted at 0 and started with that
// send (its mirror), [30, 40); the next compute needs the receive, [40, 50). The receive's wait
// for its peer is the compute before the send, not communication: the path charges cp only the
// transfer (issue 19).
TEST(TimeAccounting, CriticalPathOfAMirroredReceiveGoesThroughItsSend) {
  StepProgram program(ProgramInfo{1, 0, 1, 1, 1, 1, Schedule::k1F1B});
  const std::uint32_t gemm = program.intern(testing::elementwise(1));
  const std::uint32_t send = program.intern(testing::collective(OpKind::kSend, Stream::kCpSend, 1));
  const std::uint32_t recv = program.intern(testing::collective(OpKind::kRecv, Stream::kCpRecv, 1));
  RankProgram& r = program.add_rank(0, RankKind::kWorker, 0);
  auto add = [&](std::uint32_t desc, OpRole role, std::initializer_list<std::uint32_t> deps) {
    Op o;
    o.id = op_id(0, Phase::kForward, role);
    o.desc = desc;
    return r.add(o, deps);
  };
  add(gemm, OpRole::kAttnCore, {});   // 0
  add(send, OpRole::kCpKvSend, {0});  // 1
  add(recv, OpRole::kCpKvRecv, {});   // 2
  add(gemm, OpRole::kAttnCore, {2});  // 3
  RankOpTimes t;
  t.program = &r;
  t.stream_ops[static_cast<std::size_t>(Stream::kCompute)] = {0, 3};
  t.stream_ops[static_cast<std::size_t>(Stream::kCpSend)] = {1};
  t.stream_ops[static_cast<std::size_t>(Stream::kCpRecv)] = {2};
  t.start = {Time(0), Time(30), Time(30), Time(40)};
  t.end = {Time(30), Time(40), Time(40), Time(50)};
  t.started_by = {kNoOp, kNoOp, pack_op(0, 1) | kByMirror, kNoOp};
  const CriticalPath path = critical_path(program, std::span<const RankOpTimes>(&t, 1), 10);
  EXPECT_EQ(path.buckets[static_cast<std::size_t>(TimeBucket::kCompute)], Time(40));
  EXPECT_EQ(path.buckets[static_cast<std::size_t>(TimeBucket::kCp)], Time(10));
  // Without the mirror the receive is released at 0 and charged all 40.
  t.started_by[2] = kNoOp;
  const CriticalPath unmirrored = critical_path(program, std::span<const RankOpTimes>(&t, 1), 10);
  EXPECT_EQ(unmirrored.buckets[static_cast<std::size_t>(TimeBucket::kCp)], Time(40));
}

}  // namespace
}  // namespace planner::sim
