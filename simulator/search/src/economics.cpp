#include "planner/search/economics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "planner/core/memory.hpp"
#include "planner/core/pricing.hpp"

namespace planner::search {
namespace {

constexpr double kSecondsPerHour = 3600;
constexpr double kWattsPerKilowatt = 1000;

}  // namespace

Result<GpuPrice> resolve_price(const GpuSpec& gpu, const PricingOptions& options) {
  for (const PriceOverride& o : options.overrides) {
    if (gpu.matches(o.gpu)) {
      GpuPrice p;
      p.usd_per_gpu_hour = o.usd_per_gpu_hour;
      p.offering = options.offering;
      p.overridden = true;
      p.source = "--price " + o.gpu;
      return p;
    }
  }
  PriceQuery query;
  query.offering = options.offering;
  query.provider = options.provider;
  query.instance = options.instance;
  std::vector<PriceEntry> from_files;
  for (const PriceEntry& e : options.price_files) {
    if (gpu.matches(e.gpu)) from_files.push_back(e);
  }
  const PriceEntry* e = pick_price(from_files, query);
  const bool from_file = e != nullptr;
  if (!from_file) e = pick_price(gpu.prices, query);
  if (e != nullptr) {
    GpuPrice p;
    p.usd_per_gpu_hour = e->usd_per_gpu_hour;
    p.offering = options.offering;
    p.provider = e->provider;
    p.instance = e->instance;
    p.date = e->date;
    p.source = e->source;
    if (from_file) p.price_file = e->origin;
    return p;
  }
  std::vector<PriceEntry> all = from_files;
  all.insert(all.end(), gpu.prices.begin(), gpu.prices.end());
  const std::string where =
      options.price_files.empty() ? std::string() : std::string(" or the price files");
  if (!query.provider.empty() || !query.instance.empty()) {
    const std::string asked = query.instance.empty()   ? query.provider
                              : query.provider.empty() ? query.instance
                                                       : query.provider + " " + query.instance;
    const std::string have = describe_offerings(all);
    return Status::invalid_input(gpu.name + " has no " + std::string(to_string(options.offering)) +
                                 " price from " + asked + " in the price catalogue" + where +
                                 (have.empty() ? std::string() : " (it has " + have + ")") +
                                 "; give one with --price " + gpu.name + "=USD_PER_GPU_HOUR");
  }
  std::string have;
  for (const PriceEntry& record : all) {
    const std::string name(to_string(record.offering));
    if (have.find(name) == std::string::npos) have += (have.empty() ? "" : ", ") + name;
  }
  return Status::invalid_input(
      gpu.name + " has no " + std::string(to_string(options.offering)) +
      " price in the GPU catalogue" + where +
      (have.empty() ? std::string(" (it has none)") : " (it has " + have + ")") +
      "; give one with --price " + gpu.name + "=USD_PER_GPU_HOUR");
}

double young_daly_interval(double mtbf_s, double checkpoint_s) {
  return std::sqrt(2.0 * mtbf_s * checkpoint_s);
}

double useful_fraction(double mtbf_s, double checkpoint_s, double restart_s, double interval_s) {
  if (!std::isfinite(mtbf_s)) return 1.0;
  if (interval_s <= 0)
    return checkpoint_s > 0 ? 0.0 : std::clamp(1.0 - restart_s / mtbf_s, 0.0, 1.0);
  const double u = 1.0 - checkpoint_s / interval_s - (interval_s / 2.0 + restart_s) / mtbf_s;
  return std::clamp(u, 0.0, 1.0);
}

Bytes checkpoint_bytes(const ModelSpec& model, const TrainingSpec& training) {
  const PrecisionBytes pb = precision_bytes(training);
  return Bytes(model.total_params() * (pb.param + pb.optimizer));
}

Goodput goodput(const FailureModel& f, std::int64_t gpus, std::int64_t nodes, Bytes checkpoint,
                bool spot) {
  Goodput g;
  g.interruptions_per_hour =
      f.interruptions_per_gpu_hour * static_cast<double>(gpus) +
      (spot ? f.spot_preemptions_per_node_hour * static_cast<double>(nodes) : 0.0);
  g.mtbf_s = g.interruptions_per_hour > 0 ? kSecondsPerHour / g.interruptions_per_hour
                                          : std::numeric_limits<double>::infinity();
  g.checkpoint_bytes = checkpoint;
  g.checkpoint_s = f.checkpoint_bandwidth.raw() > 0
                       ? static_cast<double>(checkpoint.raw()) / f.checkpoint_bandwidth.raw()
                       : 0.0;
  g.restart_s = to_seconds(f.restart);
  g.interval_s = std::isfinite(g.mtbf_s) ? young_daly_interval(g.mtbf_s, g.checkpoint_s) : 0.0;
  g.useful_fraction = useful_fraction(g.mtbf_s, g.checkpoint_s, g.restart_s, g.interval_s);
  return g;
}

Economics economics(double tokens_per_second, std::int64_t world, int gpus_per_node,
                    const GpuSpec& gpu, const GpuPrice& price, const PricingOptions& pricing,
                    const FailureModel& failures, Bytes checkpoint, double token_budget) {
  Economics e;
  const std::int64_t per_node = std::max(1, gpus_per_node);
  const std::int64_t nodes = (world + per_node - 1) / per_node;
  e.billed_gpus = nodes * per_node;
  const double gpus = static_cast<double>(e.billed_gpus);
  if (pricing.usd_per_kwh > 0) {
    e.energy_usd_per_hour =
        Usd(gpu.tdp_watts / kWattsPerKilowatt * pricing.pue * pricing.usd_per_kwh * gpus);
  }
  e.usd_per_hour = Usd(price.usd_per_gpu_hour.raw() * gpus) + e.energy_usd_per_hour;
  e.goodput =
      goodput(failures, e.billed_gpus, nodes, checkpoint, pricing.offering == Offering::kSpot);
  e.effective_tokens_per_second = tokens_per_second * e.goodput.useful_fraction;
  if (e.usd_per_hour.raw() > 0) {
    e.tokens_per_usd = e.effective_tokens_per_second * kSecondsPerHour / e.usd_per_hour.raw();
  }
  if (e.effective_tokens_per_second > 0 && token_budget > 0) {
    e.time_to_train_s = token_budget / e.effective_tokens_per_second;
    e.total_cost = Usd(e.usd_per_hour.raw() * e.time_to_train_s / kSecondsPerHour);
  } else if (token_budget > 0) {
    e.time_to_train_s = std::numeric_limits<double>::infinity();
    e.total_cost = Usd(std::numeric_limits<double>::infinity());
  }
  return e;
}

}  // namespace planner::search
