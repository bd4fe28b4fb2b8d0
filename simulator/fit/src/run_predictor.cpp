#include "planner/fit/run_predictor.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

namespace planner::fit {
namespace {

struct Trial {
  std::size_t run = 0;  // index into the runs
  const ParallelConfig* parallel = nullptr;
  bool check_memory = true;
  std::optional<sim::SimResult> result;
  Status status;
  double cost = 0;  // a rough size, to start the largest simulations first
};

void run_trial(const PreparedRun& p, Trial& t) {
  sim::SimInput in;
  in.plan = p.setup.plan;
  in.plan.parallel = *t.parallel;
  in.cluster = p.cluster;
  in.profile = p.setup.profile;
  in.fabric = p.fabric;
  in.options.ranks = RankSubset::kOnePerStage;
  in.options.run.keep_op_times = false;
  in.options.run.critical_path_top = 0;
  in.options.run.attention = p.setup.attention;
  in.options.run.host = p.setup.host;
  in.options.check_memory = t.check_memory;
  auto r = sim::simulate(in);
  if (r) {
    t.result = std::move(r).value();
  } else {
    t.status = r.status();
  }
}

}  // namespace

void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& fn) {
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1))
      fn(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads && static_cast<std::size_t>(t) < n; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool)
    t.join();
}

int resolve_threads(int threads) {
  return threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

Result<PreparedRun> prepare_run(RunSetup setup) {
  PreparedRun p;
  std::string problem;
  p.candidates = candidate_configs(setup, &problem);
  if (p.candidates.empty()) {
    return Status::invalid_input("no combination of the candidate values is a valid configuration" +
                                 (problem.empty() ? std::string() : " (" + problem + ")"));
  }
  PLANNER_ASSIGN_OR_RETURN(topo::Cluster cluster,
                           topo::Cluster::build(setup.topology, setup.nodes));
  p.cluster = std::make_shared<const topo::Cluster>(std::move(cluster));
  p.setup = std::move(setup);
  rebuild_fabric(p);
  return p;
}

void rebuild_fabric(PreparedRun& p) {
  p.fabric = std::make_shared<const sim::Fabric>(
      sim::Fabric::build(*p.cluster, *p.setup.profile, /*balanced=*/true));
}

std::vector<RunPrediction> predict_runs(std::span<const PreparedRun* const> runs, int threads) {
  std::vector<Trial> trials;
  std::vector<std::vector<std::size_t>> trials_of(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const PreparedRun& p = *runs[i];
    for (const ParallelConfig& c : p.candidates) {
      Trial t;
      t.run = i;
      t.parallel = &c;
      t.cost = static_cast<double>(c.pp) * p.setup.plan.model.num_layers *
               static_cast<double>(p.setup.plan.training.global_batch_size) /
               static_cast<double>(static_cast<std::int64_t>(c.dp) * c.micro_batch_size);
      trials_of[i].push_back(trials.size());
      trials.push_back(std::move(t));
    }
  }
  // Largest first, so the long simulations do not start last.
  std::vector<std::size_t> order(trials.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return trials[a].cost > trials[b].cost; });
  parallel_for(order.size(), threads, [&](std::size_t k) {
    Trial& t = trials[order[k]];
    run_trial(*runs[t.run], t);
  });

  // Runs none of whose candidates fit: simulate the one needing the least memory anyway.
  std::vector<Trial> forced;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Trial* smallest = nullptr;
    bool any_fits = false;
    for (std::size_t ti : trials_of[i]) {
      const Trial& t = trials[ti];
      if (!t.result) continue;
      if (t.result->simulated) any_fits = true;
      if (smallest == nullptr || t.result->memory.peak < smallest->result->memory.peak) {
        smallest = &t;
      }
    }
    if (any_fits || smallest == nullptr) continue;
    Trial f;
    f.run = i;
    f.parallel = smallest->parallel;
    f.check_memory = false;
    forced.push_back(std::move(f));
  }
  parallel_for(forced.size(), threads,
               [&](std::size_t k) { run_trial(*runs[forced[k].run], forced[k]); });

  std::vector<RunPrediction> out(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    RunPrediction& pred = out[i];
    const Trial* best = nullptr;
    for (std::size_t ti : trials_of[i]) {
      const Trial& t = trials[ti];
      ++pred.candidates;
      if (!t.result) {
        if (pred.failure.empty()) pred.failure = t.status.message();
        continue;
      }
      if (!t.result->simulated) {
        ++pred.out_of_memory;
        continue;
      }
      if (best == nullptr || t.result->step_time < best->result->step_time) best = &t;
    }
    for (const Trial& f : forced) {
      if (f.run == i && f.result && f.result->simulated) {
        best = &f;
        pred.forced_memory = true;
      }
    }
    if (best == nullptr) {
      if (pred.failure.empty()) pred.failure = "no candidate configuration could be simulated";
      continue;
    }
    pred.ok = true;
    pred.failure.clear();
    pred.parallel = *best->parallel;
    pred.result = best->result;
  }
  return out;
}

}  // namespace planner::fit
