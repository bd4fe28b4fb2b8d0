// planner exec: runs a plan for real (planner::exec) and records its measurements.
//
//   --launch local -n N   starts mpirun itself: N ranks on this host, each running
//                         `planner exec PLAN --launch none ...`
//   --launch none         this process is one rank of a job mpirun or srun started
// Without --launch: none when an MPI launcher started this process, else local. MPI is initialised
// here only, so every other command runs without mpirun.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include "app.hpp"
#include "db_options.hpp"
#include "output.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/loaders.hpp"
#include "planner/exec/execute.hpp"
#include "planner/exec/launch.hpp"
#include "planner/exec/mpi_world.hpp"
#include "planner/exec/store_recorder.hpp"

namespace planner::cli {
namespace {

struct ExecArgs {
  std::string plan;
  std::int64_t steps = 20;
  std::int64_t warmup = 2;
  std::string backend = "cpu";
  std::string launch;  // none | local; empty: decide from the environment
  int ranks = 0;
  double timeout_s = 60;
  double lr = 1e-3;
  std::int64_t bucket_elements = 0;
  int blas_threads = 0;
  DbOptions db;
};

std::string mib(std::int64_t bytes) {
  return fmt(static_cast<double>(bytes) / static_cast<double>(kMiB), 2) + " MiB";
}

// Prints the run's progress (rank 0) and forwards to the store recorder, when there is one.
class Progress final : public exec::ExecObserver {
 public:
  Progress(const CliContext& ctx, exec::StoreRecorder* recorder, const std::string& db_path)
      : ctx_(ctx), recorder_(recorder), db_path_(db_path) {}

  Status on_start(const exec::ExecStart& start) override {
    if (recorder_ != nullptr) PLANNER_RETURN_IF_ERROR(recorder_->on_start(start));
    std::ostream& err = *ctx_.err;
    err << "planner exec: " << start.ranks << (start.ranks == 1 ? " rank" : " ranks") << " on ";
    std::vector<std::string> hosts = start.hosts;
    std::sort(hosts.begin(), hosts.end());
    hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
    for (std::size_t i = 0; i < hosts.size(); ++i)
      err << (i > 0 ? ", " : "") << hosts[i];
    err << ", backend " << start.backend << " (" << start.device << ")";
    if (recorder_ != nullptr && recorder_->run()) {
      err << ", recording run " << recorder_->run()->value << " in " << db_path_;
    }
    err << "\ndata: " << start.data << '\n';
    return Status::ok();
  }

  Status on_step(const exec::StepRecord& rec, std::span<const store::OpMeasurement> ops) override {
    if (recorder_ != nullptr) PLANNER_RETURN_IF_ERROR(recorder_->on_step(rec, ops));
    const double ms = to_milliseconds(rec.step.step_time);
    *ctx_.err << "step " << rec.step.step + 1 << "/" << rec.steps << "  loss " << fmt(rec.loss, 4)
              << "  step " << fmt(ms, 2) << " ms  " << fmt_count(rec.step.tokens_per_s)
              << " tokens/s  peak " << mib(rec.step.peak_memory.value_or(Bytes(0)).raw())
              << (rec.loss_scale > 0 ? "  loss scale " + fmt(rec.loss_scale, 0) : "")
              << (rec.skipped ? "  (update skipped: inf/NaN gradients)" : "")
              << (rec.step.warmup ? "  (warm-up)" : "") << '\n';
    return Status::ok();
  }

  Status on_finish(const exec::ExecSummary& summary) override {
    if (recorder_ != nullptr) PLANNER_RETURN_IF_ERROR(recorder_->on_finish(summary));
    return Status::ok();
  }

  void on_failure(std::string_view reason, std::optional<int> rank) override {
    if (recorder_ != nullptr) recorder_->on_failure(reason, rank);
  }

