// The resource limits of limits.hpp: each one is enforced, with an error naming the file, the JSON
// pointer and the limit, and a document just inside it is read.
#include "planner/core/limits.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "planner/core/catalog.hpp"
#include "planner/core/hf_import.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/memory.hpp"
#include "support/command.hpp"

namespace planner {
namespace {

using testing::TempDir;

// `depth` nested arrays: "[[[...]]]".
std::string nested(int depth) {
  return std::string(static_cast<std::size_t>(depth), '[') +
         std::string(static_cast<std::size_t>(depth), ']');
}

// An object with `n` keys "k0".."k<n-1>".
std::string object_with_keys(std::int64_t n) {
  std::string s = "{";
  for (std::int64_t i = 0; i < n; ++i)
    s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  return s + "}";
}

std::string parse_error(std::string_view text) {
  Diagnostics diag("x.json");
  EXPECT_FALSE(parse_json_text(text, diag).has_value());
  return diag.to_string();
}

TEST(Limits, NestingDepth) {
  Diagnostics ok("x.json");
  EXPECT_TRUE(parse_json_text(nested(limits::kMaxNestingDepth), ok)) << ok.to_string();
  const std::string err = parse_error(nested(limits::kMaxNestingDepth + 1));
  EXPECT_EQ(err.substr(0, 9), "x.json: /");
  EXPECT_NE(err.find("nested deeper than 64 levels"), std::string::npos) << err;
  // The pointer names the innermost array: 64 levels of "/0".
  std::string pointer;
  for (int i = 0; i < limits::kMaxNestingDepth; ++i)
    pointer += "/0";
  EXPECT_EQ(err, "x.json: " + pointer +
                     ": nested deeper than 64 levels (the limit for arrays "
                     "and objects)");
}

TEST(Limits, DeepNestingIsRefusedWithoutQuadraticMemory) {
  // 100,000 levels used to cost about 10 GB (a JSON pointer per level); now parsing stops at 65.
  const std::string err = parse_error(nested(100'000));
  EXPECT_NE(err.find("nested deeper than 64 levels"), std::string::npos) << err.substr(0, 300);
  std::string objects;
  for (int i = 0; i < 100'000; ++i)
    objects += R"({"a":)";
  EXPECT_NE(parse_error(objects).find("nested deeper"), std::string::npos);
}

TEST(Limits, KeysPerObject) {
  Diagnostics ok("x.json");
  const auto doc = parse_json_text(object_with_keys(limits::kMaxObjectKeys), ok);
  ASSERT_TRUE(doc) << ok.to_string();
  EXPECT_EQ(doc->size(), static_cast<std::size_t>(limits::kMaxObjectKeys));
  EXPECT_EQ((*doc)["k9999"], 0);
  EXPECT_EQ(parse_error(object_with_keys(limits::kMaxObjectKeys + 1)),
            "x.json: /k10000: object with more than 10000 keys (the limit for one object)");
}

TEST(Limits, ManyKeysParseInOnePass) {
  // 200,000 keys over 20 objects: each key is appended without searching the object (this took
  // 28 s when keys were inserted through the ordered map's linear search; bench_core times it).
  std::string doc = "[";
  for (int o = 0; o < 20; ++o)
    doc += (o ? "," : "") + object_with_keys(limits::kMaxObjectKeys);
  doc += "]";
  Diagnostics diag("x.json");
  const auto parsed = parse_json_text(doc, diag);
  ASSERT_TRUE(parsed) << diag.to_string();
  EXPECT_EQ(parsed->size(), 20u);
  EXPECT_EQ((*parsed)[19]["k0"], 0);
}

TEST(Limits, ValuesPerDocument) {
  std::string doc = "[";
  for (std::int64_t i = 0; i < limits::kMaxValues - 1; ++i)
    doc += i ? ",0" : "0";
  Diagnostics ok("x.json");
  EXPECT_TRUE(parse_json_text(doc + "]", ok)) << ok.to_string();  // the array + 999,999 values
  EXPECT_EQ(parse_error(doc + ",0]"),
            "x.json: /999999: more than 1000000 values in one document (the limit)");
}

TEST(Limits, KeyLength) {
  const std::string key(limits::kMaxKeyBytes, 'k');
  Diagnostics ok("x.json");
  EXPECT_TRUE(parse_json_text("{\"" + key + "\": 1}", ok)) << ok.to_string();
  EXPECT_EQ(parse_error("{\"a\": {\"" + key + "k\": 1}}"),
            "x.json: /a/" + std::string(40, 'k') +
                "...: key of 257 bytes, longer than the 256-byte limit for keys");
}

TEST(Limits, StringLength) {
  const std::string value(limits::kMaxStringBytes, 'v');
  Diagnostics ok("x.json");
  EXPECT_TRUE(parse_json_text("{\"notes\": \"" + value + "\"}", ok)) << ok.to_string();
  EXPECT_EQ(parse_error("{\"list\": [\"a\", \"" + value + "v\"]}"),
            "x.json: /list/1: string of 65537 bytes, longer than the 65536-byte limit");
}

TEST(Limits, NameLength) {
  auto model = [](const std::string& name) {
    return R"({"schema_version": 1, "kind": "model", "name": ")" + name +
           R"(", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 256, "vocab": 100})";
  };
  EXPECT_TRUE(parse_model(model(std::string(limits::kMaxNameBytes, 'n')), "m.json"));
  const auto bad = parse_model(model(std::string(limits::kMaxNameBytes + 1, 'n')), "m.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(),
            "m.json: /name: expected a short name, got a name of 257 bytes, longer than the "
            "256-byte limit for names");
  const auto tab = parse_model(model("a\\tb"), "m.json");
  ASSERT_FALSE(tab);
  EXPECT_EQ(tab.status().message(),
            "m.json: /name: expected a short name, got a name with control characters (tabs, "
            "newlines, ...)");
}

TEST(Limits, DiagnosticsAreCapped) {
  Diagnostics diag("x.json");
  for (int i = 0; i < 1000; ++i)
    diag.add("/" + std::to_string(i), "bad");
  EXPECT_EQ(diag.size(), 1000u);
  EXPECT_EQ(diag.items().size(), limits::kMaxDiagnostics);
  const std::string text = diag.to_string();
  EXPECT_NE(text.find("x.json: /199: bad\nx.json: and 800 more problems (the first 200 are shown)"),
            std::string::npos);
  EXPECT_EQ(text.find("/200: bad"), std::string::npos);
}

TEST(Limits, UnknownKeysAreCountedBeyondTheFirstFew) {
  Diagnostics diag("x.json");
  auto doc = parse_json_text(object_with_keys(1000), diag);
  ASSERT_TRUE(doc);
  JsonObject o(*doc, "", diag);
  o.finish();
  EXPECT_EQ(diag.size(), limits::kMaxUnknownKeysReported + 1);
  EXPECT_EQ(diag.items().back().message, "and 980 more unknown keys");
}

TEST(Limits, FileSizeIsCheckedBeforeReading) {
  TempDir dir;
  const std::string path = dir.file("big.json");
  // A sparse file one byte over the limit: refused from its size, nothing read.
  testing::write_file(path, "{}");
  std::filesystem::resize_file(path, limits::kMaxFileBytes + 1);
  const auto text = read_text_file(path);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(text.status().message(), path +
                                         ": file is 67108865 bytes, larger than the 67108864-"
                                         "byte limit for planner inputs");
  std::filesystem::resize_file(path, 100);
  EXPECT_EQ(read_text_file(path, 99).status().code(), StatusCode::kInvalidInput);
  EXPECT_TRUE(read_text_file(path, 100));
}

TEST(Limits, ModelParameters) {
  // Every field within its own limit, but 100,000 layers of hidden 10^7 is ~10^20 parameters:
  // counted in int64 that came out negative; now the model is refused.
  const auto huge = parse_model(R"({"schema_version": 1, "kind": "model", "name": "huge",
      "layers": 100000, "hidden": 10000000, "heads": 100000, "ffn_hidden": 10000000,
      "vocab": 100000000})",
                                "huge.json");
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(huge.status().message(),
            "huge.json: /layers: a model of 100000 layers of hidden 10000000 has more "
            "parameters than the 1e+15 planner can account for (up to 7e+19)");
  // Just inside: a 1,000-layer model of hidden 100,000 (~10^14 parameters) is counted exactly.
  const auto big = parse_model(R"({"schema_version": 1, "kind": "model", "name": "big",
      "layers": 1000, "hidden": 100000, "heads": 1000, "ffn_hidden": 400000, "vocab": 100000})",
                               "big.json");
  ASSERT_TRUE(big) << big.status().message();
  EXPECT_GT(big->total_params(), 0);
  const std::int64_t h = 100'000;
  const std::int64_t ffn = 400'000;
  // Per layer: attention 4h^2 and its layernorm 2h, the gelu MLP 2 h ffn and its layernorm 2h;
  // then embedding and LM head (h x vocab each, vocab = h) and the final layernorm.
  EXPECT_EQ(big->total_params(),
            1000 * (4 * h * h + 2 * h + 2 * h * ffn + 2 * h) + 2 * h * h + 2 * h);
}

