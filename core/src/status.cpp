#include "planner/core/status.hpp"

namespace planner {

std::string_view to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidInput:
      return "invalid input";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kRuntime:
      return "runtime error";
    case StatusCode::kTimeout:
      return "timeout";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

int Status::exit_code() const {
  switch (code_) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidInput:
    case StatusCode::kNotFound:
      return 2;
    default:
      return 1;
  }
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  std::string out;
  std::string_view rest = message_;
  while (true) {
    const auto nl = rest.find('\n');
    if (!out.empty()) out += '\n';
    out += context;
    out += ": ";
    out += rest.substr(0, nl);
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  return {code_, std::move(out)};
}

}  // namespace planner
