// Dated cloud prices per GPU-hour: the records of the price catalogue and of user price files.
//
// The catalogue is core/presets/prices/gpu_prices.json, a copy of the reference data's
// gpu_prices.json (dated, sourced prices of 9 GPUs from 13 providers), embedded in the binary. A
// user price file has the same schema: a JSON array of records
//   {"gpu": "H100-SXM5-80GB", "provider": "AWS", "instance": "p5.48xlarge",
//    "gpus_per_instance": 8, "offering": "on-demand", "usd_per_instance_hour": 55.04,
//    "usd_per_gpu_hour": 6.88, "region": "us-east-1", "date": "2026-11-09 (retrieved)",
//    "source": "https://...", "notes": "..."}
// gpu, provider, instance, gpus_per_instance, offering, usd_per_gpu_hour, date and source are
// required; usd_per_instance_hour and region may be null or absent, notes absent. When both
// prices are given they must agree (instance price / GPUs within 1% of the GPU price). "gpu" is a
// GPU name or alias of the catalogue ("B200" prices B200-SXM-180GB). GPU documents may carry the
// same records in their "prices" array, without "gpu" (the document's GPU) and, in older files,
// without "gpus_per_instance".
//
// Dates are free text that starts with the period they name: "2026-11-09 (retrieved)" a day,
// "2024-Q4 (...)" a quarter, "2026 (exact date not stated)" a year; anything else ("undated
// (SkyPilot catalog snapshot ...)") is undated. parse_price_period() reads that start.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/diagnostics.hpp"
#include "planner/core/enums.hpp"
#include "planner/core/status.hpp"
#include "planner/core/units.hpp"

namespace planner {

// A day of the (proleptic Gregorian) calendar.
struct CalendarDate {
  int year = 1970;
  int month = 1;
  int day = 1;

  auto operator<=>(const CalendarDate&) const = default;
  // Days since 1970-01-01 (negative before).
  std::int64_t days_since_epoch() const;
  // "2026-11-09".
  std::string to_string() const;
};

// Exactly "YYYY-MM-DD" naming a day that exists; nullopt otherwise.
std::optional<CalendarDate> parse_calendar_date(std::string_view text);
// The day `days` after 1970-01-01.
CalendarDate date_from_days(std::int64_t days);

// The period a price's date names: its first and last day, or neither (undated).
struct PricePeriod {
  std::optional<CalendarDate> first;
  std::optional<CalendarDate> last;

  bool dated() const { return last.has_value(); }
  // "2026-11-09", "2025-06", "2024-Q4", "2026", or "undated".
  std::string label() const;
};

PricePeriod parse_price_period(std::string_view date_text);

struct PriceEntry {
  std::string gpu;  // as the price data names it ("B200"); empty in older GPU documents
  std::string provider;
  std::string instance;       // as the provider names it, with the source's remarks in "(...)"
  int gpus_per_instance = 0;  // 0: not stated (older GPU documents)
  Offering offering = Offering::kOnDemand;
  std::optional<Usd> usd_per_instance_hour;
  Usd usd_per_gpu_hour;
  std::string region;  // empty when the source states none
  std::string date;    // as written
  PricePeriod period;  // parsed from `date`
  std::string source;
  std::string notes;
  // Where the record was read: "catalogue" or a price file's name.
  std::string origin;
  // Set on catalogue records a GPU preset borrows through "price_as": the GPU they price.
  std::string priced_as;

  bool dated() const { return period.dated(); }
  // The instance name without the source's remarks: "Standard_ND96isr_H100_v5" for
  // "Standard_ND96isr_H100_v5 (ND H100 v5)".
  std::string_view instance_name() const;
};

// True when `provider` names the record's provider, ignoring case.
bool same_provider(std::string_view a, std::string_view b);
// True when `instance` is the record's instance name (instance_name()), ignoring case.
bool same_instance(const PriceEntry& entry, std::string_view instance);

// Reads one price record at `pointer`; `in_gpu_document` relaxes "gpu" and "gpus_per_instance" to
// optional. Problems go to `diag`; returns false when there were any.
class JsonObject;
bool read_price_record(JsonObject& obj, bool in_gpu_document, PriceEntry& out);

// A price file's text (`source` names it in messages and becomes each record's origin). Strict:
// every problem is reported with its JSON pointer ("prices.json: /3/offering: expected one of
// ...").
Result<std::vector<PriceEntry>> parse_price_file(std::string_view text, std::string_view source);
Result<std::vector<PriceEntry>> load_price_file(const std::string& path);

// The catalogue's price records, parsed once from the embedded data (empty if it were malformed;
// tests load every record).
std::span<const PriceEntry> builtin_prices();
// The same, with any parse error.
Result<std::vector<PriceEntry>> load_builtin_prices();

}  // namespace planner
