// Checkpoint shards and manifests without MPI: a shard round-trips a rank's state exactly, and a
// shard or manifest that does not belong to the run is refused without touching the state.
#include "planner/exec/checkpoint.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "exec_test_plans.hpp"
#include "planner/exec/cpu_device.hpp"
#include "support/command.hpp"

namespace planner::exec {
namespace {

using planner::testing::TempDir;
using planner::testing::write_file;
using testing::gpt_test_model;

const std::string kSha(64, 'a');
const std::string kOtherSha(64, 'b');

std::unique_ptr<ModelState> make_state(CpuDevice& dev, std::int64_t bucket = 40'000'000) {
  ModelState::Config c;
  c.model = gpt_test_model();
  c.bucket_elements = bucket;
  c.seed = 5;
  auto state = ModelState::create(dev, c);
  EXPECT_TRUE(state) << state.status().message();
  return state ? std::move(state).value() : nullptr;
}

// Every parameter and moment of the state, in order.
std::vector<float> contents(const ModelState& s) {
  std::vector<float> out;
  for (const ParamGroup& g : s.groups()) {
    for (const DeviceBuffer* b : {&g.param, &g.exp_avg, &g.exp_avg_sq}) {
      out.insert(out.end(), b->f32(), b->f32() + b->bytes() / 4);
    }
  }
  return out;
}

// Makes the optimizer state non-trivial: moments and parameters depend on the position.
void perturb(ModelState& s) {
  float v = 0.5f;
  for (ParamGroup& g : s.groups()) {
    for (DeviceBuffer* b : {&g.param, &g.exp_avg, &g.exp_avg_sq}) {
      for (std::int64_t i = 0; i < b->bytes() / 4; ++i) {
        b->f32()[i] += (v += 0.25f);
      }
    }
  }
  s.set_steps(7);
}

TEST(Checkpoint, AShardRestoresTheStateBitForBit) {
  CpuDevice dev(0, 1);
  auto saved = make_state(dev);
  perturb(*saved);
  auto bytes = encode_shard(*saved, dev, 1, 2, 12, kSha);
  ASSERT_TRUE(bytes) << bytes.status().message();

  auto fresh = make_state(dev);
  ASSERT_NE(contents(*fresh), contents(*saved));
  auto shard = check_shard(*bytes, "rank-00001.shard", *fresh, 1, 2, 12, kSha);
  ASSERT_TRUE(shard) << shard.status().message();
  EXPECT_EQ(shard->step, 12);
  ASSERT_TRUE(apply_shard(*shard, *fresh, dev).is_ok());
  EXPECT_EQ(contents(*fresh), contents(*saved));
  EXPECT_EQ(fresh->steps(), 7);
}

TEST(Checkpoint, ForeignOrDamagedShardsAreRefusedWithoutChangingTheState) {
  CpuDevice dev(0, 1);
  auto saved = make_state(dev);
  perturb(*saved);
  const std::string bytes = *encode_shard(*saved, dev, 1, 2, 12, kSha);
  auto fresh = make_state(dev);
  const std::vector<float> before = contents(*fresh);
  auto small_buckets = make_state(dev, 1000);

  struct Case {
    std::string what;
    std::string bytes;
    const ModelState* state;
    int rank, world;
    std::int64_t step;
    std::string sha;
    std::string expect;
  };
  std::string flipped = bytes;
  flipped[0] = 'X';
  const std::vector<Case> cases = {
      {"other plan", bytes, fresh.get(), 1, 2, 12, kOtherSha, "belongs to another plan"},
      {"other rank", bytes, fresh.get(), 0, 2, 12, kSha, "written by rank 1 of 2, expected rank 0"},
      {"other world", bytes, fresh.get(), 1, 4, 12, kSha, "expected rank 1 of 4"},
      {"other step", bytes, fresh.get(), 1, 2, 10, kSha, "holds step 12, the manifest says 10"},
      {"truncated", bytes.substr(0, bytes.size() - 4), fresh.get(), 1, 2, 12, kSha, "truncated:"},
      {"truncated header", bytes.substr(0, 20), fresh.get(), 1, 2, 12, kSha, "truncated header"},
      {"too long", bytes + "xx", fresh.get(), 1, 2, 12, kSha, "too long:"},
      {"not a shard", flipped, fresh.get(), 1, 2, 12, kSha, "not a planner checkpoint shard"},
      {"other layout", bytes, small_buckets.get(), 1, 2, 12, kSha, "parameter groups"},
  };
  for (const Case& c : cases) {
    auto r = check_shard(c.bytes, "rank-00001.shard", *c.state, c.rank, c.world, c.step, c.sha);
    ASSERT_FALSE(r) << c.what;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput) << c.what;
    EXPECT_NE(r.status().message().find("rank-00001.shard: "), std::string::npos) << c.what;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.what << ": " << r.status().message();
  }
  EXPECT_EQ(contents(*fresh), before);
}

TEST(Checkpoint, ManifestsRoundTripAndAreReadStrictly) {
  CheckpointManifest m;
  m.step = 8;
  m.world_size = 2;
  m.plan_sha256 = kSha;
  m.plan = "gpt-test tp2";
  for (int r = 0; r < 2; ++r)
    m.shards.push_back({r, checkpoint_shard_name(r), 1000 + r, std::string(64, '0' + r)});
  const std::string text = manifest_to_json(m);
  auto back = parse_manifest(text, "manifest.json");
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->step, 8);
  EXPECT_EQ(back->world_size, 2);
  EXPECT_EQ(back->plan, "gpt-test tp2");
  ASSERT_EQ(back->shards.size(), 2u);
  EXPECT_EQ(back->shards[1].file, "rank-00001.shard");
  EXPECT_EQ(back->shards[1].bytes, 1001);

