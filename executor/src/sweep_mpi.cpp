#include "planner/exec/sweep_mpi.hpp"

#include <string>

namespace planner::exec {
namespace {

// Each rank's message: {"ok": payload} or {"error": message}.
std::string wrap(const Result<Json>& r) {
  if (!r) return Json{{"error", r.status().message()}}.dump();
  return Json{{"ok", *r}}.dump();
}

Result<std::vector<Json>> unwrap_all(const std::vector<std::optional<std::string>>& parts) {
  std::vector<Json> out;
  for (std::size_t r = 0; r < parts.size(); ++r) {
    if (!parts[r]) return Status::timeout("sweep: rank " + std::to_string(r) + " did not report");
    Json j = Json::parse(*parts[r], nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return Status::runtime("sweep: rank " + std::to_string(r) + " sent a malformed part");
    }
    if (j.contains("error")) {
      return Status::runtime("sweep rank " + std::to_string(r) + ": " +
                             j["error"].get<std::string>());
    }
    out.push_back(j["ok"]);
  }
  return out;
}

}  // namespace

Result<std::optional<search::SweepResult>> run_sweep_distributed(World& world,
                                                                 const search::SweepSetup& setup,
                                                                 search::ProgressSink* sink,
                                                                 double timeout_s) {
  const int rank = world.rank();
  const int size = world.size();
  // 1-2: analytic shards, gathered and merged on rank 0.
  auto partial = search::run_analytic(setup, {rank, size}, sink);
  Result<Json> mine =
      partial ? Result<Json>(search::to_json(*partial)) : Result<Json>(partial.status());
  PLANNER_ASSIGN_OR_RETURN(auto gathered, world.gather(wrap(mine), Deadline::after(timeout_s)));
  search::AnalyticPartial merged;
  Result<Json> candidates = Status::runtime("unset");
  if (rank == 0) {
    auto parts = unwrap_all(gathered);
    if (!parts) {
      candidates = parts.status();
    } else {
      std::vector<search::AnalyticPartial> list;
      Status bad;
      for (const Json& j : *parts) {
        auto p = search::parse_partial(j);
        if (!p) {
          bad = p.status();
          break;
        }
        list.push_back(std::move(p).value());
      }
      if (!bad.is_ok()) {
        candidates = bad;
      } else {
        merged = search::merge_partials(setup, std::move(list));
        Json ids = Json::array();
        for (const search::Candidate& c : search::simulation_candidates(setup, merged))
          ids.push_back(std::to_string(c.id));
        candidates = ids;
      }
    }
  }
  // 3: the candidates to simulate, or rank 0's error.
  PLANNER_ASSIGN_OR_RETURN(
      std::string bcast,
      world.broadcast(rank == 0 ? wrap(candidates) : std::string(), Deadline::after(timeout_s)));
  std::vector<std::optional<std::string>> one{bcast};
  PLANNER_ASSIGN_OR_RETURN(std::vector<Json> cand_json, unwrap_all(one));
  std::vector<search::Candidate> all;
  for (const Json& id : cand_json.front()) {
    search::Candidate c;
    c.id = std::stoull(id.get<std::string>());
    all.push_back(c);
  }
  std::vector<search::Candidate> share;
  for (std::size_t i = static_cast<std::size_t>(rank); i < all.size();
       i += static_cast<std::size_t>(size)) {
    share.push_back(all[i]);
  }
  auto simulated = search::simulate_candidates(setup, share, sink);
  Result<Json> sims =
      simulated ? Result<Json>(search::to_json(*simulated)) : Result<Json>(simulated.status());
  // 4: gather and finish on rank 0.
  PLANNER_ASSIGN_OR_RETURN(auto sim_parts, world.gather(wrap(sims), Deadline::after(timeout_s)));
  if (rank != 0) {
    if (!simulated) return simulated.status();
    return std::optional<search::SweepResult>();
  }
  PLANNER_ASSIGN_OR_RETURN(std::vector<Json> per_rank, unwrap_all(sim_parts));
  std::vector<std::vector<search::RankedPlan>> by_rank;
  for (const Json& j : per_rank) {
    PLANNER_ASSIGN_OR_RETURN(auto plans, search::parse_simulated(setup, j));
    by_rank.push_back(std::move(plans));
  }
  // Back into candidate order: candidate i was simulated by rank i mod size.
  std::vector<search::RankedPlan> ordered;
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto& list = by_rank[i % static_cast<std::size_t>(size)];
    const std::size_t k = i / static_cast<std::size_t>(size);
    if (k >= list.size()) return Status::internal("sweep: a rank returned too few simulations");
    ordered.push_back(std::move(list[k]));
  }
  PLANNER_ASSIGN_OR_RETURN(search::SweepResult result,
                           search::finish(setup, merged, std::move(ordered)));
  return std::optional<search::SweepResult>(std::move(result));
}

}  // namespace planner::exec
