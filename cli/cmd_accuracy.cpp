// planner accuracy FILE: predicted vs published for the measured training runs of a file in the
// format of the reference data's published_runs.json or a vTrain CSV (core/measured_runs.hpp;
// planner/fit/accuracy.hpp says how every record is mapped and how its null fields are chosen),
// with MAPE per GPU type, per source and overall, and a record of the check in the database (run
// kind "accuracy").
//   --cross-validate  fits the simulator's fitted parameters on every source but one and predicts
//               the one left out, for every source (planner/fit/cross_validation.hpp); prints the
//               MAPE and bias per source with the built-in, in-sample and left-out parameters;
//               --leave-out model leaves out each model instead.
//   --ranking   also groups the configurations by (model, cluster, global batch) and reports per
//               group the Spearman rank correlation of predicted and measured time and the top-1
//               regret (planner/fit/ranking.hpp), with their means.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "app.hpp"
#include "db_options.hpp"
#include "output.hpp"
#include "plan_args.hpp"
#include "planner/app/profiles.hpp"
#include "planner/app/record.hpp"
#include "planner/core/host_model.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/measured_runs.hpp"
#include "planner/core/published_run.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/fit/accuracy.hpp"
#include "planner/fit/cross_validation.hpp"
#include "planner/fit/ranking.hpp"
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
  std::string host_costs;
  int threads = 0;
  bool ranking = false;
  bool cross_validate = false;
  std::string leave_out = "source";
  DbOptions db;
};

std::string pct(double v) {
  return (v > 0 ? "+" : "") + fmt(v, 1) + "%";
}

std::string grade(const fit::RunAccuracy& r) {
  return r.reliability ? std::string(to_string(*r.reliability)) : "-";
}

std::string seconds_text(double v) {
  return fmt(v, 3) + " s";
}

Json fields_json(const std::vector<fit::ChosenField>& fields) {
  Json out = Json::array();
  for (const fit::ChosenField& f : fields)
    out.push_back({{"field", f.field}, {"value", f.value}, {"reason", f.reason}});
  return out;
}

