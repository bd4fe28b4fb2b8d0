#include "planner/fit/cross_validation.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <utility>

#include "planner/fit/run_predictor.hpp"

namespace planner::fit {
namespace {

// The fit's constants (see the header).
const double kHuberDelta = std::log(1.1);
const double kPriorSigma = std::log(1.25);
constexpr double kJacobianStep = 0.02;  // in log space
constexpr double kStopStep = 1e-3;      // in log space
constexpr int kMaxSteps = 8;
constexpr int kMaxHalvings = 4;

double huber(double r) {
  const double a = std::abs(r);
  return a <= kHuberDelta ? r * r : 2 * kHuberDelta * a - kHuberDelta * kHuberDelta;
}

std::string precision_class(Precision p) {
  return p == Precision::kBf16 || p == Precision::kFp16 ? "16-bit" : std::string(to_string(p));
}

// Solves A x = b (n × n, row-major) by Gaussian elimination with partial pivoting; A is
// symmetric positive definite here (a Gauss-Newton matrix plus the prior's diagonal).
std::vector<double> solve(std::vector<double> a, std::vector<double> b) {
  const std::size_t n = b.size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t pivot = c;
    for (std::size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r * n + c]) > std::abs(a[pivot * n + c])) pivot = r;
    }
    if (pivot != c) {
      for (std::size_t k = 0; k < n; ++k)
        std::swap(a[c * n + k], a[pivot * n + k]);
      std::swap(b[c], b[pivot]);
    }
    const double d = a[c * n + c];
    if (d == 0) continue;
    for (std::size_t r = c + 1; r < n; ++r) {
      const double f = a[r * n + c] / d;
      if (f == 0) continue;
      for (std::size_t k = c; k < n; ++k)
        a[r * n + k] -= f * a[c * n + k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n, 0.0);
  for (std::size_t c = n; c-- > 0;) {
    double s = b[c];
    for (std::size_t k = c + 1; k < n; ++k)
      s -= a[c * n + k] * x[k];
    x[c] = a[c * n + c] == 0 ? 0 : s / a[c * n + c];
  }
  return x;
}

// A family at one key.
struct Instance {
  std::size_t family = 0;
  std::string key;
};

