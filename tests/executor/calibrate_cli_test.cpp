// planner calibrate and planner bench collectives as a user runs them (they start mpirun): a tiny
// calibration stores a fitted profile with its samples, bench prints nccl-tests columns, a refit
// from an executed run reports what moved, and the cuda backend is refused cleanly in this build.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "planner/core/hardware_profile.hpp"
#include "planner/store/profiles.hpp"
#include "planner/store/store.hpp"
#include "support/command.hpp"

namespace planner {
namespace {

using testing::CommandResult;
using testing::TempDir;

// As the other mpi tests: Open MPI's shared memory without cross-memory attach.
const std::vector<std::string> kMpiEnv = {"OMPI_MCA_btl_vader_single_copy_mechanism=none"};

CommandResult run_planner(std::vector<std::string> args) {
  args.insert(args.begin(), PLANNER_CLI_PATH);
  return testing::run_command(args, kMpiEnv, {}, 240);
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Messages up to 1 MiB: below a few KiB a collective's time is all latency and the fit cannot
// resolve the link's bandwidth (it stays pinned, and is not reported as fitted).
TEST(CalibrateCli, TinyCalibrationStoresAFittedProfileWithSamples) {
  TempDir dir;
  const std::string db = dir.file("c.db");
  const CommandResult r = run_planner({"calibrate", "--backend", "cpu", "-n", "2", "--name", "tiny",
                                       "--max-bytes", "1M", "--sweeps", "2", "--db", db, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["profile"], "tiny");
  std::set<std::string> fitted;
  for (const auto& c : out["changes"])
    fitted.insert(c["name"].get<std::string>());
  for (const char* name :
       {"compute.gemm.fp32", "compute.kernel_overhead", "compute.memory_bound.norm",
        "compute.attention_forward", "network.links.shared-memory.efficiency",
        "network.protocols.simple.base_latency"}) {
    EXPECT_TRUE(fitted.contains(name)) << name;
  }
  auto database = store::Database::open(db);
  ASSERT_TRUE(database);
  auto stored = store::get_profile(*database, "tiny");
  ASSERT_TRUE(stored) << stored.status().message();
  auto samples = store::get_calibration_samples(*database, stored->id);
  ASSERT_TRUE(samples);
  std::set<std::string> benchmarks;
  for (const store::CalibrationSample& s : *samples) {
    benchmarks.insert(s.benchmark);
    EXPECT_GT(s.time.raw(), 0) << s.benchmark << " " << s.shape;
    if (s.benchmark == "all_reduce") {
      ASSERT_TRUE(s.algbw && s.busbw);
      EXPECT_DOUBLE_EQ(s.busbw->raw(), s.algbw->raw());  // 2(n-1)/n = 1 for 2 ranks
    }
  }
  for (const char* b :
       {"gemm", "attention", "attention_backward", "norm", "activation", "elementwise", "optimizer",
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send"}) {
    EXPECT_TRUE(benchmarks.contains(b)) << b;
  }
  auto profile = parse_profile(stored->parameters_json, "tiny");
  ASSERT_TRUE(profile) << profile.status().message();
  EXPECT_GT(profile->compute.gemm_rate(Precision::kFp32).rate.raw(), 0);
  EXPECT_EQ(profile->provenance.at("backend"), "cpu");
  EXPECT_EQ(profile->provenance.at("ranks"), "2");

  // A refit from an executed run starts from the stored profile and says how far each
  // parameter moved.
  const CommandResult e =
      run_planner({"exec", std::string(PLANNER_SOURCE_DIR) + "/tests/data/exec/gpt-tiny-1.json",
                   "-n", "1", "--steps", "3", "--warmup", "1", "--db", db});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const CommandResult f = run_planner(
      {"calibrate", "--from-runs", "latest", "--base", "tiny", "--name", "tiny-refit", "--db", db});
  ASSERT_EQ(f.exit_code, 0) << f.err << f.out;
  EXPECT_TRUE(contains(f.out, "compute.gemm.fp32")) << f.out;
  EXPECT_TRUE(contains(f.out, "moved")) << f.out;
  EXPECT_TRUE(store::get_profile(*database, "tiny-refit"));
}

// More ranks than cores: the compute kernels are also measured with every rank at once, and the
// fit gives the host's oversubscribed efficiency from them.
TEST(CalibrateCli, OversubscribedHostMeasuresTheCostOfSharingCores) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (cores > 3) GTEST_SKIP() << "a host of " << cores << " cores: too many ranks to start";
  TempDir dir;
  const std::string db = dir.file("o.db");
  const CommandResult r =
      run_planner({"calibrate", "--backend", "cpu", "-n", std::to_string(cores + 1), "--name",
                   "over", "--compute-only", "--sweeps", "1", "--db", db, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto out = nlohmann::json::parse(r.out);
  bool fitted = false;
  for (const auto& c : out["changes"]) {
    if (c["name"] == "compute.oversubscribed_efficiency") {
      fitted = true;
      EXPECT_GT(c["points"].get<int>(), 0);
      EXPECT_GT(c["after"].get<double>(), 0.0);
      EXPECT_LE(c["after"].get<double>(), 1.0);
    }
  }
  EXPECT_TRUE(fitted) << r.out;
  auto database = store::Database::open(db);
  ASSERT_TRUE(database);
  auto stored = store::get_profile(*database, "over");
  ASSERT_TRUE(stored) << stored.status().message();
  auto profile = parse_profile(stored->parameters_json, "over");
  ASSERT_TRUE(profile) << profile.status().message();
  EXPECT_EQ(profile->compute.host_cores, static_cast<int>(cores));
  EXPECT_FALSE(profile->compute.oversubscribed_source.empty());
  auto samples = store::get_calibration_samples(*database, stored->id);
  ASSERT_TRUE(samples);
  std::set<int> sharing;
  for (const store::CalibrationSample& s : *samples)
    sharing.insert(s.group_size);
  EXPECT_TRUE(sharing.contains(static_cast<int>(cores + 1)));
  EXPECT_TRUE(sharing.contains(static_cast<int>(cores)));
}

TEST(CalibrateCli, BenchCollectivesPrintsNcclTestsColumns) {
  const CommandResult r = run_planner({"bench", "collectives", "-n", "2", "--ops", "all_reduce",
                                       "--ops", "all_gather", "--max-bytes", "16K"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (const char* col : {"size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)",
                          "# all_reduce, 2 ranks", "# all_gather, 2 ranks"}) {
    EXPECT_TRUE(contains(r.out, col)) << col << "\n" << r.out;
  }
  EXPECT_TRUE(contains(r.out, "16384")) << r.out;
}

TEST(CalibrateCli, BadInputIsRefusedBeforeAnyRankStarts) {
  CommandResult r = run_planner({"calibrate", "--backend", "cuda", "--no-db"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // Without a GPU (or without the cuda backend in the build) it says so, and no rank started.
  EXPECT_TRUE(contains(r.err, "the cuda backend")) << r.err;
  EXPECT_FALSE(contains(r.err, "MPI")) << r.err;
  r = run_planner({"calibrate", "--backend", "tpu", "--no-db"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_planner({"bench", "collectives", "--max-bytes", "lots"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "--max-bytes")) << r.err;
  r = run_planner({"bench", "collectives", "--ops", "gemm"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
}  // namespace planner
