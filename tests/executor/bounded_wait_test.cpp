// The bounded wait behind the cuda backend's "a failure never hangs the job" (bounded_wait.hpp),
// with fake work in place of CUDA events and NCCL communicators.
#include "planner/exec/bounded_wait.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace planner::exec {
namespace {

class FakeWork final : public AsyncWork {
 public:
  int done_after = -1;       // polls until done; -1: never
  int fail_after = -1;       // polls until done() fails (a CUDA error); -1: never
  int unhealthy_after = -1;  // polls until health() fails (an NCCL asynchronous error)
  int polls = 0;
  int aborts = 0;

  Result<bool> done() override {
    ++polls;
    if (fail_after >= 0 && polls > fail_after) {
      return Status::runtime("cudaEventQuery: cudaErrorIllegalAddress (an illegal memory access)");
    }
    return done_after >= 0 && polls > done_after;
  }
  Status health() override {
    if (unhealthy_after >= 0 && polls > unhealthy_after) {
      return Status::runtime("NCCL on tp [0,1] (asynchronous error): remote process exited");
    }
    return Status::ok();
  }
  void abort() override { ++aborts; }
};

TEST(BoundedWait, ReturnsWhenTheWorkCompletesWithoutAborting) {
  FakeWork work;
  work.done_after = 5;
  EXPECT_TRUE(wait_bounded(work, Deadline::after(10), "all-reduce", 10).is_ok());
  EXPECT_EQ(work.polls, 6);
  EXPECT_EQ(work.aborts, 0);
}

TEST(BoundedWait, TimesOutAndAbortsOnceWhenTheWorkNeverCompletes) {
  FakeWork work;
  const auto start = std::chrono::steady_clock::now();
  const Status st =
      wait_bounded(work, Deadline::after(0.05), "ncclAllReduce on tp [0,1] for L0.mb0", 0.05);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(st.code(), StatusCode::kTimeout);
  EXPECT_NE(st.message().find("ncclAllReduce on tp [0,1] for L0.mb0 did not complete within"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(work.aborts, 1);
  EXPECT_GE(waited, 0.05);
  EXPECT_LT(waited, 5.0);  // bounded: ends soon after the deadline
}

TEST(BoundedWait, AnAsynchronousErrorAbortsAtOnceAndNamesTheWait) {
  FakeWork work;
  work.unhealthy_after = 3;
  const Status st = wait_bounded(work, Deadline::after(60), "synchronising the GPU", 60);
  EXPECT_EQ(st.code(), StatusCode::kRuntime);
  EXPECT_NE(st.message().find("synchronising the GPU"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("remote process exited"), std::string::npos) << st.message();
  EXPECT_EQ(work.aborts, 1);
  EXPECT_EQ(work.polls, 4);
}

TEST(BoundedWait, ADeviceErrorAbortsAndIsReported) {
  FakeWork work;
  work.fail_after = 0;
  const Status st = wait_bounded(work, Deadline::after(60), "a copy to the host", 60);
  EXPECT_EQ(st.code(), StatusCode::kRuntime);
  EXPECT_NE(st.message().find("cudaErrorIllegalAddress"), std::string::npos) << st.message();
  EXPECT_EQ(work.aborts, 1);
}

TEST(BoundedWait, CompletedWorkSucceedsEvenPastTheDeadline) {
  FakeWork work;
  work.done_after = 0;
  EXPECT_TRUE(wait_bounded(work, Deadline::after(-1), "late but done", 1).is_ok());
  EXPECT_EQ(work.aborts, 0);
}

}  // namespace
}  // namespace planner::exec
