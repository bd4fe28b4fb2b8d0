#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "planner/core/catalog.hpp"
#include "planner/core/pricing.hpp"
#include "planner/core/spec_json.hpp"

namespace planner {
namespace {

const GpuSpec& gpu(std::string_view name) {
  const GpuSpec* g = builtin_catalog().find_gpu(name);
  EXPECT_NE(g, nullptr) << name;
  return *g;
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

std::string parse_error(std::string_view text) {
  auto r = parse_price_file(text, "p.json");
  EXPECT_FALSE(r) << text;
  return r ? std::string() : std::string(r.status().message());
}

constexpr const char* kRecord = R"({"gpu": "H100", "provider": "MyCloud", "instance": "8x H100",
  "gpus_per_instance": 8, "offering": "on-demand", "usd_per_instance_hour": 16.0,
  "usd_per_gpu_hour": 2.0, "region": null, "date": "2026-10-01", "source": "contract"})";

// ---- dates

TEST(PriceDates, CalendarDaysRoundTrip) {
  EXPECT_EQ(CalendarDate({1970, 1, 1}).days_since_epoch(), 0);
  EXPECT_EQ(CalendarDate({2000, 3, 1}).days_since_epoch(), 11017);
  for (std::int64_t d : {-1000, 0, 11016, 11017, 20000, 20783}) {
    EXPECT_EQ(date_from_days(d).days_since_epoch(), d);
  }
  EXPECT_EQ(CalendarDate({2026, 11, 25}).days_since_epoch() -
                CalendarDate({2025, 11, 25}).days_since_epoch(),
            365);
  EXPECT_EQ(CalendarDate({2024, 2, 9}).to_string(), "2024-02-09");
  EXPECT_TRUE(parse_calendar_date("2024-02-29"));
  EXPECT_FALSE(parse_calendar_date("2025-02-29"));
  EXPECT_FALSE(parse_calendar_date("2025-13-01"));
  EXPECT_FALSE(parse_calendar_date("2025-1-01"));
}

TEST(PriceDates, PeriodsReadFromTheStartOfTheText) {
  PricePeriod day = parse_price_period("2026-11-09 (retrieved)");
  ASSERT_TRUE(day.dated());
  EXPECT_EQ(day.first, day.last);
  EXPECT_EQ(day.last->to_string(), "2026-11-09");
  EXPECT_EQ(parse_price_period("2026-10-13").last->to_string(), "2026-10-13");

  PricePeriod quarter = parse_price_period("2024-Q4 (page: current rates ...)");
  ASSERT_TRUE(quarter.dated());
  EXPECT_EQ(quarter.first->to_string(), "2024-10-01");
  EXPECT_EQ(quarter.last->to_string(), "2024-12-31");

  PricePeriod month = parse_price_period("2025-06");
  EXPECT_EQ(month.first->to_string(), "2025-06-01");
  EXPECT_EQ(month.last->to_string(), "2025-06-30");

  PricePeriod year = parse_price_period("2026 (exact date not stated)");
  EXPECT_EQ(year.first->to_string(), "2026-01-01");
  EXPECT_EQ(year.last->to_string(), "2026-12-31");

  for (const char* undated : {"undated (SkyPilot catalog snapshot)", "", "long-standing list price",
                              "2023-2025 list price", "20261109", "2026-11-31", "2026-Q5"}) {
    EXPECT_FALSE(parse_price_period(undated).dated()) << undated;
  }
}

// ---- the catalogue

TEST(PriceCatalogue, EveryRecordLoads) {
  auto loaded = load_builtin_prices();
  ASSERT_TRUE(loaded) << loaded.status().message();
  const std::vector<PriceEntry>& all = *loaded;
  ASSERT_EQ(all.size(), 110u);  // the reference data's gpu_prices.json
  std::set<std::string> providers, gpus;
  int undated = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const PriceEntry& p = all[i];
    SCOPED_TRACE("record " + std::to_string(i) + " " + p.gpu + " " + p.provider);
    EXPECT_EQ(p.origin, "catalogue");
    EXPECT_FALSE(p.provider.empty());
    EXPECT_FALSE(p.instance.empty());
    EXPECT_FALSE(p.source.empty());
    EXPECT_FALSE(p.date.empty());
    EXPECT_GE(p.gpus_per_instance, 1);
    EXPECT_GT(p.usd_per_gpu_hour.raw(), 0.1);
    EXPECT_LT(p.usd_per_gpu_hour.raw(), 20.0);
    // Every record prices a GPU of the catalogue.
    const GpuSpec* g = builtin_catalog().find_gpu(p.gpu);
    ASSERT_NE(g, nullptr) << p.gpu;
    EXPECT_TRUE(g->price_as == std::nullopt) << g->name;
    if (p.dated()) {
      EXPECT_GE(p.period.last->year, 2024);
    } else {
      ++undated;
      EXPECT_TRUE(contains(p.date, "undated")) << p.date;
    }
    providers.insert(p.provider);
    gpus.insert(g->name);
  }
  EXPECT_EQ(undated, 16);  // the catalogue snapshots the reference data's README names
  EXPECT_EQ(providers.size(), 13u);
  EXPECT_EQ(gpus.size(), 9u);
  EXPECT_EQ(builtin_prices().size(), all.size());
}

