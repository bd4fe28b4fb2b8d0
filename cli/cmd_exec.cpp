// planner exec: runs a plan for real (planner::exec) and records its measurements.
//
//   --launch local -n N   starts mpirun itself: N ranks on this host, each running
//                         `planner exec PLAN --launch none ...`
//   --launch slurm        writes an sbatch script (srun --mpi=pmix ... --launch none) and submits
//                         it (--dry-run prints it; --wait follows the job to its end)
//   --launch none         this process is one rank of a job mpirun or srun started
// Without --launch: none when an MPI launcher started this process, else local. MPI is initialised
// here only, so every other command runs without mpirun.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "app.hpp"
#include "db_options.hpp"
#include "output.hpp"
#include "planner/app/profiles.hpp"
#include "planner/app/record.hpp"
#include "planner/app/simulate.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/loaders.hpp"
#include "planner/exec/execute.hpp"
#include "planner/exec/launch.hpp"
#include "planner/exec/mpi_world.hpp"
#include "planner/exec/outcome.hpp"
#include "planner/exec/store_recorder.hpp"
#include "planner/store/runs.hpp"

namespace planner::cli {
namespace {

struct ExecArgs {
  std::string plan;
  std::int64_t steps = 20;
  std::int64_t warmup = 2;
  std::string backend = "cpu";
  std::string profile;  // hardware profile of the stored prediction (default: the GPU's preset)
  std::string launch;   // none | local | slurm; empty: decide from the environment
  int ranks = 0;
  double timeout_s = 60;
  double lr = 1e-3;
  std::int64_t bucket_elements = 0;
  int blas_threads = 0;
  std::int64_t checkpoint_every = 0;
  std::string checkpoint_dir = "checkpoints";
  bool resume = false;
  // --launch slurm
  int nodes = 0;
  std::string partition;
  std::string time_limit;
  std::string slurm_output;
  bool dry_run = false;
  bool wait = false;
  // Set by a launching planner exec for its ranks (OutcomeFile).
  std::string outcome_file;
  // Set by the batch script of --launch slurm after the job step, with srun's exit code.
  std::optional<int> settle;
  DbOptions db;
};

std::string mib(std::int64_t bytes) {
  return fmt(static_cast<double>(bytes) / static_cast<double>(kMiB), 2) + " MiB";
}

// Prints the run's progress (rank 0) and forwards it to the store recorder, when there is one;
// tells the launching process the recorded run's id.
class Progress final : public exec::ExecObserver {
 public:
  Progress(const CliContext& ctx, exec::StoreRecorder* recorder, const std::string& db_path,
           const exec::OutcomeFile& outcome)
      : ctx_(ctx), recorder_(recorder), db_path_(db_path), outcome_(outcome) {}

