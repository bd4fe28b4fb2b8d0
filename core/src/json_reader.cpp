#include "planner/core/json_reader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_set>

#include "planner/core/limits.hpp"

namespace planner {
namespace {

std::string format_number(double v) {
  char buf[64];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.6g", v);
  }
  return buf;
}

// Where a byte offset falls as "line L, column C" (1-based).
std::string line_column(std::string_view text, std::size_t offset) {
  std::size_t line = 1;
  std::size_t column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// Builds the document from the parser's events (nlohmann's SAX interface) in one linear pass,
// enforcing the limits of limits.hpp as it goes and locating duplicate keys.
//
// Memory is linear in the input: each open array or object keeps only its own key or index (the
// JSON pointer is assembled when a diagnostic needs it), and keys are appended to an object
// without the ordered map's linear duplicate search (duplicates are found through a hash set per
// open object instead).
class DocumentBuilder {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  DocumentBuilder(std::string_view text, Diagnostics& diag) : text_(text), diag_(diag) {}

  // The document, once sax_parse() returned true and no diagnostic was added.
  Json& root() { return root_; }
  bool failed() const { return failed_; }

  bool null() { return add(Json(nullptr)); }
  bool boolean(bool v) { return add(Json(v)); }
  bool number_integer(number_integer_t v) { return add(Json(v)); }
  bool number_unsigned(number_unsigned_t v) { return add(Json(v)); }
  bool number_float(number_float_t v, const string_t& /*text*/) { return add(Json(v)); }
  bool string(string_t& v) {
    if (v.size() > limits::kMaxStringBytes) {
      return limit(pointer(), "string of " + std::to_string(v.size()) + " bytes, longer than the " +
                                  std::to_string(limits::kMaxStringBytes) + "-byte limit");
    }
    return add(Json(std::move(v)));
  }
  bool binary(binary_t& /*v*/) { return limit(pointer(), "binary values are not JSON"); }

  bool start_object(std::size_t /*elements*/) { return open(Json::object()); }
  bool start_array(std::size_t /*elements*/) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    Frame& f = frames_.back();
    if (k.size() > limits::kMaxKeyBytes) {
      f.key = k.substr(0, 40) + "...";
      return limit(pointer(), "key of " + std::to_string(k.size()) + " bytes, longer than the " +
                                  std::to_string(limits::kMaxKeyBytes) + "-byte limit for keys");
    }
    f.key = k;
    if (++f.count > limits::kMaxObjectKeys) {
      return limit(pointer(), "object with more than " + std::to_string(limits::kMaxObjectKeys) +
                                  " keys (the limit for one object)");
    }
    if (!f.keys.insert(k).second) {
      diag_.add(pointer(), "duplicate key (a key may appear once per object)");
    }
    // Appended without the ordered map's linear search for an existing key: duplicates are
    // reported above and make the whole parse fail, so a map holding one is never read.
    auto& members = static_cast<Json::object_t::Container&>(f.value->get_ref<Json::object_t&>());
    members.emplace_back(std::move(k), nullptr);
    f.member = &members.back().second;
    return true;
  }

  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: <detail>";
    // other errors (a number too large for a double) have no location of their own.
    std::string what = e.what();
    const auto prefix_end = what.find("] ");
    if (prefix_end != std::string::npos) what = what.substr(prefix_end + 2);
    const auto colon = what.find(": ", what.find("parse error"));
    if (what.rfind("parse error", 0) == 0 && colon != std::string::npos) {
      what = what.substr(colon + 2);
    }
    std::string detail;
    for (char c : what) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", u);
        detail += hex;
      } else {
        detail += c;
      }
    }
    // A syntax error is located by line and column; a value the parser cannot hold (a number
    // beyond a double's range) also by its JSON pointer.
    const bool syntax = dynamic_cast<const Json::parse_error*>(&e) != nullptr;
    diag_.add(
        syntax ? std::string() : pointer(),
        "invalid JSON at " + line_column(text_, position == 0 ? 0 : position - 1) + ": " + detail);
    failed_ = true;
    return false;
  }

 private:
  struct Frame {
    Json* value = nullptr;                 // the open array or object
    Json* member = nullptr;                // object: the slot of the current key's value
    std::string key;                       // object: the current key
    std::int64_t count = 0;                // keys or elements so far
    std::unordered_set<std::string> keys;  // object: keys seen
  };

  // Where the value being parsed goes: the root, the next array element or the current key's
  // slot.
  Json* slot() {
    if (frames_.empty()) return &root_;
    Frame& f = frames_.back();
    if (f.value->is_array()) {
      ++f.count;
      auto& elements = f.value->get_ref<Json::array_t&>();
      elements.emplace_back();
      return &elements.back();
    }
    return f.member;
  }

  bool count_value() {
    if (++values_ > limits::kMaxValues) {
      return limit(pointer(), "more than " + std::to_string(limits::kMaxValues) +
                                  " values in one document (the limit)");
    }
    return true;
  }

  bool add(Json value) {
    if (!count_value()) return false;
    *slot() = std::move(value);
    return true;
  }

  bool open(Json container) {
    if (!count_value()) return false;
    if (static_cast<int>(frames_.size()) >= limits::kMaxNestingDepth) {
      return limit(pointer(), "nested deeper than " + std::to_string(limits::kMaxNestingDepth) +
                                  " levels (the limit for arrays and objects)");
    }
    Json* s = slot();
    *s = std::move(container);
    frames_.push_back({s, nullptr, {}, 0, {}});
    return true;
  }

  bool close() {
    frames_.pop_back();
    return true;
  }

  // The JSON pointer of the value about to be added (the next array element, or the value of the
  // current key).
  std::string pointer() const {
    std::string p;
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      p += '/';
      if (f.value->is_array()) {
        // An enclosing array's current element is its last one; the innermost array's next.
        const bool innermost = i + 1 == frames_.size();
        p += std::to_string(innermost ? f.count : f.count - 1);
      } else {
        p += json_pointer_escape(f.key);
      }
    }
    return p;
  }

  bool limit(std::string pointer, std::string message) {
    diag_.add(std::move(pointer), std::move(message));
    failed_ = true;
    return false;
  }

  std::string_view text_;
  Diagnostics& diag_;
  Json root_;
  std::vector<Frame> frames_;
  std::int64_t values_ = 0;
  bool failed_ = false;
};

}  // namespace