TEST(PriceCatalogue, EveryGpuPresetHasAnOnDemandPrice) {
  for (const GpuSpec& g : builtin_catalog().gpus()) {
    if (g.name == "cpu-host") continue;  // planner exec's local CPU ranks: nothing to rent
    const PriceEntry* p = g.price_for(Offering::kOnDemand);
    ASSERT_NE(p, nullptr) << g.name << " has no on-demand price";
    EXPECT_GT(p->usd_per_gpu_hour.raw(), 0) << g.name;
    EXPECT_EQ(g.price_as.has_value(), !p->priced_as.empty()) << g.name;
  }
}

TEST(PriceCatalogue, PresetsCarryNoPricesOfTheirOwn) {
  // Prices are data (core/presets/prices): every record a GPU has comes from there.
  for (const GpuSpec& g : builtin_catalog().gpus()) {
    for (const PriceEntry& p : g.prices) {
      EXPECT_EQ(p.origin, "catalogue") << g.name;
      if (p.priced_as.empty()) {
        EXPECT_TRUE(g.matches(p.gpu)) << g.name << " " << p.gpu;
      } else {
        EXPECT_TRUE(gpu(p.priced_as).matches(p.gpu));
      }
    }
  }
}

// The default rule's choice for every GPU the price data covers.
TEST(PriceChoice, DefaultOnDemandPricePerGpu) {
  struct Expect {
    const char* gpu;
    const char* provider;
    const char* instance;
    double usd;
  };
  const Expect expected[] = {
      {"A100-SXM4-40GB", "AWS", "p4d.24xlarge", 2.74471},
      {"A100-SXM4-80GB", "AWS", "p4de.24xlarge", 3.43088},
      {"H100-SXM5-80GB", "AWS", "p5.48xlarge", 6.88},  // after AWS's June 2025 cut (was 12.29)
      {"H200-SXM-141GB", "AWS", "p5en.48xlarge", 7.912},
      {"B200-SXM-180GB", "AWS", "p6-b200.48xlarge", 14.2416},
      {"L40S", "AWS", "g6e.48xlarge", 3.7664},
      {"V100-SXM2-32GB", "AWS", "p3.16xlarge", 3.06},
      // No AWS price: the largest instance of any provider, dated before undated.
      {"GB200-B200-186GB", "CoreWeave", "GB200 NVL72 (4-GPU node)", 10.5},
      {"MI300X", "Oracle", "BM.GPU.MI300X.8", 6.0},
  };
  for (const Expect& e : expected) {
    auto c = choose_price(gpu(e.gpu), {}, {}, {}, CalendarDate{2026, 11, 25});
    ASSERT_TRUE(c) << e.gpu << ": " << c.status().message();
    ASSERT_TRUE(c->entry) << e.gpu;
    EXPECT_EQ(c->entry->provider, e.provider) << e.gpu;
    EXPECT_EQ(c->entry->instance, e.instance) << e.gpu;
    EXPECT_DOUBLE_EQ(c->usd_per_gpu_hour.raw(), e.usd) << e.gpu;
    EXPECT_EQ(c->origin, PriceOrigin::kCatalogue);
    // GpuSpec::price_for() applies the same rule.
    EXPECT_DOUBLE_EQ(gpu(e.gpu).price_for(Offering::kOnDemand)->usd_per_gpu_hour.raw(), e.usd);
  }
  auto mi300x = choose_price(gpu("MI300X"), {}, {}, {}, CalendarDate{2026, 11, 25});
  EXPECT_TRUE(mi300x->undated);
  ASSERT_EQ(mi300x->warnings.size(), 1u);
  EXPECT_TRUE(contains(mi300x->warnings[0], "undated"));
}

TEST(PriceChoice, BorrowedPricesSayWhose) {
  auto c = choose_price(gpu("V100-SXM3-32GB"), {}, {}, {}, std::nullopt);
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_DOUBLE_EQ(c->usd_per_gpu_hour.raw(), 3.06);
  EXPECT_EQ(c->entry->priced_as, "V100-SXM2-32GB");
  ASSERT_FALSE(c->warnings.empty());
  EXPECT_TRUE(contains(c->warnings[0], "priced as V100-SXM2-32GB")) << c->warnings[0];
}

