// planner db list | show RUN | export RUN|--all | repair | vacuum
#include <filesystem>
#include <iostream>
#include <sstream>

#include "app.hpp"
#include "db_options.hpp"
#include "output.hpp"
#include "planner/core/loaders.hpp"
#include "planner/store/store.hpp"

namespace planner::cli {
namespace {

// How much of a run `planner db show` prints as text (--json and export print everything).
constexpr int kShownPlans = 10;
constexpr int kShownSweepResults = 10;
constexpr std::size_t kShownMetrics = 40;
constexpr std::size_t kShownInputChars = 160;

struct ListArgs {
  DbOptions db;
  std::string kind;
  int limit = 50;
};

struct RunArgs {
  DbOptions db;
  std::string run;
  bool all = false;
  std::string output;
};

std::string when(std::int64_t unix_ms) {
  // "2024-05-01T12:00:03.250Z" -> "2024-05-01 12:00:03" (UTC).
  std::string s = store::format_utc(unix_ms);
  s[10] = ' ';
  return s.substr(0, 19);
}

std::string duration(const store::RunRecord& r) {
  if (!r.finished_unix_ms) return "-";
  const double s = static_cast<double>(*r.finished_unix_ms - r.created_unix_ms) / 1000.0;
  if (s < 120) return fmt(s, 1) + " s";
  if (s < 7200) return fmt(s / 60, 1) + " min";
  return fmt(s / 3600, 1) + " h";
}

std::string status_text(const store::RunRecord& r) {
  std::string s(to_string(r.status));
  if (r.failed_rank) s += " (rank " + std::to_string(*r.failed_rank) + ")";
  return s;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items)
    out += (out.empty() ? "" : ", ") + s;
  return out;
}

// A number with up to six significant digits ("12.3457", "1.2e+09").
std::string number(double v) {
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

Json run_json(const store::RunRecord& r) {
  Json j;
  j["id"] = r.id.value;
  j["kind"] = to_string(r.kind);
  j["status"] = to_string(r.status);
  j["label"] = r.label;
  j["created"] = store::format_utc(r.created_unix_ms);
  j["finished"] = r.finished_unix_ms ? Json(store::format_utc(*r.finished_unix_ms)) : Json();
  j["duration_s"] = r.finished_unix_ms
                        ? Json(static_cast<double>(*r.finished_unix_ms - r.created_unix_ms) / 1e3)
                        : Json();
  j["planner_version"] = r.planner_version;
  j["git_commit"] = r.git_commit;
  j["hosts"] = r.hosts;
  j["plans"] = r.plan_count;
  if (r.status == store::RunStatus::kFailed || r.status == store::RunStatus::kInterrupted) {
    j["failure"] = {{"reason", r.failure_reason},
                    {"rank", r.failed_rank ? Json(*r.failed_rank) : Json()}};
  }
  if (r.owner_pid) j["process"] = {{"host", r.owner_host}, {"pid", *r.owner_pid}};
  return j;
}

Status db_list(const CliContext& ctx, const ListArgs& args) {
  store::RunFilter filter;
  if (!args.kind.empty()) {
    auto kind = parse_enum<store::RunKind>(args.kind);
    if (!kind) {
      return Status::invalid_input("--kind: expected one of " + enum_choices<store::RunKind>() +
                                   "; got \"" + args.kind + "\"");
    }
    filter.kind = *kind;
  }
  if (args.limit < 0) return Status::invalid_input("--limit: must be >= 0 (0 = all)");
  filter.limit = args.limit;
  PLANNER_ASSIGN_OR_RETURN(store::Database db, open_existing_db(args.db));
  PLANNER_ASSIGN_OR_RETURN(std::vector<store::RunRecord> runs, store::list_runs(db, filter));
  std::ostream& out = *ctx.out;
  if (ctx.json) {
    Json arr = Json::array();
    for (const store::RunRecord& r : runs)
      arr.push_back(run_json(r));
    out << arr.dump(2) << '\n';
    return Status::ok();
  }
  if (runs.empty()) {
    out << "No " << (args.kind.empty() ? "" : args.kind + " ") << "runs in " << db.path() << ".\n";
    return Status::ok();
  }
  Table t({{"ID", Align::kRight},
           {"KIND"},
           {"STATUS"},
           {"CREATED (UTC)"},
           {"TIME", Align::kRight},
           {"PLANS", Align::kRight},
           {"HOSTS"},
           {"LABEL"}});
  for (const store::RunRecord& r : runs) {
    t.add_row({std::to_string(r.id.value), std::string(to_string(r.kind)), status_text(r),
               when(r.created_unix_ms), duration(r), std::to_string(r.plan_count), join(r.hosts),
               r.label});
  }
  t.print(out);
  return Status::ok();
}

struct RunDetails {
  store::RunRecord run;
  store::RunCounts counts;
  std::vector<store::PlanRecord> plans;
  std::vector<store::MetricRecord> metrics;
  std::vector<store::SweepResultRecord> sweep;
};

Result<RunDetails> load_details(store::Database& db, store::RunId id) {
  RunDetails d;
  PLANNER_ASSIGN_OR_RETURN(d.run, store::get_run(db, id));
  PLANNER_ASSIGN_OR_RETURN(d.counts, store::count_rows(db, id));
  PLANNER_ASSIGN_OR_RETURN(d.plans, store::run_plans(db, id));
  PLANNER_ASSIGN_OR_RETURN(d.metrics, store::get_metrics(db, id));
  PLANNER_ASSIGN_OR_RETURN(d.sweep, store::get_sweep_results(db, id));
  return d;
}

Json details_json(const RunDetails& d) {
  Json j = run_json(d.run);
  Json inputs = Json::parse(d.run.inputs_json, nullptr, /*allow_exceptions=*/false);
  j["inputs"] = inputs.is_discarded() ? Json(d.run.inputs_json) : inputs;
  j["counts"] = {{"plans", d.counts.plans},
                 {"metrics", d.counts.metrics},
                 {"predicted_ops", d.counts.predicted_ops},
                 {"measured_ops", d.counts.measured_ops},
                 {"measured_steps", d.counts.measured_steps},
                 {"sweep_results", d.counts.sweep_results},
                 {"hardware_profiles", d.counts.profiles}};
  Json plans = Json::array();
  for (const store::PlanRecord& p : d.plans) {
    Json plan = Json::parse(p.canonical_json, nullptr, /*allow_exceptions=*/false);
    plans.push_back({{"id", p.id.value}, {"label", p.label}, {"hash", p.hash}, {"plan", plan}});
  }
  j["plans"] = std::move(plans);
  Json metrics = Json::array();
  for (const store::MetricRecord& m : d.metrics) {
    metrics.push_back({{"plan_id", m.plan.value},
                       {"source", to_string(m.source)},
                       {"name", m.metric.name},
                       {"value", m.metric.value},
                       {"unit", m.metric.unit}});
  }
  j["metrics"] = std::move(metrics);
  Json sweep = Json::array();
  for (const store::SweepResultRecord& s : d.sweep) {
    sweep.push_back({{"position", s.position},
                     {"plan_id", s.plan.value},
                     {"label", s.plan_label},
                     {"tier", to_string(s.tier)},
                     {"objective", s.objective},
                     {"note", s.note}});
  }
  j["sweep_results"] = std::move(sweep);
  return j;
}

void print_details(std::ostream& out, const RunDetails& d, const std::string& db_path) {
  const store::RunRecord& r = d.run;
  KeyValues kv;
  kv.add("run", std::to_string(r.id.value) + " in " + db_path);
  kv.add("kind", std::string(to_string(r.kind)));
  kv.add("status", status_text(r));
  if (r.status == store::RunStatus::kFailed || r.status == store::RunStatus::kInterrupted) {
    kv.add("failure", r.failure_reason);
  }
  if (r.owner_pid) kv.add("process", "pid " + std::to_string(*r.owner_pid) + " on " + r.owner_host);
  if (!r.label.empty()) kv.add("label", r.label);
  kv.add("created", when(r.created_unix_ms) + " UTC");
  kv.add("finished",
         r.finished_unix_ms ? when(*r.finished_unix_ms) + " UTC (" + duration(r) + ")" : "-");
  kv.add("planner", r.planner_version + " (commit " + r.git_commit + ")");
  kv.add("hosts", join(r.hosts));
  std::string inputs = r.inputs_json;
  if (inputs.size() > kShownInputChars) inputs = inputs.substr(0, kShownInputChars) + " ...";
  kv.add("inputs", inputs);
  const store::RunCounts& c = d.counts;
  kv.add("stored", fmt_int(c.plans) + " plans, " + fmt_int(c.metrics) + " metrics, " +
                       fmt_int(c.predicted_ops) + " predicted ops, " + fmt_int(c.measured_ops) +
                       " measured ops, " + fmt_int(c.measured_steps) + " measured steps, " +
                       fmt_int(c.sweep_results) + " sweep results, " + fmt_int(c.profiles) +
                       " hardware profiles");
  kv.print(out);

  if (!d.sweep.empty()) {
    out << "\nSweep ranking (best first):\n";
    Table t({{"POS", Align::kRight},
             {"PLAN", Align::kRight},
             {"LABEL"},
             {"TIER"},
             {"OBJECTIVE", Align::kRight},
             {"NOTE"}});
    for (std::size_t i = 0; i < d.sweep.size() && i < kShownSweepResults; ++i) {
      const store::SweepResultRecord& s = d.sweep[i];
      t.add_row({std::to_string(s.position), std::to_string(s.plan.value), s.plan_label,
                 std::string(to_string(s.tier)), number(s.objective), s.note});
    }
    t.print(out);
    if (d.sweep.size() > kShownSweepResults) {
      out << "... " << fmt_int(static_cast<long long>(d.sweep.size() - kShownSweepResults))
          << " more\n";
    }
  }
  if (!d.plans.empty()) {
    out << "\nPlans:\n";
    Table t({{"ID", Align::kRight}, {"LABEL"}, {"SHA-256"}});
    for (std::size_t i = 0; i < d.plans.size() && i < kShownPlans; ++i) {
      t.add_row(
          {std::to_string(d.plans[i].id.value), d.plans[i].label, d.plans[i].hash.substr(0, 16)});
    }
    t.print(out);
    if (d.plans.size() > kShownPlans) {
      out << "... " << fmt_int(static_cast<long long>(d.plans.size() - kShownPlans)) << " more\n";
    }
  }
  if (!d.metrics.empty()) {
    out << "\nMetrics:\n";
    Table t({{"PLAN", Align::kRight}, {"SOURCE"}, {"METRIC"}, {"VALUE", Align::kRight}, {"UNIT"}});
    for (std::size_t i = 0; i < d.metrics.size() && i < kShownMetrics; ++i) {
      const store::MetricRecord& m = d.metrics[i];
      t.add_row({std::to_string(m.plan.value), std::string(to_string(m.source)), m.metric.name,
                 number(m.metric.value), m.metric.unit});
    }
    t.print(out);
    if (d.metrics.size() > kShownMetrics) {
      out << "... " << fmt_int(static_cast<long long>(d.metrics.size() - kShownMetrics))
          << " more (all of them with --json)\n";
    }
  }
  out << "\nEverything, per-op rows included: planner db export " << r.id.value << '\n';
}

Status db_show(const CliContext& ctx, const RunArgs& args) {
  PLANNER_ASSIGN_OR_RETURN(store::Database db, open_existing_db(args.db));
  PLANNER_ASSIGN_OR_RETURN(store::RunId id, resolve_run(db, args.run));
  PLANNER_ASSIGN_OR_RETURN(RunDetails d, load_details(db, id));
  if (ctx.json) {
    *ctx.out << details_json(d).dump(2) << '\n';
  } else {
    print_details(*ctx.out, d, db.path());
  }
  return Status::ok();
}

// JSON with two-space indentation, except that arrays of scalars stay on one line: the per-op
// tables of an export then read one row per line.
void write_json(std::ostream& out, const Json& j, int indent) {
  const auto scalar = [](const Json& v) { return !v.is_object() && !v.is_array(); };
  const std::string pad(static_cast<std::size_t>(indent) + 2, ' ');
  const std::string close_pad(static_cast<std::size_t>(indent), ' ');
  if (j.is_array()) {
    if (j.empty()) {
      out << "[]";
      return;
    }
    if (std::all_of(j.begin(), j.end(), scalar)) {
      out << '[';
      for (std::size_t i = 0; i < j.size(); ++i)
        out << (i ? ", " : "") << j[i].dump();
      out << ']';
      return;
    }
    out << "[\n";
    for (std::size_t i = 0; i < j.size(); ++i) {
      out << pad;
      write_json(out, j[i], indent + 2);
      out << (i + 1 < j.size() ? ",\n" : "\n");
    }
    out << close_pad << ']';
    return;
  }
  if (j.is_object()) {
    if (j.empty()) {
      out << "{}";
      return;
    }
    out << "{\n";
    std::size_t i = 0;
    for (auto it = j.begin(); it != j.end(); ++it, ++i) {
      out << pad << Json(it.key()).dump() << ": ";
      write_json(out, it.value(), indent + 2);
      out << (i + 1 < j.size() ? ",\n" : "\n");
    }
    out << close_pad << '}';
    return;
  }
  out << j.dump();
}

Status db_export(const CliContext& ctx, const RunArgs& args) {
  if (args.all == !args.run.empty()) {
    return Status::invalid_input("give either a RUN or --all to `planner db export`");
  }
  PLANNER_ASSIGN_OR_RETURN(store::Database db, open_existing_db(args.db));
  std::vector<store::RunId> runs;
  if (!args.all) {
    PLANNER_ASSIGN_OR_RETURN(store::RunId id, resolve_run(db, args.run));
    runs.push_back(id);
  }
  PLANNER_ASSIGN_OR_RETURN(Json doc, store::export_runs(db, runs));
  std::ostringstream text;
  write_json(text, doc, 0);
  text << '\n';
  if (args.output.empty() || args.output == "-") {
    *ctx.out << text.str();
    return Status::ok();
  }
  PLANNER_RETURN_IF_ERROR(write_text_file_atomic(args.output, text.str()));
  *ctx.err << "wrote " << doc["runs"].size() << " run(s) to " << args.output << '\n';
  return Status::ok();
}

// Bytes of the database with its write-ahead log.
std::uintmax_t file_bytes(const std::string& path) {
  std::uintmax_t total = 0;
  for (const std::string& p : {path, path + "-wal"}) {
    std::error_code ec;
    const std::uintmax_t n = std::filesystem::file_size(p, ec);
    if (!ec) total += n;
  }
  return total;
}

// Records as interrupted the runs whose process is gone, and says which.
Status mark_interrupted(const CliContext& ctx, store::Database& db) {
  PLANNER_ASSIGN_OR_RETURN(std::vector<store::RunId> gone, store::mark_interrupted_runs(db));
  if (gone.empty()) return Status::ok();
  std::string ids;
  for (store::RunId id : gone)
    ids += (ids.empty() ? "" : ", ") + std::to_string(id.value);
  *ctx.out << db.path() << ": marked " << gone.size() << " run" << (gone.size() == 1 ? "" : "s")
           << " interrupted (the process that recorded " << (gone.size() == 1 ? "it" : "them")
           << " is gone): " << ids << '\n';
  return Status::ok();
}

Status db_repair(const CliContext& ctx, const DbOptions& options) {
  PLANNER_ASSIGN_OR_RETURN(store::Database db, open_existing_db(options));
  PLANNER_RETURN_IF_ERROR(mark_interrupted(ctx, db));
  PLANNER_RETURN_IF_ERROR(db.integrity_check());
  *ctx.out << db.path() << ": integrity check ok\n";
  return Status::ok();
}

Status db_vacuum(const CliContext& ctx, const DbOptions& options) {
  PLANNER_ASSIGN_OR_RETURN(store::Database db, open_existing_db(options));
  PLANNER_RETURN_IF_ERROR(mark_interrupted(ctx, db));
  const std::uintmax_t before = file_bytes(db.path());
  PLANNER_RETURN_IF_ERROR(db.vacuum());
  PLANNER_RETURN_IF_ERROR(db.integrity_check());
  const std::uintmax_t after = file_bytes(db.path());
  const auto mib = [](std::uintmax_t b) { return fmt(static_cast<double>(b) / (1 << 20), 2); };
  *ctx.out << db.path() << ": " << mib(before) << " MiB -> " << mib(after)
           << " MiB; integrity check ok\n";
  return Status::ok();
}

}  // namespace

void register_db_commands(CLI::App& app, CliContext& ctx) {
  CLI::App* db = app.add_subcommand(
      "db", "The SQLite database of runs, plans, predictions and measurements (planner.db)");
  db->require_subcommand(1);

  auto list_args = std::make_shared<ListArgs>();
  CLI::App* list = db->add_subcommand("list", "List recorded runs, newest first");
  add_db_path_option(list, list_args->db);
  list->add_option("--kind", list_args->kind,
                   "Only runs of this kind: " + enum_choices<store::RunKind>());
  list->add_option("--limit", list_args->limit, "Show at most N runs (0 = all)")
      ->type_name("N")
      ->capture_default_str();
  add_json_flag(list, ctx);
  list->callback(
      [&ctx, list_args] { ctx.action = [&ctx, list_args] { return db_list(ctx, *list_args); }; });

  auto show_args = std::make_shared<RunArgs>();
  CLI::App* show =
      db->add_subcommand("show", "Show one run: its plans, metrics and what was stored");
  show->add_option("RUN", show_args->run, "Run id, or \"last\"")->required();
  add_db_path_option(show, show_args->db);
  add_json_flag(show, ctx);
  show->callback(
      [&ctx, show_args] { ctx.action = [&ctx, show_args] { return db_show(ctx, *show_args); }; });

  auto export_args = std::make_shared<RunArgs>();
  CLI::App* exp = db->add_subcommand(
      "export", "Export a run (or --all) as JSON, per-op predictions and measurements included");
  exp->add_option("RUN", export_args->run, "Run id, or \"last\"");
  exp->add_flag("--all", export_args->all, "Export every run and hardware profile");
  exp->add_option("-o,--output", export_args->output, "Write to FILE instead of stdout")
      ->type_name("FILE");
  add_db_path_option(exp, export_args->db);
  exp->callback([&ctx, export_args] {
    ctx.action = [&ctx, export_args] { return db_export(ctx, *export_args); };
  });

  auto repair_args = std::make_shared<DbOptions>();
  CLI::App* repair = db->add_subcommand(
      "repair",
      "Mark runs whose process was killed as interrupted, and check the database's integrity");
  add_db_path_option(repair, *repair_args);
  repair->callback([&ctx, repair_args] {
    ctx.action = [&ctx, repair_args] { return db_repair(ctx, *repair_args); };
  });

  auto vacuum_args = std::make_shared<DbOptions>();
  CLI::App* vacuum = db->add_subcommand(
      "vacuum", "Mark interrupted runs, compact the database file and check its integrity");
  add_db_path_option(vacuum, *vacuum_args);
  vacuum->callback([&ctx, vacuum_args] {
    ctx.action = [&ctx, vacuum_args] { return db_vacuum(ctx, *vacuum_args); };
  });
}

}  // namespace planner::cli
