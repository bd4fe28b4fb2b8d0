// `planner exec --launch slurm` against a real single-node Slurm: the test starts slurmctld and
// slurmd itself (private slurm.conf in a temporary directory, auth/none, MpiDefault=pmix, free
// ports, no systemd), submits a small plan, follows the job to its end, checks the run in the
// database, and tears the daemons down (also when a check fails). Skipped, with the reason, only
// when the Slurm programs are not installed (scripts/setup.sh installs slurm-wlm, slurmctld and
// slurmd).
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <thread>

#include "exec_test_plans.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/loaders.hpp"
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

constexpr const char* kSlurmPrograms[] = {"/usr/sbin/slurmctld", "/usr/sbin/slurmd",
                                          "/usr/bin/sbatch",     "/usr/bin/srun",
                                          "/usr/bin/sinfo",      "/usr/bin/scontrol"};
// The node's CPU count as configured (SlurmdParameters=config_overrides lets it exceed the
// machine's, so the test's ranks fit on any CI machine).
constexpr int kNodeCpus = 4;

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string short_hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  std::string host(name);
  return host.substr(0, host.find('.'));
}

std::string user_name() {
  const passwd* pw = ::getpwuid(::geteuid());
  return pw != nullptr ? pw->pw_name : "root";
}

// A one-node Slurm cluster for the length of the test suite.
class SlurmCluster {
 public:
  SlurmCluster() {
    const std::string d = dir_.path();
    for (const char* sub : {"state", "spool", "log", "tmp"})
      fs::create_directories(d + "/" + sub);
    conf_ = d + "/slurm.conf";
    const std::string user = user_name();
    write_file(d + "/plugstack.conf", "");
    write_file(
        conf_,
        "ClusterName=plannertest\n"
        "SlurmctldHost=" +
            short_hostname() +
            "(127.0.0.1)\n"
            "SlurmctldPort=" +
            std::to_string(free_port()) +
            "\n"
            "SlurmdPort=" +
            std::to_string(free_port()) +
            "\n"
            "AuthType=auth/none\nCredType=cred/none\n"
            "MpiDefault=pmix\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
            "JobAcctGatherType=jobacct_gather/none\n"
            "AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\n"
            "SchedulerType=sched/builtin\n"
            "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
            "SlurmUser=" +
            user + "\nSlurmdUser=" + user +
            "\n"
            "StateSaveLocation=" +
            d + "/state\nSlurmdSpoolDir=" + d +
            "/spool\n"
            "SlurmctldPidFile=" +
            d + "/slurmctld.pid\nSlurmdPidFile=" + d +
            "/slurmd.pid\n"
            "SlurmctldLogFile=" +
            d +
            "/log/slurmctld.log\n"
            "SlurmdLogFile=" +
            d +
            "/log/slurmd.log\n"
            "PlugStackConfig=" +
            d +
            "/plugstack.conf\n"
            "MailProg=/bin/true\n"
            "ReturnToService=2\nSlurmdParameters=config_overrides\n"
            "MinJobAge=600\n"
            // Private TmpFS and a job id no other test cluster starts from: the PMIx plugin
            // names its directory after the job and step, so clusters running side by side (or
            // one left by a killed run) must not meet in a shared /tmp.
            "TmpFS=" +
            d + "/tmp\nFirstJobId=" + std::to_string(free_port()) +
            "\n"
            "NodeName=plannernode NodeHostname=" +
            short_hostname() + " NodeAddr=127.0.0.1 CPUs=" + std::to_string(kNodeCpus) +
            " RealMemory=1000 State=UNKNOWN\n"
            "PartitionName=planner Nodes=plannernode Default=YES MaxTime=INFINITE State=UP\n");
    fs::create_directories(d + "/ctld");
    fs::create_directories(d + "/d");
    ctld_ = std::make_unique<Background>(
        std::vector<std::string>{"/usr/sbin/slurmctld", "-D", "-f", conf_}, env(), d + "/ctld");
    slurmd_ = std::make_unique<Background>(
        std::vector<std::string>{"/usr/sbin/slurmd", "-D", "-N", "plannernode", "-f", conf_}, env(),
        d + "/d");
    ready_ = planner::testing::wait_until(
        [&] {
          const CommandResult r =
              planner::testing::run_command({"/usr/bin/sinfo", "-h", "-o", "%t"}, env(), {}, 10);
          return r.exit_code == 0 && r.out.find("idle") != std::string::npos;
        },
        std::chrono::milliseconds(30'000));
  }

  // Stops both daemons and whatever they started.
  ~SlurmCluster() {
    slurmd_.reset();
    ctld_.reset();
  }

  bool ready() const { return ready_; }
  std::vector<std::string> env() const { return {"SLURM_CONF=" + conf_}; }
  std::string logs() const {
    return "--- slurmctld\n" + slurp(dir_.file("log/slurmctld.log")) + ctld_->err() +
           "--- slurmd\n" + slurp(dir_.file("log/slurmd.log")) + slurmd_->err();
  }

 private:
  TempDir dir_;
  std::string conf_;
  std::unique_ptr<Background> ctld_;
  std::unique_ptr<Background> slurmd_;
  bool ready_ = false;
};

class ExecSlurm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* p : kSlurmPrograms) {
      if (!fs::exists(p)) {
        missing_ = p;
        return;
      }
    }
    cluster_ = new SlurmCluster();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (!missing_.empty()) {
      GTEST_SKIP() << missing_ << " is not installed (scripts/setup.sh installs slurm-wlm, "
                   << "slurmctld and slurmd)";
    }
    ASSERT_TRUE(cluster_->ready()) << "the test's Slurm did not come up\n" << cluster_->logs();
  }

  // The cluster's environment plus Open MPI's shared memory without cross-memory attach (as the
  // other mpi tests), passed on to the job by sbatch.
  std::vector<std::string> env() const {
    std::vector<std::string> e = cluster_->env();
    e.push_back("OMPI_MCA_btl_vader_single_copy_mechanism=none");
    return e;
  }

  CommandResult run(const std::vector<std::string>& argv, int timeout_s = 120) const {
    return planner::testing::run_command(argv, env(), {}, timeout_s);
  }

  static SlurmCluster* cluster_;
  static std::string missing_;
};