TEST(PriceChoice, OfferingsAndProviders) {
  const CalendarDate today{2026, 11, 25};
  PriceQuery q;
  q.offering = Offering::kSpot;
  auto spot = choose_price(gpu("H100"), q, {}, {}, today);
  ASSERT_TRUE(spot);
  EXPECT_EQ(spot->entry->provider, "AWS");
  EXPECT_DOUBLE_EQ(spot->usd_per_gpu_hour.raw(), 1.65227);
  EXPECT_FALSE(spot->stale);  // 2025-11-30: 360 days

  q.offering = Offering::kCapacityBlock;
  auto block = choose_price(gpu("H100"), q, {}, {}, today);
  ASSERT_TRUE(block);
  EXPECT_DOUBLE_EQ(block->usd_per_gpu_hour.raw(), 4.916);
  EXPECT_TRUE(block->stale);  // 2024-Q4
  ASSERT_EQ(block->warnings.size(), 1u);
  EXPECT_TRUE(contains(block->warnings[0], "22 months old")) << block->warnings[0];
  // Without a date to compare with, nothing is stale.
  EXPECT_FALSE(choose_price(gpu("H100"), q, {}, {}, std::nullopt)->stale);

  q.offering = Offering::kOnDemand;
  q.provider = "gcp";
  auto gcp = choose_price(gpu("H100"), q, {}, {}, today);
  ASSERT_TRUE(gcp);
  EXPECT_EQ(gcp->entry->provider, "GCP");
  // Two 8-GPU instances dated the same day: the cheaper.
  EXPECT_EQ(gcp->entry->instance, "a3-highgpu-8g");
  EXPECT_TRUE(contains(gcp->rule, "provider GCP as asked")) << gcp->rule;

  q.instance = "a3-megagpu-8g";
  auto mega = choose_price(gpu("H100"), q, {}, {}, today);
  ASSERT_TRUE(mega);
  EXPECT_DOUBLE_EQ(mega->usd_per_gpu_hour.raw(), 11.6172);

  // Instance names match without the source's remarks in parentheses.
  q.provider.clear();
  q.instance = "standard_nd96isr_h100_v5";
  auto azure = choose_price(gpu("H100"), q, {}, {}, today);
  ASSERT_TRUE(azure);
  EXPECT_EQ(azure->entry->provider, "Azure");
  EXPECT_DOUBLE_EQ(azure->usd_per_gpu_hour.raw(), 12.29);

  // Of one provider's records, dated beats undated even when dearer (Oracle H200).
  PriceQuery oracle;
  oracle.provider = "Oracle";
  auto h200 = choose_price(gpu("H200"), oracle, {}, {}, today);
  ASSERT_TRUE(h200);
  EXPECT_DOUBLE_EQ(h200->usd_per_gpu_hour.raw(), 12.25);
}

TEST(PriceChoice, MissingPriceNamesWhatExists) {
  PriceQuery q;
  q.offering = Offering::kReserved1y;
  auto r = choose_price(gpu("B200"), q, {}, {}, std::nullopt);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  const std::string msg(r.status().message());
  EXPECT_TRUE(contains(msg, "B200-SXM-180GB has no reserved-1y price")) << msg;
  EXPECT_TRUE(contains(msg,
                       "on-demand (AWS, CoreWeave, Hyperstack, Lambda, Nebius, Oracle, "
                       "RunPod); spot (AWS, CoreWeave)"))
      << msg;
  EXPECT_TRUE(contains(msg, "--price B200-SXM-180GB=USD_PER_GPU_HOUR")) << msg;

  q.offering = Offering::kOnDemand;
  q.provider = "Vultr";
  auto none = choose_price(gpu("H100"), q, {}, {}, std::nullopt);
  ASSERT_FALSE(none);
  EXPECT_TRUE(contains(std::string(none.status().message()), "no on-demand price from Vultr"));

  auto cpu = choose_price(gpu("cpu-host"), {}, {}, {}, std::nullopt);
  ASSERT_FALSE(cpu);
  EXPECT_TRUE(contains(std::string(cpu.status().message()), "it has no price at all"));
}

