#include <chrono>

#include <nlohmann/json.hpp>

#include "impl.hpp"

namespace planner::store {
namespace detail {

void Statement::bind(int index, std::int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_.get(), index, value);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
}

void Statement::bind(int index, double value) {
  const int rc = sqlite3_bind_double(stmt_.get(), index, value);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
}

void Statement::bind(int index, std::string_view value) {
  const int rc = sqlite3_bind_text64(stmt_.get(), index, value.data(), value.size(), SQLITE_STATIC,
                                     SQLITE_UTF8);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
}

void Statement::bind(int index, std::nullopt_t) {
  const int rc = sqlite3_bind_null(stmt_.get(), index);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
}

int Statement::step() {
  if (bind_rc_ != SQLITE_OK) return bind_rc_;
  return sqlite3_step(stmt_.get());
}

void Statement::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
  bind_rc_ = SQLITE_OK;
}

bool Statement::is_null(int col) const {
  return sqlite3_column_type(stmt_.get(), col) == SQLITE_NULL;
}

std::int64_t Statement::int64(int col) const {
  return sqlite3_column_int64(stmt_.get(), col);
}

double Statement::real(int col) const {
  return sqlite3_column_double(stmt_.get(), col);
}

std::string Statement::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_.get(), col));
  if (p == nullptr) return {};
  return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_.get(), col)));
}

std::optional<std::int64_t> Statement::opt_int64(int col) const {
  if (is_null(col)) return std::nullopt;
  return int64(col);
}

std::optional<double> Statement::opt_real(int col) const {
  if (is_null(col)) return std::nullopt;
  return real(col);
}

Result<bool> Lease::next() {
  const int rc = stmt_->step();
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return impl_->error(rc);
}

Status Lease::run() {
  const int rc = stmt_->step();
  Status status = rc == SQLITE_DONE || rc == SQLITE_ROW ? Status::ok() : impl_->error(rc);
  stmt_->reset();
  return status;
}

Result<std::int64_t> Lease::scalar() {
  PLANNER_ASSIGN_OR_RETURN(bool row, next());
  if (!row) {
    return Status::internal(impl_->path + ": no result from " + sqlite3_sql(stmt_->handle()));
  }
  return stmt_->int64(0);
}

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status check_json(std::string_view text, std::string_view what) {
  if (nlohmann::json::accept(text)) return Status::ok();
  return Status::invalid_input(std::string(what) + " is not valid JSON");
}

std::optional<double> to_GBps(const std::optional<Bandwidth>& bw) {
  if (!bw) return std::nullopt;
  return planner::to_GBps(*bw);
}

std::optional<Bandwidth> from_GBps(std::optional<double> gbps) {
  if (!gbps) return std::nullopt;
  return GBps(*gbps);
}

}  // namespace detail

Result<detail::Lease> Database::Impl::prepare(std::string_view sql) {
  auto it = cache.find(std::string(sql));
  if (it == cache.end()) {
    sqlite3_stmt* raw = nullptr;
    const int rc = sqlite3_prepare_v3(conn.get(), sql.data(), static_cast<int>(sql.size()),
                                      SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(raw);
      return error(rc);
    }
    it = cache.emplace(std::string(sql), std::make_unique<detail::Statement>(raw)).first;
  }
  if (it->second->leased) {
    return Status::internal(path + ": statement used while already in use: " + std::string(sql));
  }
  it->second->leased = true;
  return detail::Lease(this, it->second.get());
}

Status Database::Impl::exec(const std::string& sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(conn.get(), sql.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return Status::ok();
  std::string text = message != nullptr ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  Status status = error(rc);
  return Status(status.code(), path + ": " + text);
}

Status Database::Impl::error(int rc) const {
  const int primary = rc & 0xff;
  std::string message = conn ? sqlite3_errmsg(conn.get()) : sqlite3_errstr(rc);
  switch (primary) {
    case SQLITE_NOTADB:
      return Status::invalid_input(path + ": not a SQLite database (" + message + ")");
    case SQLITE_CONSTRAINT:
      return Status::invalid_input(path + ": " + message);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::timeout(path + ": " + message +
                             " (another process held the database longer than the busy timeout)");
    case SQLITE_CORRUPT:
      return Status::runtime(path + ": the database file is damaged (" + message + ")");
    default:
      return Status::runtime(path + ": " + message);
  }
}

}  // namespace planner::store