class Fitter {
 public:
  Fitter(std::vector<ParameterFamily> families, std::vector<MappedRun>& mapped,
         std::vector<std::size_t> modelled, std::vector<ParallelConfig> chosen, int threads)
      : families_(std::move(families)),
        mapped_(mapped),
        modelled_(std::move(modelled)),
        chosen_(std::move(chosen)),
        threads_(threads) {
    uses_.resize(modelled_.size());
    std::map<std::pair<std::size_t, std::string>, std::size_t> index;
    for (std::size_t m = 0; m < modelled_.size(); ++m) {
      const RunSetup& s = setup(m);
      for (std::size_t f = 0; f < families_.size(); ++f) {
        const std::optional<std::string> key = families_[f].key(s);
        if (!key) continue;
        auto [it, fresh] = index.emplace(std::pair{f, *key}, instances_.size());
        if (fresh) instances_.push_back({f, *key});
        uses_[m].push_back(it->second);
      }
    }
    // Instances in family order, then key, for reports.
    order_.resize(instances_.size());
    for (std::size_t i = 0; i < order_.size(); ++i)
      order_[i] = i;
    std::sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
      return std::tie(instances_[a].family, instances_[a].key) <
             std::tie(instances_[b].family, instances_[b].key);
    });
  }

  std::size_t runs() const { return modelled_.size(); }
  const RunSetup& setup(std::size_t m) const { return mapped_[modelled_[m]].prepared->setup; }
  double published(std::size_t m) const { return setup(m).published.seconds; }
  int simulations() const { return simulations_; }

  // A record's setup with the parameter values z (log multipliers, one per instance) applied.
  PreparedRun with_values(std::size_t m, const std::vector<double>& z, bool all_candidates) const {
    PreparedRun p = *mapped_[modelled_[m]].prepared;
    auto profile = std::make_shared<HardwareProfile>(*p.setup.profile);
    p.setup.profile = profile;
    bool network = false;
    for (std::size_t i : uses_[m]) {
      if (z[i] == 0) continue;
      const ParameterFamily& f = families_[instances_[i].family];
      f.apply(std::exp(z[i]), p.setup);
      network = network || f.network;
    }
    if (network) rebuild_fabric(p);
    if (!all_candidates) p.candidates = {chosen_[m]};
    return p;
  }

  // ln(predicted step time) of the records `which` at z, with the configurations chosen at the
  // initial values; cached.
  std::vector<double> log_times(const std::vector<double>& z,
                                const std::vector<std::size_t>& which) {
    std::vector<double> out(which.size(), 0.0);
    std::vector<std::size_t> missing;
    std::vector<std::vector<double>> keys(which.size());
    for (std::size_t k = 0; k < which.size(); ++k) {
      for (std::size_t i : uses_[which[k]])
        keys[k].push_back(z[i]);
      const auto it = cache_.find({which[k], keys[k]});
      if (it != cache_.end()) {
        out[k] = it->second;
      } else {
        missing.push_back(k);
      }
    }
    std::vector<PreparedRun> prepared;
    prepared.reserve(missing.size());
    for (std::size_t k : missing)
      prepared.push_back(with_values(which[k], z, /*all_candidates=*/false));
    std::vector<const PreparedRun*> ptrs;
    for (const PreparedRun& p : prepared)
      ptrs.push_back(&p);
    const std::vector<RunPrediction> preds = predict_runs(ptrs, threads_);
    for (std::size_t j = 0; j < missing.size(); ++j) {
      const std::size_t k = missing[j];
      simulations_ += preds[j].candidates + (preds[j].forced_memory ? 1 : 0);
      // A simulation that fails at other parameter values keeps the record's last good time.
      const double t = preds[j].ok ? std::log(to_seconds(preds[j].result->step_time))
                                   : std::log(published(which[k]));
      out[k] = t;
      cache_.emplace(std::pair{which[k], keys[k]}, t);
    }
    return out;
  }

  // The Jacobian d ln t / d z at z = 0 (forward differences), per record and instance it uses.
  void compute_jacobian() {
    std::vector<std::size_t> all(runs());
    for (std::size_t m = 0; m < all.size(); ++m)
      all[m] = m;
    const std::vector<double> zero(instances_.size(), 0.0);
    base_ = log_times(zero, all);
    jacobian_.assign(runs(), {});
    // One batch per instance: every record using it, stepped.
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      std::vector<std::size_t> users;
      for (std::size_t m = 0; m < runs(); ++m) {
        if (std::find(uses_[m].begin(), uses_[m].end(), i) != uses_[m].end()) users.push_back(m);
      }
      std::vector<double> z = zero;
      z[i] = kJacobianStep;
      const std::vector<double> stepped = log_times(z, users);
      for (std::size_t k = 0; k < users.size(); ++k)
        jacobian_[users[k]].emplace_back(i, (stepped[k] - base_[users[k]]) / kJacobianStep);
    }
  }

  // Fits the parameters on the records `train` (indices into the modelled records).
  std::pair<FitResult, std::vector<double>> fit(const std::vector<std::size_t>& train) {
    const std::size_t n = instances_.size();
    std::vector<int> users(n, 0);
    for (std::size_t m : train) {
      for (std::size_t i : uses_[m])
        ++users[i];
    }
    std::vector<std::size_t> active;  // instances some training record uses
    std::vector<int> slot(n, -1);
    for (std::size_t i = 0; i < n; ++i) {
      if (users[i] > 0) {
        slot[i] = static_cast<int>(active.size());
        active.push_back(i);
      }
    }
    std::vector<double> lower(n), upper(n);
    for (std::size_t i = 0; i < n; ++i) {
      lower[i] = std::log(families_[instances_[i].family].lower);
      upper[i] = std::log(families_[instances_[i].family].upper);
    }
    std::vector<double> z(n, 0.0);
    std::vector<double> r(train.size());
    for (std::size_t k = 0; k < train.size(); ++k)
      r[k] = base_[train[k]] - std::log(published(train[k]));
    auto objective = [&](const std::vector<double>& zz, const std::vector<double>& rr) {
      double o = 0;
      for (double x : rr)
        o += huber(x);
      for (std::size_t i : active)
        o += (zz[i] / kPriorSigma) * (zz[i] / kPriorSigma);
      return o;
    };
    FitResult result;
    result.objective_initial = objective(z, r);
    double current = result.objective_initial;
    const std::size_t a = active.size();
    for (int step = 0; step < kMaxSteps && a > 0; ++step) {
      std::vector<double> h(a * a, 0.0), g(a, 0.0);
      for (std::size_t k = 0; k < train.size(); ++k) {
        const double w = std::abs(r[k]) <= kHuberDelta ? 1.0 : kHuberDelta / std::abs(r[k]);
        const auto& row = jacobian_[train[k]];
        for (const auto& [i, d] : row) {
          g[static_cast<std::size_t>(slot[i])] += w * d * r[k];
          for (const auto& [j, e] : row)
            h[static_cast<std::size_t>(slot[i]) * a + static_cast<std::size_t>(slot[j])] +=
                w * d * e;
        }
      }
      for (std::size_t s = 0; s < a; ++s) {
        h[s * a + s] += 1.0 / (kPriorSigma * kPriorSigma);
        g[s] += z[active[s]] / (kPriorSigma * kPriorSigma);
      }
      for (double& x : g)
        x = -x;
      std::vector<double> delta = solve(h, g);
      bool accepted = false;
      double moved = 0;
      for (int halving = 0; halving <= kMaxHalvings && !accepted; ++halving) {
        std::vector<double> next = z;
        moved = 0;
        for (std::size_t s = 0; s < a; ++s) {
          const std::size_t i = active[s];
          next[i] = std::clamp(z[i] + delta[s], lower[i], upper[i]);
          moved = std::max(moved, std::abs(next[i] - z[i]));
        }
        if (moved < kStopStep) break;
        const std::vector<double> times = log_times(next, train);
        std::vector<double> rn(train.size());
        for (std::size_t k = 0; k < train.size(); ++k)
          rn[k] = times[k] - std::log(published(train[k]));
        const double o = objective(next, rn);
        if (o < current) {
          z = std::move(next);
          r = std::move(rn);
          current = o;
          accepted = true;
        } else {
          for (double& d : delta)
            d *= 0.5;
        }
      }
      result.steps = step + 1;
      if (!accepted || moved < kStopStep) break;
    }
    result.objective = current;
    for (std::size_t i : order_) {
      const ParameterFamily& f = families_[instances_[i].family];
      result.parameters.push_back(
          {f.name, instances_[i].key, f.unit, 1.0, std::exp(z[i]), users[i]});
    }
    return {result, z};
  }

 private:
  std::vector<ParameterFamily> families_;
  std::vector<MappedRun>& mapped_;
  std::vector<std::size_t> modelled_;  // indices into mapped_
  std::vector<ParallelConfig> chosen_;
  int threads_;
  std::vector<Instance> instances_;
  std::vector<std::size_t> order_;
  std::vector<std::vector<std::size_t>> uses_;  // instances per modelled record
  std::map<std::pair<std::size_t, std::vector<double>>, double> cache_;
  std::vector<double> base_;
  std::vector<std::vector<std::pair<std::size_t, double>>> jacobian_;
  int simulations_ = 0;
};

