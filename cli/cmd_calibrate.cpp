// planner calibrate: measures this machine through an executor backend and fits a hardware profile
// (planner::fit::fit_profile), stored in the database with its raw samples; --from-runs refits
// from the per-op measurements of executed runs instead. planner bench collectives prints the
// nccl-tests table of the same collective microbenchmarks.
//
// Like planner exec, the command starts mpirun itself (--launch local, -n RANKS) with every rank
// running the same command under --launch none; rank 0 fits, records and prints, and reports its
// exit code to the launching process through a small file (mpirun's recovery mode exits 0
// whatever the ranks did).
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "app.hpp"
#include "db_options.hpp"
#include "output.hpp"
#include "planner/app/calibrate.hpp"
#include "planner/app/profiles.hpp"
#include "planner/app/record.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/lowering.hpp"
#include "planner/core/version.hpp"
#include "planner/exec/execute.hpp"
#include "planner/exec/launch.hpp"
#include "planner/exec/microbench.hpp"
#include "planner/exec/mpi_world.hpp"
#include "planner/exec/outcome.hpp"
#include "planner/exec/runner.hpp"
#include "planner/fit/calibration.hpp"
#include "planner/topo/link_kind.hpp"
#include "planner/topo/topology_catalog.hpp"

namespace planner::cli {
namespace {

// The pseudo-GPU whose built-in profile and topology a cpu-backend calibration starts from.
constexpr const char* kCpuGpu = "cpu-host";

struct CalibrateArgs {
  std::string backend = "cpu";
  std::string launch;  // none | local; empty: none under an MPI launcher, else local
  int ranks = 0;
  std::string name;
  std::string base;  // profile to start from (default: the backend's built-in profile)
  bool full = false;
  int sweeps = 3;
  bool compute_only = false;
  bool collectives_only = false;
  std::vector<std::string> from_runs;
  double timeout_s = 60;
  std::string outcome_file;  // set for the ranks by the launching process
  // bench collectives
  bool bench = false;
  std::string min_bytes = "1K";
  std::string max_bytes;
  std::vector<std::string> ops;
  DbOptions db;
};

int host_cores() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// "1K", "16M", "1G", "4096" -> bytes.
Result<std::int64_t> parse_size(const std::string& text, const char* option) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::int64_t unit = 1;
  const std::string suffix = text.substr(used);
  if (suffix == "K" || suffix == "KiB") unit = kKiB;
  if (suffix == "M" || suffix == "MiB") unit = kMiB;
  if (suffix == "G" || suffix == "GiB") unit = kGiB;
  if (used == 0 || v < 1 || (!suffix.empty() && unit == 1)) {
    return Status::invalid_input(std::string(option) +
                                 ": expected a size such as 1K, 16M or 1G, got \"" + text + "\"");
  }
  return static_cast<std::int64_t>(v) * unit;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

Result<std::vector<OpKind>> parse_ops(const std::vector<std::string>& ops) {
  std::vector<OpKind> out;
  for (const std::string& op : ops) {
    const std::string name = op == "sendrecv" ? "send" : op;
    auto kind = parse_enum<OpKind>(name);
    if (!kind || !is_communication(*kind) || *kind == OpKind::kRecv) {
      return Status::invalid_input(
          "--ops: expected all_reduce, all_gather, reduce_scatter, "
          "all_to_all, broadcast or sendrecv, got \"" +
          op + "\"");
    }
    out.push_back(*kind);
  }
  return out;
}

Result<exec::MicrobenchOptions> microbench_options(const CalibrateArgs& a) {
  exec::MicrobenchOptions o;
  o.full_compute = a.full;
  o.compute_sweeps = a.sweeps;
  o.timeout_s = a.timeout_s;
  o.compute = !a.bench && !a.collectives_only;
  o.collectives = !a.compute_only;
  PLANNER_ASSIGN_OR_RETURN(o.min_bytes, parse_size(a.min_bytes, "--min-bytes"));
  // The quick grid stops at 16 MiB (seconds on a 2-core machine); --full goes to 1 GiB as
  // nccl-tests' usual -e 1G.
  const std::string max = a.max_bytes.empty() ? (a.full ? "1G" : "16M") : a.max_bytes;
  PLANNER_ASSIGN_OR_RETURN(o.max_bytes, parse_size(max, "--max-bytes"));
  o.size_factor = a.full ? 2 : 4;
  PLANNER_ASSIGN_OR_RETURN(o.kinds, parse_ops(a.ops));
  if (o.max_bytes < o.min_bytes) {
    return Status::invalid_input("--max-bytes (" + max + ") is below --min-bytes (" + a.min_bytes +
                                 ")");
  }
  return o;
}

// ---- samples and points

store::CalibrationSample to_sample(const CalibrationPoint& p, std::int64_t iterations) {
  store::CalibrationSample s;
  s.benchmark = benchmark_name(p);
  s.shape = encode_shape(p);
  s.precision = std::string(to_string(p.desc.precision));
  s.group_size = p.group_size;
  s.iterations = iterations;
  s.time = p.measured;
  if (is_communication(p.desc.kind)) {
    s.bytes = p.desc.comm_bytes;
    if (p.measured > Time(0)) {
      const Bandwidth algbw = rate_of(p.desc.comm_bytes, p.measured);
      s.algbw = algbw;
      s.busbw = algbw.scaled(exec::bus_bandwidth_factor(p.desc.kind, p.group_size));
    }
  } else {
    s.bytes = p.desc.bytes_read + p.desc.bytes_written;
    if (p.desc.flops.raw() > 0 && p.measured > Time(0))
      s.flop_rate = rate_of(p.desc.flops, p.measured);
  }
  return s;
}

struct Target {
  HardwareProfile base;
  std::shared_ptr<const topo::Cluster> cluster;
  std::string link_kind;
};

// The base profile, the cluster the collectives ran on (one host of the backend's topology) and
// the link kind between its first two ranks.
Result<Target> calibration_target(const CliContext& ctx, const CalibrateArgs& a) {
  const GpuSpec* gpu = ctx.catalog->find_gpu(kCpuGpu);
  if (gpu == nullptr) return Status::internal("the cpu-host GPU preset is missing");
  Target t;
  PLANNER_ASSIGN_OR_RETURN(t.base, app::resolve_profile(a.base, *gpu, a.db));
  PLANNER_ASSIGN_OR_RETURN(topo::TopologySpec topology, topo::topology_for_gpu(*gpu));
  PLANNER_ASSIGN_OR_RETURN(topo::Cluster cluster, topo::Cluster::build(topology, 1));
  std::vector<topo::LinkId> path;
  cluster.append_path(0, 1, 0, path);
  if (path.empty())
    return Status::internal("no path between the first two ranks of " + topology.name);
  t.link_kind =
      std::string(to_string(cluster.links()[static_cast<std::size_t>(path.front())].kind));
  t.cluster = std::make_shared<const topo::Cluster>(std::move(cluster));
  return t;
}

void print_fit(const CliContext& ctx, const fit::FitReport& fit) {
  std::ostream& out = *ctx.out;
  Table params({{"parameter"},
                {"before", Align::kRight},
                {"after", Align::kRight},
                {"unit"},
                {"moved", Align::kRight},
                {"points", Align::kRight}});
  for (const fit::ParameterChange& c : fit.changes) {
    const auto rel = c.relative_change();
    params.add_row({c.name, fmt(c.before, 4), fmt(c.after, 4), c.unit,
                    rel ? (*rel >= 0 ? "+" : "") + fmt(*rel * 100, 1) + " %" : "new",
                    c.points > 0 ? std::to_string(c.points) : "-"});
  }
  params.print(out);
  out << '\n';
  Table quality({{"benchmark"},
                 {"points", Align::kRight},
                 {"median |error|", Align::kRight},
                 {"max |error|", Align::kRight}});
  for (const fit::FitQuality& q : fit.quality) {
    quality.add_row({q.benchmark, std::to_string(q.points), fmt(q.median_abs_error * 100, 1) + " %",
                     fmt(q.max_abs_error * 100, 1) + " %"});
  }
  quality.print(out);
}

Json fit_json(const fit::FitReport& fit) {
  Json changes = Json::array();
  for (const fit::ParameterChange& c : fit.changes) {
    Json j{{"name", c.name},
           {"unit", c.unit},
           {"before", c.before},
           {"after", c.after},
           {"points", c.points}};
    if (auto rel = c.relative_change()) j["relative_change"] = *rel;
    changes.push_back(std::move(j));
  }
  Json quality = Json::array();
  for (const fit::FitQuality& q : fit.quality) {
    quality.push_back({{"benchmark", q.benchmark},
                       {"points", q.points},
                       {"median_abs_error", q.median_abs_error},
                       {"max_abs_error", q.max_abs_error}});
  }
  return Json{{"changes", changes}, {"quality", quality}};
}

// Records a calibrate run and the fitted profile with its samples; returns the run id (none under
// --no-db).
Result<std::optional<store::RunId>> store_profile(
    const CalibrateArgs& a, const HardwareProfile& profile,
    const std::vector<store::CalibrationSample>& samples, const Json& inputs) {
  PLANNER_ASSIGN_OR_RETURN(std::optional<store::Database> db, open_recording_db(a.db));
  if (!db) return std::optional<store::RunId>();
  PLANNER_ASSIGN_OR_RETURN(store::RunId id, app::record_profile(*db, profile, samples, inputs));
  return std::optional<store::RunId>(id);
}

Json args_json(const CalibrateArgs& a, int ranks) {
  return Json{{"command", a.bench ? "bench collectives" : "calibrate"},
              {"backend", a.backend},
              {"ranks", ranks},
              {"grid", a.full ? "full" : "quick"},
              {"name", a.name},
              {"base", a.base},
              {"from_runs", a.from_runs}};
}

// ---- bench collectives output

void print_bench(const CliContext& ctx, const std::vector<exec::Measurement>& ms) {
  if (ctx.json) {
    Json rows = Json::array();
    for (const exec::Measurement& m : ms) {
      const store::CalibrationSample s = to_sample(m.point, m.iterations);
      rows.push_back({{"op", s.benchmark},
                      {"ranks", s.group_size},
                      {"size_bytes", s.bytes.raw()},
                      {"count", s.bytes.raw() / 4},
                      {"type", "float"},
                      {"time_us", to_microseconds(s.time)},
                      {"algbw_GBps", s.algbw ? to_GBps(*s.algbw) : 0.0},
                      {"busbw_GBps", s.busbw ? to_GBps(*s.busbw) : 0.0},
                      {"iterations", s.iterations}});
    }
    *ctx.out << rows.dump(2) << '\n';
    return;
  }
  std::map<std::pair<std::string, int>, std::vector<store::CalibrationSample>> by_op;
  std::vector<std::pair<std::string, int>> order;
  for (const exec::Measurement& m : ms) {
    store::CalibrationSample s = to_sample(m.point, m.iterations);
    const auto key =
        std::pair{s.benchmark == "send" ? std::string("sendrecv") : s.benchmark, s.group_size};
    if (!by_op.contains(key)) order.push_back(key);
    by_op[key].push_back(std::move(s));
  }
  for (const auto& key : order) {
    *ctx.out << "# " << key.first << ", " << key.second << " ranks\n";
    Table t({{"size (B)", Align::kRight},
             {"count", Align::kRight},
             {"type"},
             {"time (us)", Align::kRight},
             {"algbw (GB/s)", Align::kRight},
             {"busbw (GB/s)", Align::kRight}});
    for (const store::CalibrationSample& s : by_op[key]) {
      t.add_row({std::to_string(s.bytes.raw()), std::to_string(s.bytes.raw() / 4), "float",
                 fmt(to_microseconds(s.time), 1), fmt(s.algbw ? to_GBps(*s.algbw) : 0.0, 3),
                 fmt(s.busbw ? to_GBps(*s.busbw) : 0.0, 3)});
    }
    t.print(*ctx.out);
    *ctx.out << '\n';
  }
}

// ---- the ranks

Status rank_job(const CliContext& ctx, const CalibrateArgs& a, exec::MpiWorld& world) {
  PLANNER_RETURN_IF_ERROR(exec::check_launcher_world(world));
  const bool root = world.rank() == 0;
  PLANNER_ASSIGN_OR_RETURN(exec::MicrobenchOptions options, microbench_options(a));
  // Everything rank 0 needs after the benchmarks is checked before them.
  std::optional<Target> target;
  if (root && !a.bench) {
    auto t = calibration_target(ctx, a);
    if (!t) return t.status();
    target = std::move(t).value();
  }
  exec::BackendOptions backend_options;
  PLANNER_ASSIGN_OR_RETURN(std::unique_ptr<exec::Backend> backend,
                           exec::make_backend(a.backend, world, backend_options));
  if (root) {
    *ctx.err << "planner " << (a.bench ? "bench collectives" : "calibrate") << ": " << world.size()
             << (world.size() == 1 ? " rank" : " ranks") << " on " << world.host() << ", backend "
             << a.backend << " (" << backend->device().description() << ")\n";
  }
  std::int64_t done = 0;
  const auto started = std::chrono::steady_clock::now();
  auto sink = [&](const exec::Measurement& m) {
    ++done;
    if (!a.bench && done % 20 == 0) {
      *ctx.err << "  " << done << " measurements (" << benchmark_name(m.point) << ")\n";
    }
  };
  PLANNER_ASSIGN_OR_RETURN(std::vector<exec::Measurement> ms,
                           exec::run_microbenchmarks(*backend, options, sink));
  if (!root) return Status::ok();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (a.bench) {
    print_bench(ctx, ms);
    return Status::ok();
  }
  std::vector<CalibrationPoint> points;
  std::vector<store::CalibrationSample> samples;
  for (const exec::Measurement& m : ms) {
    points.push_back(m.point);
    samples.push_back(to_sample(m.point, m.iterations));
  }
  fit::FitOptions fo;
  fo.link_kind = target->link_kind;
  fo.name = a.name.empty() ? a.backend + "-" + world.host() : a.name;
  fo.description = "measured by planner calibrate --backend " + a.backend + " on " + world.host() +
                   " (" + backend->device().description() + ", " + std::to_string(world.size()) +
                   " ranks)";
  fo.source = "planner calibrate: " + std::to_string(ms.size()) +
              " microbenchmarks on this host, fitted to the simulator's models (samples stored "
              "with the profile)";
  // The cpu backend's ranks share this host's cores (the simulator's core-sharing model); GPU
  // ranks each compute on their own device.
  fo.host_cores = a.backend == "cpu" ? host_cores() : 0;
  PLANNER_ASSIGN_OR_RETURN(fit::FitReport fit,
                           fit::fit_profile(target->base, *target->cluster, points, fo));
  fit.profile.provenance = {
      {"host", world.host()},
      {"backend", a.backend},
      {"device", backend->device().description()},
      {"ranks", std::to_string(world.size())},
      {"cores", std::to_string(host_cores())},
      {"date", utc_now()},
      {"planner", std::string(build::kVersion) + " (" + build::kGitCommit + ")"},
      {"mpi", exec::MpiWorld::library_version()},
      {"grid", a.full ? "full" : "quick"},
      {"base", target->base.name}};
  const Json inputs = args_json(a, world.size());
  PLANNER_ASSIGN_OR_RETURN(std::optional<store::RunId> run,
                           store_profile(a, fit.profile, samples, inputs));
  if (ctx.json) {
    Json out = fit_json(fit);
    out["profile"] = fit.profile.name;
    out["samples"] = samples.size();
    out["seconds"] = elapsed;
    if (run) out["run"] = run->value;
    *ctx.out << out.dump(2) << '\n';
    return Status::ok();
  }
  KeyValues kv;
  kv.add("profile",
         fit.profile.name + (run ? " (run " + std::to_string(run->value) + " in " + a.db.path + ")"
                                 : " (not stored: --no-db)"));
  kv.add("measured", std::to_string(ms.size()) + " microbenchmarks in " + fmt(elapsed, 1) + " s");
  kv.add("fitted from", target->base.name + " (its parameters are the 'before' column)");
  kv.print(*ctx.out);
  *ctx.out << '\n';
  print_fit(ctx, fit);
  *ctx.out << "\nuse it: planner simulate PLAN --profile " << fit.profile.name << '\n';
  return Status::ok();
}

// ---- --from-runs

// The lowering options the executor used for a run (its recorded --bucket-elements).
LowerOptions exec_lowering(const Plan& plan, const Json& inputs) {
  exec::RunnerOptions ro;
  if (inputs.is_object() && inputs.contains("bucket_elements") &&
      inputs["bucket_elements"].is_number_integer()) {
    ro.bucket_elements = inputs["bucket_elements"].get<std::int64_t>();
  }
  return exec::runner_lower_options(ro, plan.training.precision);
}

Status from_runs(const CliContext& ctx, const CalibrateArgs& a) {
  PLANNER_ASSIGN_OR_RETURN(store::Database db, open_existing_db(a.db));
  std::vector<CalibrationPoint> points;
  for (const std::string& text : a.from_runs) {
    PLANNER_ASSIGN_OR_RETURN(store::RunId run, resolve_run(db, text));
    PLANNER_ASSIGN_OR_RETURN(std::vector<CalibrationPoint> more,
                             app::run_points(db, run, *ctx.catalog, exec_lowering));
    points.insert(points.end(), more.begin(), more.end());
  }
  if (points.empty()) {
    return Status::invalid_input("the runs have no measured compute ops to fit");
  }
  PLANNER_ASSIGN_OR_RETURN(Target target, calibration_target(ctx, a));
  fit::FitOptions fo;
  fo.link_kind = target.link_kind;
  fo.name = a.name.empty() ? target.base.name + "-refit" : a.name;
  std::string runs;
  for (const std::string& r : a.from_runs)
    runs += (runs.empty() ? "" : ", ") + r;
  fo.description = target.base.description + "; compute refitted from executed runs " + runs;
  fo.source = "planner calibrate --from-runs " + runs + ": " + std::to_string(points.size()) +
              " measured compute ops (joined with the step program on op id), starting from " +
              target.base.name;
  PLANNER_ASSIGN_OR_RETURN(fit::FitReport fit,
                           fit::fit_profile(target.base, *target.cluster, points, fo));
  fit.profile.provenance["date"] = utc_now();
  fit.profile.provenance["refit_from_runs"] = runs;
  fit.profile.provenance["base"] = target.base.name;
  std::vector<store::CalibrationSample> samples;
  for (const CalibrationPoint& p : points)
    samples.push_back(to_sample(p, 1));
  PLANNER_ASSIGN_OR_RETURN(std::optional<store::RunId> run,
                           store_profile(a, fit.profile, samples, args_json(a, 0)));
  if (ctx.json) {
    Json out = fit_json(fit);
    out["profile"] = fit.profile.name;
    out["samples"] = samples.size();
    if (run) out["run"] = run->value;
    *ctx.out << out.dump(2) << '\n';
    return Status::ok();
  }
  KeyValues kv;
  kv.add("profile", fit.profile.name + " (refitted from " + std::to_string(points.size()) +
                        " measured compute ops of runs " + runs + ")");
  kv.add("fitted from", target.base.name + " (its parameters are the 'before' column)");
  kv.print(*ctx.out);
  *ctx.out << '\n';
  print_fit(ctx, fit);
  return Status::ok();
}

// ---- launching

Result<std::vector<std::string>> rank_program(const CliContext& ctx, const CalibrateArgs& a,
                                              const std::string& outcome) {
  PLANNER_ASSIGN_OR_RETURN(std::string self, exec::self_executable());
  std::vector<std::string> p = {self};
  if (a.bench) {
    p.insert(p.end(), {"bench", "collectives"});
  } else {
    p.insert(p.end(), {"calibrate", "--backend", a.backend});
    if (!a.name.empty()) p.insert(p.end(), {"--name", a.name});
    if (!a.base.empty()) p.insert(p.end(), {"--base", a.base});
    if (a.compute_only) p.push_back("--compute-only");
    if (a.collectives_only) p.push_back("--collectives-only");
    p.insert(p.end(), {"--sweeps", std::to_string(a.sweeps)});
  }
  p.insert(p.end(), {"--launch", "none", "--min-bytes", a.min_bytes, "--timeout",
                     std::to_string(a.timeout_s), "--outcome-file", outcome});
  if (!a.max_bytes.empty()) p.insert(p.end(), {"--max-bytes", a.max_bytes});
  if (a.full) p.push_back("--full");
  for (const std::string& op : a.ops)
    p.insert(p.end(), {"--ops", op});
  if (a.bench) {
    // bench collectives records nothing
  } else if (a.db.disabled) {
    p.push_back("--no-db");
  } else {
    p.insert(p.end(), {"--db", std::filesystem::absolute(a.db.path).lexically_normal().string()});
  }
  if (ctx.json) p.push_back("--json");
  return p;
}

Status launch_local(const CliContext& ctx, const CalibrateArgs& a) {
  const int ranks = a.ranks > 0 ? a.ranks : std::max(2, host_cores());
  const std::string outcome = exec::OutcomeFile::fresh_path("calibrate");
  PLANNER_ASSIGN_OR_RETURN(std::vector<std::string> program, rank_program(ctx, a, outcome));
  exec::LocalLaunch launch;
  launch.ranks = ranks;
  launch.cores = host_cores();
  launch.as_root = ::geteuid() == 0;
  const exec::LaunchCommand cmd = exec::local_launch_command(launch, program);
  PLANNER_ASSIGN_OR_RETURN(int code, exec::run_command(cmd));
  // A calibration records its run only at the end, so there is no running run to mark failed.
  return exec::settle_outcome(outcome, "", cmd.argv[0], code, "rank 0 died or was killed");
}

Status run_rank(const CliContext& ctx, const CalibrateArgs& a) {
  PLANNER_ASSIGN_OR_RETURN(std::unique_ptr<exec::MpiWorld> world,
                           exec::MpiWorld::init(nullptr, nullptr));
  const Status st = rank_job(ctx, a, *world);
  exec::OutcomeFile(world->rank() == 0 ? a.outcome_file : "").exit(st.exit_code());
  if (!st.is_ok() && world->size() > 1) {
    // The other ranks may wait in a collective of the failed benchmark: end the job.
    if (world->rank() == 0) std::cerr << "error: " << st.message() << '\n';
    std::cerr.flush();
    world->abort(st.exit_code());
  }
  return st;
}

Status calibrate_command(const CliContext& ctx, CalibrateArgs a) {
  if (a.compute_only && a.collectives_only) {
    return Status::invalid_input("--compute-only and --collectives-only exclude each other");
  }
  if (!a.from_runs.empty()) {
    if (!a.launch.empty() || a.ranks > 0) {
      return Status::invalid_input(
          "--from-runs refits from stored measurements: it takes no "
          "--launch or -n");
    }
    return from_runs(ctx, a);
  }
  // Before any rank starts: an unknown name is bad input; cuda in a build without it, or on a
  // machine without a GPU, is a runtime failure that says which.
  PLANNER_RETURN_IF_ERROR(exec::check_backend_available(a.backend));
  PLANNER_RETURN_IF_ERROR(microbench_options(a).status());
  if (a.launch.empty()) a.launch = exec::launched_by_mpi() ? "none" : "local";
  if (a.launch != "none" && a.launch != "local") {
    return Status::invalid_input("--launch: expected none or local, got \"" + a.launch + "\"");
  }
  if (a.launch == "none" && a.ranks > 0) {
    return Status::invalid_input(
        "-n applies to --launch local; under mpirun the launcher sets "
        "the number of ranks");
  }
  if (a.launch == "local") {
    if (!a.bench) PLANNER_RETURN_IF_ERROR(calibration_target(ctx, a).status());
    return launch_local(ctx, a);
  }
  return run_rank(ctx, a);
}

void add_launch_options(CLI::App* cmd, CalibrateArgs& a) {
  cmd->add_option("--launch", a.launch,
                  "none: started by mpirun already; local: start mpirun here (default: none under "
                  "an MPI launcher, else local)");
  cmd->add_option("-n,--ranks", a.ranks,
                  "Ranks to start with --launch local (default: the host's cores, at least 2)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--min-bytes", a.min_bytes, "Smallest message (nccl-tests -b)")
      ->capture_default_str();
  cmd->add_option("--max-bytes", a.max_bytes,
                  "Largest message (nccl-tests -e; default 16M, 1G with --full)");
  cmd->add_option("--ops", a.ops,
                  "Collectives to measure: all_reduce, all_gather, reduce_scatter, all_to_all, "
                  "broadcast, sendrecv (default: all)");
  cmd->add_flag("--full", a.full,
                "The full grid: messages up to 1 GiB doubling, larger GEMMs, attention and "
                "memory-bound kernels (minutes on a small machine)");
  cmd->add_option("--timeout", a.timeout_s, "Seconds any wait may take before the run fails")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--outcome-file", a.outcome_file)->group("");
}

}  // namespace

void register_calibrate_commands(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Measure this machine (GEMMs, attention, memory-bound kernels, collectives) through an "
      "executor backend, fit the simulator's models and store the result as a named hardware "
      "profile; --from-runs refits from executed runs");
  auto a = std::make_shared<CalibrateArgs>();
  cmd->add_option("--backend", a->backend, "Backend: cpu (cuda needs a CUDA build and a GPU)")
      ->capture_default_str();
  cmd->add_option("--name", a->name,
                  "Name of the stored profile (default: BACKEND-HOST, or BASE-refit with "
                  "--from-runs); an existing profile of that name is replaced");
  cmd->add_option("--base", a->base,
                  "Profile to start from: parameters without measurements keep its values "
                  "(default: the backend's built-in profile, cpu-host)");
  cmd->add_option("--from-runs", a->from_runs,
                  "Refit compute parameters from the per-op measurements of these executed runs "
                  "(run ids or latest) instead of running microbenchmarks")
      ->type_name("RUN ...");
  cmd->add_flag("--compute-only", a->compute_only, "Measure compute only");
  cmd->add_option("--sweeps", a->sweeps,
                  "Passes over the compute kernels, each kernel keeping its fastest (other work "
                  "on the machine only slows kernels down)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--collectives-only", a->collectives_only, "Measure collectives only");
  add_launch_options(cmd, *a);
  add_db_options(cmd, a->db);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return calibrate_command(ctx, *a); }; });

  CLI::App* bench = app.add_subcommand("bench", "Microbenchmarks of this machine");
  bench->require_subcommand(1);
  CLI::App* coll = bench->add_subcommand(
      "collectives",
      "nccl-tests-style table of the backend's collectives: size, count, type, time, algbw, "
      "busbw (busbw = algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter "
      "and all-to-all)");
  auto b = std::make_shared<CalibrateArgs>();
  b->bench = true;
  b->db.disabled = true;
  coll->add_option("--backend", b->backend, "Backend: cpu")->capture_default_str();
  add_launch_options(coll, *b);
  add_json_flag(coll, ctx);
  coll->callback([&ctx, b] { ctx.action = [&ctx, b] { return calibrate_command(ctx, *b); }; });
}

}  // namespace planner::cli
