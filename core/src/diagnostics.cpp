#include "planner/core/diagnostics.hpp"

#include "planner/core/limits.hpp"

namespace planner {

void Diagnostics::add(std::string pointer, std::string message) {
  ++count_;
  if (items_.size() < limits::kMaxDiagnostics) {
    items_.push_back({std::move(pointer), std::move(message)});
  }
}

std::string Diagnostics::format(const Diagnostic& d) const {
  std::string out = source_.empty() ? std::string() : source_ + ": ";
  if (!d.pointer.empty()) out += d.pointer + ": ";
  out += d.message;
  return out;
}

std::string Diagnostics::to_string() const {
  std::string out;
  for (const Diagnostic& d : items_) {
    if (!out.empty()) out += '\n';
    out += format(d);
  }
  if (dropped() > 0) {
    out += '\n';
    out += format({"", "and " + std::to_string(dropped()) + " more problem" +
                           (dropped() == 1 ? "" : "s") + " (the first " +
                           std::to_string(items_.size()) + " are shown)"});
  }
  return out;
}

Status Diagnostics::to_status() const {
  if (empty()) return Status::ok();
  return Status::invalid_input(to_string());
}

std::string json_pointer_escape(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace planner
