// planner sweep: the main job. Searches every valid plan for a model on a cluster (or a batch of
// scenarios from a sweep document), ranks them by effective tokens per dollar with the analytic
// tier, re-runs the best through the simulator, prints the ranking with why each plan wins or
// loses, and records the sweep in the database.
//
// Exit codes: 0 ok, 1 runtime failure, 2 bad input, 3 (--check) the checked plan is more than
// --max-regret worse than the best plan found.
//
// Under an MPI launcher (`mpirun -np N planner sweep ...`) the search splits over the ranks
// (executor/sweep_mpi.hpp) and rank 0 prints and records the result.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "app.hpp"
#include "cluster_args.hpp"
#include "db_options.hpp"
#include "flag_checks.hpp"
#include "output.hpp"
#include "plan_args.hpp"
#include "planner/app/defaults.hpp"
#include "planner/app/explain.hpp"
#include "planner/app/profiles.hpp"
#include "planner/app/record.hpp"
#include "planner/app/sweep.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/prices.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/search/sweep.hpp"
#include "planner/search/sweep_spec.hpp"
#include "planner/topo/topology_catalog.hpp"
#include "sim_json.hpp"
#ifdef PLANNER_HAVE_EXECUTOR
#include "planner/exec/mpi_world.hpp"
#include "planner/exec/sweep_mpi.hpp"
#endif

