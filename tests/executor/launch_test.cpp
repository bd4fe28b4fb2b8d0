#include "planner/exec/launch.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "planner/exec/mpi_world.hpp"

namespace planner::exec {
namespace {

TEST(LocalLaunch, OversubscribesOnlyBeyondTheCores) {
  LocalLaunch l;
  l.ranks = 2;
  l.cores = 2;
  l.mpirun = "mpirun";
  LaunchCommand cmd = local_launch_command(l, {"/bin/planner", "exec", "p.json"});
  EXPECT_EQ(cmd.argv,
            (std::vector<std::string>{"mpirun", "-n", "2", "--mca", "orte_enable_recovery", "1",
                                      "/bin/planner", "exec", "p.json"}));
  EXPECT_TRUE(cmd.env.empty());
  l.ranks = 8;
  l.as_root = true;
  cmd = local_launch_command(l, {"/bin/planner"});
  EXPECT_EQ(cmd.argv,
            (std::vector<std::string>{"mpirun", "-n", "8", "--oversubscribe", "--bind-to", "none",
                                      "--mca", "orte_enable_recovery", "1", "/bin/planner"}));
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

TEST(LocalLaunch, RunCommandOutputFeedsInputAndCapturesOutput) {
  auto r = run_command_output({{"/bin/sh", "-c", "tr a-z A-Z; exit 4"}, {}}, "job script\n");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(r->out, "JOB SCRIPT\n");
}

TEST(SlurmLaunch, TheBatchScriptRunsOneSrunStepWithThePlansTasksPerNode) {
  SlurmLaunch l;
  l.ranks = 8;
  l.ranks_per_node = 4;
  l.partition = "cpu";
  l.time = "00:30:00";
  l.workdir = "/home/me/runs";
  l.output = "/home/me/runs/planner-exec-%j.out";
  l.comment = "planner exec gpt tp2 pp2 dp2, 8 ranks";
  auto script = slurm_batch_script(
      l, {"/opt/planner/bin/planner", "exec", "/home/me/my plan.json", "--launch", "none"});
  ASSERT_TRUE(script) << script.status().message();
  const std::string expected =
      "#!/bin/bash\n"
      "# planner exec gpt tp2 pp2 dp2, 8 ranks\n"
      "#SBATCH --job-name=planner-exec\n"
      "#SBATCH --nodes=2\n"
      "#SBATCH --ntasks=8\n"
      "#SBATCH --ntasks-per-node=4\n"
      "#SBATCH --partition=cpu\n"
      "#SBATCH --time=00:30:00\n"
      "#SBATCH --output=/home/me/runs/planner-exec-%j.out\n"
      "#SBATCH --chdir=/home/me/runs\n";
  EXPECT_EQ(script->substr(0, expected.size()), expected);
  EXPECT_NE(script->find("\nexec srun --mpi=pmix --kill-on-bad-exit=0 --ntasks=8 "
                         "--ntasks-per-node=4 /opt/planner/bin/planner exec "
                         "'/home/me/my plan.json' --launch none\n"),
            std::string::npos)
      << *script;

  // With an after-step command: the ranks report to an outcome file, which that command settles
  // with srun's exit code (the job's exit code is its).
  l.outcome_dir = "/home/me/runs";
  l.after_step = {"/opt/planner/bin/planner", "exec", "/home/me/p.json", "--no-db"};
  auto settled = slurm_batch_script(l, {"/opt/planner/bin/planner", "exec", "--launch", "none"});
  ASSERT_TRUE(settled);
  EXPECT_NE(settled->find("\noutcome=/home/me/runs/planner-exec-\"$SLURM_JOB_ID\".outcome\n"),
            std::string::npos)
      << *settled;
  EXPECT_NE(settled->find("\nsrun --mpi=pmix --kill-on-bad-exit=0 --ntasks=8 --ntasks-per-node=4 "
                          "/opt/planner/bin/planner exec --launch none --outcome-file "
                          "\"$outcome\"\n"),
            std::string::npos)
      << *settled;
  EXPECT_TRUE(
      settled->ends_with("\nexec /opt/planner/bin/planner exec /home/me/p.json --no-db "
                         "--outcome-file \"$outcome\" --settle \"$?\"\n"))
      << *settled;
  l.after_step.clear();

  l.nodes = 1;
  auto refused = slurm_batch_script(l, {"planner"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(refused.status().message().find("its 8 ranks need 2 nodes"), std::string::npos)
      << refused.status().message();
  l.nodes = 3;  // more nodes than needed: allowed, the tasks stay 8
  auto spread = slurm_batch_script(l, {"planner"});
  ASSERT_TRUE(spread);
  EXPECT_NE(spread->find("#SBATCH --nodes=3\n#SBATCH --ntasks=8\n"), std::string::npos);
}

TEST(SlurmLaunch, ShellQuotingKeepsArgumentsWhole) {
  EXPECT_EQ(shell_quote("plain-word_1.json"), "plain-word_1.json");
  EXPECT_EQ(shell_quote("two words"), "'two words'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
  auto r =
      run_command_output({{"/bin/sh", "-c", "printf '%s|' " + shell_quote("a 'b' $c") + " x"}, {}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out, "a 'b' $c|x|");
}

// A world of `size` ranks as the launcher check sees it (nothing else is used).
class SizedWorld final : public World {
 public:
  explicit SizedWorld(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  int local_rank() const override { return 0; }
  int local_size() const override { return size_; }
  const std::string& host() const override { return host_; }
  Result<std::vector<std::optional<std::string>>> gather(std::string_view, Deadline) override {
    return Status::internal("unused");
  }
  Result<std::string> broadcast(std::string_view, Deadline) override {
    return Status::internal("unused");
  }
  [[noreturn]] void abort(int code) override { std::exit(code); }

 private:
  int size_;
  std::string host_ = "test";
};

TEST(LauncherCheck, SrunTasksThatFormedWorldsOfOneAreReported) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"})
    ::unsetenv(v);
  EXPECT_TRUE(check_launcher_world(SizedWorld(1)).is_ok());  // no launcher: a singleton is fine
  ::setenv("SLURM_STEP_NUM_TASKS", "2", 1);
  EXPECT_TRUE(check_launcher_world(SizedWorld(2)).is_ok());
  const Status st = check_launcher_world(SizedWorld(1));
  EXPECT_EQ(st.code(), StatusCode::kRuntime);
  EXPECT_NE(st.message().find("srun started 2 ranks, but this rank's MPI world has 1: srun did "
                              "not connect the tasks to MPI; run it with --mpi=pmix"),
            std::string::npos)
      << st.message();
  ::unsetenv("SLURM_STEP_NUM_TASKS");
}

TEST(LocalLaunch, FindsItsOwnExecutable) {
  auto self = self_executable();
  ASSERT_TRUE(self) << self.status().message();
  EXPECT_NE(self->find("exec_unit_test"), std::string::npos) << *self;
}

}  // namespace
}  // namespace planner::exec
