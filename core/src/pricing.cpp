#include "planner/core/pricing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace planner {
namespace {

bool matches_query(const PriceEntry& e, const PriceQuery& q) {
  return e.offering == q.offering &&
         (q.provider.empty() || same_provider(e.provider, q.provider)) &&
         (q.instance.empty() || same_instance(e, q.instance));
}

// Rules 2-4 of the header: true when `a` is preferred to `b`.
bool preferred(const PriceEntry& a, const PriceEntry& b) {
  if (a.gpus_per_instance != b.gpus_per_instance) return a.gpus_per_instance > b.gpus_per_instance;
  if (a.dated() != b.dated()) return a.dated();
  if (a.dated() && *a.period.last != *b.period.last) return *a.period.last > *b.period.last;
  return a.usd_per_gpu_hour < b.usd_per_gpu_hour;
}

std::string money(double usd) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.3f", usd);
  return buf;
}

std::string months(int days) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f months", std::floor(days / 30.44));
  return buf;
}

// The records of `records` that price `gpu`.
std::vector<PriceEntry> for_gpu(const GpuSpec& gpu, std::span<const PriceEntry> records) {
  std::vector<PriceEntry> out;
  for (const PriceEntry& e : records) {
    if (gpu.matches(e.gpu)) out.push_back(e);
  }
  return out;
}

}  // namespace

Result<PriceOverride> parse_price_override(std::string_view text) {
  const auto eq = text.find('=');
  const auto bad = [&] {
    return Status::invalid_input("expected GPU=USD_PER_GPU_HOUR (e.g. H100=2.49), got \"" +
                                 std::string(text) + "\"");
  };
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) return bad();
  const std::string number(text.substr(eq + 1));
  double usd = 0;
  try {
    std::size_t used = 0;
    usd = std::stod(number, &used);
    if (used != number.size()) return bad();
  } catch (const std::exception&) {
    return bad();
  }
  if (!std::isfinite(usd) || usd <= 0) return bad();
  return PriceOverride{std::string(text.substr(0, eq)), Usd(usd)};
}

const PriceEntry* pick_price(std::span<const PriceEntry> records, const PriceQuery& query,
                             std::string* rule) {
  bool reference = false;
  if (query.provider.empty()) {
    reference = std::any_of(records.begin(), records.end(), [&](const PriceEntry& e) {
      return matches_query(e, query) && same_provider(e.provider, kReferenceProvider);
    });
  }
  const PriceEntry* best = nullptr;
  int candidates = 0;
  for (const PriceEntry& e : records) {
    if (!matches_query(e, query)) continue;
    if (reference && !same_provider(e.provider, kReferenceProvider)) continue;
    ++candidates;
    if (best == nullptr || preferred(e, *best)) best = &e;
  }
  if (best != nullptr && rule != nullptr) {
    std::string r = !query.provider.empty() ? "provider " + best->provider + " as asked"
                    : reference ? "reference provider " + std::string(kReferenceProvider)
                                : "no " + std::string(kReferenceProvider) +
                                      " price; the largest instance of any provider";
    if (!query.instance.empty()) r += ", instance " + query.instance;
    if (candidates > 1) {
      r += "; of " + std::to_string(candidates) +
           " records: the largest instance, dated, newest, cheapest";
    }
    *rule = std::move(r);
  }
  return best;
}

std::optional<int> price_age_days(const PriceEntry& entry, const CalendarDate& today) {
  if (!entry.dated()) return std::nullopt;
  return static_cast<int>(today.days_since_epoch() - entry.period.last->days_since_epoch());
}

std::string describe_offerings(std::span<const PriceEntry> records) {
  std::string out;
  for (const auto& [offering, name] : EnumTraits<Offering>::kNames) {
    std::vector<std::string> providers;
    for (const PriceEntry& e : records) {
      if (e.offering != offering) continue;
      if (std::none_of(providers.begin(), providers.end(),
                       [&](const std::string& p) { return same_provider(p, e.provider); })) {
        providers.push_back(e.provider);
      }
    }
    if (providers.empty()) continue;
    std::sort(providers.begin(), providers.end());
    std::string list;
    for (const std::string& p : providers)
      list += (list.empty() ? "" : ", ") + p;
    out += (out.empty() ? "" : "; ") + std::string(name) + " (" + list + ")";
  }
  return out;
}

Result<ChosenPrice> choose_price(const GpuSpec& gpu, const PriceQuery& query,
                                 std::span<const PriceOverride> overrides,
                                 std::span<const PriceEntry> price_files,
                                 std::optional<CalendarDate> today) {
  ChosenPrice c;
  c.offering = query.offering;
  for (const PriceOverride& o : overrides) {
    if (gpu.matches(o.gpu)) {
      c.usd_per_gpu_hour = o.usd_per_gpu_hour;
      c.origin = PriceOrigin::kOverride;
      c.override_gpu = o.gpu;
      c.rule = "override " + o.gpu + "=" + money(o.usd_per_gpu_hour.raw());
      return c;
    }
  }
  const std::vector<PriceEntry> from_files = for_gpu(gpu, price_files);
  const PriceEntry* chosen = pick_price(from_files, query, &c.rule);
  c.origin = PriceOrigin::kPriceFile;
  if (chosen == nullptr) {
    chosen = pick_price(gpu.prices, query, &c.rule);
    c.origin = PriceOrigin::kCatalogue;
  }
  if (chosen == nullptr) {
    std::vector<PriceEntry> all = from_files;
    all.insert(all.end(), gpu.prices.begin(), gpu.prices.end());
    std::string asked = std::string(to_string(query.offering)) + " price";
    if (!query.provider.empty()) asked += " from " + query.provider;
    if (!query.instance.empty()) asked += " for instance " + query.instance;
    const std::string have = describe_offerings(all);
    std::string borrowed;
    if (!gpu.prices.empty() && !gpu.prices.front().priced_as.empty()) {
      borrowed = " (it is priced as " + gpu.prices.front().priced_as + ")";
    }
    return Status::invalid_input(
        gpu.name + " has no " + asked + " in the price catalogue" +
        (price_files.empty() ? std::string() : " or the price files") + borrowed +
        (have.empty() ? std::string("; it has no price at all") : "; prices exist for " + have) +
        ". Give one with --price " + gpu.name + "=USD_PER_GPU_HOUR or a price file");
  }
  c.entry = *chosen;
  c.usd_per_gpu_hour = chosen->usd_per_gpu_hour;
  if (!chosen->priced_as.empty()) {
    std::string reason = gpu.price_as ? gpu.price_as->reason : std::string();
    c.warnings.push_back(gpu.name + " has no price of its own; priced as " + chosen->priced_as +
                         (reason.empty() ? std::string() : " (" + reason + ")"));
  }
  if (!chosen->dated()) {
    c.undated = true;
    c.warnings.push_back("the price is undated: \"" + chosen->date + "\"");
  } else if (today) {
    c.age_days = price_age_days(*chosen, *today);
    if (*c.age_days > kStaleAfterDays) {
      c.stale = true;
      c.warnings.push_back("the price is " + months(*c.age_days) + " old (" + chosen->date +
                           ", today " + today->to_string() + "); prices change: check it");
    }
  }
  return c;
}

}  // namespace planner
