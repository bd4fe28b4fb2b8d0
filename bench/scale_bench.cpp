// Frontier scale (issue 21): one simulated step and a whole sweep at 1,024 / 16,384 / 131,072 GPUs,
// and the analytic tier at 1,048,576, with wall time and peak RSS per case.
// Run: build/bin/bench_scale            every case, a table (bench/README.md has the last one)
//      build/bin/bench_scale CASE...    only those (names as in the table's first column)
//
// Each case runs in a child process of its own (fork), so its peak RSS is its own (the parent
// reads it from wait4's rusage) and its wall time includes everything a command-line run does
// after parsing: building the cluster, the fabric, the profile, then the step or the sweep.
//
//   step-<topology>-<gpus>  Llama 3 405B with 128 layers (16 stages do not divide its 126; Meta
//                           gave the first and last stages fewer layers; bench_simulator does the
//                           same), tp 8, pp 16, dp = gpus / 128, sequence parallel, full
//                           recompute, ZeRO 1, 1F1B, sequences of 8,192 tokens, 16 micro-batches
//                           (global batch 16 x dp), one rank per stage simulated with the other
//                           ranks' traffic as background: `planner simulate` of that plan.
//                           step-h100-rail-100k-98304 and step-gb200-nvl72-100k-101376 run it
//                           on the whole of the 100,000-GPU-class presets.
//   sweep-<gpus>            `planner sweep --model llama3-405b --gpu h100 --gpus N`: the default
//                           search space on the default topology (aws-p5), sequences of 8,192,
//                           global batch 512, every core, the best 32 simulated.
//   sweep-530b-5128         the issue-6 reference: Megatron 530B on up to 5,128 A100-80GB
//                           (bench_sweep's BM_WholeSweep case, every core).
//   analytic-<gpus>         the sweep's analytic tier alone (`--top-k 0`).
// Targets (issue 21): step at 131,072 GPUs < 10 s and < 2 GiB; sweep up to 131,072 GPUs < 60 s
// and < 4 GiB; the analytic tier at 1,048,576 GPUs < 60 s; 16,384-GPU steps no slower than before
// (about 0.5 s); the 530B sweep < 5 s.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "planner/core/catalog.hpp"
#include "planner/search/sweep.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topo/topology_catalog.hpp"

