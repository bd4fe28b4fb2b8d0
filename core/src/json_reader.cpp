#include "planner/core/json_reader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

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

// Tracks the JSON pointer of the value being parsed so duplicate keys can be located.
class DuplicateKeyChecker {
 public:
  explicit DuplicateKeyChecker(Diagnostics& diag) : diag_(diag) {}

  bool on_event(int depth, Json::parse_event_t event, const Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        frames_.push_back({event == Json::parse_event_t::array_start, child_pointer(), {}, {}, 0});
        break;
      case Json::parse_event_t::key: {
        Frame& f = frames_.back();
        const std::string key = parsed.get<std::string>();
        if (!f.keys.insert(key).second) {
          diag_.add(f.pointer + "/" + json_pointer_escape(key),
                    "duplicate key (a key may appear once per object)");
        }
        f.current_key = key;
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        frames_.pop_back();
        finish_child();
        break;
      case Json::parse_event_t::value:
        finish_child();
        break;
    }
    (void)depth;
    return true;
  }

 private:
  struct Frame {
    bool is_array;
    std::string pointer;
    std::string current_key;
    std::set<std::string> keys;
    std::size_t index;
  };

  std::string child_pointer() const {
    if (frames_.empty()) return "";
    const Frame& f = frames_.back();
    return f.pointer + "/" +
           (f.is_array ? std::to_string(f.index) : json_pointer_escape(f.current_key));
  }
  void finish_child() {
    if (!frames_.empty() && frames_.back().is_array) ++frames_.back().index;
  }

  Diagnostics& diag_;
  std::vector<Frame> frames_;
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
  DuplicateKeyChecker checker(diag);
  const std::size_t before = diag.size();
  try {
    Json value = Json::parse(
        text.begin(), text.end(),
        [&checker](int depth, Json::parse_event_t event, Json& parsed) {
          return checker.on_event(depth, event, parsed);
        },
        /*allow_exceptions=*/true, /*ignore_comments=*/false);
    if (diag.size() != before) return std::nullopt;
    return value;
  } catch (const Json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: <detail>".
    std::string what = e.what();
    const auto colon = what.find(": ", what.find("parse error"));
    std::string detail;
    for (char c : colon == std::string::npos ? what : what.substr(colon + 2)) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", u);
        detail += hex;
      } else {
        detail += c;
      }
    }
    diag.add("",
             "invalid JSON at " + line_column(text, e.byte == 0 ? 0 : e.byte - 1) + ": " + detail);
    return std::nullopt;
  } catch (const Json::exception& e) {
    diag.add("", std::string("invalid JSON: ") + e.what());
    return std::nullopt;
  }
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

void JsonObject::finish() {
  if (object_ == nullptr) return;
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    if (std::find(seen_.begin(), seen_.end(), it.key()) != seen_.end()) continue;
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