void summarize(SourceErrors& e, const std::vector<const CrossValidatedRun*>& runs) {
  e.runs = static_cast<int>(runs.size());
  if (runs.empty()) return;
  for (const CrossValidatedRun* r : runs) {
    e.builtin_mape += std::abs(r->builtin_error_percent);
    e.builtin_bias += r->builtin_error_percent;
    e.insample_mape += std::abs(r->insample_error_percent);
    e.insample_bias += r->insample_error_percent;
    e.loso_mape += std::abs(r->loso_error_percent);
    e.loso_bias += r->loso_error_percent;
  }
  const double n = static_cast<double>(runs.size());
  for (double* v : {&e.builtin_mape, &e.builtin_bias, &e.insample_mape, &e.insample_bias,
                    &e.loso_mape, &e.loso_bias})
    *v /= n;
}

}  // namespace

std::vector<ParameterFamily> builtin_families() {
  std::vector<ParameterFamily> out;
  {
    ParameterFamily f;
    f.name = "gemm_rate";
    f.key_meaning = "GPU type / precision";
    f.unit = "x";
    f.description = "multiplier of the profile's sustained GEMM rate for the training precision";
    f.key = [](const RunSetup& s) -> std::optional<std::string> {
      return s.plan.gpu.name + "/" + precision_class(s.plan.training.precision);
    };
    f.apply = [](double v, RunSetup& s) {
      auto profile = std::make_shared<HardwareProfile>(*s.profile);
      const Precision p = s.plan.training.precision;
      std::vector<Precision> scaled{p};
      if (p == Precision::kBf16) scaled.push_back(Precision::kFp16);
      if (p == Precision::kFp16) scaled.push_back(Precision::kBf16);
      for (Precision q : scaled) {
        GemmRate& g = profile->compute.gemm[static_cast<std::size_t>(q)];
        g.rate = g.rate.scaled(v);
      }
      s.profile = std::move(profile);
    };
    f.lower = 0.5;
    f.upper = 1.5;
    out.push_back(std::move(f));
  }
  {
    ParameterFamily f;
    f.name = "scale_out_efficiency";
    f.key_meaning = "scale-out link kind";
    f.unit = "x";
    f.description =
        "multiplier of the achievable fraction of the NIC link's rate (at most an efficiency of 1)";
    f.key = [](const RunSetup& s) -> std::optional<std::string> {
      if (s.nodes <= 1 || s.topology.fabric.type == topo::FabricType::kNone) return std::nullopt;
      return std::string(to_string(s.topology.fabric.host_link.kind));
    };
    f.apply = [](double v, RunSetup& s) {
      auto profile = std::make_shared<HardwareProfile>(*s.profile);
      const std::string kind(to_string(s.topology.fabric.host_link.kind));
      auto it = std::find_if(profile->network.links.begin(), profile->network.links.end(),
                             [&](const LinkProfile& l) { return l.kind == kind; });
      if (it == profile->network.links.end()) {
        LinkProfile l = profile->network.default_link;
        l.kind = kind;
        profile->network.links.push_back(l);
        it = profile->network.links.end() - 1;
      }
      it->efficiency = std::min(1.0, it->efficiency * v);
      s.profile = std::move(profile);
    };
    f.lower = 0.5;
    f.upper = 1.5;
    f.network = true;
    out.push_back(std::move(f));
  }
  {
    ParameterFamily f;
    f.name = "kernel_overhead";
    f.key_meaning = "software stack";
    f.unit = "x";
    f.description =
        "multiplier of the fixed time per kernel (launch gap, ramp and tail) as the stack issues "
        "them";
    f.key = [](const RunSetup& s) -> std::optional<std::string> {
      return std::string(to_string(s.software.stack));
    };
    f.apply = [](double v, RunSetup& s) {
      auto profile = std::make_shared<HardwareProfile>(*s.profile);
      profile->compute.kernel_overhead = profile->compute.kernel_overhead.scaled(v);
      s.profile = std::move(profile);
    };
    f.lower = 0.25;
    f.upper = 25;
    out.push_back(std::move(f));
  }
  return out;
}

