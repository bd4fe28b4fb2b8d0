#include "planner/app/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "planner/app/defaults.hpp"
#include "planner/core/host_model.hpp"
#include "planner/core/spec_json.hpp"

namespace planner::app {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<SweepRun> run_sweep(search::SweepRequest request, search::ProgressSink* sink,
                           const SweepRunOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  request.options.threads =
      options.threads > 0 ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Catalogue prices are aged against today (the search reads no clock).
  const CalendarDate day = today();
  if (!request.pricing.today) request.pricing.today = day;
  for (search::SweepScenario& s : request.scenarios) {
    if (s.pricing && !s.pricing->today) s.pricing->today = day;
  }
  SweepRun run;
  if (options.distributed) {
    PLANNER_ASSIGN_OR_RETURN(run.setup, search::SweepSetup::prepare(request));
    PLANNER_ASSIGN_OR_RETURN(run.result, options.distributed(*run.setup, sink));
  } else {
    PLANNER_ASSIGN_OR_RETURN(search::SweepOutcome outcome,
                             search::run_sweep(request, sink, options.stop));
    run.setup = std::move(outcome.setup);
    run.result = std::move(outcome.result);
  }
  run.seconds = seconds_since(t0);
  return run;
}

Json sweep_inputs(const search::SweepRequest& req, Json origin) {
  Json scenarios = Json::array();
  for (const search::SweepScenario& s : req.scenarios) {
    scenarios.push_back({{"model", s.model.name},
                         {"gpu", s.gpu.name},
                         {"topology", s.topology.name},
                         {"max_gpus", s.max_gpus},
                         {"min_gpus", s.min_gpus},
                         {"training", to_json(s.training)}});
    if (s.priced_at_instance) {
      scenarios.back()["provider"] = s.topology.provider;
      scenarios.back()["instance"] = s.topology.instance;
    }
    // A scenario with its own pricing (--all-offerings, a document's cluster) records its offering.
    if (s.pricing) scenarios.back()["offering"] = std::string(to_string(s.pricing->offering));
    scenarios.back()["stack"] = std::string(to_string(s.stack.value_or(req.options.stack)));
  }
  Json j = origin.is_object() ? std::move(origin) : Json::object();
  j["scenarios"] = scenarios;
  j["top_k"] = req.options.top_k;
  j["keep"] = req.options.keep;
  j["threads"] = req.options.threads;
  j["offering"] = std::string(to_string(req.pricing.offering));
  if (!req.pricing.provider.empty()) j["provider"] = req.pricing.provider;
  if (req.options.attention) j["attention"] = std::string(to_string(*req.options.attention));
  if (req.options.host) j["host_costs"] = describe(*req.options.host);
  j["budget_usd"] = req.constraints.budget_usd ? Json(*req.constraints.budget_usd) : Json();
  j["deadline_s"] = req.constraints.deadline_s ? Json(*req.constraints.deadline_s) : Json();
  return j;
}

}  // namespace planner::app
