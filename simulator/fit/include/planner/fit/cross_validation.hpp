// Fitting the simulator's physical parameters to measured runs, and leave-one-source-out
// cross-validation: the honest estimate of how planner does on runs it has not seen.
//
// Parameters. A ParameterFamily is one physical quantity with one value per key: a GPU type, a
// GPU type and precision, a link kind, a software stack, never a run. Its key() says which value
// a record uses (nullopt: the family does not affect the record) and apply() scales the quantity
// in the record's setup (its profile, its plan) by a multiplier before it is simulated. Every
// multiplier starts at 1 (what the built-in profiles and models already say) and is fitted in log
// space within [lower, upper]. The built-in families (builtin_families()):
//   gemm_rate[GPU/precision]     the profile's sustained GEMM rate for the training precision
//                                (bf16 and fp16 share one value: the same tensor cores), in
//                                [0.5, 1.5]
//   scale_out_efficiency[link]   the achievable fraction of the scale-out link's rate (the
//                                topology's NIC link kind: ib-hdr, ib-ndr, efa, ...; records on
//                                one node do not use it), in [0.5, 1.5] and never above an
//                                efficiency of 1
//   kernel_overhead[stack]       the fixed time per kernel (launch gap, ramp and tail) as the
//                                software stack issues them, in [0.25, 25]
// The engine's models add families by appending to the list handed to the fit.
//
// The fit minimises, over the log values z of the parameters the training records use,
//     Σ_records huber_δ(ln(predicted / published)) + Σ_parameters ((z − z₀) / σ)²
// with δ = ln 1.1 (residuals beyond 10 % count linearly, so one odd record cannot drag a
// parameter) and σ = ln 1.25 (a parameter moves from its physical value only as far as the data
// insist). The minimiser is a damped Gauss-Newton (chord) iteration with the Jacobian taken once by
// forward differences (a 2 % step) at the initial values, iteratively reweighted for the Huber
// loss, each step halved until the objective decreases, stopping when no value moves by more
// than 0.1 % or after 8 steps. During the fit a record with unpublished fields keeps the
// configuration chosen at the initial values; its reported prediction chooses again at the fitted
// values, as `planner accuracy` does.
//
// Cross-validation. The source of a record is source_key() (core/published_run.hpp): a paper,
// a benchmark table, a repository document. For every source S the parameters are fitted on the
// records of every other source and S's records are predicted with them (a parameter no training
// record uses keeps its initial value). Reported per source and overall: the MAPE and the bias
// (mean signed error) with the built-in parameters (what `planner accuracy` prints), fitted on all
// records (in-sample) and leave-one-source-out. A fit that improves the in-sample error and
// worsens the leave-one-source-out error is a regression. With LeaveOut::kModel the folds leave
// out a model instead (the model simulated: an MoE record's preset), the same report per model.
//
// Deterministic: simulations run on `threads` threads, results are gathered in a fixed order.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "planner/core/published_run.hpp"
#include "planner/fit/accuracy.hpp"

namespace planner::fit {

struct ParameterFamily {
  std::string name;         // "gemm_rate"
  std::string key_meaning;  // "GPU type / precision"
  std::string unit;         // "x": every value is a multiplier
  std::string description;  // one sentence: what it is physically
  // The key of a record (nullopt: the family does not affect it).
  std::function<std::optional<std::string>(const RunSetup&)> key;
  // Scales the quantity in the record's setup by `value` (replacing shared objects such as the
  // profile by modified copies, never modifying them).
  std::function<void(double value, RunSetup&)> apply;
  double lower = 0;
  double upper = 0;
  bool network = false;  // apply() changes link parameters: the fabric is rebuilt
};

// The families planner fits today (see the header).
std::vector<ParameterFamily> builtin_families();

// One parameter: a family at one key.
struct FittedParameter {
  std::string family;
  std::string key;
  std::string unit;
  double initial = 1;
  double value = 1;  // fitted (the initial value when no training record uses it)
  int runs = 0;      // training records that use it
};

struct FitResult {
  std::vector<FittedParameter> parameters;  // family order, then key
  int steps = 0;
  double objective_initial = 0;
  double objective = 0;
};

// Errors of one record under the three parameter sets.
struct CrossValidatedRun {
  std::size_t run = 0;  // index into CrossValidationReport::builtin.runs
  double builtin_error_percent = 0;
  double insample_error_percent = 0;
  double loso_error_percent = 0;
};

struct SourceErrors {
  std::string source;  // the source, or the model under LeaveOut::kModel
  int runs = 0;
  double builtin_mape = 0, builtin_bias = 0;
  double insample_mape = 0, insample_bias = 0;
  double loso_mape = 0, loso_bias = 0;
};

struct FoldFit {
  std::string held_out;  // the source left out
  FitResult fit;
};

struct CrossValidationReport {
  AccuracyReport builtin;               // `planner accuracy` with the built-in parameters
  FitResult insample;                   // fitted on every modelled record
  std::vector<FoldFit> folds;           // one per source, by first appearance
  std::vector<CrossValidatedRun> runs;  // the modelled records, file order
  std::vector<SourceErrors> by_source;  // by first appearance (by model under LeaveOut::kModel)
  SourceErrors overall;                 // source "all"
  int simulations = 0;
};

// What a fold leaves out: a source (source_key()), or a model (the simulated model's name: the
// preset of an MoE record, the record's model name otherwise), to ask how planner predicts a model
// it was not fitted on.
enum class LeaveOut { kSource, kModel };

struct CrossValidationOptions {
  AccuracyOptions accuracy;
  std::vector<ParameterFamily> families;  // empty: builtin_families()
  LeaveOut leave_out = LeaveOut::kSource;
};

// Fails like evaluate_accuracy(); a record that cannot be modelled is skipped in every fold.
Result<CrossValidationReport> cross_validate(
    std::span<const PublishedRun> runs, const CrossValidationOptions& options,
    const Catalog& catalog = builtin_catalog(),
    const topo::TopologyCatalog& topologies = topo::builtin_topologies());

}  // namespace planner::fit

namespace planner {

template <>
struct EnumTraits<fit::LeaveOut> {
  static constexpr std::string_view kWhat = "cross-validation fold";
  static constexpr std::array<std::pair<fit::LeaveOut, std::string_view>, 2> kNames{{
      {fit::LeaveOut::kSource, "source"},
      {fit::LeaveOut::kModel, "model"},
  }};
};

}  // namespace planner
