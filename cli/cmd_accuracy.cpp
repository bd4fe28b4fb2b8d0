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
#include "planner/app/profiles.hpp"
#include "planner/app/record.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/published_run.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/fit/accuracy.hpp"
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

std::string grade(const fit::RunAccuracy& r) {
  return r.reliability ? std::string(to_string(*r.reliability)) : "-";
}

std::string value_text(fit::AccuracyMetric metric, double v) {
  return metric == fit::AccuracyMetric::kStepTime ? fmt(v, 3) + " s" : fmt(v, 1) + " TF/s";
}

Json fields_json(const std::vector<fit::ChosenField>& fields) {
  Json out = Json::array();
  for (const fit::ChosenField& f : fields)
    out.push_back({{"field", f.field}, {"value", f.value}, {"reason", f.reason}});
  return out;
}

Json report_json(const std::string& file, const fit::AccuracyReport& rep) {
  Json by_gpu = Json::array();
  for (const fit::GpuTypeAccuracy& g : rep.by_gpu_type) {
    by_gpu.push_back({{"gpu_type", g.gpu_type},
                      {"runs", g.runs},
                      {"mape_percent", g.mape_percent},
                      {"worst_id", g.worst_id},
                      {"worst_error_percent", g.worst_error_percent}});
  }
  Json runs = Json::array();
  for (const fit::RunAccuracy& r : rep.runs) {
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
    const fit::RunAccuracy& w = rep.runs[*rep.worst_a_grade];
    out["worst_a_grade"] = {{"id", w.id}, {"error_percent", w.error_percent}};
  }
  out["runs"] = runs;
  return out;
}

void print_report(std::ostream& out, const std::string& file, const fit::AccuracyReport& rep) {
  out << "accuracy of " << file << ": " << rep.modelled << " runs modelled, " << rep.skipped
      << " skipped, " << rep.simulations << " simulations\n\n";
  Table runs({{"RUN"},
              {"GPU"},
              {"GRADE"},
              {"PUBLISHED", Align::kRight},
              {"PREDICTED", Align::kRight},
              {"ERROR", Align::kRight},
              {"CONFIGURATION"}});
  for (const fit::RunAccuracy& r : rep.runs) {
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
  for (const fit::GpuTypeAccuracy& g : rep.by_gpu_type) {
    gpus.add_row({g.gpu_type, std::to_string(g.runs), fmt(g.mape_percent, 1) + "%", g.worst_id,
                  pct(g.worst_error_percent)});
  }
  gpus.print(out);
  out << "\noverall MAPE: " << fmt(rep.mape_percent, 1) << "% over " << rep.modelled << " runs";
  if (rep.worst_a_grade) {
    const fit::RunAccuracy& w = rep.runs[*rep.worst_a_grade];
    out << "; worst grade-A run: " << w.id << " (" << pct(w.error_percent) << ")";
  }
  out << "\n";

  std::vector<const fit::RunAccuracy*> worst;
  for (const fit::RunAccuracy& r : rep.runs) {
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
    for (const fit::RunAccuracy* r : worst) {
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
  for (const fit::RunAccuracy& r : rep.runs) {
    if (!r.modelled) continue;
    out << r.id << ": " << r.topology << " x" << r.nodes << " nodes, profile " << r.profile << "\n";
    for (const fit::ChosenField& f : r.chosen)
      out << "  chosen  " << f.field << " = " << f.value << " (" << f.reason << ")\n";
    for (const fit::ChosenField& f : r.assumptions)
      out << "  mapped  " << f.field << " = " << f.value << " (" << f.reason << ")\n";
  }
  if (rep.skipped > 0) {
    out << "\nskipped\n";
    for (const fit::RunAccuracy& r : rep.runs) {
      if (!r.modelled) out << "  " << r.id << ": " << r.skip_reason << "\n";
    }
  }
}

Status record(const AccuracyArgs& args, const fit::AccuracyReport& rep) {
  PLANNER_ASSIGN_OR_RETURN(auto db, open_recording_db(args.db));
  if (!db) return Status::ok();
  const Json inputs{{"command", "accuracy"},         {"file", args.file},
                    {"gpu_type", args.gpu_type},     {"only", args.only},
                    {"profiles", args.profiles},     {"mape_percent", rep.mape_percent},
                    {"runs_modelled", rep.modelled}, {"runs_skipped", rep.skipped}};
  return app::record_accuracy(*db, rep, inputs).status();
}

Status accuracy_command(const CliContext& ctx, const AccuracyArgs& args) {
  PLANNER_ASSIGN_OR_RETURN(std::vector<PublishedRun> runs, load_published_runs_file(args.file));
  fit::AccuracyOptions options;
  options.gpu_type = args.gpu_type;
  options.only = args.only;
  options.threads = args.threads;
  for (const std::string& spec : args.profiles) {
    PLANNER_ASSIGN_OR_RETURN(HardwareProfile profile, app::read_profile(spec, args.db));
    options.profiles.push_back(std::move(profile));
  }
  PLANNER_ASSIGN_OR_RETURN(fit::AccuracyReport report,
                           fit::evaluate_accuracy(runs, options, *ctx.catalog));
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
                  "A hardware profile (a file, a preset or a profile stored in --db) to use "
                  "instead of the built-in one for the GPUs it describes (repeatable)")
      ->expected(1, -1);
  cmd->add_option("--threads", a->threads,
                  "Simulation threads (default: the machine's hardware threads)");
  add_db_options(cmd, a->db);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return accuracy_command(ctx, *a); }; });
}

}  // namespace planner::cli