std::optional<Json> parse_json_text(std::string_view text, Diagnostics& diag) {
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    diag.add("", text.empty() ? "empty file: expected a JSON document"
                              : "only whitespace: expected a JSON document");
    return std::nullopt;
  }
  if (text.find('\0') != std::string_view::npos) {
    diag.add("", "binary data (NUL bytes): expected a UTF-8 JSON text document");
    return std::nullopt;
  }
  if (text.size() > limits::kMaxFileBytes) {
    diag.add("", "document of " + std::to_string(text.size()) + " bytes, larger than the " +
                     std::to_string(limits::kMaxFileBytes) + "-byte limit");
    return std::nullopt;
  }
  const std::size_t before = diag.size();
  DocumentBuilder builder(text, diag);
  const bool parsed = Json::sax_parse(text.begin(), text.end(), &builder,
                                      Json::input_format_t::json, /*strict=*/true,
                                      /*ignore_comments=*/false);
  if (!parsed || builder.failed() || diag.size() != before) return std::nullopt;
  return std::move(builder.root());
}

std::string describe_json(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Json::value_t::string: {
      std::string s = value.get<std::string>();
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      return "string \"" + s + "\"";
    }
    case Json::value_t::number_integer:
      return std::to_string(value.get<std::int64_t>());
    case Json::value_t::number_unsigned:
      return std::to_string(value.get<std::uint64_t>());
    case Json::value_t::number_float:
      return format_number(value.get<double>());
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::binary:
    case Json::value_t::discarded:
      return "an unsupported value";
  }
  return "an unsupported value";
}

JsonObject::JsonObject(const Json& value, std::string pointer, Diagnostics& diag)
    : pointer_(std::move(pointer)), diag_(diag) {
  if (value.is_object()) {
    object_ = &value;
  } else {
    diag_.add(pointer_, "expected an object, got " + describe_json(value));
  }
}

