// planner profile list|show|export|import|delete and simulate --profile with a stored profile, run
// the way a user runs them: a profile round-trips through SQLite and JSON with its provenance, and
// a bad profile document names the file and the JSON pointer (exit 2).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/core/hardware_profile.hpp"
#include "planner/store/profiles.hpp"
#include "planner/store/store.hpp"
#include "support/command.hpp"

namespace planner {
namespace {

using testing::CommandResult;
using testing::run_planner;
using testing::slurp;
using testing::TempDir;
using testing::write_file;

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The cpu-host preset, renamed and changed where a calibration would change it, with provenance.
std::string measured_profile_text() {
  HardwareProfile p = *builtin_profile("cpu-host");
  p.name = "box-measured";
  p.description = "a measured test host";
  p.provenance = {{"host", "box"}, {"date", "2026-11-22T01:00:00Z"}, {"backend", "cpu"}};
  p.compute.gemm[static_cast<std::size_t>(Precision::kFp32)].rate = tflops_per_s(0.05);
  p.compute.memory_bound[static_cast<std::size_t>(OpKind::kActivation)] = GBps(3.0);
  p.compute.memory_bound_source = "test";
  p.compute.host_cores = 2;
  return to_json_text(p);
}

TEST(ProfileCli, ImportExportRoundTripsWithProvenance) {
  TempDir dir;
  const std::string db = dir.file("p.db");
  const std::string in = dir.file("in.json");
  write_file(in, measured_profile_text());
  CommandResult r = run_planner({"profile", "import", in, "--db", db});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "imported profile box-measured")) << r.out;
  // Importing the same name again needs --replace.
  r = run_planner({"profile", "import", in, "--db", db});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "box-measured")) << r.err;
  ASSERT_EQ(run_planner({"profile", "import", in, "--db", db, "--replace"}).exit_code, 0);

  r = run_planner({"profile", "list", "--db", db});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "box-measured")) << r.out;
  r = run_planner({"profile", "show", "box-measured", "--db", db});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "50.0 GFLOP/s")) << r.out;
  EXPECT_TRUE(contains(r.out, "activation")) << r.out;
  EXPECT_TRUE(contains(r.out, "box")) << r.out;

  const std::string out = dir.file("out.json");
  r = run_planner({"profile", "export", "box-measured", "--db", db, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto original = nlohmann::json::parse(measured_profile_text());
  const auto exported = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(exported, original);
  EXPECT_EQ(exported["provenance"]["host"], "box");
  EXPECT_EQ(exported["compute"]["host_cores"], 2);

  // SQLite keeps the provenance column too.
  auto database = store::Database::open(db);
  ASSERT_TRUE(database);
  auto stored = store::get_profile(*database, "box-measured");
  ASSERT_TRUE(stored);
  EXPECT_TRUE(contains(stored->provenance, "\"host\":\"box\"")) << stored->provenance;

  // simulate --profile finds it in the database.
  r = run_planner(
      {"simulate", "--model",     "gpt-tiny", "--gpu",     "cpu-host",     "--tp", "1",
       "--pp",     "1",           "--dp",     "2",         "--gbs",        "8",    "--seq",
       "64",       "--precision", "fp32",     "--profile", "box-measured", "--db", db,
       "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["profile"], "box-measured");

  ASSERT_EQ(run_planner({"profile", "delete", "box-measured", "--db", db}).exit_code, 0);
  r = run_planner({"profile", "show", "box-measured", "--db", db});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "no hardware profile \"box-measured\"")) << r.err;
}

TEST(ProfileCli, BadProfileNamesFileAndPointer) {
  TempDir dir;
  auto doc = nlohmann::json::parse(measured_profile_text());
  doc["compute"]["memory_bound_GBps"]["gemm"] = 3.0;
  doc["provenance"]["cores"] = 2;
  const std::string bad = dir.file("bad.json");
  write_file(bad, doc.dump(2));
  const CommandResult r = run_planner({"profile", "import", bad, "--db", dir.file("p.db")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "bad.json")) << r.err;
  EXPECT_TRUE(contains(r.err, "/compute/memory_bound_GBps/gemm")) << r.err;
  EXPECT_TRUE(contains(r.err, "/provenance/cores")) << r.err;

  write_file(bad, "{\"schema_version\": 1, \"kind\": \"profile\", \"name\": 3}");
  const CommandResult r2 = run_planner({"profile", "import", bad, "--db", dir.file("p.db")});
  EXPECT_EQ(r2.exit_code, 2);
  EXPECT_TRUE(contains(r2.err, "bad.json: /name")) << r2.err;
}

}  // namespace
}  // namespace planner
