// Internal to planner::store: RAII wrappers for sqlite3 handles and the connection behind a
// Database. Never included from a public header.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/core/units.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::store {
namespace detail {

struct ConnectionCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using Connection = std::unique_ptr<sqlite3, ConnectionCloser>;

struct StatementFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};

// A prepared statement. Text is bound without copying (SQLITE_STATIC): the bound string must
// outlive the next step(), which holds for every use in the store (bind, step, reset in one scope).
class Statement {
 public:
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}

  void bind(int index, std::int64_t value);
  void bind(int index, int value) { bind(index, static_cast<std::int64_t>(value)); }
  void bind(int index, double value);
  void bind(int index, std::string_view value);
  void bind(int index, const std::string& value) { bind(index, std::string_view(value)); }
  void bind(int index, const char* value) { bind(index, std::string_view(value)); }
  void bind(int index, std::nullopt_t);
  void bind(int index, Time value) { bind(index, value.raw()); }   // picoseconds
  void bind(int index, Bytes value) { bind(index, value.raw()); }  // bytes
  template <class T>
  void bind(int index, const std::optional<T>& value) {
    if (value) {
      bind(index, *value);
    } else {
      bind(index, std::nullopt);
    }
  }

  // sqlite3_step's result code, or the first bind error.
  int step();
  void reset();

  bool is_null(int col) const;
  std::int64_t int64(int col) const;
  int int32(int col) const { return static_cast<int>(int64(col)); }
  double real(int col) const;
  std::string text(int col) const;
  std::optional<std::int64_t> opt_int64(int col) const;
  std::optional<double> opt_real(int col) const;

  sqlite3_stmt* handle() const { return stmt_.get(); }

  bool leased = false;  // a Lease is using it (a statement cannot be used twice at once)

 private:
  std::unique_ptr<sqlite3_stmt, StatementFinalizer> stmt_;
  int bind_rc_ = SQLITE_OK;
};

class Lease;

}  // namespace detail

struct Database::Impl {
  std::string path;
  detail::Connection conn;  // declared before the cache: statements are finalized first
  std::unordered_map<std::string, std::unique_ptr<detail::Statement>> cache;
  int depth = 0;  // open transactions and savepoints
  int version = 0;

  // A prepared statement for `sql` (compiled once per connection), reset when the lease ends.
  // Leasing a statement that is already leased is StatusCode::kInternal.
  Result<detail::Lease> prepare(std::string_view sql);
  // Runs one or more statements without results (schema scripts, transaction control).
  Status exec(const std::string& sql);
  // The Status for a failed SQLite call: "<path>: <SQLite's message>", with the code that fits
  // (kInvalidInput for constraint violations and non-databases, kTimeout when busy).
  Status error(int rc) const;
  Result<Transaction> begin(bool write);
};

namespace detail {

// A statement borrowed from the cache for one use.
class Lease {
 public:
  Lease(Database::Impl* impl, Statement* stmt) : impl_(impl), stmt_(stmt) {}
  Lease(Lease&& other) noexcept : impl_(other.impl_), stmt_(std::exchange(other.stmt_, nullptr)) {}
  Lease& operator=(Lease&&) = delete;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() {
    if (stmt_ != nullptr) {
      stmt_->reset();
      stmt_->leased = false;
    }
  }

  Statement* operator->() { return stmt_; }
  Statement& operator*() { return *stmt_; }
  // True when a row is available, false when done.
  Result<bool> next();
  // Steps to completion (a statement without result rows), then resets for the next use.
  Status run();
  // The integer in the first column of the first row (count(*), a PRAGMA); kInternal when the
  // statement returns no row.
  Result<std::int64_t> scalar();

 private:
  Database::Impl* impl_;
  Statement* stmt_;
};

// Every row of `stmt`, each read by `read_row` (Statement& -> T or Result<T>).
template <class T, class ReadRow>
Result<std::vector<T>> collect(Lease& stmt, ReadRow read_row) {
  std::vector<T> out;
  while (true) {
    PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
    if (!row) return out;
    Result<T> value = read_row(*stmt);
    if (!value) return value.status();
    out.push_back(std::move(value).value());
  }
}

// put_metrics() without a transaction of its own, for store functions that already hold one (a
// savepoint per call would copy every page it touches into the statement journal).
Status insert_metrics(Database& db, RunId run, PlanId plan, MetricSource source,
                      std::span<const Metric> metrics);

// Wall-clock now as Unix milliseconds (UTC).
std::int64_t now_unix_ms();
// kInvalidInput "<what> is not valid JSON" unless `text` parses.
Status check_json(std::string_view text, std::string_view what);
// Enums are stored as their planner::to_string() names; a name this build does not know (a
// damaged file) is a runtime error naming the column.
template <class E>
Result<E> parse_column(const Database::Impl& impl, std::string_view text, std::string_view column) {
  if (auto value = parse_enum<E>(text)) return *value;
  return Status::runtime(impl.path + ": unexpected " + std::string(EnumTraits<E>::kWhat) + " \"" +
                         std::string(text) + "\" in " + std::string(column));
}
// Bandwidth in the database is GB/s (decimal, as nccl-tests prints it).
std::optional<double> to_GBps(const std::optional<Bandwidth>& bw);
std::optional<Bandwidth> from_GBps(std::optional<double> gbps);

}  // namespace detail
}  // namespace planner::store
