// planner report RUN: predicted against measured for an executed run (store::compare_run), per op
// kind and per step, with the relative error (predicted - measured) / measured.
//
// The prediction is the one `planner exec` stored with the run (the simulator's timing of the same
// plan, lowered the same way), or that of another run (`--prediction RUN`, e.g. a `planner
// simulate` of the plan). Warm-up steps are listed but left out of the per-op-kind sums and the
// median unless --include-warmup. Steps are numbered from 1, as `planner exec` prints them ("step
// 3/10"; the database keeps 0-based indices). When the step time is off by more than half and the
// prediction used a datasheet preset rather than a profile measured on the machine, the report
// says so and how to calibrate.
#include <cmath>
#include <iostream>

#include "app.hpp"
#include "db_options.hpp"
#include "output.hpp"
#include "planner/core/hardware_profile.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/store/comparison.hpp"
#include "planner/store/profiles.hpp"
#include "planner/store/runs.hpp"

namespace planner::cli {
namespace {

struct ReportArgs {
  DbOptions db;
  std::string run = "latest";
  std::string prediction;
  bool include_warmup = false;
};

std::string ms(Time t) {
  return fmt(to_milliseconds(t), 3);
}

std::string percent(std::optional<double> e) {
  if (!e) return "-";
  return (*e >= 0 ? "+" : "") + fmt(*e * 100, 1) + " %";
}

Json error_json(std::optional<double> e) {
  return e ? Json(*e) : Json(nullptr);
}

Json seconds_json(std::optional<Time> t) {
  return t ? Json(to_seconds(*t)) : Json(nullptr);
}

std::optional<double> relative(std::optional<Time> predicted, std::optional<Time> measured) {
  if (!predicted || !measured || measured->raw() == 0) return std::nullopt;
  return (to_seconds(*predicted) - to_seconds(*measured)) / to_seconds(*measured);
}

// A step-time error this large (either way) is a machine the profile does not describe, not a
// modelling error: calibrated profiles predict executed runs within about 10 % (README).
constexpr double kUncalibratedError = 0.5;

// The hardware profile the prediction run used, and whether it was measured on a machine
// (`planner calibrate` stores those in the database) rather than a datasheet preset.
struct PredictionProfile {
  std::string name;
  bool measured = false;
};

std::optional<PredictionProfile> prediction_profile(store::Database& db, store::RunId run) {
  auto record = store::get_run(db, run);
  if (!record) return std::nullopt;
  Diagnostics ignored;
  const auto inputs = parse_json_text(record->inputs_json, ignored);
  if (!inputs || !inputs->is_object() || !inputs->contains("profile") ||
      !(*inputs)["profile"].is_string()) {
    return std::nullopt;
  }
  PredictionProfile p;
  p.name = (*inputs)["profile"].get<std::string>();
  // A preset name resolves to the preset before any stored profile (profile_resolve.hpp).
  p.measured = !builtin_profile(p.name) && store::get_profile(db, p.name).is_ok();
  return p;
}

// "hint: ..." when the step-time error says the machine is uncalibrated, else "".
std::string calibration_hint(store::Database& db, store::RunId prediction_run,
                             std::optional<double> step_error) {
  if (!step_error || std::abs(*step_error) < kUncalibratedError) return {};
  const auto profile = prediction_profile(db, prediction_run);
  if (!profile || profile->measured) return {};
  return "the prediction used \"" + profile->name +
         "\", a preset from datasheet figures, not a profile measured on this machine: an error "
         "of " +
         fmt(*step_error * 100, 0) +
         " % usually means the machine is uncalibrated. Run `planner calibrate --backend cpu -n "
         "RANKS --name NAME` here, then `planner exec ... --profile NAME` (or `planner report "
         "--prediction RUN` with a `planner simulate --profile NAME` of the plan).";
}

Status report_command(const CliContext& ctx, const ReportArgs& args) {
  PLANNER_ASSIGN_OR_RETURN(store::Database db, open_existing_db(args.db));
  PLANNER_ASSIGN_OR_RETURN(store::RunId id, resolve_run(db, args.run));
  PLANNER_ASSIGN_OR_RETURN(store::RunRecord run, store::get_run(db, id));
  store::ComparisonOptions options;
  options.include_warmup = args.include_warmup;
  if (!args.prediction.empty()) {
    PLANNER_ASSIGN_OR_RETURN(options.prediction_run, resolve_run(db, args.prediction));
  }
  auto compared = store::compare_run(db, id, options);
  if (!compared) {
    if (compared.status().code() == StatusCode::kNotFound) {
      return Status::not_found(
          "run " + std::to_string(id.value) +
          " has no prediction to compare with: " + compared.status().message() +
          " (planner exec stores one with its runs; --prediction RUN takes "
          "that of a planner simulate run of the same plan)");
    }
    return compared.status();
  }
  const store::RunComparison& c = *compared;
  const std::optional<double> step_error = relative(c.predicted_step_time, c.measured_step_time);
  const std::string hint = calibration_hint(db, c.prediction_run, step_error);

  if (ctx.json) {
    Json kinds = Json::array();
    for (const store::OpKindComparison& k : c.by_op_kind) {
      kinds.push_back({{"op_kind", k.op_kind},
                       {"ops", k.ops},
                       {"predicted_s", to_seconds(k.predicted)},
                       {"measured_s", to_seconds(k.measured)},
                       {"relative_error", error_json(k.relative_error())}});
    }
    Json steps = Json::array();
    for (const store::StepComparison& s : c.by_step) {
      steps.push_back({{"step", s.step + 1},
                       {"warmup", s.warmup},
                       {"measured_s", to_seconds(s.measured)},
                       {"predicted_s", seconds_json(s.predicted)},
                       {"relative_error", error_json(s.relative_error())}});
    }
    Json out{{"run", id.value},
             {"label", run.label},
             {"status", std::string(to_string(run.status))},
             {"prediction_run", c.prediction_run.value},
             {"plan", c.plan.value},
             {"predicted_step_time_s", seconds_json(c.predicted_step_time)},
             {"measured_step_time_s", seconds_json(c.measured_step_time)},
             {"step_time_relative_error", error_json(step_error)},
             {"by_op_kind", kinds},
             {"by_step", steps},
             {"predicted_only_ops", c.predicted_only},
             {"measured_only_ops", c.measured_only}};
    if (!hint.empty()) out["hint"] = hint;
    *ctx.out << out.dump(2) << '\n';
    return Status::ok();
  }

  std::ostream& out = *ctx.out;
  KeyValues kv;
  kv.add("run", std::to_string(id.value) + " (" + std::string(to_string(run.kind)) + ", " +
                    std::string(to_string(run.status)) + ") " + run.label);
  if (run.status == store::RunStatus::kFailed || run.status == store::RunStatus::kInterrupted) {
    kv.add(run.status == store::RunStatus::kFailed ? "failed" : "interrupted",
           (run.failed_rank ? "rank " + std::to_string(*run.failed_rank) + ": " : "") +
               run.failure_reason);
  }
  kv.add("prediction", c.prediction_run == id ? std::string("stored with the run (plan ") +
                                                    std::to_string(c.plan.value) + ")"
                                              : "run " + std::to_string(c.prediction_run.value) +
                                                    " (plan " + std::to_string(c.plan.value) + ")");
  kv.add("step time",
         (c.measured_step_time ? ms(*c.measured_step_time) + " ms measured (median)" : "-") +
             (c.predicted_step_time ? ", " + ms(*c.predicted_step_time) + " ms predicted" : "") +
             (step_error ? ", error " + percent(step_error) : ""));
  kv.add("ops matched", std::to_string([&] {
                          std::int64_t n = 0;
                          for (const store::OpKindComparison& k : c.by_op_kind)
                            n += k.ops;
                          return n;
                        }()) +
                            " (rank, op) pairs; " + std::to_string(c.predicted_only) +
                            " predicted only, " + std::to_string(c.measured_only) +
                            " measured only");
  kv.print(out);

  out << "\nPer op kind (time per step, summed over ranks"
      << (args.include_warmup ? "" : ", warm-up steps excluded") << "):\n";
  Table kinds({{"op kind"},
               {"ops", Align::kRight},
               {"predicted ms", Align::kRight},
               {"measured ms", Align::kRight},
               {"error", Align::kRight}});
  for (const store::OpKindComparison& k : c.by_op_kind) {
    kinds.add_row({k.op_kind, std::to_string(k.ops), ms(k.predicted), ms(k.measured),
                   percent(k.relative_error())});
  }
  kinds.print(out);

  out << "\nPer step:\n";
  Table steps({{"step", Align::kRight},
               {"measured ms", Align::kRight},
               {"predicted ms", Align::kRight},
               {"error", Align::kRight},
               {""}});
  for (const store::StepComparison& s : c.by_step) {
    steps.add_row({std::to_string(s.step + 1), ms(s.measured), s.predicted ? ms(*s.predicted) : "-",
                   percent(s.relative_error()), s.warmup ? "warm-up" : ""});
  }
  steps.print(out);
  out << "\nerror = (predicted - measured) / measured; steps numbered as planner exec prints "
         "them\n";
  if (!hint.empty()) out << "\nhint: " << hint << '\n';
  return Status::ok();
}

}  // namespace

void register_report_command(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Predicted vs measured for an executed run: per op kind and per step, with the error");
  auto args = std::make_shared<ReportArgs>();
  cmd->add_option("run", args->run, "Run id (planner db list), or \"latest\"")
      ->capture_default_str()
      ->type_name("RUN");
  cmd->add_option("--prediction", args->prediction,
                  "Compare with the prediction of this run (e.g. a planner simulate of the same "
                  "plan) instead of the one stored with RUN")
      ->type_name("RUN");
  cmd->add_flag("--include-warmup", args->include_warmup,
                "Count warm-up steps in the per-op-kind sums and the median step time");
  add_db_path_option(cmd, args->db);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args] { ctx.action = [&ctx, args] { return report_command(ctx, *args); }; });
}

}  // namespace planner::cli