std::string JsonObject::pointer_of(std::string_view key) const {
  return pointer_ + "/" + json_pointer_escape(key);
}

bool JsonObject::has(std::string_view key) const {
  return object_ != nullptr && object_->contains(key);
}

void JsonObject::error(std::string_view key, std::string message) {
  diag_.add(pointer_of(key), std::move(message));
}

const Json* JsonObject::find(std::string_view key, Need need) {
  if (object_ == nullptr) return nullptr;
  if (std::find(seen_.begin(), seen_.end(), key) == seen_.end()) seen_.emplace_back(key);
  auto it = object_->find(key);
  if (it == object_->end()) {
    if (need == Need::kRequired) error(key, "missing required key");
    return nullptr;
  }
  return &*it;
}

const Json* JsonObject::child(std::string_view key, Need need) {
  return find(key, need);
}

void JsonObject::accept(std::string_view key) {
  find(key, Need::kOptional);
}

bool JsonObject::read(std::string_view key, std::int64_t& out, Need need, IntRange range) {
  const Json* v = find(key, need);
  if (v == nullptr) return false;
  std::string hint = range.hint ? std::string(" (") + range.hint + ")" : std::string();
  const bool fits_int64 =
      v->is_number_integer() &&
      (!v->is_number_unsigned() ||
       v->get<std::uint64_t>() <=
           static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  if (fits_int64) {
    const std::int64_t x = v->get<std::int64_t>();
    if (x < range.min) {
      error(key, "must be >= " + std::to_string(range.min) + ", got " + std::to_string(x) + hint);
      return false;
    }
    if (x > range.max) {
      error(key, "must be <= " + std::to_string(range.max) + ", got " + std::to_string(x) + hint);
      return false;
    }
    out = x;
    return true;
  }
  if (v->is_number()) {
    const double x = v->get<double>();
    if (v->is_number_float() && std::isfinite(x) && x == std::floor(x) &&
        x >= static_cast<double>(range.min) && x <= static_cast<double>(range.max)) {
      // 1e9 or 4.0: an integral value written in float notation is accepted.
      out = static_cast<std::int64_t>(x);
      return true;
    }
    if (v->is_number_float() && x != std::floor(x)) {
      error(key, "expected an integer, got " + describe_json(*v));
    } else {
      error(key, "must be an integer between " + std::to_string(range.min) + " and " +
                     std::to_string(range.max) + ", got " + describe_json(*v) + hint);
    }
    return false;
  }
  error(key, "expected an integer, got " + describe_json(*v));
  return false;
}

bool JsonObject::read(std::string_view key, int& out, Need need, IntRange range) {
  range.max = std::min<std::int64_t>(range.max, std::numeric_limits<int>::max());
  std::int64_t wide = 0;
  if (!read(key, wide, need, range)) return false;
  out = static_cast<int>(wide);
  return true;
}

bool JsonObject::read(std::string_view key, double& out, Need need, RealRange range) {
  const Json* v = find(key, need);
  if (v == nullptr) return false;
  if (!v->is_number()) {
    error(key, "expected a number, got " + describe_json(*v));
    return false;
  }
  const double x = v->get<double>();
  std::string hint = range.hint ? std::string(" (") + range.hint + ")" : std::string();
  if (!std::isfinite(x)) {
    error(key, "must be a finite number, got " + describe_json(*v));
    return false;
  }
  if (range.min_exclusive ? !(x > range.min) : !(x >= range.min)) {
    error(key, std::string("must be ") + (range.min_exclusive ? "> " : ">= ") +
                   format_number(range.min) + ", got " + describe_json(*v) + hint);
    return false;
  }
  if (x > range.max) {
    error(key, "must be <= " + format_number(range.max) + ", got " + describe_json(*v) + hint);
    return false;
  }
  out = x;
  return true;
}

bool JsonObject::read(std::string_view key, bool& out, Need need) {
  const Json* v = find(key, need);
  if (v == nullptr) return false;
  if (!v->is_boolean()) {
    error(key, "expected true or false, got " + describe_json(*v));
    return false;
  }
  out = v->get<bool>();
  return true;
}

bool JsonObject::read(std::string_view key, std::string& out, Need need, bool allow_empty) {
  const Json* v = find(key, need);
  if (v == nullptr) return false;
  if (!v->is_string()) {
    error(key, "expected a string, got " + describe_json(*v));
    return false;
  }
  std::string s = v->get<std::string>();
  if (!allow_empty && s.empty()) {
    error(key, "must not be empty");
    return false;
  }
  out = std::move(s);
  return true;
}

bool JsonObject::read(std::string_view key, std::vector<std::string>& out, Need need) {
  const Json* v = find(key, need);
  if (v == nullptr) return false;
  if (!v->is_array()) {
    error(key, "expected an array of strings, got " + describe_json(*v));
    return false;
  }
  std::vector<std::string> items;
  bool ok = true;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const Json& item = (*v)[i];
    if (!item.is_string()) {
      diag_.add(pointer_of(key) + "/" + std::to_string(i),
                "expected a string, got " + describe_json(item));
      ok = false;
    } else {
      items.push_back(item.get<std::string>());
    }
  }
  if (ok) out = std::move(items);
  return ok;
}

