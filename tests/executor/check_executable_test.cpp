// What planner exec refuses before anything starts, and the nccl-tests bandwidth factors.
#include <gtest/gtest.h>

#include "exec_test_plans.hpp"
#include "planner/exec/execute.hpp"
#include "planner/kernels/device_info.hpp"

namespace planner::exec {
namespace {

using testing::gpt_test_model;
using testing::par;
using testing::test_plan;

void expect_refused(const Status& st, StatusCode code, const std::string& text) {
  EXPECT_EQ(st.code(), code) << st.message();
  EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
}

TEST(CheckExecutable, AcceptsWhatTheExecutorRuns) {
  EXPECT_TRUE(check_executable(test_plan(gpt_test_model(), par(2, 2, 2)), "cpu", 8).is_ok());
  EXPECT_TRUE(check_executable(test_plan(gpt_test_model(), par(1, 1, 4)), "cpu", 0).is_ok());
}

TEST(CheckExecutable, RefusesAWorldSizeMismatchAndSaysHowToFixIt) {
  expect_refused(check_executable(test_plan(gpt_test_model(), par(2, 1, 1)), "cpu", 3),
                 StatusCode::kInvalidInput,
                 "/parallel: the plan runs on tp x cp x dp x pp = 2 x 1 x 1 x 1 = 2 ranks, but 3 "
                 "were started: run it on 2 ranks (-n 2)");
}

TEST(CheckExecutable, RefusesUnknownAndUnavailableBackends) {
  const Plan p = test_plan(gpt_test_model(), par(1, 1, 1));
  expect_refused(check_executable(p, "tpu", 1), StatusCode::kInvalidInput,
                 "unknown backend \"tpu\"");
#ifdef PLANNER_HAVE_CUDA
  // Built with CUDA: the plan checks pass; whether this machine can run it is a separate check,
  // which says that the backend needs a GPU where there is none.
  EXPECT_TRUE(check_executable(p, "cuda", 1).is_ok());
  if (kernels::cuda_inventory().devices.empty()) {
    expect_refused(check_backend_available("cuda"), StatusCode::kUnavailable,
                   "the cuda backend needs an NVIDIA GPU");
  } else {
    EXPECT_TRUE(check_backend_available("cuda").is_ok());
  }
  Plan fp8 = p;
  fp8.training.precision = Precision::kFp8;
  fp8.gpu = *builtin_catalog().find_gpu("H100");
  fp8.cluster.gpu = fp8.gpu.name;
  expect_refused(check_executable(fp8, "cuda", 1), StatusCode::kInvalidInput,
                 "/training/precision: the cuda backend trains in fp32, tf32, bf16 or fp16");
#else
  expect_refused(check_executable(p, "cuda", 1), StatusCode::kUnavailable, "cuda backend");
  expect_refused(check_backend_available("cuda"), StatusCode::kUnavailable,
                 "not part of this build");
#endif
  EXPECT_TRUE(check_backend_available("cpu").is_ok());
}

TEST(CheckExecutable, RefusesOtherPrecisionsOnTheCpuBackend) {
  Plan p = test_plan(gpt_test_model(), par(1, 1, 1));
  p.training.precision = Precision::kBf16;
  p.gpu = *builtin_catalog().find_gpu("H100");
  p.cluster.gpu = p.gpu.name;
  expect_refused(check_executable(p, "cpu", 1), StatusCode::kInvalidInput,
                 "/training/precision: the cpu backend trains in fp32 only, got bf16");
}

TEST(CheckExecutable, RefusesAPlanThatDoesNotFitTheTargetsMemory) {
  Plan p = test_plan(*builtin_catalog().find_model("gpt3-175b"), par(1, 1, 1), Optimizer::kAdam, 1,
                     2048);
  expect_refused(check_executable(p, "cpu", 1), StatusCode::kInvalidInput,
                 "/cluster/gpu: a rank of stage 0 needs");
}

TEST(CheckExecutable, RefusesWhatTheExecutorDoesNotRunYet) {
  // Mixtral's preset drops tokens beyond capacity; the executor routes dropless.
  Plan moe = test_plan(*builtin_catalog().find_model("mixtral-8x7b"), par(1, 1, 1));
  expect_refused(check_runnable(moe), StatusCode::kInvalidInput,
                 "/model/moe/capacity_factor: the executor routes dropless");
  moe.parallel.moe_capacity_factor = 0;
  EXPECT_TRUE(check_runnable(moe).is_ok()) << check_runnable(moe).message();
  Plan etp = test_plan(testing::moe_test_model(), par(2, 1, 1));
  etp.parallel.sequence_parallel = true;
  expect_refused(check_runnable(etp), StatusCode::kInvalidInput,
                 "/parallel/etp: the executor does not run expert tensor parallelism");
  etp.parallel.etp = 1;
  EXPECT_TRUE(check_runnable(etp).is_ok()) << check_runnable(etp).message();
  Plan deepseek = test_plan(*builtin_catalog().find_model("deepseek-v3"), par(1, 1, 1));
  expect_refused(check_runnable(deepseek), StatusCode::kInvalidInput,
                 "/model/mla: the executor does not run multi-head latent attention yet");
  Plan offload = test_plan(gpt_test_model(), par(1, 1, 2));
  offload.parallel.zero_stage = 1;
  offload.parallel.offload = Offload::kOptimizer;
  expect_refused(check_runnable(offload), StatusCode::kInvalidInput, "/parallel/offload");
  Plan tied = test_plan(gpt_test_model(/*tied=*/true), par(1, 2, 2));
  tied.parallel.zero_stage = 1;
  expect_refused(check_runnable(tied), StatusCode::kInvalidInput,
                 "with tied embeddings on several pipeline stages the executor needs zero_stage 0");
  tied.parallel.zero_stage = 0;
  EXPECT_TRUE(check_runnable(tied).is_ok());
}

TEST(BusBandwidth, NcclTestsFactors) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(OpKind::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(OpKind::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(OpKind::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(OpKind::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(OpKind::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(OpKind::kSend, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(OpKind::kGemm, 2), 0.0);
}

}  // namespace
}  // namespace planner::exec
