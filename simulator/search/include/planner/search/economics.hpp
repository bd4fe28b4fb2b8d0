// Money and goodput: what a plan costs per hour, how much of its time is useful work once
// failures and checkpoints are priced in, and what that makes of tokens per dollar.
//
// Price per GPU-hour: a --price override for the GPU, else the records of the user's price files
// (--prices FILE, core/prices.hpp) for the GPU, else the catalogue's (GpuSpec::prices), each set
// picked from by the default rule of core/pricing.hpp for the offering (and provider/instance when
// asked for). A GPU without one is an error naming it. Billed GPUs are whole nodes: ceil(world /
// GPUs per node) × GPUs per node. Energy (optional, when a $/kWh is given): TDP × PUE × GPUs ×
// $/kWh, the GPUs at their TDP.
//
// Goodput (a first-order checkpoint/restart model):
//   λ      interruptions per GPU-hour (default kLlama3InterruptionsPerGpuHour), plus for spot
//          capacity preemptions per node-hour (default kDefaultSpotPreemptionsPerNodeHour)
//   M      the job's mean time between interruptions: 1 / (λ·GPUs + λ_spot·nodes)
//   δ      checkpoint write time: checkpoint bytes / storage bandwidth, the checkpoint being the
//          weights and optimizer states of one model replica (core's precision_bytes(): param +
//          optimizer bytes per parameter)
//   R      restart time (re-launch and reload)
//   τ      checkpoint interval: Young's optimum τ = sqrt(2·δ·M) (Young 1974, "A first order
//          approximation to the optimum checkpoint interval", CACM 17(9); Daly 2006, FGCS 22(3),
//          gives it as the first-order term of his higher-order estimate)
//   useful fraction  U = 1 − δ/τ − (τ/2 + R)/M, clamped to [0, 1]: checkpoint writes take δ of
//          every τ, and each interruption loses on average half an interval plus the restart.
//          At τ = sqrt(2δM): U = 1 − sqrt(2δ/M) − R/M.
// Objective: effective tokens per dollar = tokens/s × U × 3600 / (USD per hour). Also: time to
// train the token budget (budget / (tokens/s × U)) and its total cost.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/core/enums.hpp"
#include "planner/core/gpu_spec.hpp"
#include "planner/core/model_spec.hpp"
#include "planner/core/prices.hpp"
#include "planner/core/pricing.hpp"
#include "planner/core/status.hpp"
#include "planner/core/training_spec.hpp"
#include "planner/core/units.hpp"

