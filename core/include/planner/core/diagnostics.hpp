// Diagnostics: every problem found in one input, each located by file and JSON pointer.
//
// Loaders keep going after the first problem so that `planner validate` can report all of them. A
// diagnostic prints as "<source>: <pointer>: <message>", e.g.
//   gpt.json: /heads: must divide hidden (5120), got 48
// The pointer is an RFC 6901 JSON pointer ("" is the whole document). At most
// limits::kMaxDiagnostics diagnostics are kept; the rest are counted and summarised in one line,
// so a pathological input cannot produce millions of messages.
#pragma once

#include <string>
#include <vector>

#include "planner/core/status.hpp"

namespace planner {

struct Diagnostic {
  std::string pointer;
  std::string message;
};

class Diagnostics {
 public:
  explicit Diagnostics(std::string source = {}) : source_(std::move(source)) {}

  void add(std::string pointer, std::string message);
  bool empty() const { return count_ == 0; }
  // Every diagnostic added, kept or not.
  std::size_t size() const { return count_; }
  // The diagnostics kept (the first limits::kMaxDiagnostics).
  const std::vector<Diagnostic>& items() const { return items_; }
  // How many were added beyond the kept ones.
  std::size_t dropped() const { return count_ - items_.size(); }
  const std::string& source() const { return source_; }

  // "<source>: <pointer>: <message>" (or "<source>: <message>" for the document root).
  std::string format(const Diagnostic& d) const;
  // All kept diagnostics, one per line, then "<source>: and N more problems" when some were
  // dropped.
  std::string to_string() const;
  // Ok when empty; otherwise kInvalidInput carrying to_string().
  Status to_status() const;

 private:
  std::string source_;
  std::vector<Diagnostic> items_;
  std::size_t count_ = 0;
};

// Escapes a key for use in a JSON pointer ("~" -> "~0", "/" -> "~1").
std::string json_pointer_escape(std::string_view key);

}  // namespace planner