TEST(PriceChoice, OverridesThenPriceFilesThenTheCatalogue) {
  auto file = parse_price_file(std::string("[") + kRecord + "]", "mine.json");
  ASSERT_TRUE(file) << file.status().message();
  ASSERT_EQ(file->size(), 1u);
  EXPECT_EQ((*file)[0].origin, "mine.json");

  auto from_file = choose_price(gpu("H100"), {}, {}, *file, std::nullopt);
  ASSERT_TRUE(from_file);
  EXPECT_EQ(from_file->origin, PriceOrigin::kPriceFile);
  EXPECT_DOUBLE_EQ(from_file->usd_per_gpu_hour.raw(), 2.0);
  EXPECT_EQ(from_file->entry->provider, "MyCloud");

  // The file has no spot price: the catalogue's.
  PriceQuery spot;
  spot.offering = Offering::kSpot;
  auto fallback = choose_price(gpu("H100"), spot, {}, *file, std::nullopt);
  ASSERT_TRUE(fallback);
  EXPECT_EQ(fallback->origin, PriceOrigin::kCatalogue);

  // Other GPUs ignore it.
  EXPECT_EQ(choose_price(gpu("B200"), {}, {}, *file, std::nullopt)->origin,
            PriceOrigin::kCatalogue);

  const std::vector<PriceOverride> overrides{{"h100-sxm5-80gb", Usd(1.5)}};
  auto over = choose_price(gpu("H100"), {}, overrides, *file, std::nullopt);
  ASSERT_TRUE(over);
  EXPECT_EQ(over->origin, PriceOrigin::kOverride);
  EXPECT_DOUBLE_EQ(over->usd_per_gpu_hour.raw(), 1.5);
  EXPECT_FALSE(over->entry);
}

TEST(PriceChoice, OverrideSyntax) {
  auto ok = parse_price_override("H100=2.49");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->gpu, "H100");
  EXPECT_DOUBLE_EQ(ok->usd_per_gpu_hour.raw(), 2.49);
  for (const char* bad : {"H100", "=2", "H100=", "H100=abc", "H100=2.5x", "H100=0", "H100=-1",
                          "H100=inf", "H100=nan"}) {
    auto r = parse_price_override(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  }
}

// ---- strict price files

TEST(PriceFiles, ProblemsNameTheFileAndPointer) {
  EXPECT_TRUE(contains(parse_error("{}"), "p.json: expected a JSON array"));
  EXPECT_TRUE(contains(parse_error("[]"), "holds no price records"));
  EXPECT_TRUE(contains(parse_error("[1]"), "p.json: /0: expected an object"));
  std::string r = kRecord;
  auto with = [&](std::string from, std::string to) {
    std::string t = r;
    t.replace(t.find(from), from.size(), to);
    return "[" + t + "]";
  };
  EXPECT_TRUE(contains(parse_error(with("\"on-demand\"", "\"reserved-2y\"")),
                       "p.json: /0/offering: expected one of on-demand, spot, reserved-1y, "
                       "reserved-3y, capacity-block; got \"reserved-2y\""));
  EXPECT_TRUE(contains(parse_error(with("\"usd_per_gpu_hour\": 2.0", "\"usd_per_gpu_hour\": 16.0")),
                       "p.json: /0/usd_per_gpu_hour: disagrees with usd_per_instance_hour"));
  EXPECT_TRUE(contains(parse_error(with("\"source\"", "\"sauce\"")), "/0/sauce"));
  EXPECT_TRUE(contains(parse_error(with("\"gpus_per_instance\": 8", "\"gpus_per_instance\": 0")),
                       "/0/gpus_per_instance"));
  EXPECT_TRUE(contains(parse_error(with("\"region\": null", "\"region\": 3")),
                       "/0/region: expected a string or null"));
  EXPECT_TRUE(contains(parse_error(with("\"usd_per_gpu_hour\": 2.0,", "")), "/0/usd_per_gpu_hour"));
  // Every problem is reported, not just the first.
  const std::string two = "[" + r + ", {\"gpu\": \"H100\"}]";
  const std::string msg = parse_error(two);
  EXPECT_TRUE(contains(msg, "/1/provider")) << msg;
  EXPECT_TRUE(contains(msg, "/1/offering")) << msg;
}

TEST(PriceFiles, OldReservedSpellingStillReads) {
  EXPECT_EQ(parse_enum<Offering>("reserved"), Offering::kReserved1y);
  EXPECT_EQ(to_string(Offering::kReserved1y), "reserved-1y");
  EXPECT_EQ(enum_choices<Offering>(), "on-demand, spot, reserved-1y, reserved-3y, capacity-block");
}

TEST(PriceFiles, RecordsRoundTripThroughJson) {
  for (const PriceEntry& p : builtin_prices()) {
    auto again = parse_price_file("[" + to_json(p).dump() + "]", "again");
    ASSERT_TRUE(again) << again.status().message();
    EXPECT_EQ(to_json((*again)[0]), to_json(p));
  }
}

}  // namespace
}  // namespace planner