  auto edit = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return parse_manifest(t, "manifest.json");
  };
  const std::vector<std::tuple<std::string, std::string, std::string>> bad = {
      {"\"kind\": \"checkpoint\"", "\"kind\": \"plan\"", "/kind"},
      {"\"step\": 8", "\"step\": 8, \"extra\": 1", "/extra"},
      {"\"world_size\": 2", "\"world_size\": 3", "expected 3 shards"},
      {"rank-00001.shard", "rank-00009.shard", "/shards/1/file"},
      {"\"rank\": 1", "\"rank\": 0", "/shards/1/rank"},
  };
  for (const auto& [from, to, expect] : bad) {
    auto r = edit(from, to);
    ASSERT_FALSE(r) << to;
    EXPECT_NE(r.status().message().find("manifest.json: "), std::string::npos);
    EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
  }
}

TEST(Checkpoint, TheLatestCheckpointIsTheNewestWithAManifest) {
  TempDir dir;
  auto none = latest_checkpoint(dir.file("missing"));
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  for (std::int64_t step : {4, 8, 12}) {
    std::filesystem::create_directories(checkpoint_step_dir(dir.path(), step));
  }
  // 12 was interrupted before its manifest; 8 is the newest complete one.
  for (std::int64_t step : {4, 8}) {
    ASSERT_TRUE(write_file_durably(checkpoint_step_dir(dir.path(), step) + "/" +
                                       std::string(kCheckpointManifestName),
                                   "{}")
                    .is_ok());
  }
  write_file(dir.file("step-notanumber"), "");
  auto latest = latest_checkpoint(dir.path());
  ASSERT_TRUE(latest) << latest.status().message();
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ(**latest, checkpoint_step_dir(dir.path(), 8));
  EXPECT_EQ(std::filesystem::path(**latest).filename(), "step-00000008");
  // No temporary files are left behind.
  for (const auto& e : std::filesystem::directory_iterator(checkpoint_step_dir(dir.path(), 8))) {
    EXPECT_EQ(e.path().filename(), kCheckpointManifestName);
  }
}

TEST(Checkpoint, PlanFingerprintsFollowThePlansContent) {
  Plan a = testing::test_plan(gpt_test_model(), testing::par(2, 1, 1));
  Plan b = a;
  EXPECT_EQ(plan_fingerprint(a), plan_fingerprint(b));
  EXPECT_EQ(plan_fingerprint(a).size(), 64u);
  b.training.seed = 8;
  EXPECT_NE(plan_fingerprint(a), plan_fingerprint(b));
}

}  // namespace
}  // namespace planner::exec
