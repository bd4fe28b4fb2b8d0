// planner memory, run the way a user does.
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

const std::vector<std::string> kGpt3 = {"memory",    "--model", "gpt3-175b", "--gpu", "a100-80gb",
                                        "--tp",      "8",       "--pp",      "8",     "--dp",
                                        "16",        "--mbs",   "1",         "--sp",  "--recompute",
                                        "selective", "--seq",   "2048",      "--gbs", "1536"};

TEST(MemoryCli, Gpt3TableSaysItFits) {
  auto r = planner(kGpt3);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tp8 pp8 dp16 sp mb1 1f1b rc-selective"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak: stage 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fits ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Korthikanti"), std::string::npos);
}

// The JSON breakdown: the first stage's layer activations are Korthikanti's s·b·h·L·34/t and every
// stage's parts add up to its total.
TEST(MemoryCli, JsonBreakdownSums) {
  auto args = kGpt3;
  args.push_back("--json");
  auto r = planner(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["kind"], "memory_report");
  EXPECT_EQ(doc["peak_stage"], 0);
  EXPECT_TRUE(doc["fits"].get<bool>());
  const std::int64_t korthikanti = 2048LL * 1 * 12288 * 96 * 34 / 8;
  EXPECT_EQ(doc["stages"][0]["layer_activations_bytes"].get<std::int64_t>(), korthikanti);
  EXPECT_EQ(doc["layer_activation_bytes"].get<std::int64_t>(), 2048LL * 12288 * 34 / 8);
  for (const auto& s : doc["stages"]) {
    const std::int64_t parts =
        s["weights_bytes"].get<std::int64_t>() + s["gradients_bytes"].get<std::int64_t>() +
        s["optimizer_bytes"].get<std::int64_t>() + s["activations_bytes"].get<std::int64_t>() +
        s["comm_buffers_bytes"].get<std::int64_t>() + s["overhead_bytes"].get<std::int64_t>();
    EXPECT_EQ(parts, s["total_bytes"].get<std::int64_t>());
    EXPECT_EQ(s["layer_activations_bytes"].get<std::int64_t>() +
                  s["extra_activations_bytes"].get<std::int64_t>(),
              s["activations_bytes"].get<std::int64_t>());
  }
}

TEST(MemoryCli, PlanFileAndDoesNotFit) {
  testing::TempDir dir;
  testing::write_file(dir.file("plan.json"), R"({
    "schema_version": 1, "kind": "plan", "model": "gpt3-175b",
    "cluster": {"nodes": 8, "gpus_per_node": 8, "gpu": "A100-40GB"},
    "training": {"global_batch_size": 64, "seq_length": 2048},
    "parallel": {"tp": 8, "pp": 8, "micro_batch_size": 1}})");
  auto r = planner({"memory", "--plan", dir.file("plan.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("does not fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("A100-SXM4-40GB"), std::string::npos) << r.out;
}

TEST(MemoryCli, BadInputExitsTwoWithTheReason) {
  auto bad_schedule = planner({"memory", "--schedule", "pipedream"});
  EXPECT_EQ(bad_schedule.exit_code, 2);
  EXPECT_NE(bad_schedule.err.find("unknown pipeline schedule \"pipedream\""), std::string::npos)
      << bad_schedule.err;
  auto bad_tp = planner({"memory", "--model", "gpt3-175b", "--tp", "7"});
  EXPECT_EQ(bad_tp.exit_code, 2);
  EXPECT_NE(bad_tp.err.find("/parallel/tp: must divide heads (96), got 7"), std::string::npos)
      << bad_tp.err;
  auto both = planner({"memory", "--plan", "p.json", "--tp", "2"});
  EXPECT_EQ(both.exit_code, 2);
}

}  // namespace
}  // namespace planner