Result<CrossValidationReport> cross_validate(std::span<const PublishedRun> runs,
                                             const CrossValidationOptions& options,
                                             const Catalog& catalog,
                                             const topo::TopologyCatalog& topologies) {
  const int threads = resolve_threads(options.accuracy.threads);
  PLANNER_ASSIGN_OR_RETURN(std::vector<MappedRun> mapped,
                           map_runs(runs, options.accuracy, catalog, topologies));
  CrossValidationReport report;
  // The built-in parameters: `planner accuracy`.
  std::vector<std::size_t> with_setup;
  std::vector<const PreparedRun*> prepared;
  for (std::size_t i = 0; i < mapped.size(); ++i) {
    if (!mapped[i].prepared) continue;
    with_setup.push_back(i);
    prepared.push_back(&*mapped[i].prepared);
  }
  const std::vector<RunPrediction> builtin = predict_runs(prepared, threads);
  std::vector<std::size_t> modelled;  // indices into mapped
  std::vector<ParallelConfig> chosen;
  std::vector<std::size_t> report_index;  // of each modelled record in report.builtin.runs
  {
    std::size_t next = 0;
    for (std::size_t i = 0; i < mapped.size(); ++i) {
      RunAccuracy acc = mapped[i].accuracy;
      if (mapped[i].prepared) {
        const RunPrediction& pred = builtin[next++];
        report.simulations += pred.candidates + (pred.forced_memory ? 1 : 0);
        fill_accuracy(mapped[i].prepared->setup, pred, acc);
        if (pred.ok) {
          modelled.push_back(i);
          chosen.push_back(pred.parallel);
          report_index.push_back(report.builtin.runs.size());
        }
      }
      report.builtin.runs.push_back(std::move(acc));
    }
  }
  summarize_accuracy(report.builtin);
  report.builtin.simulations = report.simulations;

  Fitter fitter(options.families.empty() ? builtin_families() : options.families, mapped, modelled,
                chosen, threads);
  fitter.compute_jacobian();

  // Folds: every modelled record in-sample, then each source (or model) left out.
  std::vector<std::string> sources;
  std::vector<std::size_t> source_of(modelled.size());
  for (std::size_t m = 0; m < modelled.size(); ++m) {
    const RunAccuracy& run = report.builtin.runs[report_index[m]];
    const std::string& s = options.leave_out == LeaveOut::kModel ? run.plan.model.name : run.source;
    auto it = std::find(sources.begin(), sources.end(), s);
    if (it == sources.end()) it = sources.insert(sources.end(), s);
    source_of[m] = static_cast<std::size_t>(it - sources.begin());
  }
  std::vector<std::size_t> everything(modelled.size());
  for (std::size_t m = 0; m < everything.size(); ++m)
    everything[m] = m;
  auto [insample, z_all] = fitter.fit(everything);
  report.insample = std::move(insample);
  std::vector<std::vector<double>> z_fold;
  for (std::size_t s = 0; s < sources.size(); ++s) {
    std::vector<std::size_t> train;
    for (std::size_t m = 0; m < modelled.size(); ++m) {
      if (source_of[m] != s) train.push_back(m);
    }
    auto [fold, z] = fitter.fit(train);
    report.folds.push_back({sources[s], std::move(fold)});
    z_fold.push_back(std::move(z));
  }

  // Predictions at the fitted values, choosing among the candidates again: every record
  // in-sample, and each record with its own fold's values.
  std::vector<PreparedRun> final_runs;
  final_runs.reserve(2 * modelled.size());
  for (std::size_t m = 0; m < modelled.size(); ++m)
    final_runs.push_back(fitter.with_values(m, z_all, /*all_candidates=*/true));
  for (std::size_t m = 0; m < modelled.size(); ++m)
    final_runs.push_back(fitter.with_values(m, z_fold[source_of[m]], /*all_candidates=*/true));
  std::vector<const PreparedRun*> ptrs;
  for (const PreparedRun& p : final_runs)
    ptrs.push_back(&p);
  const std::vector<RunPrediction> fitted = predict_runs(ptrs, threads);
  for (const RunPrediction& p : fitted)
    report.simulations += p.candidates + (p.forced_memory ? 1 : 0);
  report.simulations += fitter.simulations();
  auto error = [&](std::size_t m, const RunPrediction& p) {
    const RunAccuracy& b = report.builtin.runs[report_index[m]];
    // A record whose simulation fails at fitted values keeps its built-in error.
    if (!p.ok) return b.error_percent;
    const double t = to_seconds(p.result->step_time);
    return 100.0 * (t - b.published) / b.published;
  };
  for (std::size_t m = 0; m < modelled.size(); ++m) {
    CrossValidatedRun r;
    r.run = report_index[m];
    r.builtin_error_percent = report.builtin.runs[r.run].error_percent;
    r.insample_error_percent = error(m, fitted[m]);
    r.loso_error_percent = error(m, fitted[modelled.size() + m]);
    report.runs.push_back(r);
  }
  std::vector<const CrossValidatedRun*> all;
  for (std::size_t s = 0; s < sources.size(); ++s) {
    std::vector<const CrossValidatedRun*> of;
    for (std::size_t m = 0; m < modelled.size(); ++m) {
      if (source_of[m] == s) of.push_back(&report.runs[m]);
    }
    SourceErrors e;
    e.source = sources[s];
    summarize(e, of);
    report.by_source.push_back(e);
  }
  for (const CrossValidatedRun& r : report.runs)
    all.push_back(&r);
  report.overall.source = "all";
  summarize(report.overall, all);
  return report;
}

}  // namespace planner::fit
