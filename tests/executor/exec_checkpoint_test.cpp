// Checkpoints through `planner exec` as a user runs it: a run killed mid-way and resumed with
// --resume ends with exactly the losses of an uninterrupted run, and a checkpoint of another plan,
// another world size, with a truncated shard or a bad checksum, or none at all, is refused before
// any step runs and before anything is recorded.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "exec_test_plans.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/loaders.hpp"
#include "planner/exec/checkpoint.hpp"
#include "planner/store/store.hpp"
#include "process_tree.hpp"
#include "support/command.hpp"

namespace planner::exec {
namespace {

namespace fs = std::filesystem;
using planner::testing::Background;
using planner::testing::CommandResult;
using planner::testing::slurp;
using planner::testing::TempDir;
using planner::testing::write_file;
using testing::gpt_test_model;
using testing::par;
using testing::test_plan;

const std::vector<std::string> kMpiEnv = {"OMPI_MCA_btl_vader_single_copy_mechanism=none"};

CommandResult run_planner(std::vector<std::string> args) {
  args.insert(args.begin(), PLANNER_CLI_PATH);
  return planner::testing::run_command(args, kMpiEnv);
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Data parallel with ZeRO-1: every rank's shard holds its own slice of Adam's moments.
Plan zero1_plan() {
  ParallelConfig p = par(1, 1, 2);
  p.zero_stage = 1;
  return test_plan(gpt_test_model(), p);
}

std::string write_plan(const TempDir& dir, const std::string& name, const Plan& plan) {
  const std::string path = dir.file(name);
  write_file(path, to_json_text(plan));
  return path;
}

std::vector<double> losses_of(const CommandResult& r) {
  const Json out = Json::parse(r.out, nullptr, false);
  if (out.is_discarded() || !out.contains("losses")) return {};
  return out["losses"].get<std::vector<double>>();
}

// The step of the newest complete checkpoint in `dir` (-1 when none).
std::int64_t latest_step(const std::string& dir) {
  auto latest = latest_checkpoint(dir);
  if (!latest || !latest->has_value()) return -1;
  return std::stoll(fs::path(**latest).filename().string().substr(5));
}

TEST(ExecCheckpoint, AKilledRunResumedEndsWithTheLossesOfAnUninterruptedRun) {
  TempDir dir;
  const std::string plan = write_plan(dir, "zero1.json", zero1_plan());
  const std::string ckpt = dir.file("ckpt");
  {
    // Runs for (practically) ever, checkpointing every 2 steps; killed, every process of it, once
    // the checkpoint after step 4 is complete.
    Background run(
        {PLANNER_CLI_PATH, "exec", plan, "--launch", "local", "-n", "2", "--steps", "1000000",
         "--warmup", "0", "--checkpoint-every", "2", "--checkpoint-dir", ckpt, "--no-db"},
        kMpiEnv, dir.path());
    ASSERT_TRUE(planner::testing::wait_until([&] { return latest_step(ckpt) >= 4; },
                                             std::chrono::milliseconds(60'000)))
        << run.err();
    run.kill_all();
    ASSERT_TRUE(run.wait(std::chrono::seconds(20)).has_value());
  }
  const std::int64_t resumed_at = latest_step(ckpt);
  ASSERT_GE(resumed_at, 4);
  const std::int64_t steps = resumed_at + 3;
  const std::string n = std::to_string(steps);

  const CommandResult resumed =
      run_planner({"exec", plan, "--launch", "local", "-n", "2", "--steps", n, "--warmup", "0",
                   "--checkpoint-dir", ckpt, "--resume", "--no-db", "--json"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(
      contains(resumed.err, "resumed from the checkpoint after step " + std::to_string(resumed_at)))
      << resumed.err;
  const Json out = Json::parse(resumed.out);
  EXPECT_EQ(out["first_step"], resumed_at);

  const CommandResult straight = run_planner({"exec", plan, "--launch", "local", "-n", "2",
                                              "--steps", n, "--warmup", "0", "--no-db", "--json"});
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const std::vector<double> all = losses_of(straight);
  const std::vector<double> tail = losses_of(resumed);
  ASSERT_EQ(all.size(), static_cast<std::size_t>(steps));
  ASSERT_EQ(tail.size(), 3u);
  for (std::size_t i = 0; i < tail.size(); ++i) {
    // The cpu backend is deterministic: bit-exact.
    EXPECT_EQ(tail[i], all[static_cast<std::size_t>(resumed_at) + i]) << "step " << resumed_at + i;
  }
}

class RefusedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    plan_ = write_plan(dir_, "zero1.json", zero1_plan());
    ckpt_ = dir_.file("ckpt");
    const CommandResult r =
        run_planner({"exec", plan_, "--launch", "local", "-n", "2", "--steps", "2", "--warmup", "0",
                     "--checkpoint-every", "2", "--checkpoint-dir", ckpt_, "--no-db"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    step_dir_ = checkpoint_step_dir(ckpt_, 2);
    ASSERT_TRUE(fs::exists(step_dir_ + "/manifest.json"));
  }

  // Resumes `plan` from the checkpoint; expects exit code 2 with `message` and no step run or
  // recorded.
  void expect_refused(const std::string& plan, const std::string& message) {
    const std::string db = dir_.file("runs.db");
    const CommandResult r =
        run_planner({"exec", plan, "--launch", "local", "-n", "2", "--steps", "4", "--warmup", "0",
                     "--checkpoint-dir", ckpt_, "--resume", "--db", db});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, message)) << r.err;
    EXPECT_FALSE(contains(r.err, "step 3/4")) << r.err;
    // Refused before the run is recorded.
    if (fs::exists(db)) {
      auto opened = store::Database::open(db, {store::OpenMode::kMustExist});
      ASSERT_TRUE(opened);
      auto runs = store::list_runs(*opened);
      ASSERT_TRUE(runs);
      EXPECT_TRUE(runs->empty());
    }
  }

  std::string shard(int rank) const { return step_dir_ + "/" + checkpoint_shard_name(rank); }

  TempDir dir_;
  std::string plan_;
  std::string ckpt_;
  std::string step_dir_;
};

TEST_F(RefusedCheckpoint, OfAnotherPlan) {
  Plan other = zero1_plan();
  other.training.seed = 8;
  expect_refused(write_plan(dir_, "other.json", other), "the checkpoint belongs to another plan");
}

TEST_F(RefusedCheckpoint, OfAnotherWorldSize) {
  // A checkpoint written by 4 ranks (its manifest lists 4 shards).
  CheckpointManifest m = *parse_manifest(slurp(step_dir_ + "/manifest.json"), "manifest.json");
  m.world_size = 4;
  for (int r = 2; r < 4; ++r)
    m.shards.push_back({r, checkpoint_shard_name(r), 1, std::string(64, '0')});
  write_file(step_dir_ + "/manifest.json", manifest_to_json(m));
  expect_refused(plan_, "the checkpoint has 4 ranks' shards, this run has 2 ranks");
}

TEST_F(RefusedCheckpoint, WithATruncatedShard) {
  const std::string bytes = slurp(shard(1));
  write_file(shard(1), bytes.substr(0, bytes.size() - 10));
  expect_refused(plan_, "rank 1: " + shard(1) + ": " + std::to_string(bytes.size() - 10) +
                            " bytes, the manifest says " + std::to_string(bytes.size()));
}

TEST_F(RefusedCheckpoint, WithABadChecksum) {
  std::string bytes = slurp(shard(0));
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
  write_file(shard(0), bytes);
  expect_refused(plan_, "rank 0: " + shard(0) + ": checksum mismatch");
}

TEST_F(RefusedCheckpoint, WhenThereIsNone) {
  fs::remove(step_dir_ + "/manifest.json");  // interrupted before its manifest: not complete
  expect_refused(plan_, "no complete checkpoint in " + ckpt_);
}

}  // namespace
}  // namespace planner::exec
