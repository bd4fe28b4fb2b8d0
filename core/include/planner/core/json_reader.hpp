// Strict JSON reading: parse once, reject what is not understood.
//
// parse_json_text() rejects empty input, binary data, syntax errors (with line and column) and
// duplicate keys, and enforces the limits of limits.hpp (depth, values, keys, string lengths) in
// time and memory linear in the text. JsonObject reads one object field by field: every read checks
// the type and range and records a diagnostic at the field's JSON pointer instead of stopping;
// finish() reports every key that was never read as unknown, with a "did you mean" suggestion. Only
// core/ loaders use this header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/core/diagnostics.hpp"
#include "planner/core/enums.hpp"

namespace planner {

// Insertion-ordered, so documents planner writes keep a readable field order.
using Json = nlohmann::ordered_json;

// Parses `text` (named `source` in messages). On failure adds a diagnostic and returns nullopt.
std::optional<Json> parse_json_text(std::string_view text, Diagnostics& diag);

// "string \"abc\"", "2.5", "an array", ...: how a found value is described in messages.
std::string describe_json(const Json& value);

enum class Need { kRequired, kOptional };

struct IntRange {
  std::int64_t min = 0;
  std::int64_t max = std::int64_t{1} << 53;
  const char* hint = nullptr;  // appended to range errors, e.g. "give the size in GiB"
};

struct RealRange {
  double min = 0.0;
  double max = 1e300;
  bool min_exclusive = false;
  const char* hint = nullptr;
};

class JsonObject {
 public:
  // Reports "expected an object" (and reads nothing) when `value` is not an object.
  JsonObject(const Json& value, std::string pointer, Diagnostics& diag);

  bool valid() const { return object_ != nullptr; }
  const std::string& pointer() const { return pointer_; }
  std::string pointer_of(std::string_view key) const;
  Diagnostics& diagnostics() { return diag_; }
  bool has(std::string_view key) const;

  // Each reader returns true when `out` was assigned. A missing optional key leaves `out`
  // untouched.
  bool read(std::string_view key, std::int64_t& out, Need need, IntRange range = {});
  bool read(std::string_view key, int& out, Need need, IntRange range = {});
  bool read(std::string_view key, double& out, Need need, RealRange range = {});
  bool read(std::string_view key, bool& out, Need need);
  bool read(std::string_view key, std::string& out, Need need, bool allow_empty = false);
  bool read(std::string_view key, std::vector<std::string>& out, Need need);
  // A name (or a list of them): a non-empty string of at most limits::kMaxNameBytes bytes
  // without control characters.
  bool read_name(std::string_view key, std::string& out, Need need);
  bool read_names(std::string_view key, std::vector<std::string>& out, Need need);

  template <class E>
  bool read_enum(std::string_view key, E& out, Need need) {
    std::string text;
    if (!read(key, text, need)) return false;
    if (auto v = parse_enum<E>(text)) {
      out = *v;
      return true;
    }
    diag_.add(pointer_of(key), "expected one of " + enum_choices<E>() + "; got \"" + text + "\"");
    return false;
  }

  // Marks `key` as read and returns its value, or nullptr when absent (and reports it when
  // required).
  const Json* child(std::string_view key, Need need);
  // Marks `key` as understood without reading it (e.g. "schema_version" checked elsewhere).
  void accept(std::string_view key);

  // Reports every key that no read(), child() or accept() asked for (the first
  // limits::kMaxUnknownKeysReported one by one, then how many more).
  void finish();

  // Adds a diagnostic at `key`'s pointer.
  void error(std::string_view key, std::string message);

 private:
  const Json* find(std::string_view key, Need need);

  const Json* object_ = nullptr;
  std::string pointer_;
  Diagnostics& diag_;
  std::vector<std::string> seen_;
};

// Edit distance used for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word`, if it is close enough to be a plausible typo.
std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates);

}  // namespace planner
