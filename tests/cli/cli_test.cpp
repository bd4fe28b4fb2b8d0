// Runs the planner binary the way a user does and checks what it prints and returns.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/command.hpp"

namespace planner {
namespace {

namespace fs = std::filesystem;
constexpr auto planner = testing::run_planner;

std::string data(const std::string& rel) {
  return std::string(PLANNER_TEST_DATA_DIR) + "/" + rel;
}

TEST(Cli, VersionAndHelp) {
  auto v = planner({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("planner 0."), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("cuda backend:"), std::string::npos);
  auto h = planner({"--help"});
  EXPECT_EQ(h.exit_code, 0);
  for (const char* cmd : {"gpu", "model", "validate"}) {
    EXPECT_NE(h.out.find(cmd), std::string::npos) << cmd;
  }
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(planner({}).exit_code, 2);
  EXPECT_EQ(planner({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(planner({"gpu", "list", "--bogus"}).exit_code, 2);
  auto unknown = planner({"gpu", "show", "H900"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("error: unknown GPU \"H900\"; known GPUs: "), std::string::npos)
      << unknown.err;
}

TEST(Cli, GpuListShowsEveryPresetWithSources) {
  auto r = planner({"gpu", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"V100-SXM2-32GB", "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB",
                           "H200-SXM-141GB", "B200-SXM-180GB", "MI300X", "L40S"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
  EXPECT_NE(r.out.find("Sources:"), std::string::npos);
  EXPECT_NE(r.out.find("[1] "), std::string::npos);
  auto json = planner({"gpu", "list", "--json"});
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_EQ(json.out.front(), '[');
  EXPECT_NE(json.out.find("\"hbm_GiB\": 80"), std::string::npos);
}

TEST(Cli, GpuShowListsPricesWithDates) {
  auto r = planner({"gpu", "show", "h100"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("989.4 TFLOP/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("capacity-block"), std::string::npos);
  EXPECT_NE(r.out.find("p5.48xlarge"), std::string::npos);
}

TEST(Cli, ModelListAndShow) {
  auto list = planner({"model", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("llama3-405b"), std::string::npos);
  EXPECT_NE(list.out.find("8x top2"), std::string::npos);
  auto show = planner({"model", "show", "llama3-8b", "--json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("\"total\": 8030261248"), std::string::npos) << show.out;
}

TEST(Cli, ModelImportWritesALoadableDocument) {
  testing::TempDir dir;
  const std::string out = dir.file("llama.json");
  auto r = planner(
      {"model", "import", data("hf/llama3-8b.config.json"), "--name", "my-llama", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("8.03B"), std::string::npos) << r.out;
  auto v = planner({"validate", out});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  // model show reads the written document as it reads a preset.
  auto shown = planner({"model", "show", out, "--json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("\"total\": 8030261248"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("my-llama"), std::string::npos) << shown.out;
  auto bad = planner({"model", "import", data("hf/bert.config.json")});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unsupported architecture \"BertForMaskedLM\""), std::string::npos);
  auto missing = planner({"model", "import", dir.file("nope.json")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no such file"), std::string::npos);
}

TEST(Cli, ValidateReportsEveryBadFileAndExitsTwo) {
  std::vector<std::string> args{"validate"};
  int n = 0;
  for (const auto& e : fs::directory_iterator(data("bad"))) {
    if (e.path().extension() != ".json") continue;
    args.push_back(e.path().string());
    ++n;
  }
  auto r = planner(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(std::to_string(n) + " of " + std::to_string(n) + " file(s) invalid"),
            std::string::npos)
      << r.err;
  // Each file's expected diagnostics appear, under its full path.
  for (std::size_t i = 1; i < args.size(); ++i) {
    const fs::path p(args[i]);
    std::string expected = testing::slurp(fs::path(p).replace_extension(".expected").string());
    std::size_t pos = 0;
    while (pos < expected.size()) {
      auto nl = expected.find('\n', pos);
      std::string line = expected.substr(pos, nl - pos);
      pos = nl == std::string::npos ? expected.size() : nl + 1;
      if (line.empty()) continue;
      line = p.parent_path().string() + "/" + line;
      EXPECT_NE(r.out.find(line), std::string::npos) << line;
    }
  }
  EXPECT_EQ(r.err.find("terminate"), std::string::npos);
}

TEST(Cli, ValidateAcceptsGoodDocumentsAndPrintsJson) {
  testing::TempDir dir;
  testing::write_file(dir.file("t.json"),
                      R"({"schema_version": 1, "kind": "training", "global_batch_size": 1024,
                          "seq_length": 4096, "precision": "bf16"})");
  auto r = planner({"validate", "--json", dir.file("t.json")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\"ok\": true"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace planner
