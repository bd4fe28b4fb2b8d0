// Hardware profiles: the presets load and cover every GPU preset, documents round-trip, and bad
// documents are rejected with the file, the JSON pointer and what was expected.
#include "planner/core/hardware_profile.hpp"

#include <gtest/gtest.h>

#include "planner/core/catalog.hpp"
#include "planner/core/cluster_spec.hpp"
#include "planner/sim/profiles.hpp"

namespace planner {
namespace {

TEST(Profiles, PresetsLoadAndCoverEveryGpu) {
  auto profiles = load_builtin_profiles();
  ASSERT_TRUE(profiles) << profiles.status().message();
  EXPECT_EQ(profiles->size(), builtin_profiles().size());
  for (const GpuSpec& gpu : builtin_catalog().gpus()) {
    const HardwareProfile* p = builtin_profile_for(gpu);
    ASSERT_NE(p, nullptr) << gpu.name;
    // Every precision the GPU supports has a GEMM rate below its datasheet peak.
    for (const auto& [precision, name] : EnumTraits<Precision>::kNames) {
      if (!gpu.supports(precision)) continue;
      const FlopRate rate = p->compute.gemm_rate(precision).rate;
      EXPECT_GT(rate.raw(), 0) << gpu.name << " " << name;
      EXPECT_LE(rate.raw(), gpu.peak_for(precision).raw()) << gpu.name << " " << name;
      EXPECT_FALSE(p->compute.gemm_rate(precision).source.empty()) << gpu.name << " " << name;
    }
    EXPECT_LT(p->compute.memory_bandwidth.raw(), gpu.hbm_bandwidth.raw()) << gpu.name;
  }
  for (const HardwareProfile& p : *profiles) {
    // Link kinds are topology link kinds; every group names its source.
    auto again = sim::parse_profile(to_json_text(p), p.name);
    ASSERT_TRUE(again) << again.status().message();
    EXPECT_EQ(to_json(*again), to_json(p)) << p.name;
    EXPECT_FALSE(p.compute.attention_source.empty());
    EXPECT_FALSE(p.compute.memory_source.empty());
    EXPECT_FALSE(p.compute.comm_slowdown_source.empty());
    EXPECT_FALSE(p.network.protocol_source.empty());
    for (const LinkProfile& l : p.network.links)
      EXPECT_FALSE(l.source.empty()) << p.name << " " << l.kind;
  }
}

TEST(Profiles, LookupByNameAndDerivedFallback) {
  auto h100 = builtin_profile("H100-SXM5-80GB");
  ASSERT_TRUE(h100) << h100.status().message();
  EXPECT_EQ(h100->name, "h100-sxm5-80gb");
  EXPECT_EQ(h100->link("nvlink4").efficiency, 0.816);
  EXPECT_EQ(h100->link("no-such-kind").efficiency, h100->network.default_link.efficiency);
  auto missing = builtin_profile("tpu-v5");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("a100-sxm4-80gb"), std::string::npos);