TEST(Limits, ActivationBytes) {
  // Every field within its limit, but a micro-batch of 10^6 sequences of 10^8 tokens: the memory
  // estimate printed -8,796,093,022,208 MiB of activations per layer; now the plan is refused.
  const ModelSpec model = *builtin_catalog().model("llama3-8b");
  TrainingSpec training;
  training.seq_length = 100'000'000;
  training.global_batch_size = 1'000'000;
  ParallelConfig parallel;
  parallel.micro_batch_size = 1'000'000;
  const auto memory =
      estimate_memory(model, training, parallel, *builtin_catalog().gpu("h100"), {});
  ASSERT_FALSE(memory);
  EXPECT_EQ(memory.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(memory.status().message().find(
                "/training/seq_length: a micro-batch of 1000000 x 100000000 tokens "
                "(micro_batch_size x seq_length / cp) holds up to"),
            std::string::npos)
      << memory.status().message();
  // A long but real sequence is accounted for.
  training.seq_length = 1'000'000;
  training.global_batch_size = 1;
  parallel.micro_batch_size = 1;
  const auto real = estimate_memory(model, training, parallel, *builtin_catalog().gpu("h100"), {});
  ASSERT_TRUE(real) << real.status().message();
  EXPECT_GT(real->stages[0].activations.raw(), 0);
}

}  // namespace
}  // namespace planner