namespace {

using planner::Result;

// What a case reports besides time and memory (one line, printed in the table's last column).
using CaseFn = std::function<Result<std::string>()>;

struct Case {
  std::string name;
  CaseFn run;
};

std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

Result<std::string> step(const std::string& topology, int gpus) {
  const planner::Catalog& catalog = planner::builtin_catalog();
  planner::sim::SimInput in;
  PLANNER_ASSIGN_OR_RETURN(in.plan.model, catalog.model("llama3-405b"));
  in.plan.model.num_layers = 128;
  PLANNER_ASSIGN_OR_RETURN(planner::topo::TopologySpec spec,
                           planner::topo::builtin_topologies().get(topology));
  const int gpn = spec.node.count(planner::topo::DeviceKind::kGpu);
  PLANNER_ASSIGN_OR_RETURN(planner::topo::Cluster cluster,
                           planner::topo::Cluster::build(spec, gpus / gpn));
  in.cluster = std::make_shared<const planner::topo::Cluster>(std::move(cluster));
  PLANNER_ASSIGN_OR_RETURN(in.plan.gpu, catalog.gpu(spec.gpu));
  const planner::HardwareProfile* profile = planner::builtin_profile_for(in.plan.gpu);
  if (profile == nullptr) return planner::Status::internal("no profile for " + in.plan.gpu.name);
  in.profile = std::make_shared<const planner::HardwareProfile>(*profile);
  planner::ParallelConfig& p = in.plan.parallel;
  p.tp = 8;
  p.pp = 16;
  p.dp = gpus / 128;
  p.sequence_parallel = true;
  p.recompute = planner::Recompute::kFull;
  p.zero_stage = 1;
  p.schedule = planner::Schedule::k1F1B;
  in.plan.training.global_batch_size = 16 * p.dp;
  in.plan.training.seq_length = 8192;
  in.options.run.keep_op_times = false;
  PLANNER_ASSIGN_OR_RETURN(planner::sim::SimResult r, planner::sim::simulate(in));
  if (!r.simulated) return planner::Status::internal("the plan does not fit");
  return fmt("step %.4f s, MFU %.1f%%", planner::to_seconds(r.step_time), 100 * r.mfu);
}

Result<std::string> sweep(const char* model, const char* gpu, int gpus, std::int64_t gbs,
                          std::int64_t seq, int top_k, double usd_per_gpu_hour = 0) {
  const planner::Catalog& catalog = planner::builtin_catalog();
  planner::search::SweepScenario sc;
  PLANNER_ASSIGN_OR_RETURN(sc.model, catalog.model(model));
  PLANNER_ASSIGN_OR_RETURN(sc.gpu, catalog.gpu(gpu));
  PLANNER_ASSIGN_OR_RETURN(sc.topology, planner::topo::topology_for_gpu(sc.gpu));
  sc.training.global_batch_size = gbs;
  sc.training.seq_length = seq;
  sc.max_gpus = gpus;
  planner::search::SweepRequest req;
  req.scenarios.push_back(sc);
  // Every core, as `planner sweep` by default.
  req.options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  req.options.top_k = top_k;
  req.options.sim.run.keep_op_times = false;
  if (usd_per_gpu_hour > 0) {
    req.pricing.overrides.push_back({sc.gpu.name, planner::Usd(usd_per_gpu_hour)});
  }
  PLANNER_ASSIGN_OR_RETURN(planner::search::SweepOutcome run, planner::search::run_sweep(req));
  const planner::search::SweepResult& r = run.result;
  if (r.ranking.empty()) return planner::Status::internal("no plan ranked");
  return fmt("%.0f plans estimated, %.0f simulated", static_cast<double>(r.counts.evaluated),
             static_cast<double>(r.counts.simulated)) +
         ", best " + planner::short_label(r.ranking.front().parallel);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int gpus : {1024, 16384, 131072}) {
    for (const char* topology : {"aws-p5", "dgx-h100-superpod"}) {
      // The SuperPOD preset's 64-port cores join at most 64 pods: 65,536 GPUs.
      if (gpus > 65536 && std::string(topology) == "dgx-h100-superpod") continue;
      out.push_back({"step-" + std::string(topology) + "-" + std::to_string(gpus),
                     [=] { return step(topology, gpus); }});
    }
  }
  // The 100,000-GPU-class presets, whole.
  out.push_back({"step-h100-rail-100k-98304", [] { return step("h100-rail-100k", 98304); }});
  out.push_back({"step-gb200-nvl72-100k-101376", [] { return step("gb200-nvl72-100k", 101376); }});
  // `planner sweep` defaults for Llama 3 405B: its pre-training length, 4 Mi tokens per batch.
  for (int gpus : {1024, 16384, 32768, 131072}) {
    out.push_back({"sweep-" + std::to_string(gpus),
                   [=] { return sweep("llama3-405b", "h100", gpus, 512, 8192, 32); }});
  }
  for (int gpus : {131072, 1048576}) {
    out.push_back({"analytic-" + std::to_string(gpus),
                   [=] { return sweep("llama3-405b", "h100", gpus, 512, 8192, 0); }});
  }
  // The GPU catalogue has no on-demand A100-80GB price; any rate times the same (bench_sweep).
  out.push_back({"sweep-530b-5128",
                 [] { return sweep("megatron-530b", "a100-80gb", 5128, 2520, 2048, 32, 1.79); }});
  return out;
}

// Runs `c` in a child; prints its row.
void run_case(const Case& c) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("pipe");
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Result<std::string> r = c.run();
    const std::string line = r ? *r : "FAILED: " + r.status().message();
    const ssize_t written = write(fds[1], line.data(), line.size());
    _exit(r && written >= 0 ? 0 : 1);
  }
  close(fds[1]);
  std::string line;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    line.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  if (!WIFEXITED(status)) line = "killed (signal " + std::to_string(WTERMSIG(status)) + ")";
  std::printf("| %-28s | %8.2f | %8.2f | %9.0f | %s |\n", c.name.c_str(), wall, cpu,
              static_cast<double>(usage.ru_maxrss) / 1024.0, line.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<Case> all = cases();
  std::vector<const Case*> chosen;
  for (int i = 1; i < argc; ++i) {
    bool found = false;
    for (const Case& c : all) {
      if (c.name == argv[i]) {
        chosen.push_back(&c);
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "bench_scale: no case \"%s\"; cases:", argv[i]);
      for (const Case& c : all)
        std::fprintf(stderr, " %s", c.name.c_str());
      std::fprintf(stderr, "\n");
      return 2;
    }
  }
  if (chosen.empty()) {
    for (const Case& c : all)
      chosen.push_back(&c);
  }
  std::printf("| %-28s | %8s | %8s | %9s | %s |\n", "case", "wall s", "CPU s", "peak MiB",
              "result");
  std::printf("| %-28s | %8s | %8s | %9s | %s |\n", "---", "---:", "---:", "---:", "---");
  std::fflush(stdout);
  for (const Case* c : chosen)
    run_case(*c);
  return 0;
}
