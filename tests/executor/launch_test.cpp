#include "planner/exec/launch.hpp"

#include <gtest/gtest.h>

namespace planner::exec {
namespace {

TEST(LocalLaunch, OversubscribesOnlyBeyondTheCores) {
  LocalLaunch l;
  l.ranks = 2;
  l.cores = 2;
  l.mpirun = "mpirun";
  LaunchCommand cmd = local_launch_command(l, {"/bin/planner", "exec", "p.json"});
  EXPECT_EQ(cmd.argv,
            (std::vector<std::string>{"mpirun", "-n", "2", "/bin/planner", "exec", "p.json"}));
  EXPECT_TRUE(cmd.env.empty());
  l.ranks = 8;
  l.as_root = true;
  cmd = local_launch_command(l, {"/bin/planner"});
  EXPECT_EQ(cmd.argv, (std::vector<std::string>{"mpirun", "-n", "8", "--oversubscribe", "--bind-to",
                                                "none", "/bin/planner"}));
  EXPECT_EQ(cmd.env, (std::vector<std::string>{"OMPI_ALLOW_RUN_AS_ROOT=1",
                                               "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}));
}

TEST(LocalLaunch, RunCommandReturnsTheExitCodeAndPassesTheEnvironment) {
  auto code = run_command({{"/bin/sh", "-c", "exit 3"}, {}});
  ASSERT_TRUE(code) << code.status().message();
  EXPECT_EQ(*code, 3);
  code = run_command(
      {{"/bin/sh", "-c", "test \"$PLANNER_LAUNCH_TEST\" = yes"}, {"PLANNER_LAUNCH_TEST=yes"}});
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
  code = run_command({{"/nonexistent/mpirun"}, {}});
  ASSERT_FALSE(code);
  EXPECT_EQ(code.status().code(), StatusCode::kRuntime);
  EXPECT_NE(code.status().message().find("/nonexistent/mpirun"), std::string::npos);
}

TEST(LocalLaunch, FindsItsOwnExecutable) {
  auto self = self_executable();
  ASSERT_TRUE(self) << self.status().message();
  EXPECT_NE(self->find("exec_unit_test"), std::string::npos) << *self;
}

}  // namespace
}  // namespace planner::exec