namespace planner::search {

// Dubey et al. 2024, "The Llama 3 Herd of Models" (arXiv:2407.21783) §3.3.4: 419 unexpected
// interruptions in a 54-day snapshot of pre-training on 16,384 H100 GPUs:
// 419 / (54 × 24 h × 16,384 GPUs) = 1.97e-5 interruptions per GPU-hour (about one every 3 hours
// for the whole job).
inline constexpr double kLlama3UnexpectedInterruptions = 419;
inline constexpr double kLlama3SnapshotHours = 54.0 * 24.0;
inline constexpr double kLlama3Gpus = 16384;
inline constexpr double kLlama3InterruptionsPerGpuHour =
    kLlama3UnexpectedInterruptions / (kLlama3SnapshotHours * kLlama3Gpus);
// Assumption (not from the reference data): AWS's Spot Instance Advisor ranks instance types by
// the share of instances interrupted over the trailing month; its lowest band is "<5%". Taken at
// 5% per instance (node) per month of 730 hours. Large GPU instances are often in higher bands:
// set --spot-preemptions for the capacity you buy.
inline constexpr double kSpotMonthlyInterruptionShare = 0.05;
inline constexpr double kHoursPerMonth = 730;
inline constexpr double kDefaultSpotPreemptionsPerNodeHour =
    kSpotMonthlyInterruptionShare / kHoursPerMonth;
// Assumption: the aggregate write bandwidth a training job gets from its parallel file system. For
// scale, Llama 3's Tectonic storage sustained 2 TB/s (Dubey et al. 2024 §3.3.1). Set it with
// --checkpoint-GBps.
inline constexpr double kDefaultCheckpointGBps = 100;
// Assumption: time to notice an interruption, re-launch the job and reload the last checkpoint.
inline constexpr double kDefaultRestartMinutes = 10;
// Assumption: power usage effectiveness of the data centre, used only when energy is priced.
inline constexpr double kDefaultPue = 1.2;

using PriceOverride = planner::PriceOverride;  // core/pricing.hpp

struct PricingOptions {
  Offering offering = Offering::kOnDemand;
  std::vector<PriceOverride> overrides;
  // Records of user price files (--prices FILE): they win over the catalogue's for their GPU.
  std::vector<PriceEntry> price_files;
  // A provider ("AWS") and instance ("p5.48xlarge") to price at; empty: the catalogue's default
  // rule (core/pricing.hpp).
  std::string provider;
  std::string instance;
  double usd_per_kwh = 0;  // 0: energy not priced
  double pue = kDefaultPue;
  // The date catalogue prices are aged against (a price older than 12 months is flagged); the
  // simulator reads no clock, so the caller sets it (app::run_sweep: today). Empty: not aged.
  std::optional<CalendarDate> today;
};

struct GpuPrice {
  Usd usd_per_gpu_hour;
  Offering offering = Offering::kOnDemand;
  bool overridden = false;
  std::string provider;  // catalogue entries: provider, instance, date, source
  std::string instance;
  std::string date;
  std::string source;
  std::string price_file;  // the user price file the record came from; empty: the catalogue
  // One line each: borrowed from another GPU, older than 12 months or undated (core/pricing.hpp).
  std::vector<std::string> warnings;
};

// The price of `gpu` under `options` (core's choose_price: an override, then the price files, then
// the catalogue); kInvalidInput naming the GPU (and the offerings it has a price for) when neither
// an override nor a catalogue entry (of the provider and instance, when given) exists.
Result<GpuPrice> resolve_price(const GpuSpec& gpu, const PricingOptions& options);

struct FailureModel {
  double interruptions_per_gpu_hour = kLlama3InterruptionsPerGpuHour;
  double spot_preemptions_per_node_hour = kDefaultSpotPreemptionsPerNodeHour;
  Bandwidth checkpoint_bandwidth = GBps(kDefaultCheckpointGBps);
  Time restart = seconds(kDefaultRestartMinutes * 60);
};

// Young's optimal checkpoint interval sqrt(2 × MTBF × checkpoint time), seconds.
double young_daly_interval(double mtbf_s, double checkpoint_s);
// U = 1 − δ/τ − (τ/2 + R)/M, clamped to [0, 1]; 1 when nothing fails (M infinite).
double useful_fraction(double mtbf_s, double checkpoint_s, double restart_s, double interval_s);

struct Goodput {
  double interruptions_per_hour = 0;  // the whole job's
  double mtbf_s = 0;                  // infinity when nothing fails
  Bytes checkpoint_bytes;
  double checkpoint_s = 0;
  double interval_s = 0;
  double restart_s = 0;
  double useful_fraction = 1;
};

// Checkpoint of one replica: weights and optimizer states (param + optimizer bytes per parameter).
Bytes checkpoint_bytes(const ModelSpec& model, const TrainingSpec& training);

Goodput goodput(const FailureModel& failures, std::int64_t gpus, std::int64_t nodes,
                Bytes checkpoint, bool spot);

struct Economics {
  std::int64_t billed_gpus = 0;
  Usd usd_per_hour;         // GPUs plus energy
  Usd energy_usd_per_hour;  // zero unless energy is priced
  double effective_tokens_per_second = 0;
  double tokens_per_usd = 0;
  double time_to_train_s = 0;  // the token budget at the effective rate
  Usd total_cost;
  Goodput goodput;
};

// `world` GPUs on nodes of `gpus_per_node`, training at `tokens_per_second`.
Economics economics(double tokens_per_second, std::int64_t world, int gpus_per_node,
                    const GpuSpec& gpu, const GpuPrice& price, const PricingOptions& pricing,
                    const FailureModel& failures, Bytes checkpoint, double token_budget);

}  // namespace planner::search