Json software_json(const std::vector<fit::SoftwareField>& fields) {
  Json out = Json::array();
  for (const fit::SoftwareField& f : fields) {
    out.push_back({{"field", f.field},
                   {"value", f.value},
                   {"origin", f.stated ? "stated" : "inferred"},
                   {"reason", f.reason}});
  }
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
              {"source", r.source},
              {"gpu_type", r.gpu_type},
              {"reliability", grade(r)},
              {"status", r.modelled ? "modelled" : "skipped"}};
    if (!r.modelled) {
      j["reason"] = r.skip_reason;
      runs.push_back(std::move(j));
      continue;
    }
    j["metric"] = "step_time_s";
    j["published_from"] = std::string(to_string(r.basis));
    j["published_how"] = r.published_how;
    j["published"] = r.published;
    j["predicted"] = r.predicted;
    j["error_percent"] = r.error_percent;
    j["topology"] = r.topology;
    j["nodes"] = r.nodes;
    j["profile"] = r.profile;
    j["attention"] = std::string(to_string(r.attention));
    j["software"] = software_json(r.software);
    if (!r.software_source.empty()) j["software_source"] = r.software_source;
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
  Json by_source = Json::array();
  for (const fit::SourceAccuracy& a : rep.by_source) {
    by_source.push_back({{"source", a.source},
                         {"runs", a.runs},
                         {"mape_percent", a.mape_percent},
                         {"bias_percent", a.bias_percent}});
  }
  Json out = {{"schema_version", kSchemaVersion},
              {"kind", "accuracy"},
              {"file", file},
              {"mape_percent", rep.mape_percent},
              {"bias_percent", rep.bias_percent},
              {"runs_modelled", rep.modelled},
              {"runs_skipped", rep.skipped},
              {"simulations", rep.simulations},
              {"by_gpu_type", by_gpu},
              {"by_source", by_source}};
  if (rep.worst_a_grade) {
    const fit::RunAccuracy& w = rep.runs[*rep.worst_a_grade];
    out["worst_a_grade"] = {{"id", w.id}, {"error_percent", w.error_percent}};
  }
  const fit::RepeatedConfigurations& rc = rep.repeated;
  out["repeated_configurations"] = {{"configurations", rc.configurations},
                                    {"runs", rc.runs},
                                    {"floor_mape_percent", rc.floor_mape_percent},
                                    {"model_mape_percent", rc.model_mape_percent},
                                    {"widest_ratio", rc.widest_ratio},
                                    {"widest_id", rc.widest_id}};
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
    runs.add_row({r.id, r.gpu_type, grade(r), seconds_text(r.published), seconds_text(r.predicted),
                  pct(r.error_percent),
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

  out << "\nerror per source (bias = mean signed error)\n";
  Table sources(
      {{"SOURCE"}, {"RUNS", Align::kRight}, {"MAPE", Align::kRight}, {"BIAS", Align::kRight}});
  for (const fit::SourceAccuracy& a : rep.by_source) {
    sources.add_row(
        {a.source, std::to_string(a.runs), fmt(a.mape_percent, 1) + "%", pct(a.bias_percent)});
  }
  sources.print(out);
  out << "\noverall MAPE: " << fmt(rep.mape_percent, 1) << "% over " << rep.modelled
      << " runs, bias " << pct(rep.bias_percent);
  if (rep.worst_a_grade) {
    const fit::RunAccuracy& w = rep.runs[*rep.worst_a_grade];
    out << "; worst grade-A run: " << w.id << " (" << pct(w.error_percent) << ")";
  }
  out << "\n";
  const fit::RepeatedConfigurations& rc = rep.repeated;
  if (rc.configurations > 0) {
    out << "measured more than once: " << rc.runs << " runs of " << rc.configurations
        << (rc.configurations == 1 ? " configuration" : " configurations")
        << ", their measurements up to " << fmt(rc.widest_ratio, 2) << "x apart (" << rc.widest_id
        << "); no prediction from the configuration gets below " << fmt(rc.floor_mape_percent, 1)
        << "% MAPE on them, planner " << fmt(rc.model_mape_percent, 1) << "%\n";
  }

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

  out << "\nper run: fields the record leaves null (chosen), its software (stated or inferred), "
         "and how its hardware, model and published step time were mapped\n";
  for (const fit::RunAccuracy& r : rep.runs) {
    if (!r.modelled) continue;
    out << r.id << " [" << r.source << "]: " << r.topology << " x" << r.nodes << " nodes, profile "
        << r.profile << "\n";
    out << "  published " << seconds_text(r.published) << " (" << to_string(r.basis) << ": "
        << r.published_how << ")\n";
    for (const fit::SoftwareField& f : r.software) {
      out << "  " << (f.stated ? "stated  " : "inferred") << " " << f.field << " = " << f.value
          << (f.reason.empty() ? "" : " (" + f.reason + ")") << "\n";
    }
    if (!r.software_source.empty()) out << "  software source: " << r.software_source << "\n";
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

Json optional_json(const std::optional<double>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json ranking_json(const fit::RankingReport& rep) {
  Json groups = Json::array();
  for (const fit::RankingGroup& g : rep.groups) {
    Json ids = Json::array();
    for (std::size_t i : g.runs)
      ids.push_back(rep.accuracy.runs[i].id);
    groups.push_back({{"model", g.model},
                      {"cluster", g.cluster},
                      {"global_batch", g.global_batch},
                      {"configurations", g.runs.size()},
                      {"spearman", optional_json(g.spearman)},
                      {"top1_regret", optional_json(g.top1_regret)},
                      {"mape_percent", g.mape_percent},
                      {"picked", g.picked},
                      {"best", g.best},
                      {"runs", ids}});
  }
  return {{"groups", groups.size()},
          {"ranked_groups", rep.ranked_groups},
          {"mean_spearman", optional_json(rep.mean_spearman)},
          {"mean_top1_regret", optional_json(rep.mean_top1_regret)},
          {"worst_top1_regret", rep.worst_top1_regret},
          {"worst_group", rep.worst_group},
          {"mape_percent", rep.accuracy.mape_percent},
          {"by_group", groups}};
}

std::string optional_text(const std::optional<double>& v, int decimals) {
  return v ? fmt(*v, decimals) : "-";
}

std::string optional_pct(const std::optional<double>& v) {
  return v ? fmt(100 * *v, 1) + "%" : "-";
}

void print_ranking(std::ostream& out, const std::string& file, const fit::RankingReport& rep) {
  const fit::AccuracyReport& acc = rep.accuracy;
  out << "ranking accuracy of " << file << ": " << acc.modelled << " configurations modelled, "
      << acc.skipped << " skipped, in " << rep.groups.size() << " groups (model, cluster, global "
      << "batch), " << rep.ranked_groups << " with two or more\n\n";
  Table t({{"MODEL"},
           {"CLUSTER"},
           {"GBS", Align::kRight},
           {"CONFIGS", Align::kRight},
           {"SPEARMAN", Align::kRight},
           {"TOP-1 REGRET", Align::kRight},
           {"MAPE", Align::kRight},
           {"PICKED"},
           {"MEASURED BEST"}});
  for (const fit::RankingGroup& g : rep.groups) {
    t.add_row({g.model, g.cluster, std::to_string(g.global_batch), std::to_string(g.runs.size()),
               optional_text(g.spearman, 3), optional_pct(g.top1_regret),
               fmt(g.mape_percent, 1) + "%", g.picked, g.picked == g.best ? "(same)" : g.best});
  }
  t.print(out);
  out << "\nmean Spearman " << optional_text(rep.mean_spearman, 3) << ", mean top-1 regret "
      << optional_pct(rep.mean_top1_regret) << ", worst top-1 regret "
      << fmt(100 * rep.worst_top1_regret, 1) << "%"
      << (rep.worst_group.empty() ? "" : " (" + rep.worst_group + ")") << "; step-time MAPE "
      << fmt(acc.mape_percent, 1) << "%, bias " << pct(acc.bias_percent) << " over " << acc.modelled
      << " configurations\n";
  if (acc.skipped > 0) {
    out << "\nskipped\n";
    for (const fit::RunAccuracy& r : acc.runs) {
      if (!r.modelled) out << "  " << r.id << ": " << r.skip_reason << "\n";
    }
  }
}

Json parameters_json(const std::vector<fit::FittedParameter>& params) {
  Json out = Json::array();
  for (const fit::FittedParameter& p : params) {
    out.push_back({{"family", p.family},
                   {"key", p.key},
                   {"unit", p.unit},
                   {"initial", p.initial},
                   {"value", p.value},
                   {"runs", p.runs}});
  }
  return out;
}

Json source_errors_json(const fit::SourceErrors& e) {
  return {{"source", e.source},
          {"runs", e.runs},
          {"builtin_mape_percent", e.builtin_mape},
          {"builtin_bias_percent", e.builtin_bias},
          {"insample_mape_percent", e.insample_mape},
          {"insample_bias_percent", e.insample_bias},
          {"loso_mape_percent", e.loso_mape},
          {"loso_bias_percent", e.loso_bias}};
}

Json cross_validation_json(const std::string& file, const fit::CrossValidationReport& rep,
                           const std::vector<fit::ParameterFamily>& families,
                           fit::LeaveOut leave_out) {
  Json fams = Json::array();
  for (const fit::ParameterFamily& f : families) {
    fams.push_back({{"name", f.name},
                    {"key", f.key_meaning},
                    {"unit", f.unit},
                    {"lower", f.lower},
                    {"upper", f.upper},
                    {"description", f.description}});
  }
  Json folds = Json::array();
  for (const fit::FoldFit& f : rep.folds) {
    folds.push_back({{"held_out", f.held_out},
                     {"steps", f.fit.steps},
                     {"objective_initial", f.fit.objective_initial},
                     {"objective", f.fit.objective},
                     {"parameters", parameters_json(f.fit.parameters)}});
  }
  Json sources = Json::array();
  for (const fit::SourceErrors& e : rep.by_source)
    sources.push_back(source_errors_json(e));
  Json runs = Json::array();
  for (const fit::CrossValidatedRun& r : rep.runs) {
    const fit::RunAccuracy& a = rep.builtin.runs[r.run];
    runs.push_back({{"id", a.id},
                    {"source", a.source},
                    {"gpu_type", a.gpu_type},
                    {"published", a.published},
                    {"builtin_error_percent", r.builtin_error_percent},
                    {"insample_error_percent", r.insample_error_percent},
                    {"loso_error_percent", r.loso_error_percent}});
  }
  Json skipped = Json::array();
  for (const fit::RunAccuracy& a : rep.builtin.runs) {
    if (!a.modelled) skipped.push_back({{"id", a.id}, {"reason", a.skip_reason}});
  }
  return {{"schema_version", kSchemaVersion},
          {"kind", "cross-validation"},
          {"file", file},
          {"leave_out", std::string(to_string(leave_out))},
          {"runs_modelled", rep.runs.size()},
          {"runs_skipped", skipped.size()},
          {"sources", rep.by_source.size()},
          {"simulations", rep.simulations},
          {"overall", source_errors_json(rep.overall)},
          {"by_source", sources},
          {"families", fams},
          {"insample",
           {{"steps", rep.insample.steps},
            {"objective_initial", rep.insample.objective_initial},
            {"objective", rep.insample.objective},
            {"parameters", parameters_json(rep.insample.parameters)}}},
          {"folds", folds},
          {"runs", runs},
          {"skipped", skipped}};
}

std::string mape_bias(double mape, double bias) {
  return fmt(mape, 1) + "% / " + pct(bias);
}

void print_cross_validation(std::ostream& out, const std::string& file,
                            const fit::CrossValidationReport& rep, fit::LeaveOut leave_out) {
  const bool by_model = leave_out == fit::LeaveOut::kModel;
  const std::string unit = by_model ? "model" : "source";
  out << "cross-validation of " << file << ": " << rep.runs.size() << " runs modelled from "
      << rep.by_source.size() << " " << unit << "s, " << rep.insample.parameters.size()
      << " parameters, " << rep.simulations << " simulations\n\n";
  out << "parameters fitted on every " << unit
      << " (multipliers of the built-in values; a parameter no run uses stays 1)\n";
  Table params({{"PARAMETER"}, {"KEY"}, {"RUNS", Align::kRight}, {"IN-SAMPLE", Align::kRight}});
  for (const fit::FittedParameter& p : rep.insample.parameters)
    params.add_row({p.family, p.key, std::to_string(p.runs), "x" + fmt(p.value, 3)});
  params.print(out);
  out << "\nerror per " << unit
      << ", MAPE / bias (mean signed error): built-in parameters, fitted on every " << unit
      << ", fitted on the other " << unit << "s\n";
  Table t({{by_model ? "MODEL" : "SOURCE"},
           {"RUNS", Align::kRight},
           {"BUILT-IN", Align::kRight},
           {"IN-SAMPLE", Align::kRight},
           {by_model ? "LEAVE-ONE-MODEL-OUT" : "LEAVE-ONE-SOURCE-OUT", Align::kRight}});
  for (const fit::SourceErrors& e : rep.by_source) {
    t.add_row({e.source, std::to_string(e.runs), mape_bias(e.builtin_mape, e.builtin_bias),
               mape_bias(e.insample_mape, e.insample_bias), mape_bias(e.loso_mape, e.loso_bias)});
  }
  const fit::SourceErrors& o = rep.overall;
  t.add_row({"all", std::to_string(o.runs), mape_bias(o.builtin_mape, o.builtin_bias),
             mape_bias(o.insample_mape, o.insample_bias), mape_bias(o.loso_mape, o.loso_bias)});
  t.print(out);
  out << "\nleave-one-" << unit << "-out MAPE " << fmt(o.loso_mape, 1) << "% beside in-sample "
      << fmt(o.insample_mape, 1) << "% (built-in parameters: " << fmt(o.builtin_mape, 1) << "%)";
  if (o.insample_mape < o.builtin_mape && o.loso_mape > o.builtin_mape) {
    out << "; the fit improves in-sample and worsens leave-one-" << unit << "-out: a regression";
  }
  out << "\n";
  const std::size_t skipped = static_cast<std::size_t>(rep.builtin.skipped);
  if (skipped > 0) {
    out << "\nskipped\n";
    for (const fit::RunAccuracy& r : rep.builtin.runs) {
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
  PLANNER_ASSIGN_OR_RETURN(std::vector<PublishedRun> runs, load_measured_runs_file(args.file));
  fit::AccuracyOptions options;
  options.gpu_type = args.gpu_type;
  options.only = args.only;
  options.threads = args.threads;
  if (!args.host_costs.empty()) {
    if (auto parsed = parse_host_costs(args.host_costs, HostCosts{}); !parsed) {
      return Status::invalid_input("--host-costs: " + parsed.status().message());
    }
    options.host_costs = args.host_costs;
  }
  for (const std::string& spec : args.profiles) {
    PLANNER_ASSIGN_OR_RETURN(HardwareProfile profile, app::read_profile(spec, args.db));
    options.profiles.push_back(std::move(profile));
  }
  if (args.cross_validate) {
    fit::CrossValidationOptions cv;
    cv.accuracy = options;
    PLANNER_ASSIGN_OR_RETURN(cv.leave_out,
                             parse_flag<fit::LeaveOut>("--leave-out", args.leave_out));
    cv.families = fit::builtin_families();
    PLANNER_ASSIGN_OR_RETURN(fit::CrossValidationReport report,
                             fit::cross_validate(runs, cv, *ctx.catalog));
    if (ctx.json) {
      *ctx.out << cross_validation_json(args.file, report, cv.families, cv.leave_out).dump(2)
               << '\n';
    } else {
      print_cross_validation(*ctx.out, args.file, report, cv.leave_out);
    }
    return record(args, report.builtin);
  }
  PLANNER_ASSIGN_OR_RETURN(fit::AccuracyReport report,
                           fit::evaluate_accuracy(runs, options, *ctx.catalog));
  if (args.ranking) {
    const fit::RankingReport ranking = fit::rank_accuracy(runs, report);
    if (ctx.json) {
      Json j = report_json(args.file, report);
      j["ranking"] = ranking_json(ranking);
      *ctx.out << j.dump(2) << '\n';
    } else {
      print_ranking(*ctx.out, args.file, ranking);
    }
  } else if (ctx.json) {
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
      "Simulate published or measured training runs and compare with what they measured (MAPE "
      "per GPU type and per source; --ranking: rank correlation and top-1 regret per group)");
  auto a = std::make_shared<AccuracyArgs>();
  cmd->add_option("FILE", a->file,
                  "Measured runs: a JSON array in the format of the reference data's "
                  "published_runs.json, or a vTrain CSV (vtrain_calibration.csv)")
      ->required();
  CLI::Option* cv = cmd->add_flag(
      "--cross-validate", a->cross_validate,
      "Leave one source out: fit the fitted parameters on every other source and "
      "predict the one left out, for every source; MAPE and bias per source beside the "
      "in-sample ones");
  cmd->add_option("--leave-out", a->leave_out,
                  "What --cross-validate leaves out of each fit: \"source\" (default) or "
                  "\"model\" (how planner predicts a model it was not fitted on)")
      ->needs(cv);
  cmd->add_flag("--ranking", a->ranking,
                "Group the configurations by (model, cluster, global batch) and report per "
                "group the Spearman rank correlation of predicted and measured step time and "
                "the top-1 regret (measured time of planner's pick / measured best - 1)")
      ->excludes(cv);
  cmd->add_option("--gpu-type", a->gpu_type, "Only runs on this GPU preset (name or alias)");
  cmd->add_option("--only", a->only, "Only these run ids")->expected(1, -1);
  cmd->add_option("--profile", a->profiles,
                  "A hardware profile (a file, a preset or a profile stored in --db) to use "
                  "instead of the built-in one for the GPUs it describes (repeatable)")
      ->expected(1, -1);
  cmd->add_option("--host-costs", a->host_costs,
                  "Override the host model of every run's software stack: "
                  "KEY=MICROSECONDS,... (gemm, attention, memory, router (an MoE router op), "
                  "collective, p2p, micro_batch, "
                  "step, gather_member; backward is a factor; pass_sync and recv_sync are 0 or 1) "
                  "or \"none\"; "
                  "see planner sim-models");
  cmd->add_option("--threads", a->threads,
                  "Simulation threads (default: the machine's hardware threads)");
  add_db_options(cmd, a->db);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return accuracy_command(ctx, *a); }; });
}

}  // namespace planner::cli