SlurmCluster* ExecSlurm::cluster_ = nullptr;
std::string ExecSlurm::missing_;

TEST_F(ExecSlurm, ASmallPlanRunsThroughSbatchAndSrunAndLandsInTheDatabase) {
  TempDir dir;
  const std::string plan = dir.file("tp2.json");
  write_file(plan, to_json_text(test_plan(gpt_test_model(), par(2, 1, 1))));
  const std::string db = dir.file("runs.db");
  const std::string output = dir.file("job-%j.out");
  const CommandResult r =
      run({PLANNER_CLI_PATH, "exec", plan, "--launch", "slurm", "--nodes", "1", "--wait", "--steps",
           "3", "--warmup", "1", "--timeout", "20", "--output", output, "--db", db});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << cluster_->logs();
  const auto at = r.out.find("submitted batch job ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string job = r.out.substr(at + 20, r.out.find(':', at) - at - 20);
  EXPECT_NE(r.out.find("squeue -j " + job), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("COMPLETED"), std::string::npos) << r.err;

  // The job's output: both ranks under srun, joined in one MPI world.
  std::string job_output = output;
  job_output.replace(job_output.find("%j"), 2, job);
  const std::string text = slurp(job_output);
  EXPECT_NE(text.find("planner exec: 2 ranks on "), std::string::npos) << text;
  EXPECT_NE(text.find("step 3/3  loss "), std::string::npos) << text;

  auto opened = store::Database::open(db, {store::OpenMode::kMustExist});
  ASSERT_TRUE(opened) << opened.status().message();
  auto runs = store::list_runs(*opened);
  ASSERT_TRUE(runs);
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().kind, store::RunKind::kExec);
  EXPECT_EQ(runs->front().status, store::RunStatus::kOk);
  EXPECT_EQ(runs->front().hosts.size(), 2u);
  auto steps = store::get_measured_steps(*opened, runs->front().id);
  ASSERT_TRUE(steps);
  EXPECT_EQ(steps->size(), 3u);
}

