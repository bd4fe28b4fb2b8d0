// Status and Result<T>: how library code reports failure (after LevelDB's Status).
//
// Library code never exits, never prints and never lets an exception reach the user: it returns a
// Status (or a Result<T> holding either a value or a Status). Only a program's main() turns a
// Status into a message and an exit code (exit_code(): 2 for bad input, 1 for runtime failures).
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace planner {

enum class StatusCode {
  kOk = 0,
  kInvalidInput,  // the user's input is wrong: a file, a field, a flag (exit code 2)
  kNotFound,      // a named thing (preset, run, file) does not exist (exit code 2)
  kRuntime,       // something failed while running: I/O, a child process, a backend (exit code 1)
  kTimeout,       // a bounded wait expired (exit code 1)
  kUnavailable,   // a capability is missing on this machine or build, e.g. no GPU (exit code 1)
  kInternal,      // a bug: an invariant did not hold (exit code 1)
};

std::string_view to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status invalid_input(std::string message) {
    return {StatusCode::kInvalidInput, std::move(message)};
  }
  static Status not_found(std::string message) {
    return {StatusCode::kNotFound, std::move(message)};
  }
  static Status runtime(std::string message) { return {StatusCode::kRuntime, std::move(message)}; }
  static Status timeout(std::string message) { return {StatusCode::kTimeout, std::move(message)}; }
  static Status unavailable(std::string message) {
    return {StatusCode::kUnavailable, std::move(message)};
  }
  static Status internal(std::string message) {
    return {StatusCode::kInternal, std::move(message)};
  }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Process exit code for this status: 0 ok, 2 bad input (invalid or not found), 1 otherwise.
  int exit_code() const;

  // Returns a copy whose message is "<context>: <message>" (each line prefixed when multi-line).
  Status with_context(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or a non-ok Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value)
      : data_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : data_(std::in_place_index<1>, std::move(status)) {  // NOLINT
    assert(!std::get<1>(data_).is_ok() && "Result constructed from an ok Status");
  }

  bool is_ok() const { return data_.index() == 0; }
  explicit operator bool() const { return is_ok(); }

  const T& value() const& {
    assert(is_ok());
    return std::get<0>(data_);
  }
  T& value() & {
    assert(is_ok());
    return std::get<0>(data_);
  }
  T&& value() && {
    assert(is_ok());
    return std::get<0>(std::move(data_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // The error; Status::ok() when a value is held.
  Status status() const { return is_ok() ? Status::ok() : std::get<1>(data_); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace planner

// Propagates a non-ok Status from an expression returning Status.
#define PLANNER_RETURN_IF_ERROR(expr)                     \
  do {                                                    \
    ::planner::Status planner_status_ = (expr);           \
    if (!planner_status_.is_ok()) return planner_status_; \
  } while (false)

#define PLANNER_CONCAT_INNER_(a, b) a##b
#define PLANNER_CONCAT_(a, b) PLANNER_CONCAT_INNER_(a, b)
#define PLANNER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.is_ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

// `PLANNER_ASSIGN_OR_RETURN(auto x, make_x());` assigns the value or returns the error.
#define PLANNER_ASSIGN_OR_RETURN(lhs, expr) \
  PLANNER_ASSIGN_OR_RETURN_IMPL_(PLANNER_CONCAT_(planner_result_, __LINE__), lhs, expr)
