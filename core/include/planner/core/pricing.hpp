// Choosing the price a plan is costed at: a pure function of the GPU, the offering, an optional
// provider or instance, the user's overrides and price files, and today's date (no I/O, no clock).
//
// Precedence: an override "GPU=USD" for the GPU wins; else the records of the user's price files
// for the GPU, else the catalogue's (GpuSpec::prices; a GPU preset with no price of its own
// borrows another GPU's through "price_as", see gpu_spec.hpp). Among the records of the offering
// (and of the provider or instance, when asked for), the default rule picks:
//
//   1. the reference provider, AWS, whenever it has such a record: its list prices are public and
//      machine-readable per region (the catalogue's come from us-east-1), it prices 7 of the 9
//      GPUs in the catalogue, so a sweep over several GPUs compares hardware rather than
//      providers, and its instances are whole 8-GPU nodes with the RDMA network (EFA) that
//      multi-node plans need, as the default topologies of the H100 and A100 (aws-p5, aws-p4d)
//      assume. Otherwise, any provider.
//   2. the largest instance: clusters are rented in nodes, and single-GPU listings of GPU clouds
//      come without the cluster network (the reference data's caveat);
//   3. a dated record before an undated one, then the newest (by the last day of its period);
//   4. the cheapest; then the first in file order.
//
// The cheapest record of any provider is the wrong default: it is a single-GPU community listing
// for most GPUs (RunPod's $2.69 H100), with no cluster network, and it would mix providers across
// the GPUs of one sweep. A record whose period ended more than kStaleAfterDays before `today` is
// stale, and an undated one is flagged too; the caller prints the warnings.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "planner/core/gpu_spec.hpp"
#include "planner/core/prices.hpp"
#include "planner/core/status.hpp"

namespace planner {

inline constexpr std::string_view kReferenceProvider = "AWS";
// "Older than 12 months".
inline constexpr int kStaleAfterDays = 365;

// A price given for one GPU on the command line ("H100=2.49").
struct PriceOverride {
  std::string gpu;  // a GPU name or alias
  Usd usd_per_gpu_hour;
};

// "H100=2.49" or "H100-SXM5-80GB=2.49": kInvalidInput unless NAME=USD with USD > 0.
Result<PriceOverride> parse_price_override(std::string_view text);

struct PriceQuery {
  Offering offering = Offering::kOnDemand;
  std::string provider;  // empty: the default rule
  std::string instance;  // empty: any instance (else an instance name, e.g. "p5.48xlarge")
};

enum class PriceOrigin { kOverride, kPriceFile, kCatalogue };

struct ChosenPrice {
  Usd usd_per_gpu_hour;
  Offering offering = Offering::kOnDemand;
  PriceOrigin origin = PriceOrigin::kCatalogue;
  std::optional<PriceEntry> entry;  // the record chosen (none for an override)
  std::string override_gpu;         // the override's GPU as given
  std::string rule;                 // why this record: "reference provider AWS, largest instance"
  std::optional<int> age_days;      // from the end of the record's period to today
  bool stale = false;               // older than kStaleAfterDays
  bool undated = false;
  // Ready to print, one line each: borrowed from another GPU (first), stale or undated.
  std::vector<std::string> warnings;
};

// The price of `gpu` for `query`. kInvalidInput when none exists: the message names the GPU, the
// offering (and provider/instance) asked for, and the offerings with their providers that exist.
// `today` enables the staleness check.
Result<ChosenPrice> choose_price(const GpuSpec& gpu, const PriceQuery& query,
                                 std::span<const PriceOverride> overrides,
                                 std::span<const PriceEntry> price_files,
                                 std::optional<CalendarDate> today);

// The record the default rule picks among `records` for `query` (records of other GPUs included:
// the caller filters), with the reason in `rule`; nullptr when none matches.
const PriceEntry* pick_price(std::span<const PriceEntry> records, const PriceQuery& query,
                             std::string* rule = nullptr);

// Age in days of a record relative to `today` (from the last day of its period); nullopt when
// undated.
std::optional<int> price_age_days(const PriceEntry& entry, const CalendarDate& today);

// "on-demand (AWS, CoreWeave, Lambda), spot (AWS)": the offerings of `records` with their
// providers, in offering order.
std::string describe_offerings(std::span<const PriceEntry> records);

}  // namespace planner