  GpuSpec custom = *builtin_catalog().find_gpu("H100");
  custom.name = "X1";
  custom.aliases.clear();
  EXPECT_EQ(builtin_profile_for(custom), nullptr);
  const HardwareProfile d = derive_profile(custom);
  EXPECT_TRUE(d.describes(custom));
  EXPECT_NEAR(d.compute.gemm_rate(Precision::kBf16).rate.raw(),
              0.75 * custom.peak_for(Precision::kBf16).raw(), 1.0);
  auto again = sim::parse_profile(to_json_text(d), "derived");
  EXPECT_TRUE(again) << again.status().message();
}

TEST(Profiles, DefaultIsThePresetElseDerived) {
  const GpuSpec& h100 = *builtin_catalog().find_gpu("H100");
  EXPECT_EQ(default_profile_for(h100).name, builtin_profile_for(h100)->name);
  GpuSpec custom = h100;
  custom.name = "X1";
  custom.aliases.clear();
  EXPECT_EQ(default_profile_for(custom).source, derive_profile(custom).source);
}

TEST(Profiles, NodesForHoldsEveryGpuInWholeNodes) {
  EXPECT_EQ(nodes_for(1, 8), 1);
  EXPECT_EQ(nodes_for(8, 8), 1);
  EXPECT_EQ(nodes_for(9, 8), 2);
  EXPECT_EQ(nodes_for(1024, 8), 128);
  EXPECT_EQ(nodes_for(0, 8), 1);
  EXPECT_EQ(nodes_for(5, 0), 5);  // a topology without a GPU count: one per node
}

TEST(Profiles, BadDocumentsNameThePointer) {
  std::string text = to_json_text(*builtin_profile("a100-sxm4-80gb"));
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    return t;
  };
  auto error = [](const std::string& doc) {
    auto p = sim::parse_profile(doc, "p.json");
    return p ? std::string("accepted") : p.status().message();
  };
  EXPECT_NE(
      error(replace("\"sm_count\"", "\"sm_cnt\"")).find("p.json: /compute/sm_cnt: unknown key"),
      std::string::npos);
  EXPECT_NE(error(replace("\"kind\": \"nvlink3\"", "\"kind\": \"nvlink9\""))
                .find("p.json: /network/links/0/kind: unknown link kind \"nvlink9\""),
            std::string::npos);
  EXPECT_NE(error(replace("\"efficiency\": 0.772", "\"efficiency\": 65"))
                .find("p.json: /network/links/0/efficiency"),
            std::string::npos);
  EXPECT_NE(error(replace("\"kind\": \"profile\"", "\"kind\": \"gpu\""))
                .find("p.json: /kind: expected \"profile\""),
            std::string::npos);
}

// A CPU host's oversubscribed efficiency: absent in presets (1, ideal sharing), round-trips with
// its source, and must lie in (0, 1].
TEST(Profiles, OversubscribedEfficiencyRoundTripsWithinBounds) {
  HardwareProfile p = *builtin_profile("cpu-host");
  EXPECT_EQ(p.compute.oversubscribed_efficiency, 1.0);
  EXPECT_FALSE(to_json(p)["compute"].contains("oversubscribed_efficiency"));
  p.compute.host_cores = 2;
  p.compute.oversubscribed_efficiency = 0.85;
  p.compute.oversubscribed_source = "measured";
  const std::string text = to_json_text(p);
  auto back = sim::parse_profile(text, "p.json");
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->compute.oversubscribed_efficiency, 0.85);
  EXPECT_EQ(back->compute.oversubscribed_source, "measured");
  EXPECT_EQ(to_json(*back), to_json(p));
  for (const char* bad : {"0.0", "1.5"}) {
    std::string t = text;
    const std::string from = "\"oversubscribed_efficiency\": 0.85";
    const auto at = t.find(from);
    ASSERT_NE(at, std::string::npos);
    t.replace(at, from.size(), std::string("\"oversubscribed_efficiency\": ") + bad);
    auto r = sim::parse_profile(t, "p.json");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.status().message().find("p.json: /compute/oversubscribed_efficiency"),
              std::string::npos)
        << r.status().message();
  }
}

// The head dimension at which flash attention runs at half its rate: optional (0, not written,
// without it), kept through JSON, and refused when negative.
TEST(Profiles, AttentionHalfHeadDimRoundTripsWithinBounds) {
  HardwareProfile p = *builtin_profile("h100-sxm5-80gb");
  EXPECT_EQ(p.compute.attention_half_head_dim, 54);
  const std::string text = to_json_text(p);
  auto back = sim::parse_profile(text, "p.json");
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->compute.attention_half_head_dim, 54);
  p.compute.attention_half_head_dim = 0;
  EXPECT_FALSE(to_json(p)["compute"].contains("attention_half_head_dim"));
  std::string t = text;
  const std::string from = "\"attention_half_head_dim\": 54";
  const auto at = t.find(from);
  ASSERT_NE(at, std::string::npos);
  t.replace(at, from.size(), "\"attention_half_head_dim\": -1");
  auto r = sim::parse_profile(t, "p.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("p.json: /compute/attention_half_head_dim"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace planner
