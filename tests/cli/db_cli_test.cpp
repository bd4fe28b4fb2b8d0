// planner db list | show | export | vacuum, run the way a user runs them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "planner/store/store.hpp"
#include "support/command.hpp"

namespace planner {
namespace {

using testing::CommandResult;

CommandResult planner(std::vector<std::string> args) {
  args.insert(args.begin(), PLANNER_CLI_PATH);
  return testing::run_command(args);
}

template <class T>
T take(Result<T> result) {
  if (!result) throw std::runtime_error(result.status().message());
  return std::move(result).value();
}

void ok(const Status& status) {
  if (!status) throw std::runtime_error(status.message());
}

// A database with a finished simulation, a sweep of three plans and a failed execution.
class DbCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store::Database db = take(store::Database::open(path_));
    sim_ = take(store::create_run(
        db, {store::RunKind::kSimulate, "llama tp2", R"({"plan": "plan.json"})", {"box-1"}}));
    const store::PlanId plan = take(
        store::put_plan_text(db, R"({"kind": "plan", "parallel": {"tp": 2}})", "llama3-8b tp2"));
    const std::vector<store::Metric> metrics = {{"step_time", 1.25, "s"},
                                                {"mfu", 0.43, "fraction"}};
    ok(store::put_metrics(db, sim_, plan, store::MetricSource::kSimulated, metrics));
    std::vector<store::OpPrediction> ops(3);
    for (int i = 0; i < 3; ++i) {
      ops[i].op_id = "op" + std::to_string(i);
      ops[i].op_kind = "gemm";
      ops[i].duration = microseconds(10.0 * (i + 1));
    }
    ok(store::add_predicted_ops(db, sim_, plan, ops));
    ok(store::finish_run(db, sim_));

    sweep_ = take(store::create_run(db, {store::RunKind::kSweep, "search", "{}", {"box-1"}}));
    std::vector<store::SweepEntry> entries;
    for (int tp : {1, 2, 4}) {
      store::SweepEntry e;
      e.plan = take(store::put_plan_text(
          db, R"({"kind": "plan", "parallel": {"pp": 2, "tp": )" + std::to_string(tp) + "}}",
          "candidate tp" + std::to_string(tp)));
      e.position = tp == 2 ? 1 : tp == 4 ? 2 : 3;
      e.objective = 1000.0 / e.position;
      e.note = tp == 2 ? "least exposed communication" : "bigger bubble";
      entries.push_back(e);
    }
    ok(store::add_sweep_results(db, sweep_, entries));
    ok(store::finish_run(db, sweep_));

    exec_ = take(store::create_run(db, {store::RunKind::kExec, "", "{}", {"n0", "n1"}}));
    ok(store::fail_run(db, exec_, "rank 1 timed out after 60 s", 1));
  }

  testing::TempDir dir_;
  std::string path_ = dir_.file("runs.db");
  store::RunId sim_, sweep_, exec_;
};

