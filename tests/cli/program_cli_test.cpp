// planner program, run the way a user does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/command.hpp"

namespace planner {
namespace {

using testing::CommandResult;

CommandResult planner(std::vector<std::string> args) {
  args.insert(args.begin(), PLANNER_CLI_PATH);
  return testing::run_command(args);
}

TEST(ProgramCli, SummaryOfACompleteProgramIsChecked) {
  auto r = planner({"program", "--model", "gpt-tiny", "--tp", "2", "--pp", "2", "--dp", "2", "--sp",
                    "--gbs", "8", "--ranks", "all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("8 of 8 ranks lowered"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check: ok (complete program"), std::string::npos) << r.out;
}

TEST(ProgramCli, Gpt3OneRankPerStage) {
  auto r =
      planner({"program", "--model", "gpt3-175b", "--tp", "8", "--pp", "8", "--dp", "16", "--sp",
               "--recompute", "selective", "--seq", "2048", "--gbs", "1024", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["world_size"], 1024);
  EXPECT_EQ(doc["microbatches"], 64);
  EXPECT_FALSE(doc["complete"].get<bool>());
  ASSERT_EQ(doc["ranks"].size(), 8u);
  // Every stage runs the same 12 layers' worth of GEMMs; the ends add embedding / LM head.
  EXPECT_EQ(doc["ranks"][3]["flops"], doc["ranks"][4]["flops"]);
}

TEST(ProgramCli, OneRanksOpsAsJson) {
  auto r = planner({"program", "--model", "gpt-tiny", "--tp", "2", "--sp", "--gbs", "2", "--rank",
                    "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["rank"], 1);
  const auto& ops = doc["ops"];
  ASSERT_GT(ops.size(), 50u);
  EXPECT_EQ(ops[0]["id"], "mb0.fwd.data_broadcast");
  EXPECT_EQ(ops[0]["group"]["ranks"], nlohmann::json::array({0, 1}));
  for (const auto& op : ops) {
    for (const auto& d : op["deps"])
      EXPECT_LT(d.get<std::size_t>(), op["index"].get<std::size_t>());
  }
  EXPECT_EQ(ops.back()["id"], "step.optimizer");
}

TEST(ProgramCli, BadInput) {
  auto r = planner({"program", "--model", "gpt-tiny", "--ranks", "some"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--ranks: expected all, replica or stage"), std::string::npos) << r.err;
  auto rank = planner({"program", "--model", "gpt-tiny", "--rank", "9"});
  EXPECT_EQ(rank.exit_code, 2);
}

}  // namespace
}  // namespace planner
