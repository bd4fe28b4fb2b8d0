// `mpiexec -n N planner sweep ...` splits the sweep over the ranks and gathers it on rank 0: its
// result equals one process's, and the other ranks print nothing (label mpi: it starts mpiexec).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/command.hpp"

namespace planner {
namespace {

using testing::CommandResult;

// As for the mpi tests (tests/CMakeLists.txt): run as root in containers, oversubscribe the cores,
// no cross-memory attach.
const std::vector<std::string> kMpiEnv = {
    "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
    "OMPI_MCA_rmaps_base_oversubscribe=1", "OMPI_MCA_btl_vader_single_copy_mechanism=none"};

const std::vector<std::string> kSweep = {"sweep", "--gpus", "16",      "--gbs", "64",
                                         "--seq", "2048",   "--top-k", "5",     "--threads",
                                         "1",     "--json", "--no-db"};

nlohmann::json result_of(const CommandResult& r) {
  nlohmann::json j = nlohmann::json::parse(r.out);
  j.erase("seconds");
  return j;
}

TEST(SweepMpi, ThreeRanksEqualOneProcess) {
  std::vector<std::string> single = kSweep;
  single.insert(single.begin(), PLANNER_CLI_PATH);
  const CommandResult one = testing::run_command(single);
  ASSERT_EQ(one.exit_code, 0) << one.err;

  std::vector<std::string> mpi = {PLANNER_MPIEXEC, "-n", "3", "--oversubscribe", PLANNER_CLI_PATH};
  mpi.insert(mpi.end(), kSweep.begin(), kSweep.end());
  const CommandResult three = testing::run_command(mpi, kMpiEnv, {}, 240);
  ASSERT_EQ(three.exit_code, 0) << three.err << three.out;
  // Only rank 0 prints: one JSON document.
  const nlohmann::json a = result_of(one), b = result_of(three);
  EXPECT_EQ(a, b);
  EXPECT_EQ(b["counts"]["simulated"], 5);
  EXPECT_EQ(b["ranking"].size(), 100u);
}

}  // namespace
}  // namespace planner