TEST_F(DbCliTest, ListShowsRunsNewestFirst) {
  auto r = planner({"db", "list", "--db", path_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("KIND"), std::string::npos) << r.out;
  const auto exec_at = r.out.find("failed (rank 1)");
  const auto sweep_at = r.out.find("search");
  const auto sim_at = r.out.find("llama tp2");
  ASSERT_NE(exec_at, std::string::npos) << r.out;
  ASSERT_NE(sim_at, std::string::npos);
  EXPECT_LT(exec_at, sweep_at);
  EXPECT_LT(sweep_at, sim_at);
  EXPECT_NE(r.out.find("n0, n1"), std::string::npos);

  auto sweeps = planner({"db", "list", "--db", path_, "--kind", "sweep"});
  ASSERT_EQ(sweeps.exit_code, 0) << sweeps.err;
  EXPECT_NE(sweeps.out.find("search"), std::string::npos);
  EXPECT_EQ(sweeps.out.find("llama tp2"), std::string::npos);

  auto json = planner({"db", "list", "--db", path_, "--json", "--limit", "2"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json runs = Json::parse(json.out);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["id"], exec_.value);
  EXPECT_EQ(runs[0]["failure"]["rank"], 1);
  EXPECT_EQ(runs[1]["kind"], "sweep");
  EXPECT_EQ(runs[1]["plans"], 3);

  auto none = planner({"db", "list", "--db", path_, "--kind", "calibrate"});
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_NE(none.out.find("No calibrate runs in"), std::string::npos) << none.out;
  auto bad = planner({"db", "list", "--db", path_, "--kind", "nonsense"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--kind: expected one of sweep, simulate, exec, calibrate, accuracy"),
            std::string::npos)
      << bad.err;
}

TEST_F(DbCliTest, ShowPrintsPlansMetricsAndCounts) {
  auto r = planner({"db", "show", std::to_string(sim_.value), "--db", path_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* text : {"simulate", "llama tp2", "box-1", "llama3-8b tp2", "step_time", "1.25",
                           "mfu", "3 predicted ops", "planner db export"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << " in\n" << r.out;
  }
  auto sweep = planner({"db", "show", std::to_string(sweep_.value), "--db", path_});
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  const auto best = sweep.out.find("candidate tp2");
  ASSERT_NE(best, std::string::npos) << sweep.out;
  EXPECT_LT(best, sweep.out.find("candidate tp4"));
  EXPECT_NE(sweep.out.find("least exposed communication"), std::string::npos);

  auto last = planner({"db", "show", "last", "--db", path_, "--json"});
  ASSERT_EQ(last.exit_code, 0) << last.err;
  const Json j = Json::parse(last.out);
  EXPECT_EQ(j["id"], exec_.value);
  EXPECT_EQ(j["status"], "failed");
  EXPECT_EQ(j["failure"]["reason"], "rank 1 timed out after 60 s");
  EXPECT_EQ(j["counts"]["measured_ops"], 0);

  auto sim_json = planner({"db", "show", std::to_string(sim_.value), "--db", path_, "--json"});
  const Json s = Json::parse(sim_json.out);
  EXPECT_EQ(s["inputs"]["plan"], "plan.json");
  EXPECT_EQ(s["plans"][0]["plan"]["parallel"]["tp"], 2);
  EXPECT_EQ(s["counts"]["predicted_ops"], 3);

  auto missing = planner({"db", "show", "999", "--db", path_});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("error: run 999 not found in " + path_), std::string::npos)
      << missing.err;
  auto bad = planner({"db", "show", "first", "--db", path_});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("RUN must be a run id"), std::string::npos) << bad.err;
}

TEST_F(DbCliTest, ExportWritesJson) {
  const std::string out = dir_.file("sim.json");
  auto r = planner({"db", "export", std::to_string(sim_.value), "--db", path_, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json doc = Json::parse(testing::slurp(out));
  EXPECT_EQ(doc["kind"], "planner_db_export");
  ASSERT_EQ(doc["runs"].size(), 1u);
  EXPECT_EQ(doc["runs"][0]["predicted_ops"]["rows"].size(), 3u);
  EXPECT_EQ(doc["runs"][0]["predicted_ops"]["rows"][2][6], 30000000);  // duration_ps of op2
  // One row per line.
  EXPECT_NE(testing::slurp(out).find(R"([1, 0, "op0", "gemm", null, 0, 10000000, 0])"),
            std::string::npos);

  auto all = planner({"db", "export", "--all", "--db", path_});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(Json::parse(all.out)["runs"].size(), 3u);

  EXPECT_EQ(planner({"db", "export", "--db", path_}).exit_code, 2);
  EXPECT_EQ(planner({"db", "export", "1", "--all", "--db", path_}).exit_code, 2);
}

TEST_F(DbCliTest, VacuumKeepsEverything) {
  auto r = planner({"db", "vacuum", "--db", path_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("integrity check ok"), std::string::npos) << r.out;
  auto list = planner({"db", "list", "--db", path_, "--json"});
  EXPECT_EQ(Json::parse(list.out).size(), 3u);
}

TEST_F(DbCliTest, DefaultDatabaseIsInTheWorkingDirectory) {
  std::filesystem::copy_file(path_, dir_.file("planner.db"));
  const std::string cmd = "cd '" + dir_.path() + "' && exec '" + PLANNER_CLI_PATH + "' db list";
  auto r = testing::run_command({"/bin/sh", "-c", cmd});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("llama tp2"), std::string::npos) << r.out;

  testing::TempDir empty;
  const std::string none = "cd '" + empty.path() + "' && exec '" + PLANNER_CLI_PATH + "' db list";
  auto missing = testing::run_command({"/bin/sh", "-c", none});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("error: planner.db: no such database"), std::string::npos)
      << missing.err;
  EXPECT_FALSE(std::filesystem::exists(empty.file("planner.db"))) << "reading created a database";
}

TEST_F(DbCliTest, BadDatabaseFilesAreClearErrors) {
  const std::string text = dir_.file("notes.txt");
  testing::write_file(text, "These are my notes, not a database. " + std::string(100, '-'));
  auto r = planner({"db", "list", "--db", text});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: " + text + ": not a SQLite database (file is not a database)\n");

  // A planner database written by a newer planner: user_version (bytes 60-63 of the header,
  // big-endian) says 99.
  const std::string newer = dir_.file("newer.db");
  std::filesystem::copy_file(path_, newer);
  {
    std::fstream f(newer, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(60);
    const char version[4] = {0, 0, 0, 99};
    f.write(version, 4);
  }
  auto too_new = planner({"db", "show", "1", "--db", newer});
  EXPECT_EQ(too_new.exit_code, 2);
  EXPECT_NE(too_new.err.find("database schema version 99 is newer than this build"),
            std::string::npos)
      << too_new.err;
}

}  // namespace
}  // namespace planner
