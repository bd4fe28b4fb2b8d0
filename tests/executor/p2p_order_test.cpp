// NCCL matches the sends and receives between two ranks by order, not by tag (cuda_backend.cpp):
// for every ordered pair of ranks, the step program's sends from one to the other must come in
// the same order as the other's receives from it. Checked here on the lowered programs of every
// parallel layout the executor's tests run.
#include <gtest/gtest.h>

#include <map>

#include "exec_test_plans.hpp"
#include "planner/core/lowering.hpp"

namespace planner::exec {
namespace {

using testing::gpt_test_model;
using testing::llama_test_model;
using testing::par;
using testing::test_plan;

// (sender, receiver) -> tags in program order, as sent and as received.
void expect_ordered(const Plan& plan) {
  LowerOptions o;
  o.fp32_grads = true;
  auto program = lower(plan, o);
  ASSERT_TRUE(program) << plan.name << ": " << program.status().message();
  std::map<std::pair<int, int>, std::vector<std::uint32_t>> sent, received;
  for (const RankProgram& rp : program->ranks()) {
    for (const Op& op : rp.ops()) {
      const OpKind kind = program->desc(op).kind;
      if (kind == OpKind::kSend) sent[{rp.rank(), op.peer}].push_back(op.tag);
      if (kind == OpKind::kRecv) received[{op.peer, rp.rank()}].push_back(op.tag);
    }
  }
  EXPECT_EQ(sent.size(), received.size()) << plan.name;
  for (const auto& [pair, tags] : sent) {
    EXPECT_EQ(tags, received[pair])
        << plan.name << ": rank " << pair.first << " -> rank " << pair.second;
  }
}

ParallelConfig with(ParallelConfig p, Schedule s, int vpp = 1) {
  p.schedule = s;
  p.virtual_stages = vpp;
  return p;
}

TEST(P2pOrder, SendsAndReceivesOfEveryPairComeInTheSameOrder) {
  ParallelConfig sp = par(2, 2, 1);
  sp.sequence_parallel = true;
  ParallelConfig recompute = par(1, 1, 1, 2);
  recompute.recompute = Recompute::kSelective;
  ParallelConfig full = par(1, 2, 1, 2);
  full.recompute = Recompute::kFull;
  for (const ModelSpec& m : {gpt_test_model(), llama_test_model()}) {
    for (const ParallelConfig& p :
         {par(1, 2, 1), with(par(1, 2, 1), Schedule::kGpipe), par(1, 4, 1),
          with(par(1, 2, 1), Schedule::kInterleaved, 2),
          with(par(1, 2, 1), Schedule::kZeroBubbleH1), with(sp, Schedule::kZeroBubbleH1),
          par(1, 1, 1, 2), par(1, 1, 1, 4), recompute, full, par(2, 2, 1, 2),
          with(par(2, 2, 1, 2), Schedule::kInterleaved, 2), par(1, 2, 2, 2)}) {
      expect_ordered(test_plan(m, p, Optimizer::kAdam, 16, 16));
    }
  }
}

}  // namespace
}  // namespace planner::exec