namespace planner::cli {
namespace {

constexpr int kExitRegret = 3;
constexpr double kSecondsPerDay = 86400;
// The progress line is redrawn at most this often.
constexpr double kProgressRedrawS = 0.1;

struct SweepArgs {
  std::string spec;
  std::string profile;
  std::vector<std::string> models;
  std::vector<std::string> gpus;
  std::string topology;
  std::vector<std::string> instances;
  bool all_offerings = false;
  std::string provider;
  ClusterNumberArgs numbers;
  std::vector<int> cluster_gpus;
  int min_gpus = 0;
  std::int64_t seq = 0;
  std::int64_t gbs = 0;
  std::string precision = "bf16";
  std::string fp8_recipe;
  std::string optimizer = "adam";
  double tokens = 0;
  std::vector<int> tp, pp, dp, cp, ep, vpp, zero, etp;
  std::vector<std::string> capacity;   // --moe-capacity-factor: numbers or "dropless"
  double imbalance = 1;                // --moe-imbalance
  bool distributed_optimizer = false;  // --use-distributed-optimizer: zero = {1}
  bool sequence_parallel = false;      // --sequence-parallel: sp = on
  std::vector<std::int64_t> mbs;
  std::vector<std::string> schedules, recompute, orders, moe_a2a;
  std::vector<std::string> recompute_modules;  // module sets, names joined by '+'
  std::string sp = "both";
  std::string overlap = "both";
  std::string a2a_overlap = "both";
  bool tp_beyond_nvlink = false;
  bool uneven_stages = false;     // --uneven-stages
  bool no_uneven_stages = false;  // --no-uneven-stages
  double budget = 0;
  double deadline_days = 0;
  std::vector<std::string> prices;
  std::vector<std::string> price_files;
  std::string offering;
  double usd_per_kwh = 0;
  double pue = search::kDefaultPue;
  double failure_rate = -1;
  double spot_rate = -1;
  double checkpoint_gbps = 0;
  double restart_min = -1;
  int threads = 0;
  int top_k = -1;
  int keep = -1;
  int top = 10;
  bool csv = false;
  std::string emit_plan;
  std::string check;
  StackArgs stack;
  std::vector<std::string> stacks;  // --stack: one, or several to compare
  std::string max_regret;
  bool no_progress = false;
  DbOptions db;
};

// ---- the request from flags or a sweep document

Result<std::vector<bool>> on_off(const std::string& flag, const std::string& v) {
  if (v == "both") return std::vector<bool>{};
  if (v == "on") return std::vector<bool>{true};
  if (v == "off") return std::vector<bool>{false};
  return Status::invalid_input(flag + ": expected on, off or both, got \"" + v + "\"");
}

template <class E>
Result<std::vector<E>> enum_list(const std::string& flag, const std::vector<std::string>& in) {
  std::vector<E> out;
  for (const std::string& s : in) {
    PLANNER_ASSIGN_OR_RETURN(E v, parse_flag<E>(flag, s));
    out.push_back(v);
  }
  return out;
}

// A GPU on a topology: one per --gpu, one per cloud instance of --instances, or one per cloud
// instance and offering of --all-offerings.
struct Hardware {
  GpuSpec gpu;
  topo::TopologySpec topology;
  bool instance = false;             // priced at the topology's cloud instance
  std::optional<Offering> offering;  // --all-offerings: priced at this offering
};

// --instances: each a cloud instance ("p5.48xlarge") or a topology preset that names one
// ("aws-p5"), with its GPU.
Result<std::vector<Hardware>> instance_hardware(const CliContext& ctx, const SweepArgs& a) {
  std::vector<Hardware> out;
  for (const std::string& name : a.instances) {
    auto topology = search::resolve_cloud_instance(name);
    if (!topology) return topology.status().with_context("--instances");
    PLANNER_ASSIGN_OR_RETURN(GpuSpec gpu, ctx.catalog->gpu(topology->gpu));
    out.push_back({std::move(gpu), std::move(topology).value(), true, std::nullopt});
  }
  return out;
}

// --all-offerings: every cloud instance of the topology presets with one of the --gpu GPUs (of
// --provider, when given), once per offering it has a price for (only --offering, when given), in
// the price files or the catalogue.
Result<std::vector<Hardware>> offering_hardware(const CliContext& ctx, const SweepArgs& a,
                                                const std::vector<PriceEntry>& price_files) {
  std::vector<std::string> gpus = a.gpus;
  if (gpus.empty()) gpus.emplace_back(app::default_scenario().gpu);
  std::optional<Offering> only;
  if (!a.offering.empty()) {
    PLANNER_ASSIGN_OR_RETURN(only, parse_flag<Offering>("--offering", a.offering));
  }
  std::vector<Hardware> out;
  for (const std::string& g : gpus) {
    PLANNER_ASSIGN_OR_RETURN(GpuSpec gpu, ctx.catalog->gpu(g));
    std::size_t found = 0;
    std::string instances;
    for (const topo::TopologySpec& t : topo::builtin_topologies().all()) {
      if (t.instance.empty() || !gpu.matches(t.gpu)) continue;
      if (!a.provider.empty() && !same_provider(t.provider, a.provider)) continue;
      instances += (instances.empty() ? "" : ", ") + t.instance;
      for (const auto& [offering, name] : EnumTraits<Offering>::kNames) {
        if (only && offering != *only) continue;
        search::PricingOptions p;
        p.offering = offering;
        p.provider = t.provider;
        p.instance = t.instance;
        p.price_files = price_files;
        if (!search::resolve_price(gpu, p)) continue;
        out.push_back({gpu, t, true, offering});
        ++found;
      }
    }
    if (found == 0) {
      const std::string from = a.provider.empty() ? "" : " from " + a.provider;
      return Status::invalid_input(
          "--all-offerings: " +
          (instances.empty()
               ? "no cloud instance" + from + " has " + gpu.name +
                     " GPUs; known instances: " + search::cloud_instance_names()
               : "no " + (only ? std::string(to_string(*only)) + " " : std::string()) +
                     "price for the instances with " + gpu.name + " GPUs" + from + " (" +
                     instances + "); planner price list --gpu " + gpu.name));
    }
  }
  return out;
}

Result<std::vector<Hardware>> gpu_hardware(const CliContext& ctx, const SweepArgs& a) {
  std::vector<std::string> gpus = a.gpus;
  if (gpus.empty()) gpus.emplace_back(app::default_scenario().gpu);
  std::vector<Hardware> out;
  for (const std::string& g : gpus) {
    PLANNER_ASSIGN_OR_RETURN(GpuSpec gpu, ctx.catalog->gpu(g));
    topo::TopologySpec topology;
    if (has_cluster_numbers(a.numbers)) {
      // Built per cluster size from the numbers (request_from_flags).
    } else if (!a.topology.empty()) {
      PLANNER_ASSIGN_OR_RETURN(topology, topo::resolve_topology(a.topology));
      if (!gpu.matches(topology.gpu)) {
        return Status::invalid_input("--topology " + topology.name + " has " + topology.gpu +
                                     " GPUs, not " + gpu.name);
      }
    } else {
      PLANNER_ASSIGN_OR_RETURN(topology, topo::topology_for_gpu(gpu));
    }
    out.push_back({std::move(gpu), std::move(topology), false, std::nullopt});
  }
  return out;
}

Result<search::SweepRequest> request_from_flags(const CliContext& ctx, const SweepArgs& a,
                                                const std::vector<PriceEntry>& price_files) {
  search::SweepRequest req;
  const app::DefaultScenario& d = app::default_scenario();
  std::vector<std::string> models = a.models;
  if (models.empty()) models.emplace_back(d.model);
  std::vector<int> sizes = a.cluster_gpus;
  if (sizes.empty()) sizes.push_back(d.gpus);
  if ((!a.instances.empty() || a.all_offerings) && has_cluster_numbers(a.numbers)) {
    return Status::invalid_input(std::string(a.all_offerings ? "--all-offerings" : "--instances") +
                                 ": a cloud instance brings its own network; leave out the "
                                 "cluster numbers");
  }
  PLANNER_ASSIGN_OR_RETURN(const std::vector<Hardware> hardware,
                           a.all_offerings        ? offering_hardware(ctx, a, price_files)
                           : !a.instances.empty() ? instance_hardware(ctx, a)
                                                  : gpu_hardware(ctx, a));
  for (const std::string& name : models) {
    PLANNER_ASSIGN_OR_RETURN(ModelSpec model, resolve_model(*ctx.catalog, name));
    TrainingSpec t;
    PLANNER_ASSIGN_OR_RETURN(t.precision, parse_flag<Precision>("--precision", a.precision));
    PLANNER_ASSIGN_OR_RETURN(t.fp8_recipe, parse_fp8_recipe(a.fp8_recipe, t.precision));
    PLANNER_ASSIGN_OR_RETURN(t.optimizer, parse_flag<Optimizer>("--optimizer", a.optimizer));
    t.seq_length = a.seq > 0 ? a.seq : app::default_seq_length(model);
    t.global_batch_size = a.gbs > 0 ? a.gbs : app::default_global_batch(t.seq_length);
    t.token_budget = a.tokens;
    for (const Hardware& h : hardware) {
      if (const std::string p = search::precision_problem(h.gpu, t.precision); !p.empty()) {
        return Status::invalid_input("--precision " + a.precision + ": " + p);
      }
      if (const std::string p = fp8_recipe_problem(h.gpu, t); !p.empty()) {
        return Status::invalid_input("--fp8-recipe " + a.fp8_recipe + ": " + p);
      }
      std::optional<topo::ClusterNumbers> numbers;
      if (has_cluster_numbers(a.numbers)) {
        PLANNER_ASSIGN_OR_RETURN(numbers, cluster_numbers(a.numbers, h.gpu));
      }
      for (int n : sizes) {
        if (n < 1) return Status::invalid_input("--gpus: must be >= 1, got " + std::to_string(n));
        if (a.min_gpus > n) {
          return Status::invalid_input("--min-gpus (" + std::to_string(a.min_gpus) +
                                       ") exceeds --gpus (" + std::to_string(n) + ")");
        }
        search::SweepScenario sc;
        sc.model = model;
        sc.training = t;
        sc.gpu = h.gpu;
        sc.topology = h.topology;
        if (numbers) {
          const int nodes = (n + numbers->gpus_per_node - 1) / numbers->gpus_per_node;
          PLANNER_ASSIGN_OR_RETURN(sc.topology,
                                   topo::topology_from_numbers(*numbers, h.gpu, nodes));
        }
        if (const std::string p = search::node_count_problem(sc.topology, n); !p.empty()) {
          return Status::invalid_input("--gpus " + std::to_string(n) + ": " + p);
        }
        sc.max_gpus = n;
        sc.min_gpus = a.min_gpus;
        if (h.instance) {
          sc.priced_at_instance = true;
          sc.name = model.name + " on " + std::to_string(n) + " x " + h.gpu.name + ", " +
                    h.topology.provider + " " + h.topology.instance;
        }
        if (h.offering) {
          search::PricingOptions p;
          p.offering = *h.offering;
          sc.pricing = p;
          sc.name += " " + std::string(to_string(*h.offering));
        }
        req.scenarios.push_back(std::move(sc));
      }
    }
  }
  search::SearchSpace& s = req.space;
  s.tp = a.tp;
  s.pp = a.pp;
  s.dp = a.dp;
  s.cp = a.cp;
  s.ep = a.ep;
  s.virtual_stages = a.vpp;
  s.zero_stages = a.distributed_optimizer ? std::vector<int>{1} : a.zero;
  s.micro_batch_sizes = a.mbs;
  if (std::find(a.schedules.begin(), a.schedules.end(), "dualpipe") != a.schedules.end()) {
    return Status::invalid_input(
        "--schedule: the sweep searches DeepSeek's DualPipe in its cut-in-half form, dualpipev "
        "(DualPipe on 2p ranks is dualpipev on p stages with twice the data-parallel replicas): "
        "give dualpipev");
  }
  PLANNER_ASSIGN_OR_RETURN(s.schedules, enum_list<Schedule>("--schedule", a.schedules));
  PLANNER_ASSIGN_OR_RETURN(s.recompute, enum_list<Recompute>("--recompute", a.recompute));
  for (const std::string& set : a.recompute_modules) {
    auto modules = parse_recompute_modules(set);
    if (!modules)
      return Status::invalid_input("--recompute-modules: " + modules.status().message());
    s.recompute_modules.push_back(*modules);
  }
  PLANNER_ASSIGN_OR_RETURN(s.moe_a2a, enum_list<MoeA2a>("--moe-a2a", a.moe_a2a));
  s.etp = a.etp;
  s.moe_imbalance = a.imbalance;
  for (const std::string& c : a.capacity) {
    const std::optional<double> v = parse_capacity_factor(c);
    if (!v) {
      return Status::invalid_input(
          "--moe-capacity-factor: expected dropless or a capacity factor above 0 and at most 64 "
          "(tokens per expert over the mean), got \"" +
          c + "\"");
    }
    s.moe_capacity.push_back(*v);
  }
  s.orders = a.orders;
  PLANNER_ASSIGN_OR_RETURN(s.sequence_parallel,
                           on_off("--sp", a.sequence_parallel ? std::string("on") : a.sp));
  PLANNER_ASSIGN_OR_RETURN(s.overlap, on_off("--overlap", a.overlap));
  PLANNER_ASSIGN_OR_RETURN(s.moe_a2a_overlap, on_off("--moe-a2a-overlap", a.a2a_overlap));
  s.tp_within_nvlink = !a.tp_beyond_nvlink;
  if (a.uneven_stages) s.uneven_stages = true;
  if (a.no_uneven_stages) s.uneven_stages = false;
  return req;
}

// --stack (one, or several: every scenario is swept under each), --host-costs, --attention.
Status apply_stacks(const SweepArgs& a, search::SweepRequest& req) {
  std::vector<SoftwareStack> stacks;
  for (const std::string& name : a.stacks) {
    PLANNER_ASSIGN_OR_RETURN(const SoftwareStack s, parse_flag<SoftwareStack>("--stack", name));
    if (std::find(stacks.begin(), stacks.end(), s) != stacks.end()) {
      return Status::invalid_input("--stack: " + name + " is given twice");
    }
    stacks.push_back(s);
  }
  if (stacks.size() > 1 && !a.stack.host_costs.empty()) {
    return Status::invalid_input(
        "--host-costs: overrides one stack's host costs; not with several --stack (" +
        std::to_string(stacks.size()) + " given)");
  }
  if (stacks.size() > 1 && !a.check.empty()) {
    return Status::invalid_input(
        "--check: a plan is checked under one software stack; give one "
        "--stack (" +
        std::to_string(stacks.size()) + " given)");
  }
  StackArgs one = a.stack;
  if (!stacks.empty()) one.stack = std::string(to_string(stacks.front()));
  PLANNER_ASSIGN_OR_RETURN(const ResolvedStack resolved, resolve_stack(one));
  req.options.stack = resolved.stack;
  if (!a.stack.host_costs.empty()) req.options.host = resolved.host;
  if (!a.stack.attention.empty()) req.options.attention = resolved.attention;
  if (stacks.size() > 1) {
    std::vector<search::SweepScenario> each;
    for (const search::SweepScenario& sc : req.scenarios) {
      for (SoftwareStack s : stacks) {
        each.push_back(sc);
        each.back().stack = s;
      }
    }
    req.scenarios = std::move(each);
  }
  return Status::ok();
}

// Flags that apply on top of a sweep document too (given flags win).
Status apply_common_flags(const CliContext& ctx, const SweepArgs& a,
                          const std::vector<PriceEntry>& price_files, search::SweepRequest& req) {
  if (a.budget > 0) req.constraints.budget_usd = a.budget;
  if (a.deadline_days > 0) req.constraints.deadline_s = a.deadline_days * kSecondsPerDay;
  std::optional<Offering> offering;
  if (!a.offering.empty()) {
    PLANNER_ASSIGN_OR_RETURN(offering, parse_flag<Offering>("--offering", a.offering));
  }
  std::vector<search::PriceOverride> prices;
  for (const std::string& p : a.prices) {
    const auto eq = p.find('=');
    double usd = 0;
    bool ok = eq != std::string::npos && eq > 0;
    if (ok) {
      try {
        std::size_t used = 0;
        usd = std::stod(p.substr(eq + 1), &used);
        ok = used == p.size() - eq - 1 && std::isfinite(usd) && usd > 0 && usd <= 1000;
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (!ok) {
      return Status::invalid_input(
          "--price: expected GPU=USD_PER_GPU_HOUR with a price from 0 to 1000 (e.g. H100=2.49), "
          "got \"" +
          p + "\"");
    }
    const std::string gpu = p.substr(0, eq);
    if (ctx.catalog->find_gpu(gpu) == nullptr) {
      PLANNER_RETURN_IF_ERROR(ctx.catalog->gpu(gpu).status().with_context("--price"));
    }
    prices.insert(prices.begin(), {gpu, Usd(usd)});
  }
  // The sweep's pricing and that of every scenario with its own (a document's cluster with an
  // offering or a price): given flags win over both.
  auto apply = [&](search::PricingOptions& p) {
    if (offering) p.offering = *offering;
    if (!a.provider.empty()) p.provider = a.provider;
    p.overrides.insert(p.overrides.begin(), prices.begin(), prices.end());
    p.price_files.insert(p.price_files.begin(), price_files.begin(), price_files.end());
    if (a.usd_per_kwh > 0) p.usd_per_kwh = a.usd_per_kwh;
    if (a.pue != search::kDefaultPue) p.pue = a.pue;
  };
  apply(req.pricing);
  for (search::SweepScenario& sc : req.scenarios) {
    if (sc.pricing) apply(*sc.pricing);
  }
  if (a.failure_rate >= 0) req.failures.interruptions_per_gpu_hour = a.failure_rate;
  if (a.spot_rate >= 0) req.failures.spot_preemptions_per_node_hour = a.spot_rate;
  if (a.checkpoint_gbps > 0) req.failures.checkpoint_bandwidth = GBps(a.checkpoint_gbps);
  if (a.restart_min >= 0) req.failures.restart = seconds(a.restart_min * 60);
  if (a.top_k >= 0) req.options.top_k = a.top_k;
  if (a.keep >= 0) req.options.keep = a.keep;
  return apply_stacks(a, req);
}

Result<search::SweepRequest> build_request(const CliContext& ctx, const SweepArgs& a) {
  search::SweepRequest req;
  if (!a.spec.empty() && (!a.instances.empty() || a.all_offerings)) {
    return Status::invalid_input(
        std::string(a.all_offerings ? "--all-offerings" : "--instances") +
        ": not with --spec (a sweep document names its clusters: give each an \"instance\")");
  }
  if (!a.spec.empty() && has_cluster_numbers(a.numbers)) {
    return Status::invalid_input(
        "--node-gpus, --nics, ...: not with --spec (a sweep document names its topologies)");
  }
  // Price files first: a bad one fails before anything else is read.
  std::vector<PriceEntry> price_files;
  for (const std::string& path : a.price_files) {
    PLANNER_ASSIGN_OR_RETURN(std::vector<PriceEntry> records, load_price_file(path));
    price_files.insert(price_files.end(), records.begin(), records.end());
  }
  if (!a.spec.empty()) {
    PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(a.spec));
    PLANNER_ASSIGN_OR_RETURN(
        req, search::parse_sweep_spec(text, a.spec, *ctx.catalog, [](std::string_view name) {
          return topo::resolve_topology(name);
        }));
  } else {
    PLANNER_ASSIGN_OR_RETURN(req, request_from_flags(ctx, a, price_files));
  }
  PLANNER_RETURN_IF_ERROR(apply_common_flags(ctx, a, price_files, req));
  if (!a.profile.empty()) PLANNER_RETURN_IF_ERROR(app::use_profile(req, a.profile, a.db));
  return req;
}

// ---- progress on stderr

class ProgressBar final : public search::ProgressSink {
 public:
  explicit ProgressBar(std::ostream& err) : err_(err), start_(Clock::now()) {}
  ~ProgressBar() override { clear(); }

  void on_progress(const search::SweepProgress& p) override {
    const auto now = Clock::now();
    if (p.phase != phase_) {
      phase_ = p.phase;
      phase_start_ = now;
    } else if (std::chrono::duration<double>(now - last_).count() < kProgressRedrawS &&
               p.done < p.total) {
      return;
    }
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - phase_start_).count();
    std::ostringstream line;
    if (p.phase == search::SweepPhase::kAnalytic) {
      const double rate = elapsed > 0 ? static_cast<double>(p.evaluated) / elapsed : 0;
      line << "ranking  " << bar(p) << " " << fmt_count(static_cast<double>(p.evaluated))
           << " plans estimated, " << fmt_count(static_cast<double>(p.pruned)) << " out of memory, "
           << fmt_count(rate) << " plans/s" << left(p, elapsed);
    } else if (p.phase == search::SweepPhase::kSimulate) {
      line << "simulating " << bar(p) << " " << p.done << "/" << p.total << " plans"
           << left(p, elapsed);
    } else {
      clear();
      return;
    }
    std::string text = line.str();
    const std::size_t width = text.size();
    if (width < shown_) text += std::string(shown_ - width, ' ');
    shown_ = width;
    err_ << '\r' << text << std::flush;
  }

  void clear() {
    if (shown_ == 0) return;
    err_ << '\r' << std::string(shown_, ' ') << '\r' << std::flush;
    shown_ = 0;
  }

 private:
  using Clock = std::chrono::steady_clock;

  static std::string bar(const search::SweepProgress& p) {
    constexpr int kWidth = 20;
    const int filled =
        p.total > 0 ? static_cast<int>(kWidth * static_cast<double>(p.done) / p.total) : 0;
    return "[" + std::string(static_cast<std::size_t>(filled), '#') +
           std::string(static_cast<std::size_t>(kWidth - filled), '.') + "]";
  }
  static std::string left(const search::SweepProgress& p, double elapsed) {
    if (p.done == 0 || p.total <= p.done) return "";
    const double rest = elapsed * static_cast<double>(p.total - p.done) / p.done;
    return ", " + fmt(rest, rest < 10 ? 1 : 0) + " s left";
  }

  std::ostream& err_;
  Clock::time_point start_, phase_start_, last_;
  search::SweepPhase phase_ = search::SweepPhase::kPrepare;
  std::size_t shown_ = 0;
};

// ---- output

std::string days(double s) {
  if (!std::isfinite(s)) return "-";
  const double d = s / kSecondsPerDay;
  return d >= 100 ? fmt(d, 0) : fmt(d, 1);
}

std::string money(double usd) {
  if (!std::isfinite(usd)) return "-";
  return "$" + fmt_count(usd);
}

std::string pct(double f) {
  return fmt(100.0 * f, 1) + "%";
}

// short_label() plus what a sweep varies beyond it: the rank order and data-parallel overlap.
std::string plan_label(const search::RankedPlan& r) {
  std::string s = short_label(r.parallel);
  if (r.parallel.order != kDefaultRankOrder) s += " " + r.parallel.order;
  if (r.parallel.dp * r.parallel.cp > 1 &&
      !(r.parallel.overlap_grad_reduce && r.parallel.overlap_param_gather)) {
    s += " no-overlap";
  }
  return s;
}

Json metrics_json(const search::PlanMetrics& m) {
  return {{"step_time_s", to_seconds(m.step_time)},
          {"tokens_per_s", m.tokens_per_second},
          {"mfu", m.mfu},
          {"hfu", m.hfu},
          {"bubble_fraction", m.bubble_fraction},
          {"compute_s", to_seconds(m.exposed(sim::TimeBucket::kCompute))},
          {"exposed_comm",
           exposed_comm_json([&](sim::TimeBucket b) { return to_seconds(m.exposed(b)); })},
          {"peak_memory_bytes", m.peak_memory.raw()},
          {"hbm_bytes", m.capacity.raw()}};
}

Json plan_json(const search::SweepSetup& setup, const search::RankedPlan& r) {
  const search::Economics& e = r.economics;
  Json j = {{"position", r.position},          {"scenario", setup.info(r.scenario).name},
            {"label", plan_label(r)},          {"world_size", r.parallel.world_size()},
            {"parallel", to_json(r.parallel)}, {"tier", std::string(to_string(r.tier))},
            {"tokens_per_usd", r.objective},   {"estimate", metrics_json(r.estimate)}};
  if (r.simulated) j["simulated"] = metrics_json(*r.simulated);
  j["economics"] = {{"billed_gpus", e.billed_gpus},
                    {"usd_per_hour", e.usd_per_hour.raw()},
                    {"energy_usd_per_hour", e.energy_usd_per_hour.raw()},
                    {"useful_fraction", e.goodput.useful_fraction},
                    {"effective_tokens_per_s", e.effective_tokens_per_second},
                    {"time_to_train_s", e.time_to_train_s},
                    {"total_cost_usd", e.total_cost.raw()},
                    {"checkpoint_interval_s", e.goodput.interval_s},
                    {"checkpoint_s", e.goodput.checkpoint_s},
                    {"mtbf_s", e.goodput.mtbf_s}};
  j["note"] = r.note;
  return j;
}

// The cloud instance of each scenario ("AWS p5.48xlarge", with the offering when the scenarios'
// offerings differ: "AWS p5.48xlarge spot"; a scenario of a topology not priced at its own
// instance: "aws-p5 at GCP price") when any scenario is priced at an instance, else empty.
std::vector<std::string> instance_labels(const search::SweepResult& res) {
  const auto priced_at_instance = [](const search::ScenarioInfo& s) {
    return !s.pricing.instance.empty();
  };
  if (std::none_of(res.scenarios.begin(), res.scenarios.end(), priced_at_instance)) return {};
  const bool offerings_differ =
      std::any_of(res.scenarios.begin(), res.scenarios.end(), [&](const search::ScenarioInfo& s) {
        return s.price.offering != res.scenarios.front().price.offering;
      });
  std::vector<std::string> labels;
  for (const search::ScenarioInfo& s : res.scenarios) {
    std::string label = priced_at_instance(s) ? s.pricing.provider + " " + s.pricing.instance
                        : s.price.overridden  ? s.topology + " at --price"
                                              : s.topology + " at " + s.price.provider + " price";
    if (offerings_differ) label += " " + std::string(to_string(s.price.offering));
    labels.push_back(std::move(label));
  }
  return labels;
}

// The first scenario when every scenario runs under the same stack, attention and host costs;
// null when they differ (planner sweep --stack a,b).
const search::ScenarioInfo* shared_software(const search::SweepResult& res) {
  if (res.scenarios.empty()) return nullptr;
  const search::ScenarioInfo& first = res.scenarios.front();
  for (const search::ScenarioInfo& s : res.scenarios) {
    if (s.stack != first.stack || s.attention != first.attention || !(s.host == first.host)) {
      return nullptr;
    }
  }
  return &first;
}

std::string software_text(const search::ScenarioInfo& s) {
  return std::string(to_string(s.stack)) + ", " + std::string(to_string(s.attention)) +
         " attention (host model: " + describe(s.host) + ")";
}

// The software stack of each scenario when the scenarios' differ (planner sweep --stack a,b), else
// empty.
std::vector<std::string> stack_labels(const search::SweepResult& res) {
  if (shared_software(res) != nullptr) return {};
  std::vector<std::string> labels;
  for (const search::ScenarioInfo& s : res.scenarios)
    labels.emplace_back(to_string(s.stack));
  return labels;
}

// The best plan of each label (an instance, a stack: the first of the ranking whose scenario has
// it), labels in the order of their best plans; `plan` is null for a label none of whose plans
// was kept.
struct LabelBest {
  std::string label;
  int scenario = 0;  // the first scenario with the label
  const search::RankedPlan* plan = nullptr;
};

std::vector<LabelBest> best_per_label(const search::SweepResult& res,
                                      const std::vector<std::string>& labels) {
  std::vector<LabelBest> out;
  const auto find = [&](const std::string& label) {
    return std::find_if(out.begin(), out.end(),
                        [&](const LabelBest& b) { return b.label == label; });
  };
  for (const search::RankedPlan& r : res.ranking) {
    const std::string& label = labels[static_cast<std::size_t>(r.scenario)];
    if (find(label) == out.end()) out.push_back({label, r.scenario, &r});
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (find(labels[i]) == out.end()) out.push_back({labels[i], static_cast<int>(i), nullptr});
  }
  return out;
}

// The best plan explained (app::explain_plan()) as JSON.
Json explanation_json(const search::RankedPlan& best, const app::PlanExplanation& x) {
  Json j = {{"position", best.position},
            {"label", plan_label(best)},
            {"parallel", to_json(x.parallel)},
            {"num_microbatches", x.microbatches},
            {"schedule_bubble", x.schedule_bubble},
            {"bubble_fraction", x.bubble},
            {"step_time_s", to_seconds(x.step_time)},
            {"simulated", x.simulated},
            {"peak_stage", x.peak_stage},
            {"hbm_bytes", x.capacity.raw()}};
  if (x.experts) {
    const app::ExpertParallelExplanation& e = *x.experts;
    j["experts"] = {{"experts", e.experts},
                    {"etp", e.etp},
                    {"expert_dp", e.edp},
                    {"top_k", e.top_k},
                    {"local_experts", e.local_experts},
                    {"tokens_per_expert", e.tokens_per_expert},
                    {"routing", e.routing},
                    {"fp8_dispatch", e.fp8_dispatch},
                    {"group_gpus", e.group_gpus},
                    {"group_nodes", e.group_nodes},
                    {"group_nvlink_domains", e.group_nvlink_domains},
                    {"groups_alike", e.groups_alike},
                    {"over_network", e.group_nvlink_domains > 1},
                    {"all_to_all_algorithm", e.algorithm},
                    {"all_to_all_protocol", e.protocol},
                    {"all_to_all_calls", e.calls},
                    {"all_to_all_mb_per_call", e.mb_per_call},
                    {"all_to_all_ms_per_call", e.ms_per_call},
                    {"all_to_all_exposed_s", to_seconds(e.exposed)}};
  } else {
    j["experts"] = nullptr;
  }
  Json stages = Json::array();
  for (const app::StageExplanation& s : x.stages) {
    const StageMemory& m = s.memory;
    stages.push_back({{"stage", s.stage},
                      {"layers", s.layers},
                      {"weights_bytes", m.weights.raw()},
                      {"gradients_bytes", m.gradients.raw()},
                      {"optimizer_bytes", m.optimizer.raw()},
                      {"activations_bytes", m.activations.raw()},
                      {"microbatches_in_flight", m.microbatches_in_flight},
                      {"comm_buffers_bytes", m.comm_buffers.raw()},
                      {"overhead_bytes", m.overhead.raw()},
                      {"host_bytes", m.host.raw()},
                      {"total_bytes", m.total().raw()}});
  }
  j["memory_per_stage"] = stages;
  return j;
}

void print_explanation(std::ostream& out, const search::RankedPlan& best,
                       const app::PlanExplanation& x) {
  const ParallelConfig& p = x.parallel;
  out << "\nbest plan explained (#" << best.position << " " << plan_label(best) << ")\n";
  out << "  parallelism: tp " << p.tp << " · pp " << p.pp << " · dp " << p.dp << " · cp " << p.cp;
  if (p.ep > 1 || x.experts) {
    out << " · ep " << p.ep << " (expert tp " << p.expert_tp() << ", expert dp " << p.expert_dp()
        << ")";
  }
  out << (p.sequence_parallel ? " · sequence parallel" : "") << "; micro-batch "
      << p.micro_batch_size << ", " << x.microbatches << " micro-batches per step; ZeRO "
      << p.zero_stage << "; recompute " << to_string(p.recompute)
      << (p.recompute == Recompute::kSelective
              ? " (" + recompute_modules_text(p.recompute_modules) + ")"
              : std::string())
      << "\n";
  out << "  schedule: ";
  if (p.pp == 1) {
    out << "no pipeline (pp 1)";
  } else {
    out << to_string(p.schedule);
    if (p.schedule == Schedule::kDualPipeV) {
      out << " (two model chunks per GPU in a V, stage 0 holding the first and the last; "
             "forward and backward chunks of different micro-batches merged, one's "
             "communication under the other's compute";
      // The same plan as DeepSeek's DualPipe writes it (parallel_config.hpp fold_dualpipe).
      if (p.dp % 2 == 0) {
        ParallelConfig as_written = p;
        as_written.dualpipe = true;
        out << "; the cut-in-half form of DeepSeek's DualPipe on " << as_written.written_pp()
            << " ranks: --schedule dualpipe --pp " << as_written.written_pp() << " --dp "
            << as_written.written_dp() << " is this plan";
      }
      out << ")";
    } else if (p.virtual_stages > 1) {
      out << " with " << p.virtual_stages << " virtual stages per GPU";
    }
    out << " over " << p.pp << " stages; bubble " << pct(x.schedule_bubble)
        << " of the step in closed form, " << pct(x.bubble)
        << (x.simulated ? " simulated (with waits)" : " estimated");
  }
  if (p.moe_a2a_overlap) {
    out << "; each steady-state forward pass merged with the backward pass of another "
           "micro-batch, one's all-to-alls under the other's compute (EP all-to-all overlap, one "
           "more warm-up forward per stage)";
  }
  out << "\n";
  if (x.experts) {
    const app::ExpertParallelExplanation& e = *x.experts;
    out << "  experts: " << e.experts << " routed, top-" << e.top_k << "; " << e.local_experts
        << " per GPU, " << fmt_int(e.tokens_per_expert)
        << " tokens per expert per micro-batch on the busiest GPU (" << e.routing << ")\n";
    out << "  all-to-all: " << (e.groups_alike ? "each" : "the widest")
        << " expert-parallel group of " << e.group_gpus << " GPUs spans " << e.group_nodes
        << (e.group_nodes == 1 ? " node" : " nodes") << " and " << e.group_nvlink_domains
        << (e.group_nvlink_domains == 1 ? " NVLink domain (NVLink only)"
                                        : " NVLink domains (NVLink and the scale-out network)");
    if (!e.algorithm.empty()) {
      const bool hierarchical = e.algorithm == "hierarchical-a2a";
      // Inside one NVLink domain there is no network leg: a token goes once to each GPU it is
      // routed to, however many of that GPU's experts it picked.
      const char* form = !hierarchical ? "; NCCL all-to-all, "
                         : e.group_nvlink_domains == 1
                             ? "; hierarchical all-to-all (a token once per destination GPU, over "
                               "NVLink, as DeepEP's intranode kernels), "
                             : "; hierarchical all-to-all (once per node over the network, then "
                               "NVLink, as DeepEP), ";
      out << form << e.algorithm << " algorithm, " << e.protocol << " protocol"
          << (e.fp8_dispatch ? ", FP8 dispatch" : "") << ": " << fmt_int(e.calls)
          << " calls per step of " << fmt(e.mb_per_call, 1) << " MB per GPU, "
          << fmt(e.ms_per_call, 2) << " ms each; " << fmt(to_seconds(e.exposed), 3) << " s exposed";
    } else {
      out << "; the plan was not simulated (--top-k), so no all-to-all figures";
    }
    out << "\n";
  }
  out << "  memory per GPU of each pipeline stage (GiB; ZeRO shards and offload applied)\n";
  Table t({{"STAGE", Align::kRight},
           {"LAYERS", Align::kRight},
           {"WEIGHTS", Align::kRight},
           {"GRADS", Align::kRight},
           {"OPTIMIZER", Align::kRight},
           {"ACTIVATIONS", Align::kRight},
           {"IN FLIGHT", Align::kRight},
           {"BUFFERS", Align::kRight},
           {"OTHER", Align::kRight},
           {"TOTAL", Align::kRight}});
  for (const app::StageExplanation& s : x.stages) {
    const StageMemory& m = s.memory;
    std::string total = fmt(to_GiB(m.total()), 1);
    if (s.stage == x.peak_stage) total += " (peak)";
    t.add_row({std::to_string(s.stage), std::to_string(s.layers), fmt(to_GiB(m.weights), 1),
               fmt(to_GiB(m.gradients), 1), fmt(to_GiB(m.optimizer), 1),
               fmt(to_GiB(m.activations), 1), std::to_string(m.microbatches_in_flight),
               fmt(to_GiB(m.comm_buffers), 1), fmt(to_GiB(m.overhead), 1), total});
  }
  std::ostringstream table;
  t.print(table);
  std::istringstream lines(table.str());
  for (std::string line; std::getline(lines, line);)
    out << "  " << line << "\n";
  out << "  of " << fmt(to_GiB(x.capacity), 1)
      << " GiB HBM; IN FLIGHT: micro-batches whose activations a GPU of the stage holds at its "
         "peak; OTHER: framework overhead\n";
}

// `no_plan`: why nothing was ranked (search::explain_empty()), empty when plans were.
Json result_json(const search::SweepSetup& setup, const search::SweepResult& res, double seconds,
                 const std::string& no_plan, const std::optional<app::PlanExplanation>& explained) {
  Json scenarios = Json::array();
  for (std::size_t i = 0; i < res.scenarios.size(); ++i) {
    const search::ScenarioInfo& s = res.scenarios[i];
    const TrainingSpec& t = setup.request().scenarios[i].training;
    scenarios.push_back({{"name", s.name},
                         {"model", s.model},
                         {"gpu", s.gpu},
                         {"topology", s.topology},
                         {"max_gpus", s.max_gpus},
                         {"min_gpus", s.min_gpus},
                         {"profile", s.profile},
                         {"seq_length", t.seq_length},
                         {"global_batch_size", t.global_batch_size},
                         {"precision", std::string(to_string(t.precision))},
                         {"token_budget", s.token_budget},
                         {"usd_per_gpu_hour", s.price.usd_per_gpu_hour.raw()},
                         {"offering", std::string(to_string(s.price.offering))},
                         {"price_source", s.price.source},
                         {"price_date", s.price.date}});
    if (!s.placement.empty()) scenarios.back()["placement"] = s.placement;
    if (!s.price.overridden) {
      scenarios.back()["price_provider"] = s.price.provider;
      scenarios.back()["price_instance"] = s.price.instance;
    }
    if (!s.price.price_file.empty()) scenarios.back()["price_file"] = s.price.price_file;
    if (!s.price.warnings.empty()) scenarios.back()["price_warnings"] = s.price.warnings;
    if (!s.pricing.instance.empty()) {
      scenarios.back()["provider"] = s.pricing.provider;
      scenarios.back()["instance"] = s.pricing.instance;
    }
    scenarios.back()["stack"] = std::string(to_string(s.stack));
    scenarios.back()["attention"] = std::string(to_string(s.attention));
    scenarios.back()["host_costs"] = describe(s.host);
  }
  Json ranking = Json::array(), pareto = Json::array();
  for (const search::RankedPlan& r : res.ranking)
    ranking.push_back(plan_json(setup, r));
  for (const search::RankedPlan& r : res.pareto)
    pareto.push_back(plan_json(setup, r));
  const search::SweepCounts& c = res.counts;
  Json out = {{"schema_version", kSchemaVersion},
              {"kind", "sweep-result"},
              {"scenarios", scenarios},
              {"counts",
               {{"candidates", c.candidates},
                {"out_of_memory", c.out_of_memory},
                {"evaluated", c.evaluated},
                {"over_budget", c.over_budget},
                {"over_deadline", c.over_deadline},
                {"feasible", c.feasible},
                {"simulated", c.simulated},
                {"simulation_failures", c.simulation_failures}}},
              {"estimate_error",
               {{"plans", res.error.plans},
                {"mean_abs_pct", res.error.mean_abs_pct},
                {"max_abs_pct", res.error.max_abs_pct},
                {"mean_signed_pct", res.error.mean_signed_pct}}},
              {"seconds", seconds},
              {"ranking", ranking},
              {"pareto", pareto}};
  const std::vector<std::string> labels = instance_labels(res);
  if (!labels.empty()) {
    Json best = Json::array();
    for (const LabelBest& b : best_per_label(res, labels)) {
      const search::ScenarioInfo& s = res.scenarios[static_cast<std::size_t>(b.scenario)];
      Json j = {{"instance", b.label},
                {"provider", s.price.provider},
                {"offering", std::string(to_string(s.price.offering))},
                {"usd_per_gpu_hour", s.price.usd_per_gpu_hour.raw()},
                {"price_date", s.price.date},
                {"price_source", s.price.source}};
      if (b.plan != nullptr) {
        j["scenario"] = res.scenarios[static_cast<std::size_t>(b.plan->scenario)].name;
        j["position"] = b.plan->position;
        j["label"] = plan_label(*b.plan);
        j["world_size"] = b.plan->parallel.world_size();
        j["tokens_per_usd"] = b.plan->objective;
        j["total_cost_usd"] = b.plan->economics.total_cost.raw();
        j["time_to_train_s"] = b.plan->economics.time_to_train_s;
        j["tier"] = std::string(to_string(b.plan->tier));
      } else {
        j["position"] = nullptr;  // none of its plans was kept (--keep)
      }
      best.push_back(std::move(j));
    }
    out["best_per_instance"] = best;
  }
  const std::vector<std::string> stacks = stack_labels(res);
  if (!stacks.empty()) {
    Json best = Json::array();
    for (const LabelBest& b : best_per_label(res, stacks)) {
      Json j = {{"stack", b.label}};
      if (b.plan != nullptr) {
        const search::RankedPlan& r = *b.plan;
        j["scenario"] = res.scenarios[static_cast<std::size_t>(r.scenario)].name;
        j["position"] = r.position;
        j["label"] = plan_label(r);
        j["world_size"] = r.parallel.world_size();
        j["step_time_s"] = to_seconds(r.metrics().step_time);
        j["mfu"] = r.metrics().mfu;
        j["tokens_per_usd"] = r.objective;
        j["tier"] = std::string(to_string(r.tier));
      } else {
        j["position"] = nullptr;  // none of its plans was kept (--keep)
      }
      best.push_back(std::move(j));
    }
    out["best_per_stack"] = best;
  }
  if (explained && !res.ranking.empty()) {
    out["best_plan"] = explanation_json(res.ranking.front(), *explained);
  }
  if (!no_plan.empty()) out["no_plan"] = no_plan;
  // The sweep's software where every scenario shares it (else each scenario says its own).
  if (const search::ScenarioInfo* s = shared_software(res)) {
    out["stack"] = std::string(to_string(s->stack));
    out["attention"] = std::string(to_string(s->attention));
    out["host_costs"] = describe(s->host);
  }
  return out;
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// "selective" or, with other recompute modules than core_attn, "selective:moe_act+layernorm".
std::string recompute_text(const ParallelConfig& p) {
  std::string text(to_string(p.recompute));
  if (p.recompute == Recompute::kSelective && p.recompute_modules != kDefaultRecomputeModules) {
    std::string modules = recompute_modules_text(p.recompute_modules);
    std::replace(modules.begin(), modules.end(), ',', '+');
    text += ":" + modules;
  }
  return text;
}

void print_csv(std::ostream& out, const search::SweepSetup& setup, const search::SweepResult& res) {
  out << "position,scenario,plan,gpus,tp,pp,dp,cp,ep,sp,mbs,schedule,vpp,recompute,zero,order,"
         "overlap,moe_a2a,moe_a2a_overlap,etp,capacity_factor,tier,step_s,tokens_per_s,mfu,bubble,"
         "peak_GiB,usd_per_hour,useful_fraction,days_to_train,total_usd,tokens_per_usd,"
         "estimate_step_s,note\n";
  for (const search::RankedPlan& r : res.ranking) {
    const ParallelConfig& p = r.parallel;
    const search::PlanMetrics& m = r.metrics();
    const search::Economics& e = r.economics;
    out << r.position << ',' << csv_escape(setup.info(r.scenario).name) << ','
        << csv_escape(plan_label(r)) << ',' << p.world_size() << ',' << p.tp << ',' << p.pp << ','
        << p.dp << ',' << p.cp << ',' << p.ep << ',' << (p.sequence_parallel ? 1 : 0) << ','
        << p.micro_batch_size << ',' << to_string(p.schedule) << ',' << p.virtual_stages << ','
        << recompute_text(p) << ',' << p.zero_stage << ',' << p.order << ','
        << (p.overlap_grad_reduce ? 1 : 0) << ',' << to_string(p.moe_a2a) << ','
        << (p.moe_a2a_overlap ? 1 : 0) << ',' << p.expert_tp() << ','
        << (p.moe_capacity_factor < 0 ? std::string() : capacity_factor_text(p.moe_capacity_factor))
        << ',' << to_string(r.tier) << ',' << to_seconds(m.step_time) << ',' << m.tokens_per_second
        << ',' << m.mfu << ',' << m.bubble_fraction << ',' << to_GiB(m.peak_memory) << ','
        << e.usd_per_hour.raw() << ',' << e.goodput.useful_fraction << ','
        << e.time_to_train_s / kSecondsPerDay << ',' << e.total_cost.raw() << ',' << r.objective
        << ',' << to_seconds(r.estimate.step_time) << ',' << csv_escape(r.note) << '\n';
  }
}

// Whether `r` differs from `shown` only in its rank order or in overlapping the data-parallel
// communication, and by under 0.5 % in tokens per dollar: such a row is folded into the one shown
// above it.
bool minor_variant(const search::RankedPlan& r, const search::RankedPlan& shown) {
  if (r.scenario != shown.scenario || shown.objective <= 0) return false;
  ParallelConfig a = r.parallel, b = shown.parallel;
  a.order = b.order;
  a.overlap_grad_reduce = b.overlap_grad_reduce;
  a.overlap_param_gather = b.overlap_param_gather;
  return a == b && std::abs(r.objective / shown.objective - 1) < 0.005;
}

// Prints up to `rows` plans; with `fold`, plans that differ from a plan printed above only in the
// rank order or the data-parallel overlap (and hardly in tokens per dollar) are folded into it.
// Returns the number folded.
// `instances`: the cloud instance of each scenario ("AWS p5.48xlarge") when the sweep compares
// instances (a column of its own), else empty.
std::size_t print_plans(std::ostream& out, const std::vector<search::RankedPlan>& plans,
                        std::size_t rows, bool numbered, bool several, bool fold,
                        const std::vector<std::string>& instances) {
  std::vector<Table::Column> columns{{"#", Align::kRight}, {"PLAN"}};
  if (!instances.empty()) columns.push_back({"INSTANCE"});
  for (Table::Column c : std::vector<Table::Column>{{"GPUS", Align::kRight},
                                                    {"STEP s", Align::kRight},
                                                    {"TOKENS/s", Align::kRight},
                                                    {"MFU", Align::kRight},
                                                    {"DAYS", Align::kRight},
                                                    {"COST", Align::kRight},
                                                    {"TOKENS/$", Align::kRight},
                                                    {"PEAK GiB", Align::kRight},
                                                    {"BY"},
                                                    {"WHY"}}) {
    columns.push_back(std::move(c));
  }
  Table t(std::move(columns));
  std::vector<std::size_t> shown;  // indices of the printed plans
  std::vector<int> variants;       // per printed plan: order variants folded into it
  std::size_t folded = 0;
  for (std::size_t i = 0; i < plans.size() && shown.size() < rows; ++i) {
    if (fold) {
      auto into = std::find_if(shown.begin(), shown.end(),
                               [&](std::size_t k) { return minor_variant(plans[i], plans[k]); });
      if (into != shown.end()) {
        ++variants[static_cast<std::size_t>(into - shown.begin())];
        ++folded;
        continue;
      }
    }
    shown.push_back(i);
    variants.push_back(0);
  }
  for (std::size_t n = 0; n < shown.size(); ++n) {
    const search::RankedPlan& r = plans[shown[n]];
    const search::PlanMetrics& m = r.metrics();
    std::string label = plan_label(r);
    if (several) label = "s" + std::to_string(r.scenario + 1) + " " + label;
    if (variants[n] > 0) label += " (+" + std::to_string(variants[n]) + ")";
    std::vector<std::string> row{numbered ? std::to_string(r.position) : std::to_string(n + 1),
                                 label};
    if (!instances.empty()) row.push_back(instances[static_cast<std::size_t>(r.scenario)]);
    for (std::string cell :
         {fmt_int(r.parallel.world_size()), fmt(to_seconds(m.step_time), 3),
          fmt_count(m.tokens_per_second), pct(m.mfu), days(r.economics.time_to_train_s),
          money(r.economics.total_cost.raw()), fmt_count(r.objective),
          fmt(to_GiB(m.peak_memory), 1), std::string(r.simulated ? "sim" : "est"), r.note}) {
      row.push_back(std::move(cell));
    }
    t.add_row(std::move(row));
  }
  t.print(out);
  return folded;
}

// Which cloud, in one line per instance: its price and its best plan.
void print_best_per_instance(std::ostream& out, const search::SweepResult& res,
                             const std::vector<std::string>& instances, bool several) {
  out << "\nbest plan per instance (the first of the ranking on each; cost and days to train the "
         "token budget)\n";
  Table t({{"INSTANCE"},
           {"$/GPU-h", Align::kRight},
           {"PRICE DATE"},
           {"#", Align::kRight},
           {"PLAN"},
           {"GPUS", Align::kRight},
           {"TOKENS/$", Align::kRight},
           {"COST", Align::kRight},
           {"DAYS", Align::kRight},
           {"BY"}});
  for (const LabelBest& b : best_per_label(res, instances)) {
    const search::ScenarioInfo& s = res.scenarios[static_cast<std::size_t>(b.scenario)];
    std::vector<std::string> row{
        b.label, fmt(s.price.usd_per_gpu_hour.raw(), 3),
        s.price.overridden ? std::string("--price") : parse_price_period(s.price.date).label()};
    if (b.plan == nullptr) {
      for (const char* cell : {"-", "none kept (--keep)", "-", "-", "-", "-", "-"})
        row.emplace_back(cell);
    } else {
      const search::RankedPlan& r = *b.plan;
      std::string label = plan_label(r);
      if (several) label = "s" + std::to_string(r.scenario + 1) + " " + label;
      for (std::string cell :
           {std::to_string(r.position), label, fmt_int(r.parallel.world_size()),
            fmt_count(r.objective), money(r.economics.total_cost.raw()),
            days(r.economics.time_to_train_s), std::string(r.simulated ? "sim" : "est")}) {
        row.push_back(std::move(cell));
      }
    }
    t.add_row(std::move(row));
  }
  t.print(out);
}

// Which stack, one line each: its best plan and how far it falls behind the sweep's best.
void print_best_per_stack(std::ostream& out, const search::SweepResult& res,
                          const std::vector<std::string>& stacks) {
  out << "\nbest plan per stack (the first of the ranking under each; the stacks differ in host "
         "costs, attention kernel, overlap and pipeline schedules: planner sim-models)\n";
  Table t({{"STACK"},
           {"#", Align::kRight},
           {"PLAN"},
           {"GPUS", Align::kRight},
           {"STEP s", Align::kRight},
           {"MFU", Align::kRight},
           {"TOKENS/$", Align::kRight},
           {"VS #1", Align::kRight},
           {"BY"}});
  const double top = res.ranking.front().objective;
  for (const LabelBest& b : best_per_label(res, stacks)) {
    std::vector<std::string> row{b.label};
    if (b.plan == nullptr) {
      for (const char* cell : {"-", "none kept (--keep)", "-", "-", "-", "-", "-", "-"})
        row.emplace_back(cell);
    } else {
      const search::RankedPlan& r = *b.plan;
      const search::PlanMetrics& m = r.metrics();
      for (std::string cell :
           {std::to_string(r.position), "s" + std::to_string(r.scenario + 1) + " " + plan_label(r),
            fmt_int(r.parallel.world_size()), fmt(to_seconds(m.step_time), 3), pct(m.mfu),
            fmt_count(r.objective),
            top > 0 ? (r.objective >= top ? "+" : "") + pct(r.objective / top - 1) : "-",
            std::string(r.simulated ? "sim" : "est")}) {
        row.push_back(std::move(cell));
      }
    }
    t.add_row(std::move(row));
  }
  t.print(out);
}

void print_report(std::ostream& out, const search::SweepSetup& setup,
                  const search::SweepResult& res, double seconds, int rows,
                  const std::optional<app::PlanExplanation>& explained) {
  const bool several = res.scenarios.size() > 1;
  const std::vector<std::string> instances = instance_labels(res);
  const search::ScenarioInfo* shared = shared_software(res);
  for (std::size_t i = 0; i < res.scenarios.size(); ++i) {
    const search::ScenarioInfo& s = res.scenarios[i];
    out << (several ? "s" + std::to_string(i + 1) + ": " : std::string()) << s.name << " ("
        << s.topology << ", " << s.gpus_per_node << " GPUs/node, profile " << s.profile
        << "); plans use " << fmt_int(s.min_gpus) << "-" << fmt_int(s.max_gpus) << " GPUs\n";
    if (!s.placement.empty()) {
      out << "  placement: " << s.placement
          << " (equal blocks, one per NVLink domain, so that parallel groups do not straddle "
             "racks: Slurm --segment)\n";
    }
    out << "  " << s.gpu << " at $" << fmt(s.price.usd_per_gpu_hour.raw(), 3) << "/GPU-hour "
        << to_string(s.price.offering)
        << (s.price.overridden
                ? " (--price)"
                : " (" + s.price.provider + " " + s.price.instance + ", " + s.price.date + "; " +
                      s.price.source +
                      (s.price.price_file.empty() ? "" : "; from " + s.price.price_file) + ")")
        << (s.pricing.usd_per_kwh > 0 ? " + energy at $" + fmt(s.pricing.usd_per_kwh, 3) +
                                            "/kWh, PUE " + fmt(s.pricing.pue, 2)
                                      : std::string())
        << "; token budget " << fmt_count(s.token_budget) << "\n";
    for (const std::string& w : s.price.warnings)
      out << "  warning: " << w << "\n";
    const search::SweepScenario& sc = setup.request().scenarios[i];
    const TrainingSpec& t = sc.training;
    out << "  training: sequences of " << fmt_int(t.seq_length) << " tokens, global batch "
        << fmt_int(t.global_batch_size) << " sequences ("
        << fmt_count(static_cast<double>(t.seq_length * t.global_batch_size))
        << " tokens per step), " << to_string(t.precision) << ", " << to_string(t.optimizer)
        << "\n";
    const search::SearchSpace& space = setup.request().space;
    if (!space.uneven_stages && search::searches_uneven_stages(space, sc.model.num_layers)) {
      out << "  pipeline: 4 does not divide the " << sc.model.num_layers
          << " layers, so the powers of two for pp that do not divide them are searched "
             "too, with uneven stages (--no-uneven-stages: only the pp that divide them)\n";
    }
    // Learned position embeddings refuse longer sequences (plan validation); the others may be
    // trained past their context on purpose (a long-context extension), but rarely by accident.
    if (sc.model.max_seq_len > 0 && t.seq_length > sc.model.max_seq_len) {
      out << "  warning: sequences of " << fmt_int(t.seq_length) << " tokens are longer than "
          << sc.model.name << "'s context of " << fmt_int(sc.model.max_seq_len)
          << " (max_seq_len): this plans a context extension\n";
    }
    if (shared == nullptr) out << "  software: " << software_text(s) << "\n";
  }
  if (shared != nullptr) out << "software: " << software_text(*shared) << "\n";
  const search::SweepCounts& c = res.counts;
  out << "\n"
      << fmt_int(c.candidates) << " valid plans: " << fmt_int(c.out_of_memory)
      << " do not fit in memory, " << fmt_int(c.evaluated) << " estimated";
  if (c.over_budget > 0) out << ", " << fmt_int(c.over_budget) << " over budget";
  if (c.over_deadline > 0) out << ", " << fmt_int(c.over_deadline) << " past the deadline";
  out << "; the best " << c.simulated << " simulated (" << fmt(seconds, 1) << " s in all)\n";
  if (c.simulation_failures > 0) {
    out << c.simulation_failures
        << " simulations failed; those plans are left out (first: " << res.simulation_failure
        << ")\n";
  }
  if (res.error.plans > 0) {
    out << "estimate vs simulation on those " << res.error.plans << ": mean |error| "
        << fmt(res.error.mean_abs_pct, 1) << "%, max " << fmt(res.error.max_abs_pct, 1)
        << "% (estimate " << (res.error.mean_signed_pct >= 0 ? "+" : "")
        << fmt(res.error.mean_signed_pct, 1) << "% on average)\n";
  }
  if (res.ranking.empty()) return;  // the command fails with search::explain_empty()
  out << "\nranked by effective tokens per dollar (goodput-adjusted); BY: sim = simulated, est = "
         "analytic estimate\n";
  const std::size_t folded =
      print_plans(out, res.ranking, static_cast<std::size_t>(rows), true, several, true, instances);
  if (folded > 0) {
    out << "(+N): " << folded << (folded == 1 ? " plan differs" : " plans differ")
        << " from a row above only in the rank order or in overlapping the data-parallel "
           "communication, within 0.5% in tokens/$, and "
        << (folded == 1 ? "is" : "are") << " folded into it (--csv and --json list every plan)\n";
  }
  if (!instances.empty()) print_best_per_instance(out, res, instances, several);
  if (const std::vector<std::string> stacks = stack_labels(res); !stacks.empty())
    print_best_per_stack(out, res, stacks);
  const search::RankedPlan& best = res.ranking.front();
  const search::Goodput& g = best.economics.goodput;
  out << "\ngoodput of #1: " << fmt(res.failures.interruptions_per_gpu_hour * 1e5, 2)
      << "e-5 interruptions per GPU-hour (Llama 3's 419 in 54 days on 16,384 GPUs unless set)"
      << " -> one every " << fmt(g.mtbf_s / 3600, 1) << " h on "
      << fmt_int(best.economics.billed_gpus) << " GPUs; checkpoint "
      << fmt(to_GB(g.checkpoint_bytes), 0) << " GB in " << fmt(g.checkpoint_s, 0) << " s every "
      << fmt(g.interval_s / 60, 0) << " min (Young/Daly), restart " << fmt(g.restart_s / 60, 0)
      << " min: " << pct(g.useful_fraction) << " useful\n";
  if (explained) print_explanation(out, best, *explained);
  if (!res.pareto.empty()) {
    out << "\nPareto frontier, time to train vs cost (" << res.pareto.size()
        << " plans; # counts along the frontier, fastest first; WHY compares with #1 of the "
           "ranking above)\n";
    print_plans(out, res.pareto, res.pareto.size(), false, several, false, instances);
  }
  (void)setup;
}

// ---- the CI gate

Result<double> parse_regret(const std::string& text) {
  std::string s = text;
  if (!s.empty() && s.back() == '%') s.pop_back();
  try {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  return Status::invalid_input("--max-regret: expected a percentage such as 5%, got \"" + text +
                               "\"");
}

// Evaluates the checked plan in the matching scenario; returns the exit code (0 or 3).
Result<int> check_gate(const CliContext& ctx, const SweepArgs& a, const search::SweepSetup& setup,
                       const search::SweepResult& res) {
  PLANNER_ASSIGN_OR_RETURN(Plan plan, load_plan_file(a.check, *ctx.catalog));
  PLANNER_ASSIGN_OR_RETURN(const double max_regret,
                           parse_regret(a.max_regret.empty() ? "5%" : a.max_regret));
  int scenario = -1;
  for (std::size_t i = 0; i < setup.scenario_count(); ++i) {
    const search::ScenarioInfo& s = setup.info(static_cast<int>(i));
    if (s.model == plan.model.name && plan.gpu.matches(s.gpu) &&
        plan.parallel.world_size() <= s.max_gpus) {
      scenario = static_cast<int>(i);
      break;
    }
  }
  if (scenario < 0) {
    return Status::invalid_input(a.check + ": no scenario of this sweep trains " + plan.model.name +
                                 " on " + plan.gpu.name + " with " +
                                 std::to_string(plan.parallel.world_size()) + " GPUs");
  }
  PLANNER_ASSIGN_OR_RETURN(search::RankedPlan checked, setup.evaluate(scenario, plan.parallel));
  // Beside --json or --csv output the verdict goes to stderr, keeping stdout machine-readable.
  std::ostream& out = (ctx.json || a.csv) ? *ctx.err : *ctx.out;
  if (res.ranking.empty()) {
    out << "check: no plan was found to compare " << a.check << " with\n";
    return 0;
  }
  const search::RankedPlan& best = res.ranking.front();
  const double regret = search::regret_pct(best, checked);
  out << "\ncheck " << a.check << ": " << plan_label(checked) << " ";
  if (!checked.simulated) {
    out << "does not run (" << (checked.note.empty() ? "simulation failed" : checked.note) << ")";
  } else {
    out << fmt_count(checked.objective) << " tokens/$ vs the best " << fmt_count(best.objective)
        << ": " << fmt(regret, 1) << "% worse (allowed " << fmt(max_regret, 1) << "%)";
  }
  out << "\n";
  if (checked.simulated && regret <= max_regret) {
    out << "check passed\n";
    return 0;
  }
  out << "check FAILED: this plan is better (" << plan_label(best) << "):\n"
      << to_json_text(setup.plan_of(best.scenario, best.parallel)) << "\n";
  return kExitRegret;
}

// ---- the command

Status sweep_command(CliContext& ctx, const SweepArgs& a) {
  PLANNER_ASSIGN_OR_RETURN(search::SweepRequest req, build_request(ctx, a));
  const bool tty = isatty(STDERR_FILENO) != 0 && !a.no_progress;
  std::unique_ptr<ProgressBar> bar;
  if (tty) bar = std::make_unique<ProgressBar>(*ctx.err);
  app::SweepRunOptions options;
  options.threads = a.threads;
  bool records = true;
#ifdef PLANNER_HAVE_EXECUTOR
  // Under mpirun the analytic and simulation steps split over the ranks; rank 0 prints and records.
  std::unique_ptr<exec::MpiWorld> world;
  if (exec::launched_by_mpi()) {
    PLANNER_ASSIGN_OR_RETURN(world, exec::MpiWorld::init(nullptr, nullptr));
    records = world->rank() == 0;
    if (!records) bar.reset();
    options.distributed = [&world](const search::SweepSetup& setup, search::ProgressSink* sink) {
      return exec::run_sweep_distributed(*world, setup, sink);
    };
  }
#endif
  // Opened before the search: a --db that cannot hold the result fails at once, not after it.
  std::optional<store::Database> db;
  if (records) {
    PLANNER_ASSIGN_OR_RETURN(db, open_recording_db(a.db));
  }
  PLANNER_ASSIGN_OR_RETURN(app::SweepRun run, app::run_sweep(req, bar.get(), options));
  if (bar) bar->clear();
  if (!run.result) return Status::ok();  // not rank 0 of a distributed sweep
  const search::SweepSetup& setup = *run.setup;
  const search::SweepResult& res = *run.result;
  const std::string no_plan = res.ranking.empty() ? search::explain_empty(setup, res) : "";
  std::ostream& out = *ctx.out;
  // The best plan explained; a plan the simulator could not run is ranked but not explained.
  std::optional<app::PlanExplanation> explained;
  if (!res.ranking.empty() && !a.csv) {
    auto x = app::explain_plan(setup, res.ranking.front());
    if (x) {
      explained = std::move(x).value();
    } else {
      *ctx.err << "note: the best plan is not explained: " << x.status().message() << "\n";
    }
  }
  if (ctx.json) {
    out << result_json(setup, res, run.seconds, no_plan, explained).dump(2) << '\n';
  } else if (a.csv) {
    print_csv(out, setup, res);
  } else {
    print_report(out, setup, res, run.seconds, a.top, explained);
  }
  if (!a.emit_plan.empty()) {
    if (res.ranking.empty()) return Status::runtime("--emit-plan: no plan was found");
    const search::RankedPlan& best = res.ranking.front();
    PLANNER_RETURN_IF_ERROR(write_text_file_atomic(
        a.emit_plan, to_json_text(setup.plan_of(best.scenario, best.parallel)) + "\n"));
    if (!ctx.json && !a.csv) {
      out << "\nwrote the best plan to " << a.emit_plan;
      // A plan document names no stack: say which one its time is for.
      if (!stack_labels(res).empty()) {
        const std::string stack(to_string(setup.info(best.scenario).stack));
        out << " (its time is under " << stack << ": planner simulate --plan " << a.emit_plan
            << " --stack " << stack << ")";
      }
      out << "\n";
    }
  }
  if (db) {
    const Json inputs = app::sweep_inputs(req, {{"command", "sweep"}, {"spec", a.spec}});
    PLANNER_RETURN_IF_ERROR(app::record_sweep(*db, setup, res, inputs, run.seconds).status());
  }
  if (!no_plan.empty()) return Status::runtime(no_plan);
  if (!a.check.empty()) {
    PLANNER_ASSIGN_OR_RETURN(ctx.exit_code, check_gate(ctx, a, setup, res));
  }
  return Status::ok();
}

}  // namespace

void register_sweep_command(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "The main job: search every plan for a model on a cluster, rank by effective tokens per "
      "dollar, simulate the best (no arguments: " +
          std::string(app::default_scenario().model) + " on " +
          std::to_string(app::default_scenario().gpus) + " " +
          std::string(app::default_scenario().gpu) + " GPUs)");
  auto a = std::make_shared<SweepArgs>();
  cmd->add_option("--profile", a->profile,
                  "Hardware profile for every scenario: a preset, a profile file or a profile "
                  "planner calibrate stored in --db (default: each GPU's preset)");
  cmd->add_option("--spec", a->spec, "A sweep document (models x clusters x GPU counts)")
      ->type_name("FILE");
  cmd->add_option("--model", a->models,
                  "Model presets or files, comma-separated (default " +
                      std::string(app::default_scenario().model) + ")")
      ->delimiter(',');
  cmd->add_option("--gpu", a->gpus,
                  "GPU types to consider, comma-separated (default " +
                      std::string(app::default_scenario().gpu) + ")")
      ->delimiter(',');
  CLI::Option* gpu_flag = cmd->get_option("--gpu");
  CLI::Option* topology_flag =
      cmd->add_option("--topology", a->topology,
                      "Topology preset or file (default: the first preset with the GPU)");
  CLI::Option* instances_flag =
      cmd->add_option("--instances", a->instances,
                      "Which cloud: cloud instances (p5.48xlarge, a3-megagpu-8g, ... or their "
                      "topology presets), comma-separated: one scenario each, on the instance's "
                      "network at its provider's price, all ranked together")
          ->delimiter(',')
          ->excludes(gpu_flag)
          ->excludes(topology_flag);
  cmd->add_flag("--all-offerings", a->all_offerings,
                "Which cloud for the --gpu GPUs: every cloud instance of the topology presets "
                "with them (of --provider, when given), once per offering it has a price for "
                "(only --offering's, when given), all ranked together")
      ->excludes(instances_flag)
      ->excludes(topology_flag);
  add_cluster_number_options(cmd, a->numbers, topology_flag);
  cmd->add_option("--gpus", a->cluster_gpus,
                  "Cluster sizes in GPUs, comma-separated: one scenario each; plans use up to "
                  "that many (default " +
                      std::to_string(app::default_scenario().gpus) + ")")
      ->delimiter(',');
  cmd->add_option("--min-gpus", a->min_gpus,
                  "Fewest GPUs a plan may use (default: half the cluster)");
  cmd->add_option("--seq,--seq-length", a->seq, "Sequence length (default: the model's maximum)");
  cmd->add_option("--gbs,--global-batch-size", a->gbs,
                  "Global batch size in sequences (default: 4 Mi tokens per step)");
  cmd->add_option("--precision", a->precision, "fp32, tf32, bf16, fp16 or fp8")
      ->capture_default_str();
  cmd->add_option("--fp8-recipe", a->fp8_recipe,
                  "With --precision fp8: Transformer Engine's scaling recipe, delayed (default), "
                  "current, mxfp8 or blockwise");
  cmd->add_option("--optimizer", a->optimizer, "adam, adamw or sgd")->capture_default_str();
  cmd->add_option("--tokens", a->tokens,
                  "Token budget to train (default: 20 tokens per parameter, Chinchilla)");
  cmd->add_option("--tp,--tensor-model-parallel-size", a->tp,
                  "Fix tensor parallel sizes (comma-separated)")
      ->delimiter(',');
  cmd->add_option("--pp,--pipeline-model-parallel-size", a->pp, "Fix pipeline parallel sizes")
      ->delimiter(',');
  cmd->add_option("--dp", a->dp, "Fix data parallel sizes")->delimiter(',');
  cmd->add_option("--cp,--context-parallel-size", a->cp, "Fix context parallel sizes")
      ->delimiter(',');
  cmd->add_option("--ep,--expert-model-parallel-size", a->ep, "Fix expert parallel sizes")
      ->delimiter(',');
  cmd->add_option("--mbs,--micro-batch-size", a->mbs, "Fix micro-batch sizes")->delimiter(',');
  cmd->add_option("--vpp,--virtual-pipeline-model-parallel-size", a->vpp,
                  "Fix virtual stage counts (interleaved)")
      ->delimiter(',');
  cmd->add_option("--schedule", a->schedules,
                  "Schedules: gpipe, 1f1b, interleaved, zb-h1, dualpipev (DeepSeek's DualPipe "
                  "on 2p ranks is dualpipev on p stages)")
      ->delimiter(',');
  cmd->add_option("--recompute,--recompute-granularity", a->recompute,
                  "Recompute: none, selective, full")
      ->delimiter(',');
  cmd->add_option("--recompute-modules", a->recompute_modules,
                  "Module sets selective recompute tries, each its own candidate, names joined "
                  "by '+' (Megatron-core's --recompute-modules: core_attn, moe_act, layernorm, "
                  "mla_up_proj, mlp, moe, shared_experts), e.g. core_attn moe_act+layernorm "
                  "(default core_attn)")
      ->delimiter(',');
  cmd->add_option("--moe-a2a", a->moe_a2a,
                  "MoE all-to-all: nccl (every token copy), hierarchical (once per node over "
                  "the network, once per GPU over NVLink: DeepEP, HybridEP)")
      ->delimiter(',');
  cmd->add_option("--etp,--expert-tensor-parallel-size", a->etp,
                  "Expert tensor parallel sizes of MoE plans (default: tp and, where tp > 1, 1)")
      ->delimiter(',');
  cmd->add_option("--moe-capacity-factor", a->capacity,
                  "MoE token routing to try: dropless or a capacity factor (tokens dropped "
                  "beyond it); default: the model's only, as dropping tokens changes the training")
      ->delimiter(',');
  cmd->add_option("--moe-imbalance", a->imbalance,
                  "MoE routing imbalance: the hottest expert's tokens over the mean (default 1, "
                  "balanced); dropless plans run the hottest expert's load, a capacity factor "
                  "below it drops the excess")
      ->check(number_in(1, 1000));
  cmd->add_option("--moe-a2a-overlap", a->a2a_overlap,
                  "Megatron-core's EP all-to-all overlap (merged forward and backward passes of "
                  "the interleaved schedule, or of 1f1b with pp 1): on, off or both")
      ->capture_default_str();
  CLI::Option* zero = cmd->add_option("--zero", a->zero, "ZeRO stages 0-3")->delimiter(',');
  cmd->add_flag("--use-distributed-optimizer", a->distributed_optimizer,
                "Megatron's distributed optimizer: fix ZeRO stage 1")
      ->excludes(zero);
  CLI::Option* sp = cmd->add_option("--sp", a->sp, "Sequence parallelism: on, off or both")
                        ->capture_default_str();
  cmd->add_flag("--sequence-parallel", a->sequence_parallel, "Megatron's spelling of --sp on")
      ->excludes(sp);
  cmd->add_option("--order", a->orders, "Rank orders (default tp-cp-ep-dp-pp and tp-cp-ep-pp-dp)")
      ->delimiter(',');
  cmd->add_option("--overlap", a->overlap, "Data-parallel communication overlap: on, off or both")
      ->capture_default_str();
  CLI::Option* uneven =
      cmd->add_flag("--uneven-stages", a->uneven_stages,
                    "Also search the powers of two for pp that do not divide the layers, with a "
                    "balanced uneven split (a pp given with --pp always is); default: where 4 "
                    "does not divide the layers");
  cmd->add_flag("--no-uneven-stages", a->no_uneven_stages,
                "Search only the pp that divide the layers (and those given with --pp)")
      ->excludes(uneven);
  cmd->add_flag("--tp-beyond-nvlink", a->tp_beyond_nvlink,
                "Allow tensor parallelism across NVLink domains");
  cmd->add_option("--budget", a->budget, "Most USD the token budget may cost");
  cmd->add_option("--deadline", a->deadline_days, "Most days the token budget may take");
  cmd->add_option("--price", a->prices,
                  "Price override GPU=USD_PER_GPU_HOUR (repeatable, e.g. --price H100=2.49)");
  cmd->add_option("--prices", a->price_files,
                  "Price files (the catalogue's schema; planner price list --json writes one): "
                  "their prices win over the catalogue's (repeatable)")
      ->type_name("FILE");
  cmd->add_option("--offering", a->offering,
                  "on-demand (default), spot, reserved-1y, reserved-3y or capacity-block");
  cmd->add_option("--provider", a->provider,
                  "Price at this provider's catalogue price (default: AWS where it rents the "
                  "GPU, else the largest instance of any provider; planner price list)")
      ->excludes(instances_flag);
  cmd->add_option("--usd-per-kwh", a->usd_per_kwh,
                  "Price energy too: TDP x PUE x this per GPU-hour");
  cmd->add_option("--pue", a->pue, "Power usage effectiveness for energy")->capture_default_str();
  cmd->add_option("--failure-rate", a->failure_rate,
                  "Interruptions per GPU-hour (default 1.97e-5: Llama 3, 419 in 54 days on 16,384 "
                  "GPUs)");
  cmd->add_option("--spot-preemptions", a->spot_rate,
                  "Spot preemptions per node-hour (default 6.8e-5: 5% per node per month, an "
                  "assumption)");
  cmd->add_option("--checkpoint-GBps", a->checkpoint_gbps,
                  "Checkpoint write bandwidth, GB/s (default 100, an assumption)");
  cmd->add_option("--restart-min", a->restart_min,
                  "Minutes to restart after an interruption (default 10, an assumption)");
  cmd->add_option("--threads", a->threads, "Threads (default: every core)");
  add_stack_options(cmd, a->stack, &a->stacks);
  cmd->add_option("--top-k", a->top_k, "Plans re-run by the simulator (default 32)");
  cmd->add_option("--keep", a->keep, "Ranked plans kept and recorded (default 100)");
  cmd->add_option("--top", a->top, "Rows of the table (default 10)");
  cmd->add_flag("--csv", a->csv, "Print the ranking as CSV");
  cmd->add_option("--emit-plan", a->emit_plan,
                  "Write the best plan as a plan document (for planner simulate / exec)")
      ->type_name("FILE");
  cmd->add_option("--check", a->check,
                  "CI gate: exit 3 when this plan is more than --max-regret worse than the best")
      ->type_name("PLAN.json");
  cmd->add_option("--max-regret", a->max_regret, "Allowed shortfall for --check (default 5%)");
  cmd->add_flag("--no-progress", a->no_progress, "No progress bar on stderr");
  // Numbers are checked where they are parsed: finite, in range, named in the error.
  constexpr long long kMaxGpus = 1 << 24;  // as sweep documents allow
  constexpr long long kMaxAxis = 1 << 20;  // a parallel size, as plan documents allow
  cmd->get_option("--gpus")->check(whole_in(1, kMaxGpus));
  cmd->get_option("--min-gpus")->check(whole_in(1, kMaxGpus));
  cmd->get_option("--seq")->check(whole_in(1, 100'000'000));
  cmd->get_option("--gbs")->check(whole_in(1, 100'000'000));
  cmd->get_option("--tokens")->check(number_in(0, 1e16));
  for (const char* axis : {"--tp", "--pp", "--dp", "--cp", "--ep", "--etp"})
    cmd->get_option(axis)->check(whole_in(1, kMaxAxis));
  cmd->get_option("--mbs")->check(whole_in(1, 1'000'000));
  cmd->get_option("--vpp")->check(whole_in(2, 1024));
  cmd->get_option("--zero")->check(whole_in(0, 3));
  cmd->get_option("--budget")->check(number_in(0, 1e15, true));
  cmd->get_option("--deadline")->check(number_in(0, 1e6, true));
  cmd->get_option("--usd-per-kwh")->check(number_in(0, 100));
  cmd->get_option("--pue")->check(number_in(1, 3));
  cmd->get_option("--failure-rate")->check(number_in(0, 1));
  cmd->get_option("--spot-preemptions")->check(number_in(0, 1));
  cmd->get_option("--checkpoint-GBps")->check(number_in(0, 1e6, true));
  cmd->get_option("--restart-min")->check(number_in(0, 1e6));
  cmd->get_option("--threads")->check(whole_in(0, 4096));
  cmd->get_option("--top-k")->check(whole_in(0, 100'000));
  cmd->get_option("--keep")->check(whole_in(1, 10'000'000));
  cmd->get_option("--top")->check(whole_in(1, 10'000'000));
  add_db_options(cmd, a->db);
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return sweep_command(ctx, *a); }; });
}

}  // namespace planner::cli
