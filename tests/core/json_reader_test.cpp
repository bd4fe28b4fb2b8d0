#include "planner/core/json_reader.hpp"

#include <gtest/gtest.h>

namespace planner {
namespace {

TEST(JsonReader, SyntaxErrorsCarryLineAndColumn) {
  Diagnostics diag("x.json");
  EXPECT_FALSE(parse_json_text("{\n  \"a\": 1,\n}", diag));
  ASSERT_EQ(diag.size(), 1u);
  EXPECT_NE(diag.to_string().find("x.json: invalid JSON at line 3, column 1"), std::string::npos)
      << diag.to_string();
}

TEST(JsonReader, DuplicateKeysAreLocated) {
  Diagnostics diag("d.json");
  EXPECT_FALSE(parse_json_text(R"({"a": {"b": 1, "b": 2}, "list": [{}, {"k": 1, "k": 1}]})", diag));
  ASSERT_EQ(diag.size(), 2u);
  EXPECT_EQ(diag.items()[0].pointer, "/a/b");
  EXPECT_EQ(diag.items()[1].pointer, "/list/1/k");
}

TEST(JsonReader, EmptyAndBinaryInputs) {
  Diagnostics empty("e.json");
  EXPECT_FALSE(parse_json_text("", empty));
  EXPECT_EQ(empty.to_string(), "e.json: empty file: expected a JSON document");
  Diagnostics binary("b.json");
  EXPECT_FALSE(parse_json_text(std::string_view("\x7f"
                                                "ELF\0\0",
                                                6),
                               binary));
  EXPECT_NE(binary.to_string().find("binary data"), std::string::npos);
}

TEST(JsonReader, TypedReadsReportEveryProblem) {
  Diagnostics diag("t.json");
  Json j = Json::parse(R"({"n": "ten", "m": 2.5, "k": -1, "big": 1e30, "ok": 7, "extra": 1,
                           "flag": 1, "kind": "relu"})");
  JsonObject o(j, "", diag);
  std::int64_t n = 0;
  std::int64_t m = 0;
  std::int64_t k = 0;
  std::int64_t big = 0;
  std::int64_t ok = 0;
  std::int64_t missing = 0;
  bool flag = false;
  MlpKind kind = MlpKind::kGelu;
  EXPECT_FALSE(o.read("n", n, Need::kRequired));
  EXPECT_FALSE(o.read("m", m, Need::kRequired));
  EXPECT_FALSE(o.read("k", k, Need::kRequired, {1, 100}));
  EXPECT_FALSE(o.read("big", big, Need::kRequired, {1, 1000}));
  EXPECT_TRUE(o.read("ok", ok, Need::kRequired, {1, 100}));
  EXPECT_FALSE(o.read("missing", missing, Need::kRequired));
  EXPECT_FALSE(o.read("flag", flag, Need::kOptional));
  EXPECT_FALSE(o.read_enum("kind", kind, Need::kOptional));
  o.finish();
  EXPECT_EQ(ok, 7);
  EXPECT_EQ(diag.to_string(),
            "t.json: /n: expected an integer, got string \"ten\"\n"
            "t.json: /m: expected an integer, got 2.5\n"
            "t.json: /k: must be >= 1, got -1\n"
            "t.json: /big: must be an integer between 1 and 1000, got 1e+30\n"
            "t.json: /missing: missing required key\n"
            "t.json: /flag: expected true or false, got 1\n"
            "t.json: /kind: expected one of gelu, swiglu, geglu, relu2; got \"relu\"\n"
            "t.json: /extra: unknown key; expected one of: big, flag, k, kind, m, missing, n, ok");
}

TEST(JsonReader, UnknownKeysSuggestTheClosestKnownKey) {
  Diagnostics diag("s.json");
  Json j = Json::parse(R"({"lyers": 3, "hbm_GB": 80})");
  JsonObject o(j, "/model", diag);
  int layers = 0;
  double hbm = 0;
  o.read("layers", layers, Need::kOptional);
  o.read("hbm_GiB", hbm, Need::kOptional);
  o.finish();
  EXPECT_EQ(diag.to_string(),
            "s.json: /model/lyers: unknown key; did you mean \"layers\"?\n"
            "s.json: /model/hbm_GB: unknown key; did you mean \"hbm_GiB\"?");
}

TEST(JsonReader, IntegralFloatsAreAcceptedAsIntegers) {
  Diagnostics diag("f.json");
  Json j = Json::parse(R"({"tokens": 3e11, "n": 4.0})");
  JsonObject o(j, "", diag);
  std::int64_t tokens = 0;
  int n = 0;
  EXPECT_TRUE(o.read("tokens", tokens, Need::kRequired, {1, std::int64_t{1} << 50}));
  EXPECT_TRUE(o.read("n", n, Need::kRequired));
  EXPECT_EQ(tokens, 300'000'000'000);
  EXPECT_EQ(n, 4);
  EXPECT_TRUE(diag.empty()) << diag.to_string();
}

TEST(JsonReader, ClosestMatch) {
  EXPECT_EQ(closest_match("kv_head", {"kv_heads", "heads"}), "kv_heads");
  EXPECT_EQ(closest_match("zzzzzz", {"layers", "hidden"}), std::nullopt);
}

}  // namespace
}  // namespace planner