 private:
  const CliContext& ctx_;
  exec::StoreRecorder* recorder_;
  std::string db_path_;
};

Json inputs_json(const ExecArgs& a, int ranks) {
  return Json{{"command", "exec"},
              {"plan_file", a.plan},
              {"steps", a.steps},
              {"warmup", a.warmup},
              {"timeout_s", a.timeout_s},
              {"lr", a.lr},
              {"bucket_elements", a.bucket_elements},
              {"launch", a.launch},
              {"world_size", ranks}};
}

// --launch local: check everything, then start mpirun running this program on every rank.
Status launch_local(const CliContext& ctx, const ExecArgs& a, const Plan& plan) {
  const int ranks = a.ranks > 0 ? a.ranks : static_cast<int>(plan.parallel.world_size());
  PLANNER_RETURN_IF_ERROR(exec::check_executable(plan, a.backend, ranks));
  PLANNER_RETURN_IF_ERROR(exec::check_backend_available(a.backend));  // e.g. cuda without a GPU
  PLANNER_ASSIGN_OR_RETURN(std::string self, exec::self_executable());
  std::vector<std::string> program = {self,
                                      "exec",
                                      std::filesystem::absolute(a.plan).string(),
                                      "--launch",
                                      "none",
                                      "--steps",
                                      std::to_string(a.steps),
                                      "--warmup",
                                      std::to_string(a.warmup),
                                      "--backend",
                                      a.backend,
                                      "--timeout",
                                      std::to_string(a.timeout_s),
                                      "--lr",
                                      std::to_string(a.lr),
                                      "--bucket-elements",
                                      std::to_string(a.bucket_elements),
                                      "--blas-threads",
                                      std::to_string(a.blas_threads)};
  if (a.db.disabled) {
    program.push_back("--no-db");
  } else {
    program.insert(program.end(), {"--db", std::filesystem::absolute(a.db.path).string()});
  }
  if (ctx.json) program.push_back("--json");
  exec::LocalLaunch launch;
  launch.ranks = ranks;
  launch.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  launch.as_root = ::geteuid() == 0;
  const exec::LaunchCommand cmd = exec::local_launch_command(launch, program);
  PLANNER_ASSIGN_OR_RETURN(int code, exec::run_command(cmd));
  switch (code) {
    case 0:
      return Status::ok();
    case 1:  // the ranks reported the failure themselves
      return Status(StatusCode::kRuntime, "");
    case 2:
      return Status(StatusCode::kInvalidInput, "");
    default:
      return Status::runtime(cmd.argv[0] + " exited with code " + std::to_string(code));
  }
}

// --launch none: one rank of the job.
Status run_rank(const CliContext& ctx, const ExecArgs& a, const Plan& plan) {
  PLANNER_ASSIGN_OR_RETURN(std::unique_ptr<exec::MpiWorld> world,
                           exec::MpiWorld::init(nullptr, nullptr));
  const bool root = world->rank() == 0;
  // Every rank checks the same things and comes to the same verdict; rank 0 says it.
  const Status checked = exec::check_executable(plan, a.backend, world->size());
  if (!checked.is_ok()) return root ? checked : Status(checked.code(), "");

  std::optional<store::Database> db;
  std::unique_ptr<exec::StoreRecorder> recorder;
  if (root) {
    auto opened = open_recording_db(a.db);
    if (!opened.is_ok()) {
      std::cerr << "error: " << opened.status().message() << '\n';
      world->abort(opened.status().exit_code());
    }
    db = std::move(opened).value();
    if (db) {
      recorder = std::make_unique<exec::StoreRecorder>(*db, to_json_text(plan), plan.name,
                                                       inputs_json(a, world->size()).dump());
    }
  }
  Progress progress(ctx, recorder.get(), a.db.path);
  exec::ExecOptions options;
  options.steps = a.steps;
  options.warmup = a.warmup;
  options.backend = a.backend;
  options.runner.timeout_s = a.timeout_s;
  options.runner.optimizer.lr = a.lr;
  options.runner.bucket_elements = a.bucket_elements;
  options.backend_options.blas_threads = a.blas_threads;
  auto result = exec::execute(plan, *world, options, root ? &progress : nullptr);
  if (!result.is_ok()) {
    // Communication of the failed step may still be pending: end the job instead of finalising.
    if (root) {
      std::cerr << "error: " << result.status().message() << '\n';
      if (recorder && !recorder->failure_status().is_ok()) {
        std::cerr << "error: recording the failure: " << recorder->failure_status().message()
                  << '\n';
      }
    }
    std::cerr.flush();
    world->abort(result.status().exit_code());
  }
  if (!root) return Status::ok();
  const exec::ExecSummary& sum = result->summary;
  if (ctx.json) {
    Json out{{"steps", sum.steps},
             {"step_time_s", sum.step_time_s},
             {"tokens_per_s", sum.tokens_per_s},
             {"final_loss", sum.final_loss},
             {"peak_memory_bytes", sum.peak_memory},
             {"mfu", sum.mfu},
             {"losses", result->losses}};
    if (recorder && recorder->run()) out["run"] = recorder->run()->value;
    *ctx.out << out.dump(2) << '\n';
    return Status::ok();
  }
  KeyValues kv;
  if (recorder && recorder->run()) {
    kv.add("run", std::to_string(recorder->run()->value) + " in " + a.db.path);
  }
  kv.add("plan", plan.name + " (" + short_label(plan.parallel) + ", " +
                     std::to_string(world->size()) + (world->size() == 1 ? " rank)" : " ranks)"));
  kv.add("steps", std::to_string(sum.steps) + " (" + std::to_string(a.warmup) + " warm-up)");
  kv.add("step time", fmt(sum.step_time_s * 1e3, 2) + " ms (median of the measured steps)");
  kv.add("throughput", fmt_count(sum.tokens_per_s) + " tokens/s");
  kv.add("final loss", fmt(sum.final_loss, 4) + " nats");
  kv.add("peak memory", mib(sum.peak_memory) + " per rank (largest)");
  if (sum.mfu > 0) kv.add("MFU", fmt(sum.mfu * 100, 1) + " % of " + plan.gpu.name + " peak");
  kv.print(*ctx.out);
  return Status::ok();
}

Status exec_command(const CliContext& ctx, ExecArgs a) {
  if (a.warmup >= a.steps) {
    return Status::invalid_input("--warmup (" + std::to_string(a.warmup) +
                                 ") must be below --steps (" + std::to_string(a.steps) + ")");
  }
  if (a.launch.empty()) a.launch = exec::launched_by_mpi() ? "none" : "local";
  if (a.launch != "none" && a.launch != "local") {
    return Status::invalid_input("--launch: expected none or local, got \"" + a.launch + "\"");
  }
  if (a.launch == "none" && a.ranks > 0) {
    return Status::invalid_input(
        "-n applies to --launch local; under mpirun or srun the launcher "
        "sets the number of ranks");
  }
  PLANNER_RETURN_IF_ERROR(exec::check_backend_name(a.backend));
  PLANNER_ASSIGN_OR_RETURN(Plan plan, load_plan_file(a.plan, *ctx.catalog));
  if (a.launch == "local") return launch_local(ctx, a, plan);
  return run_rank(ctx, a, plan);
}

}  // namespace

void register_exec_command(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "exec",
      "Run a plan for real: train its model on synthetic data with the plan's parallelism, "
      "measure every op and record the run in the database");
  auto a = std::make_shared<ExecArgs>();
  cmd->add_option("plan", a->plan, "Plan document (kind \"plan\")")
      ->required()
      ->type_name("PLAN.json");
  cmd->add_option("--steps", a->steps, "Training steps to run")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", a->warmup, "Leading steps measured but marked as warm-up")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--backend", a->backend,
                  "Backend: cpu (MPI + OpenBLAS) or cuda (one NVIDIA GPU per rank, NCCL; in "
                  "builds with the CUDA toolkit)")
      ->capture_default_str();
  cmd->add_option("--launch", a->launch,
                  "none: started by mpirun/srun already; local: start mpirun here (default: none "
                  "under an MPI launcher, else local)");
  cmd->add_option("-n,--ranks", a->ranks,
                  "Ranks to start with --launch local (default: the plan's world size)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--timeout", a->timeout_s,
                  "Seconds any wait may take before the run fails (no collective waits forever)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--lr", a->lr, "Learning rate (constant)")->capture_default_str();
  cmd->add_option("--bucket-elements", a->bucket_elements,
                  "Data-parallel gradient bucket size in parameters (0: Megatron-LM's default)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--blas-threads", a->blas_threads,
                  "OpenBLAS threads per rank (0: the host's cores / ranks on the host)")
      ->check(CLI::NonNegativeNumber);
  add_db_options(cmd, a->db);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return exec_command(ctx, *a); }; });
}

}  // namespace planner::cli
