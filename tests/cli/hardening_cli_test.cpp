// Bad input through the binary, the way a user meets it: every file of the bad-input corpora
// exits 2 with exactly its expected diagnostics (file, JSON pointer, message); special files, a
// wrong --db and killed runs are reported for what they are; `planner --version` loads no CUDA
// library.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "planner/core/json_reader.hpp"
#include "planner/store/store.hpp"
#include "support/command.hpp"
#include "support/corpus.hpp"

namespace planner {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::run_planner;
using testing::TempDir;

const std::string kData = PLANNER_TEST_DATA_DIR;

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
    s.pop_back();
  return s;
}

// Lines of `text` without a leading "error: " (how main() prints a failed command's message).
std::string without_error_prefix(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::string out;
  while (std::getline(in, line)) {
    if (line.rfind("error: ", 0) == 0) line = line.substr(7);
    out += (out.empty() ? "" : "\n") + line;
  }
  return out;
}

// Runs `command FILE` for every file of a corpus folder: exit code 2, and the printed diagnostics
// (the folder's path removed, as in the .expected files) equal the file's .expected.
void expect_corpus_through_cli(const std::string& folder, const std::vector<std::string>& command,
                               bool diagnostics_on_stdout) {
  const std::string dir = kData + "/" + folder;
  const auto files = testing::corpus_files(dir);
  ASSERT_FALSE(files.empty()) << dir;
  for (const fs::path& file : files) {
    std::vector<std::string> args = command;
    args.push_back(file.string());
    const testing::CommandResult r = run_planner(args);
    EXPECT_EQ(r.exit_code, 2) << file.filename() << "\n" << r.err;
    const std::string printed = diagnostics_on_stdout ? r.out : without_error_prefix(r.err);
    std::string expected =
        trimmed(testing::slurp(fs::path(file).replace_extension(".expected").string()));
    // The .expected files list the document kinds of core alone; the binary knows them all.
    expected =
        replace_all(expected, "cluster, plan\n", "cluster, plan, topology, profile, sweep\n");
    if (expected.ends_with("cluster, plan")) expected += ", topology, profile, sweep";
    EXPECT_EQ(trimmed(replace_all(printed, dir + "/", "")), expected) << file.filename();
  }
}

TEST(BadInputCli, EveryDocumentOfTheCorporaExitsTwoWithItsDiagnostics) {
  expect_corpus_through_cli("bad", {"validate"}, true);
  expect_corpus_through_cli("bad-topology", {"validate"}, true);
  expect_corpus_through_cli("bad-sweep", {"validate"}, true);
}

TEST(BadInputCli, EveryHuggingFaceConfigOfTheCorpusExitsTwoWithItsDiagnostics) {
  expect_corpus_through_cli("bad-hf", {"model", "import"}, false);
}

TEST(BadInputCli, TheCorporaGrewWithTheHardeningCases) {
  std::size_t files = 0;
  for (const char* folder : {"bad", "bad-topology", "bad-sweep", "bad-hf"}) {
    files += testing::corpus_files(kData + "/" + folder).size();
  }
  // 74 before the hardening issue (issue 19); it added 40 and more (46).
  EXPECT_GE(files, 114u);
}

// Special paths: refused for what they are, at once (a FIFO used to block forever, /dev/zero to be
// read for 4 GiB, a symbolic link loop to be "no such file").
TEST(BadInputCli, SpecialFilesAreRefusedForWhatTheyAre) {
  TempDir dir;
  const std::string fifo = dir.file("f.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string loop = dir.file("loop.json");
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"validate", fifo}, fifo + ": is a FIFO (named pipe), expected a regular file"},
      {{"validate", "/dev/zero"}, "/dev/zero: is a character device, expected a regular file"},
      {{"validate", loop}, loop + ": a symbolic link loop (too many levels of symbolic links)"},
      {{"validate", dir.path()}, dir.path() + ": is a directory, expected a file"},
      {{"model", "import", fifo}, fifo + ": is a FIFO (named pipe), expected a regular file"},
      {{"model", "import", "/dev/zero"},
       "/dev/zero: is a character device, expected a regular file"},
      {{"simulate", "--plan", fifo}, fifo + ": is a FIFO (named pipe), expected a regular file"},
      {{"sweep", "--spec", loop},
       loop + ": a symbolic link loop (too many levels of symbolic links)"},
      {{"topology", "show", fifo}, "is a FIFO (named pipe), expected a regular file"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv{PLANNER_CLI_PATH};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto r = run_command(argv, {}, {}, /*timeout_seconds=*/20);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << " " << c.args.back() << "\n" << r.err;
    EXPECT_NE((r.out + r.err).find(c.message), std::string::npos)
        << c.args[0] << ": " << r.out << r.err;
  }
}

