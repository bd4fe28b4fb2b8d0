// planner price list | show, run as a user does.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "support/command.hpp"

namespace planner {
namespace {

constexpr auto planner = testing::run_planner;

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

TEST(PriceCli, ListShowsEveryPriceWithDatesAndSources) {
  auto r = planner({"price", "list", "--today", "2026-11-25"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "110 prices; * 3 older than 12 months")) << r.out;
  EXPECT_TRUE(contains(r.out, "16 undated")) << r.out;
  for (const char* column :
       {"PROVIDER", "INSTANCE", "GPUS", "$/GPU-h", "OFFERING", "REGION", "DATE", "SOURCE"}) {
    EXPECT_TRUE(contains(r.out, column)) << column;
  }
  EXPECT_TRUE(contains(r.out, "p5.48xlarge")) << r.out;
  EXPECT_TRUE(contains(r.out, "2024-Q4 *"));
  EXPECT_TRUE(contains(r.out, "Sources:\n  [1] "));

  // The JSON is a price file: every record in the catalogue's schema, loadable with --prices.
  auto json = planner({"price", "list", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto records = nlohmann::json::parse(json.out);
  ASSERT_TRUE(records.is_array());
  EXPECT_EQ(records.size(), 110u);
  for (const auto& rec : records) {
    for (const char* key : {"gpu", "provider", "instance", "gpus_per_instance", "offering",
                            "usd_per_gpu_hour", "date", "source"}) {
      EXPECT_TRUE(rec.contains(key)) << key << " in " << rec.dump();
    }
  }
}

TEST(PriceCli, ListFilters) {
  auto r = planner({"price", "list", "--gpu", "b200", "--offering", "spot", "--csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "gpu,provider,instance,gpus_per_instance,offering,"));
  // Header plus AWS and CoreWeave.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3) << r.out;
  EXPECT_TRUE(contains(r.out, "B200-SXM-180GB,AWS,p6-b200.48xlarge,8,spot,"));

  auto gcp = planner({"price", "list", "--provider", "gcp", "--json"});
  ASSERT_EQ(gcp.exit_code, 0) << gcp.err;
  for (const auto& rec : nlohmann::json::parse(gcp.out))
    EXPECT_EQ(rec["provider"], "GCP");

  auto bad = planner({"price", "list", "--offering", "reserved-2y"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "--offering: unknown offering \"reserved-2y\"")) << bad.err;
  auto nobody = planner({"price", "list", "--provider", "Vultr"});
  EXPECT_EQ(nobody.exit_code, 2);
  EXPECT_TRUE(contains(nobody.err, "no prices from \"Vultr\"; providers: AWS, Azure"))
      << nobody.err;
  auto gpu = planner({"price", "list", "--gpu", "H900"});
  EXPECT_EQ(gpu.exit_code, 2);
  auto date = planner({"price", "list", "--today", "25/11/2026"});
  EXPECT_EQ(date.exit_code, 2);
  EXPECT_TRUE(contains(date.err, "--today: expected YYYY-MM-DD")) << date.err;
}

TEST(PriceCli, ShowSaysWhichPriceAPlanUsesAndWhy) {
  auto r = planner({"price", "show", "h100", "--today", "2026-11-25"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "6.880  AWS       p5.48xlarge  2026-11-09")) << r.out;
  EXPECT_TRUE(contains(r.out, "reference provider AWS")) << r.out;
  EXPECT_TRUE(contains(r.out, "warning: capacity-block: the price is 22 months old")) << r.out;
  EXPECT_TRUE(contains(r.out, "All prices of H100-SXM5-80GB:")) << r.out;

  auto lambda = planner({"price", "show", "h100", "--provider", "Lambda", "--json"});
  ASSERT_EQ(lambda.exit_code, 0) << lambda.err;
  const auto j = nlohmann::json::parse(lambda.out);
  EXPECT_EQ(j["gpu"], "H100-SXM5-80GB");
  ASSERT_EQ(j["chosen"].size(), 1u);                              // Lambda lists on-demand only
  EXPECT_EQ(j["chosen"][0]["price"]["instance"], "8x H100 SXM");  // the 8-GPU instance
  EXPECT_DOUBLE_EQ(j["chosen"][0]["usd_per_gpu_hour"].get<double>(), 3.99);

  auto borrowed = planner({"price", "show", "v100-sxm3"});
  ASSERT_EQ(borrowed.exit_code, 0) << borrowed.err;
  EXPECT_TRUE(contains(borrowed.out,
                       "warning: V100-SXM3-32GB has no price of its own; priced as "
                       "V100-SXM2-32GB"))
      << borrowed.out;
  // Once, not once per offering.
  EXPECT_EQ(borrowed.out.find("has no price of its own"),
            borrowed.out.rfind("has no price of its own"));

  auto none = planner({"price", "show", "b200", "--offering", "reserved-3y"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(contains(none.err, "B200-SXM-180GB has no reserved-3y price")) << none.err;
  EXPECT_TRUE(contains(none.err, "prices exist for on-demand (AWS, CoreWeave")) << none.err;
}

TEST(PriceCli, PriceFilesAreReadStrictlyAndWin) {
  testing::TempDir dir;
  const std::string good = dir.file("mine.json");
  testing::write_file(good, R"([{"gpu": "H100", "provider": "MyCloud", "instance": "8x H100 IB",
    "gpus_per_instance": 8, "offering": "on-demand", "usd_per_gpu_hour": 2.1,
    "date": "2026-11-01", "source": "our contract"}])");
  auto r = planner({"price", "show", "h100", "--offering", "on-demand", "--prices", good});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "on-demand    2.100  MyCloud   8x H100 IB")) << r.out;
  auto listed =
      planner({"price", "list", "--gpu", "h100", "--provider", "mycloud", "--prices", good});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_TRUE(contains(listed.out, good + " [1]")) << listed.out;

  const std::string bad = dir.file("bad.json");
  testing::write_file(bad, R"([{"gpu": "H100", "provider": "MyCloud", "instance": "x",
    "gpus_per_instance": 8, "offering": "reserved", "usd_per_gpu_hour": 2.1,
    "date": "2026-11-01", "source": "s", "price": 3}])");
  auto e = planner({"price", "list", "--prices", bad});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_TRUE(contains(e.err, bad + ": /0/price: unknown key")) << e.err;
  auto missing = planner({"price", "list", "--prices", dir.file("nope.json")});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_TRUE(contains(missing.err, "nope.json: no such file")) << missing.err;
}

TEST(PriceCli, GpuListShowsTheDefaultPrice) {
  auto r = planner({"gpu", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "6.88")) << r.out;  // H100 on AWS p5 after June 2025
  EXPECT_FALSE(contains(r.out, "12.29")) << r.out;
}

}  // namespace
}  // namespace planner