TEST_F(ExecSlurm, ARankKilledUnderSrunFailsTheJobAndTheRunIsMarkedFailed) {
  TempDir dir;
  const std::string plan = dir.file("dp2.json");
  write_file(plan, to_json_text(test_plan(gpt_test_model(), par(1, 1, 2))));
  const std::string db = dir.file("runs.db");
  const std::string output = dir.file("job-%j.out");
  Background run({PLANNER_CLI_PATH, "exec", plan, "--launch", "slurm", "--wait", "--steps",
                  "1000000", "--warmup", "0", "--timeout", "5", "--output", output, "--db", db},
                 env(), dir.path());
  std::string job;
  ASSERT_TRUE(planner::testing::wait_until(
      [&] {
        const std::string out = run.out();
        const auto at = out.find("submitted batch job ");
        if (at == std::string::npos) return false;
        job = out.substr(at + 20, out.find(':', at) - at - 20);
        std::string job_output = output;
        job_output.replace(job_output.find("%j"), 2, job);
        return slurp(job_output).find("step 3/") != std::string::npos;
      },
      std::chrono::milliseconds(60'000)))
      << run.out() << run.err() << cluster_->logs();
  const std::vector<pid_t> rank1 =
      planner::testing::processes_with_env({"SLURM_JOB_ID=" + job, "PMIX_RANK=1"});
  ASSERT_EQ(rank1.size(), 1u);
  ::kill(rank1.front(), SIGKILL);
  const std::optional<int> code = run.wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value()) << run.err();
  EXPECT_EQ(*code, 1) << run.err();
  EXPECT_NE(run.err().find("job " + job + " ended FAILED with exit code 1"), std::string::npos)
      << run.err();

  auto opened = store::Database::open(db, {store::OpenMode::kMustExist});
  ASSERT_TRUE(opened) << opened.status().message();
  auto record = store::get_run(*opened, store::RunId{1});
  ASSERT_TRUE(record) << record.status().message();
  EXPECT_EQ(record->status, store::RunStatus::kFailed);
  // Whichever notices first names the failure: srun ending the job, or rank 0's wait for the
  // killed rank's step (on a loaded machine the watchdog can see rank 1 gone before srun exits).
  const std::string& why = record->failure_reason;
  EXPECT_TRUE(why.find("the job ended (srun exit code") != std::string::npos ||
              (why.find("rank 1") != std::string::npos && why.find("is gone") != std::string::npos))
      << why;
  auto steps = store::get_measured_steps(*opened, record->id);
  ASSERT_TRUE(steps);
  EXPECT_GE(steps->size(), 3u);
  // Nothing of the job is left.
  EXPECT_TRUE(planner::testing::wait_until(
      [&] { return planner::testing::processes_with_env({"SLURM_JOB_ID=" + job}).empty(); },
      std::chrono::milliseconds(10'000)));
}

// Open MPI 4 (Debian 12) starts under srun only through PMIx: without it, MPI_Init refuses (with
// Open MPI's own message), so no rank runs alone as a world of one. (check_launcher_world covers
// MPI libraries that would start singletons; exec_unit_test checks it.)
TEST_F(ExecSlurm, SrunWithoutPmixFailsBeforeAnyStep) {
  TempDir dir;
  const std::string plan = dir.file("tp2.json");
  write_file(plan, to_json_text(test_plan(gpt_test_model(), par(2, 1, 1))));
  const CommandResult r = run({"/usr/bin/srun", "--mpi=none", "-n", "2", PLANNER_CLI_PATH, "exec",
                               plan, "--launch", "none", "--no-db"},
                              60);
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("step 1/"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("planner exec: "), std::string::npos) << r.err;
}

}  // namespace
}  // namespace planner::exec
