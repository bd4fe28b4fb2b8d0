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
  PriceQuery query;
  query.offering = options.offering;
  query.provider = options.provider;
  query.instance = options.instance;
  PLANNER_ASSIGN_OR_RETURN(ChosenPrice chosen, choose_price(gpu, query, options.overrides,
                                                            options.price_files, options.today));
  GpuPrice p;
  p.usd_per_gpu_hour = chosen.usd_per_gpu_hour;
  p.offering = options.offering;
  p.warnings = std::move(chosen.warnings);
  if (chosen.origin == PriceOrigin::kOverride) {
    p.overridden = true;
    p.source = "--price " + chosen.override_gpu;
    return p;
  }
  const PriceEntry& e = *chosen.entry;
  p.provider = e.provider;
  p.instance = e.instance;
  p.date = e.date;
  p.source = e.source;
  if (chosen.origin == PriceOrigin::kPriceFile) p.price_file = e.origin;
  return p;
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