namespace {

// Why `name` cannot be a name, or "".
std::string name_problem(const std::string& name) {
  if (name.size() > limits::kMaxNameBytes) {
    return "a name of " + std::to_string(name.size()) + " bytes, longer than the " +
           std::to_string(limits::kMaxNameBytes) + "-byte limit for names";
  }
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return "a name with control characters (tabs, newlines, ...)";
    }
  }
  return {};
}

}  // namespace

bool JsonObject::read_name(std::string_view key, std::string& out, Need need) {
  std::string name;
  if (!read(key, name, need)) return false;
  if (const std::string problem = name_problem(name); !problem.empty()) {
    error(key, "expected a short name, got " + problem);
    return false;
  }
  out = std::move(name);
  return true;
}

bool JsonObject::read_names(std::string_view key, std::vector<std::string>& out, Need need) {
  std::vector<std::string> names;
  if (!read(key, names, need)) return false;
  bool ok = true;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (const std::string problem = name_problem(names[i]); !problem.empty()) {
      diag_.add(pointer_of(key) + "/" + std::to_string(i), "expected a short name, got " + problem);
      ok = false;
    }
  }
  if (ok) out = std::move(names);
  return ok;
}

void JsonObject::finish() {
  if (object_ == nullptr) return;
  std::size_t unknown = 0;
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    if (std::find(seen_.begin(), seen_.end(), it.key()) != seen_.end()) continue;
    if (++unknown > limits::kMaxUnknownKeysReported) continue;
    std::string message = "unknown key";
    if (auto guess = closest_match(it.key(), seen_)) {
      message += "; did you mean \"" + *guess + "\"?";
    } else {
      std::vector<std::string> sorted = seen_;
      std::sort(sorted.begin(), sorted.end());
      message += "; expected one of: ";
      for (std::size_t i = 0; i < sorted.size(); ++i)
        message += (i ? ", " : "") + sorted[i];
    }
    error(it.key(), message);
  }
  if (unknown > limits::kMaxUnknownKeysReported) {
    diag_.add(pointer_, "and " + std::to_string(unknown - limits::kMaxUnknownKeysReported) +
                            " more unknown keys");
  }
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1);
  std::vector<std::size_t> cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const char ca = static_cast<char>(std::tolower(static_cast<unsigned char>(a[i - 1])));
      const char cb = static_cast<char>(std::tolower(static_cast<unsigned char>(b[j - 1])));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca == cb ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    // A prefix-sharing key with a different unit suffix ("hbm_GB" vs "hbm_GiB") is a typo too.
    const bool same_stem = c.size() > 3 && word.size() > 3 &&
                           c.substr(0, c.find('_')) == word.substr(0, word.find('_'));
    const std::size_t limit = std::max<std::size_t>(2, std::min(word.size(), c.size()) / 3);
    if ((d <= limit || same_stem) && (!best || d < best_distance)) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace planner
