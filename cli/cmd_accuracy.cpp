// planner accuracy FILE: predicted vs published for the measured training runs of a file in the
// format of the reference data's published_runs.json (simulator/accuracy.hpp says how every record
// is mapped and how its null fields are chosen), with MAPE per GPU type and overall, and a record
// of the check in the database (run kind "accuracy").
#include <algorithm>
#include <cmath>
#include <iostream>

#include "app.hpp"
#include "db_options.hpp"
#include "output.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/published_run.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/sim/accuracy.hpp"
#include "planner/sim/profiles.hpp"
#include "planner/store/metrics.hpp"
#include "planner/store/plans.hpp"
#include "planner/store/predictions.hpp"
#include "planner/store/runs.hpp"
#include "sim_json.hpp"

namespace planner::cli {
namespace {

// How many of the largest errors the text report lists.
constexpr std::size_t kWorstShown = 5;

struct AccuracyArgs {
  std::string file;
  std::string gpu_type;
  std::vector<std::string> only;
  std::vector<std::string> profiles;
  int threads = 0;
  DbOptions db;
};

std::string pct(double v) {
  return (v > 0 ? "+" : "") + fmt(v, 1) + "%";
}

std::string grade(const sim::RunAccuracy& r) {
  return r.reliability ? std::string(to_string(*r.reliability)) : "-";
}

std::string value_text(sim::AccuracyMetric metric, double v) {
  return metric == sim::AccuracyMetric::kStepTime ? fmt(v, 3) + " s" : fmt(v, 1) + " TF/s";
}

Json fields_json(const std::vector<sim::ChosenField>& fields) {
  Json out = Json::array();
  for (const sim::ChosenField& f : fields)
    out.push_back({{"field", f.field}, {"value", f.value}, {"reason", f.reason}});
  return out;
}

Json report_json(const std::string& file, const sim::AccuracyReport& rep) {
  Json by_gpu = Json::array();
  for (const sim::GpuTypeAccuracy& g : rep.by_gpu_type) {
    by_gpu.push_back({{"gpu_type", g.gpu_type},
                      {"runs", g.runs},
                      {"mape_percent", g.mape_percent},
                      {"worst_id", g.worst_id},
                      {"worst_error_percent", g.worst_error_percent}});
  }
  Json runs = Json::array();
  for (const sim::RunAccuracy& r : rep.runs) {
    Json j = {{"id", r.id},
              {"gpu_type", r.gpu_type},
              {"reliability", grade(r)},
              {"status", r.modelled ? "modelled" : "skipped"}};
    if (!r.modelled) {
      j["reason"] = r.skip_reason;
      runs.push_back(std::move(j));
      continue;
    }
    j["metric"] = std::string(to_string(r.metric));
    j["published"] = r.published;
    j["predicted"] = r.predicted;
    j["error_percent"] = r.error_percent;
    j["topology"] = r.topology;
    j["nodes"] = r.nodes;
    j["profile"] = r.profile;
    j["attention"] = std::string(to_string(r.attention));
    j["parallel"] = to_json(r.plan.parallel);
    j["training"] = to_json(r.plan.training);
    j["chosen"] = fields_json(r.chosen);
    j["assumptions"] = fields_json(r.assumptions);
    j["candidates"] = r.candidates;
    j["candidates_out_of_memory"] = r.out_of_memory;
    j["memory_check_overridden"] = r.forced_memory;
    j["step_time_s"] = r.step_time_s;
    j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
    j["mfu"] = r.mfu;
    j["bubble_fraction"] = r.bubble_fraction;
    j["compute_s"] = r.exposed_s[static_cast<std::size_t>(sim::TimeBucket::kCompute)];
    j["exposed_comm"] = exposed_comm_json(
        [&](sim::TimeBucket b) { return r.exposed_s[static_cast<std::size_t>(b)]; });
    j["peak_memory_gib"] = r.peak_memory_gib;
    runs.push_back(std::move(j));
  }
  Json out = {{"schema_version", kSchemaVersion},
              {"kind", "accuracy"},
              {"file", file},
              {"mape_percent", rep.mape_percent},
              {"runs_modelled", rep.modelled},
              {"runs_skipped", rep.skipped},
              {"simulations", rep.simulations},
              {"by_gpu_type", by_gpu}};
  if (rep.worst_a_grade) {
    const sim::RunAccuracy& w = rep.runs[*rep.worst_a_grade];
    out["worst_a_grade"] = {{"id", w.id}, {"error_percent", w.error_percent}};
  }
  out["runs"] = runs;
  return out;
}

void print_report(std::ostream& out, const std::string& file, const sim::AccuracyReport& rep) {
  out << "accuracy of " << file << ": " << rep.modelled << " runs modelled, " << rep.skipped
      << " skipped, " << rep.simulations << " simulations\n\n";
  Table runs({{"RUN"},
              {"GPU"},
              {"GRADE"},
              {"PUBLISHED", Align::kRight},
              {"PREDICTED", Align::kRight},
              {"ERROR", Align::kRight},
              {"CONFIGURATION"}});
  for (const sim::RunAccuracy& r : rep.runs) {
    if (!r.modelled) continue;
    runs.add_row({r.id, r.gpu_type, grade(r), value_text(r.metric, r.published),
                  value_text(r.metric, r.predicted), pct(r.error_percent),
                  short_label(r.plan.parallel) + " " + std::string(to_string(r.attention)) +
                      "-attn" + (r.forced_memory ? " (memory check overridden)" : "")});
  }
  runs.print(out);

  out << "\nMAPE per GPU type\n";
  Table gpus({{"GPU TYPE"},
              {"RUNS", Align::kRight},
              {"MAPE", Align::kRight},
              {"WORST RUN"},
              {"ERROR", Align::kRight}});
  for (const sim::GpuTypeAccuracy& g : rep.by_gpu_type) {
    gpus.add_row({g.gpu_type, std::to_string(g.runs), fmt(g.mape_percent, 1) + "%", g.worst_id,
                  pct(g.worst_error_percent)});
  }
  gpus.print(out);
  out << "\noverall MAPE: " << fmt(rep.mape_percent, 1) << "% over " << rep.modelled << " runs";
  if (rep.worst_a_grade) {
    const sim::RunAccuracy& w = rep.runs[*rep.worst_a_grade];
    out << "; worst grade-A run: " << w.id << " (" << pct(w.error_percent) << ")";
  }
  out << "\n";

  std::vector<const sim::RunAccuracy*> worst;
  for (const sim::RunAccuracy& r : rep.runs) {
    if (r.modelled) worst.push_back(&r);
  }
  std::stable_sort(worst.begin(), worst.end(), [](const auto* a, const auto* b) {
    return std::abs(a->error_percent) > std::abs(b->error_percent);
  });
  if (worst.size() > kWorstShown) worst.resize(kWorstShown);
  if (!worst.empty()) {
    out << "\nworst runs\n";
    Table t({{"RUN"},
             {"ERROR", Align::kRight},
             {"STEP S", Align::kRight},
             {"COMPUTE S", Align::kRight},
             {"BUBBLE", Align::kRight},
             {"EXPOSED COMM"}});
    for (const sim::RunAccuracy* r : worst) {
      std::string comm;
      for (sim::TimeBucket b : sim::kCommBuckets) {
        const double s = r->exposed_s[static_cast<std::size_t>(b)];
        if (s >= 0.0005)
          comm += (comm.empty() ? "" : " ") + std::string(to_string(b)) + " " + fmt(s, 3);
      }
      t.add_row({r->id, pct(r->error_percent), fmt(r->step_time_s, 3),
                 fmt(r->exposed_s[static_cast<std::size_t>(sim::TimeBucket::kCompute)], 3),
                 fmt(100 * r->bubble_fraction, 1) + "%", comm.empty() ? "-" : comm});
    }
    t.print(out);
  }

  out << "\nper run: fields the record leaves null (chosen) and how its hardware, model and "
         "software were mapped\n";
  for (const sim::RunAccuracy& r : rep.runs) {
    if (!r.modelled) continue;
    out << r.id << ": " << r.topology << " x" << r.nodes << " nodes, profile " << r.profile << "\n";
    for (const sim::ChosenField& f : r.chosen)
      out << "  chosen  " << f.field << " = " << f.value << " (" << f.reason << ")\n";
    for (const sim::ChosenField& f : r.assumptions)
      out << "  mapped  " << f.field << " = " << f.value << " (" << f.reason << ")\n";
  }
  if (rep.skipped > 0) {
    out << "\nskipped\n";
    for (const sim::RunAccuracy& r : rep.runs) {
      if (!r.modelled) out << "  " << r.id << ": " << r.skip_reason << "\n";
    }
  }
}

Status record(const AccuracyArgs& args, const sim::AccuracyReport& rep) {
  PLANNER_ASSIGN_OR_RETURN(auto db, open_recording_db(args.db));
  if (!db) return Status::ok();
  store::NewRun run;
  run.kind = store::RunKind::kAccuracy;
  run.label = args.file;
  run.inputs_json = Json{{"command", "accuracy"},         {"file", args.file},
                         {"gpu_type", args.gpu_type},     {"only", args.only},
                         {"profiles", args.profiles},     {"mape_percent", rep.mape_percent},
                         {"runs_modelled", rep.modelled}, {"runs_skipped", rep.skipped}}
                        .dump();
  PLANNER_ASSIGN_OR_RETURN(store::RunId id, store::create_run(*db, run));
  namespace m = store::metric;
  auto metric = [](const store::MetricDef& def, double v) {
    return store::Metric{std::string(def.name), v, std::string(def.unit)};
  };
  for (const sim::RunAccuracy& r : rep.runs) {
    if (!r.modelled) continue;
    PLANNER_ASSIGN_OR_RETURN(store::PlanId plan,
                             store::put_plan(*db, as_document("plan", to_json(r.plan)), r.id));
    std::vector<store::Metric> predicted{metric(m::kStepTime, r.step_time_s),
                                         metric(m::kMfu, r.mfu),
                                         {"accuracy_error", r.error_percent, "%"}};
    PLANNER_RETURN_IF_ERROR(
        store::put_metrics(*db, id, plan, store::MetricSource::kSimulated, predicted));
    std::vector<store::Metric> published;
    if (r.metric == sim::AccuracyMetric::kStepTime) {
      published.push_back(metric(m::kStepTime, r.published));
    } else {
      published.push_back({"tflops_per_gpu", r.published, "TFLOP/s"});
    }
    PLANNER_RETURN_IF_ERROR(
        store::put_metrics(*db, id, plan, store::MetricSource::kMeasured, published));
  }
  return store::finish_run(*db, id);
}

Status accuracy_command(const CliContext& ctx, const AccuracyArgs& args) {
  PLANNER_ASSIGN_OR_RETURN(std::vector<PublishedRun> runs, load_published_runs_file(args.file));
  sim::AccuracyOptions options;
  options.gpu_type = args.gpu_type;
  options.only = args.only;
  options.threads = args.threads;
  for (const std::string& path : args.profiles) {
    PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
    PLANNER_ASSIGN_OR_RETURN(HardwareProfile profile, sim::parse_profile(text, path));
    options.profiles.push_back(std::move(profile));
  }
  PLANNER_ASSIGN_OR_RETURN(sim::AccuracyReport report,
                           sim::evaluate_accuracy(runs, options, *ctx.catalog));
  if (ctx.json) {
    *ctx.out << report_json(args.file, report).dump(2) << '\n';
  } else {
    print_report(*ctx.out, args.file, report);
  }
  return record(args, report);
}

}  // namespace

void register_accuracy_command(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "accuracy",
      "Simulate published training runs and compare with what they measured (MAPE per GPU type)");
  auto a = std::make_shared<AccuracyArgs>();
  cmd->add_option("FILE", a->file,
                  "Published runs (the format of the reference data's "
                  "published_runs.json)")
      ->required();
  cmd->add_option("--gpu-type", a->gpu_type, "Only runs on this GPU preset (name or alias)");
  cmd->add_option("--only", a->only, "Only these run ids")->expected(1, -1);
  cmd->add_option("--profile", a->profiles,
                  "A hardware profile file to use instead of the built-in one for the GPUs it "
                  "describes (repeatable), e.g. a measured profile")
      ->expected(1, -1);
  cmd->add_option("--threads", a->threads,
                  "Simulation threads (default: the machine's hardware threads)");
  add_db_options(cmd, a->db);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return accuracy_command(ctx, *a); }; });
}

}  // namespace planner::cli