  Status on_start(const exec::ExecStart& start) override {
    if (recorder_ != nullptr) PLANNER_RETURN_IF_ERROR(recorder_->on_start(start));
    const bool recorded = recorder_ != nullptr && recorder_->run();
    if (recorded) outcome_.run(recorder_->run()->value);
    std::ostream& err = *ctx_.err;
    err << "planner exec: " << start.ranks << (start.ranks == 1 ? " rank" : " ranks") << " on ";
    std::vector<std::string> hosts = start.hosts;
    std::sort(hosts.begin(), hosts.end());
    hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
    for (std::size_t i = 0; i < hosts.size(); ++i)
      err << (i > 0 ? ", " : "") << hosts[i];
    err << ", backend " << start.backend << " (" << start.device << ")";
    if (recorded) err << ", recording run " << recorder_->run()->value << " in " << db_path_;
    err << "\ndata: " << start.data << '\n';
    if (start.first_step > 0) {
      err << "resumed from the checkpoint after step " << start.first_step << '\n';
    }
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
  const exec::OutcomeFile& outcome_;
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
              {"checkpoint_every", a.checkpoint_every},
              {"checkpoint_dir", a.checkpoint_every > 0 || a.resume ? a.checkpoint_dir : ""},
              {"resume", a.resume},
              {"world_size", ranks}};
}

std::string absolute(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

// A number as text that reads back as the same double ("0.001", "1e-07").
std::string exact(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return text;
}

// The command line every rank runs under a launcher: this program, --launch none, the options.
Result<std::vector<std::string>> rank_program(const CliContext& ctx, const ExecArgs& a) {
  PLANNER_ASSIGN_OR_RETURN(std::string self, exec::self_executable());
  std::vector<std::string> program = {self,
                                      "exec",
                                      absolute(a.plan),
                                      "--launch",
                                      "none",
                                      "--steps",
                                      std::to_string(a.steps),
                                      "--warmup",
                                      std::to_string(a.warmup),
                                      "--backend",
                                      a.backend,
                                      "--timeout",
                                      exact(a.timeout_s),
                                      "--lr",
                                      exact(a.lr),
                                      "--bucket-elements",
                                      std::to_string(a.bucket_elements),
                                      "--blas-threads",
                                      std::to_string(a.blas_threads)};
  if (!a.profile.empty()) program.insert(program.end(), {"--profile", a.profile});
  if (a.checkpoint_every > 0 || a.resume) {
    program.insert(program.end(), {"--checkpoint-every", std::to_string(a.checkpoint_every),
                                   "--checkpoint-dir", absolute(a.checkpoint_dir)});
    if (a.resume) program.push_back("--resume");
  }
  if (a.db.disabled) {
    program.push_back("--no-db");
  } else {
    program.insert(program.end(), {"--db", absolute(a.db.path)});
  }
  if (ctx.json) program.push_back("--json");
  return program;
}

// After the job: what rank 0 reported, or a failure recorded here for the run rank 0 had started.
Status settle(const ExecArgs& a, const std::string& outcome_file, const std::string& launcher,
              int code, const std::string& cause) {
  return exec::settle_outcome(outcome_file, a.db.disabled ? std::string() : a.db.path, launcher,
                              code, cause);
}

// --launch local: check everything, then start mpirun running this program on every rank.
Status launch_local(const CliContext& ctx, const ExecArgs& a, const Plan& plan) {
  const int ranks = a.ranks > 0 ? a.ranks : static_cast<int>(plan.parallel.world_size());
  PLANNER_RETURN_IF_ERROR(exec::check_executable(plan, a.backend, ranks));
  PLANNER_RETURN_IF_ERROR(exec::check_backend_available(a.backend));  // e.g. cuda without a GPU
  PLANNER_ASSIGN_OR_RETURN(std::vector<std::string> program, rank_program(ctx, a));
  const std::string outcome_file = exec::OutcomeFile::fresh_path("exec");
  program.insert(program.end(), {"--outcome-file", outcome_file});
  exec::LocalLaunch launch;
  launch.ranks = ranks;
  launch.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  launch.as_root = ::geteuid() == 0;
  const exec::LaunchCommand cmd = exec::local_launch_command(launch, program);
  const Result<int> code = exec::run_command(cmd);
  if (!code) {
    std::error_code ec;
    std::filesystem::remove(outcome_file, ec);
    return code.status();
  }
  return settle(a, outcome_file, cmd.argv[0], *code, "rank 0 died or was killed");
}

// --launch slurm: check everything, write the batch script, submit it (or print it).
Status launch_slurm(const CliContext& ctx, const ExecArgs& a, const Plan& plan) {
  const int ranks = static_cast<int>(plan.parallel.world_size());
  PLANNER_RETURN_IF_ERROR(exec::check_executable(plan, a.backend, ranks));
  PLANNER_ASSIGN_OR_RETURN(std::vector<std::string> program, rank_program(ctx, a));
  exec::SlurmLaunch launch;
  launch.ranks = ranks;
  launch.ranks_per_node = plan.cluster.gpus_per_node > 0 ? plan.cluster.gpus_per_node : ranks;
  launch.nodes = a.nodes;
  launch.partition = a.partition;
  launch.time = a.time_limit;
  launch.workdir = std::filesystem::current_path().string();
  launch.output = absolute(a.slurm_output.empty() ? "planner-exec-%j.out" : a.slurm_output);
  // Slurm's PMIx plugin ends the whole job step when one rank dies, rank 0 included, so the batch
  // script settles the outcome after the step (settle()), from a file next to the output.
  launch.outcome_dir = std::filesystem::path(launch.output).parent_path().string();
  launch.after_step = {program[0], "exec", absolute(a.plan)};
  if (a.db.disabled) {
    launch.after_step.push_back("--no-db");
  } else {
    launch.after_step.insert(launch.after_step.end(), {"--db", absolute(a.db.path)});
  }
  launch.comment = "planner exec " + plan.name + ": " + short_label(plan.parallel) + ", " +
                   std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") +
                   " (written by planner exec --launch slurm)";
  PLANNER_ASSIGN_OR_RETURN(std::string script, exec::slurm_batch_script(launch, program));
  if (a.dry_run) {
    if (ctx.json) {
      *ctx.out << Json{{"script", script}}.dump(2) << '\n';
    } else {
      *ctx.out << script;
    }
    return Status::ok();
  }
  PLANNER_ASSIGN_OR_RETURN(std::string job, exec::submit_batch_job(script));
  std::string output = launch.output;
  for (std::size_t at; (at = output.find("%j")) != std::string::npos;)
    output.replace(at, 2, job);
  std::ostream& info = ctx.json ? *ctx.err : *ctx.out;
  info << "submitted batch job " << job << ": " << plan.name << ", " << ranks
       << (ranks == 1 ? " rank" : " ranks") << "\n  follow:  squeue -j " << job << "  ·  tail -f "
       << output << "\n  cancel:  scancel " << job << "\n";
  if (!a.db.disabled) {
    info << "  results: planner db list --db " << absolute(a.db.path)
         << "  ·  planner report RUN --db " << absolute(a.db.path) << "\n";
  }
  Json result{{"job_id", job}, {"output", output}};
  Status outcome = Status::ok();
  if (a.wait) {
    // Poll the controller: sbatch --wait would hold the job id in its buffered output until the
    // end.
    constexpr double kPollSeconds = 0.5;
    PLANNER_ASSIGN_OR_RETURN(
        exec::SlurmJobState end,
        exec::wait_for_slurm_job(job, kPollSeconds, 0, [&](const exec::SlurmJobState& st) {
          *ctx.err << "job " << job << ": " << st.state << '\n';
        }));
    const int code = end.exit_code.value_or(1);
    result["state"] = end.state;
    result["exit_code"] = code;
    if (code == 2) {
      outcome = Status(StatusCode::kInvalidInput, "");
    } else if (code != 0) {
      outcome = Status::runtime("job " + job + " ended " + end.state + " with exit code " +
                                std::to_string(code) + "; its output is in " + output);
    }
  }
  if (ctx.json) *ctx.out << result.dump(2) << '\n';
  return outcome;
}

// --launch none: one rank of the job (rank 0 reports to `outcome` how it ended, also when it
// aborts the job).
Status run_rank_job(const CliContext& ctx, const ExecArgs& a, const Plan& plan,
                    exec::MpiWorld* world, const exec::OutcomeFile& outcome) {
  const bool root = world->rank() == 0;
  auto abort_job = [&](int code) {
    if (root) outcome.exit(code);
    std::cerr.flush();
    world->abort(code);
  };
  // Every process reports it: each may believe it is rank 0 of a world of one.
  PLANNER_RETURN_IF_ERROR(exec::check_launcher_world(*world));
  // Every rank checks the same things and comes to the same verdict; rank 0 says it, and the
  // others leave only once it has. mpirun ends the job when the first rank exits non-zero: rank
  // 0 used to print on its way out, after MPI's finalisation, and lost the race to another rank's
  // exit (once in CI: the job ended with no message).
  const Status checked = exec::check_executable(plan, a.backend, world->size());
  if (!checked.is_ok()) {
    if (root) {
      print_error(std::cerr, checked.message());
      std::cerr.flush();
    }
    (void)world->broadcast("", exec::Deadline::after(a.timeout_s));
    return Status(checked.code(), "");
  }

  std::optional<store::Database> db;
  std::unique_ptr<exec::StoreRecorder> recorder;
  // The hardware profile of the prediction stored with the run (resolved once more below; a
  // failure there is a warning, not an error).
  std::optional<HardwareProfile> profile;
  Status profile_error = Status::internal("no hardware profile resolved");
  if (root) {
    auto opened = open_recording_db(a.db);
    if (!opened.is_ok()) {
      std::cerr << "error: " << opened.status().message() << '\n';
      abort_job(opened.status().exit_code());
    }
    db = std::move(opened).value();
    if (db) {
      Json inputs = inputs_json(a, world->size());
      auto resolved = app::resolve_profile(a.profile, plan.gpu, a.db);
      if (resolved) {
        profile = std::move(resolved).value();
        // `planner report` tells a datasheet preset from a measured profile by this name.
        inputs["profile"] = profile->name;
      } else {
        profile_error = resolved.status();
      }
      recorder =
          std::make_unique<exec::StoreRecorder>(*db, to_json_text(plan), plan.name, inputs.dump());
    }
  }
  exec::ExecOptions options;
  options.steps = a.steps;
  options.warmup = a.warmup;
  options.backend = a.backend;
  options.runner.timeout_s = a.timeout_s;
  options.runner.optimizer.lr = a.lr;
  options.runner.bucket_elements = a.bucket_elements;
  options.backend_options.blas_threads = a.blas_threads;
  options.checkpoint_every = a.checkpoint_every;
  options.checkpoint_dir = a.checkpoint_dir;
  options.resume = a.resume;
  // The simulator's prediction for the same plan, lowered as the runner lowers it, stored with the
  // run so that `planner report` can join it with the measurements on op id.
  if (recorder) {
    auto predicted =
        profile ? app::predict_for_exec(
                      plan, exec::runner_lower_options(options.runner, plan.training.precision),
                      &*profile, a.backend == "cuda" ? executor_host_costs() : HostCosts{})
                : Result<sim::SimResult>(profile_error);
    if (predicted) {
      recorder->attach_prediction(
          {app::simulated_step_metrics(*predicted), app::predicted_ops(*predicted)});
    } else {
      *ctx.err << "warning: no prediction stored with the run: " << predicted.status().message()
               << '\n';
    }
  }
  Progress progress(ctx, recorder.get(), a.db.path, outcome);
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
    abort_job(result.status().exit_code());
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
             {"first_step", result->first_step},
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
  kv.add("steps",
         std::to_string(sum.steps) + " (" + std::to_string(a.warmup) + " warm-up" +
             (result->first_step > 0 ? ", resumed at step " + std::to_string(result->first_step)
                                     : std::string()) +
             ")");
  if (a.checkpoint_every > 0) {
    kv.add("checkpoints",
           "every " + std::to_string(a.checkpoint_every) + " steps in " + a.checkpoint_dir);
  }
  kv.add("step time", fmt(sum.step_time_s * 1e3, 2) + " ms (median of the measured steps)");
  kv.add("throughput", fmt_count(sum.tokens_per_s) + " tokens/s");
  kv.add("final loss", fmt(sum.final_loss, 4) + " nats");
  kv.add("peak memory", mib(sum.peak_memory) + " per rank (largest)");
  if (sum.mfu > 0) kv.add("MFU", fmt(sum.mfu * 100, 1) + " % of " + plan.gpu.name + " peak");
  kv.print(*ctx.out);
  return Status::ok();
}

Status run_rank(const CliContext& ctx, const ExecArgs& a, const Plan& plan) {
  PLANNER_ASSIGN_OR_RETURN(std::unique_ptr<exec::MpiWorld> world,
                           exec::MpiWorld::init(nullptr, nullptr));
  const exec::OutcomeFile outcome(world->rank() == 0 ? a.outcome_file : "");
  const Status st = run_rank_job(ctx, a, plan, world.get(), outcome);
  outcome.exit(st.exit_code());
  return st;
}

Status exec_command(const CliContext& ctx, ExecArgs a) {
  if (a.warmup >= a.steps) {
    return Status::invalid_input("--warmup (" + std::to_string(a.warmup) +
                                 ") must be below --steps (" + std::to_string(a.steps) + ")");
  }
  if (a.launch.empty()) a.launch = exec::launched_by_mpi() ? "none" : "local";
  if (a.launch != "none" && a.launch != "local" && a.launch != "slurm") {
    return Status::invalid_input("--launch: expected none, local or slurm, got \"" + a.launch +
                                 "\"");
  }
  if (a.launch != "local" && a.ranks > 0) {
    return Status::invalid_input(
        "-n applies to --launch local; under mpirun or srun the launcher sets the number of "
        "ranks, and --launch slurm starts the plan's world size");
  }
  if (a.launch != "slurm" && (a.nodes > 0 || !a.partition.empty() || !a.time_limit.empty() ||
                              !a.slurm_output.empty() || a.dry_run || a.wait)) {
    return Status::invalid_input(
        "--nodes, --partition, --time, --output, --dry-run and --wait apply to --launch slurm");
  }
  if (a.checkpoint_dir.empty() && (a.checkpoint_every > 0 || a.resume)) {
    return Status::invalid_input("--checkpoint-dir: give a directory for the checkpoints");
  }
  if (a.settle) {
    if (a.outcome_file.empty()) return Status::invalid_input("--settle needs --outcome-file");
    return settle(a, a.outcome_file, "srun", *a.settle,
                  "a rank died or was killed (Slurm's PMIx plugin then ends every rank of the job "
                  "step; srun's messages in the job's output name the task)");
  }
  PLANNER_RETURN_IF_ERROR(exec::check_backend_name(a.backend));
  PLANNER_ASSIGN_OR_RETURN(Plan plan, load_plan_file(a.plan, *ctx.catalog));
  if (plan.training.precision == Precision::kFp16 && (a.checkpoint_every > 0 || a.resume)) {
    return Status::invalid_input(a.plan +
                                 ": /training/precision: checkpoints do not hold fp16's dynamic "
                                 "loss scale, so --checkpoint-every and --resume need fp32, tf32 "
                                 "or bf16, got fp16");
  }
  if (a.launch == "local") return launch_local(ctx, a, plan);
  if (a.launch == "slurm") return launch_slurm(ctx, a, plan);
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
  cmd->add_option("--profile", a->profile,
                  "Hardware profile of the prediction stored with the run (a preset, a file or a "
                  "profile planner calibrate stored; default: the GPU's preset)");
  cmd->add_option("--launch", a->launch,
                  "none: started by mpirun/srun already; local: start mpirun here; slurm: submit "
                  "an sbatch job running srun (default: none under an MPI launcher, else local)");
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
  cmd->add_option("--checkpoint-every", a->checkpoint_every,
                  "Write a checkpoint (every rank's shard, then a manifest) after every K steps "
                  "(0: none)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("K");
  cmd->add_option("--checkpoint-dir", a->checkpoint_dir,
                  "Directory of the checkpoints (shared by the nodes of a multi-node run)")
      ->capture_default_str()
      ->type_name("DIR");
  cmd->add_flag("--resume", a->resume,
                "Continue from the newest complete checkpoint in --checkpoint-dir (refused when it "
                "belongs to another plan or world size, or is corrupt)");
  cmd->add_option("--nodes", a->nodes,
                  "--launch slurm: nodes to allocate (default: as few as hold the plan's ranks at "
                  "its cluster's gpus_per_node per node)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--partition", a->partition, "--launch slurm: the Slurm partition");
  cmd->add_option("--time", a->time_limit,
                  "--launch slurm: the job's time limit (sbatch --time, e.g. 00:30:00)");
  cmd->add_option("--output", a->slurm_output,
                  "--launch slurm: the job's output file (sbatch --output; default "
                  "planner-exec-%j.out here)");
  cmd->add_flag("--dry-run", a->dry_run, "--launch slurm: print the batch script, submit nothing");
  cmd->add_flag("--wait", a->wait,
                "--launch slurm: follow the job until it ends and exit with its outcome");
  cmd->add_option("--outcome-file", a->outcome_file)->group("");  // set for ranks by a launcher
  cmd->add_option("--settle", a->settle)->group("");  // by the batch script, after the step
  add_db_options(cmd, a->db);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return exec_command(ctx, *a); }; });
}

}  // namespace planner::cli