TEST(BadInputCli, ADatabasePathThatIsNotAFileIsBadInput) {
  TempDir dir;
  const std::string loop = dir.file("loop.db");
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  for (const std::string& db : {std::string("/dev/null"), loop}) {
    const auto list = run_planner({"db", "list", "--db", db});
    EXPECT_EQ(list.exit_code, 2) << db << ": " << list.err;
    const auto sweep =
        run_planner({"sweep", "--model", "gpt-tiny", "--gpu", "h100", "--gpus", "8", "--db", db});
    EXPECT_EQ(sweep.exit_code, 2) << db << ": " << sweep.err;
    EXPECT_NE(sweep.err.find(db + ": "), std::string::npos) << sweep.err;
    EXPECT_EQ(sweep.out, "") << "refused before the search";
  }
  const auto null = run_planner({"db", "list", "--db", "/dev/null"});
  EXPECT_NE(null.err.find("/dev/null: is a character device, expected a regular file"),
            std::string::npos)
      << null.err;
}

// A model within every field's limit whose parameter count does not fit in 64 bits: refused by
// the loader (planner memory printed -3,784,974 T parameters and said it fits).
TEST(BadInputCli, AModelTooLargeToCountIsRefused) {
  const auto r = run_planner({"memory", "--model", kData + "/bad/model_params_overflow_int64.json",
                              "--gpu", "h100", "--tp", "8"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("/layers: a model of 100000 layers of hidden 10000000 has more parameters "
                       "than the 1e+15 planner can account for"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find(" T "), std::string::npos) << r.out;
}

TEST(BadInputCli, ImportedModelsAreNamedAfterTheirFile) {
  TempDir dir;
  fs::create_directories(dir.file("Qwen2-7B-Instruct"));
  const std::string config = dir.file("Qwen2-7B-Instruct/config.json");
  fs::copy_file(kData + "/hf/qwen2-7b.config.json", config);
  const auto by_dir = run_planner({"model", "import", config, "--json"});
  ASSERT_EQ(by_dir.exit_code, 0) << by_dir.err;
  EXPECT_NE(by_dir.out.find("\"name\": \"Qwen2-7B-Instruct\""), std::string::npos) << by_dir.out;
  const auto by_file =
      run_planner({"model", "import", kData + "/hf/qwen2-7b.config.json", "--json"});
  ASSERT_EQ(by_file.exit_code, 0) << by_file.err;
  EXPECT_NE(by_file.out.find("\"name\": \"qwen2-7b\""), std::string::npos) << by_file.out;
}

// An executed run whose measured steps took 10x the prediction, recorded with `profile` as its
// prediction's hardware profile (as planner exec records it). Returns the database's path.
std::string run_with_prediction_error(const TempDir& dir, const std::string& profile) {
  using namespace planner::store;
  const std::string path = dir.file("runs.db");
  auto db = Database::open(path);
  EXPECT_TRUE(db) << db.status().message();
  NewRun exec;
  exec.kind = RunKind::kExec;
  exec.inputs_json = R"({"profile": ")" + profile + R"("})";
  const RunId run = *create_run(*db, exec);
  const PlanId plan = *put_plan_text(*db, R"({"schema_version": 1, "kind": "plan"})", "p");
  OpPrediction predicted;
  predicted.op_id = "op0";
  predicted.op_kind = "gemm";
  predicted.duration = milliseconds(1.0);
  EXPECT_TRUE(add_predicted_ops(*db, run, plan, std::span(&predicted, 1)).is_ok());
  EXPECT_TRUE(put_metrics(*db, run, plan, MetricSource::kSimulated,
                          std::vector<Metric>{{"step_time", 1.0e-3, "s"}})
                  .is_ok());
  std::vector<OpMeasurement> ops;
  std::vector<StepMeasurement> steps;
  for (std::int64_t step = 0; step < 3; ++step) {
    OpMeasurement m;
    m.step = step;
    m.op_id = "op0";
    m.op_kind = "gemm";
    m.phase = "forward";
    m.wall = milliseconds(10.0);
    ops.push_back(m);
    StepMeasurement st;
    st.step = step;
    st.step_time = milliseconds(10.0);
    st.tokens_per_s = 1;
    st.warmup = step == 0;
    steps.push_back(st);
  }
  EXPECT_TRUE(add_measured_ops(*db, run, ops).is_ok());
  EXPECT_TRUE(add_measured_steps(*db, run, steps).is_ok());
  EXPECT_TRUE(finish_run(*db, run).is_ok());
  return path;
}

TEST(Report, AnErrorOfAnUncalibratedMachineSaysToCalibrate) {
  TempDir dir;
  const std::string db = run_with_prediction_error(dir, "cpu-host");
  const auto text = run_planner({"report", "latest", "--db", db});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("error -90.0 %"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("hint: the prediction used \"cpu-host\", a preset from datasheet "
                          "figures, not a profile measured on this machine"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("planner calibrate"), std::string::npos) << text.out;
  const auto json = run_planner({"report", "latest", "--db", db, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"hint\": \"the prediction used \\\"cpu-host\\\""), std::string::npos)
      << json.out;
}

TEST(Report, AMeasuredProfileGetsNoCalibrationHint) {
  TempDir dir;
  // A profile name that is no preset: one planner calibrate stored.
  const std::string db = run_with_prediction_error(dir, "mybox");
  {
    auto opened = store::Database::open(db);
    ASSERT_TRUE(opened);
    store::NewProfile measured;
    measured.name = "mybox";
    measured.parameters_json = "{}";
    ASSERT_TRUE(store::put_profile(*opened, measured, {}));
  }
  const auto text = run_planner({"report", "latest", "--db", db});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.find("hint:"), std::string::npos) << text.out;
}

TEST(Report, StepsAreNumberedAsPlannerExecPrintsThem) {
  // planner exec prints "step 1/3" for the first step; the report's table starts at 1 too.
  TempDir dir;
  const std::string db = run_with_prediction_error(dir, "cpu-host");
  const auto json = run_planner({"report", "latest", "--db", db, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  Diagnostics ignored;
  const auto doc = parse_json_text(json.out, ignored);
  ASSERT_TRUE(doc) << json.out;
  ASSERT_EQ((*doc)["by_step"].size(), 3u);
  EXPECT_EQ((*doc)["by_step"][0]["step"], 1);
  EXPECT_EQ((*doc)["by_step"][2]["step"], 3);
  EXPECT_EQ((*doc)["by_step"][0]["warmup"], true);
}

// The cuda backend is a module loaded when it is used: no other command loads cuBLAS, NCCL or the
// CUDA runtime, and the binary does not need them to start.
TEST(CudaModule, VersionLoadsNoCudaLibrary) {
  const auto r = run_command({PLANNER_CLI_PATH, "--version"}, {"LD_DEBUG=files"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("file=libc.so"), std::string::npos) << "LD_DEBUG printed nothing";
  for (const char* lib : {"libcublas", "libcublasLt", "libnccl", "libcudart", "libcuda.so"}) {
    EXPECT_EQ(r.err.find(lib), std::string::npos) << lib << " loaded by planner --version";
  }
  // Nor is any of them needed to start.
  const auto ldd = run_command({"/usr/bin/ldd", PLANNER_CLI_PATH});
  ASSERT_EQ(ldd.exit_code, 0) << ldd.err;
  for (const char* lib : {"libcublas", "libnccl", "libcudart", "libcuda.so"}) {
    EXPECT_EQ(ldd.out.find(lib), std::string::npos) << lib << " is a dependency of planner";
  }
}

TEST(CudaModule, AMissingModuleIsAClearRuntimeError) {
  const std::string plan = kData + "/exec/gpt-tiny-1.json";
  const auto r = run_command({PLANNER_CLI_PATH, "exec", plan, "--backend", "cuda", "--no-db"},
                             {"PLANNER_CUDA_BACKEND=/nonexistent/libplanner_cuda_backend.so"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto version = run_planner({"--version"});
  if (version.out.find("cuda backend: built") == std::string::npos) {
    EXPECT_NE(r.err.find("cuda backend is not part of this build"), std::string::npos) << r.err;
  } else {
    EXPECT_NE(r.err.find("was not found (looked for /nonexistent/libplanner_cuda_backend.so"),
              std::string::npos)
        << r.err;
    // With the module where the build puts it: loaded, and on a machine without a GPU the
    // backend says so.
    const auto here = run_planner({"exec", plan, "--backend", "cuda", "--no-db"});
    EXPECT_EQ(here.exit_code, 1) << here.err;
    EXPECT_TRUE(here.err.find("needs an NVIDIA GPU") != std::string::npos ||
                here.err.find("cuda backend could not be loaded") == std::string::npos)
        << here.err;
  }
}

}  // namespace
}  // namespace planner
