#include "planner/store/database.hpp"

#include <cassert>
#include <chrono>
#include <filesystem>
#include <limits>
#include <string>
#include <system_error>
#include <thread>

#include "impl.hpp"
#include "planner/core/loaders.hpp"
#include "schema.hpp"

namespace planner::store {
namespace {

// Sets a connection up: WAL, synchronous=NORMAL, page cache, foreign keys. Called after the header
// checks, so a foreign file is never switched to WAL.
Status configure(Database::Impl& impl, const OpenOptions& options) {
  // Switching a new file to WAL needs an exclusive lock, and SQLite reports a conflict with a
  // process doing the same without calling the busy handler (it would risk a deadlock), so the
  // switch is retried here until the busy timeout. Once a file is in WAL mode this is a no-op.
  constexpr std::chrono::milliseconds kRetryPause{2};
  const auto deadline = std::chrono::steady_clock::now() + options.busy_timeout;
  std::string mode;
  while (true) {
    PLANNER_ASSIGN_OR_RETURN(auto stmt, impl.prepare("PRAGMA journal_mode = WAL"));
    auto row = stmt.next();
    if (row) {
      mode = *row ? stmt->text(0) : std::string();
      break;
    }
    if (row.status().code() != StatusCode::kTimeout ||
        std::chrono::steady_clock::now() >= deadline) {
      return row.status();
    }
    std::this_thread::sleep_for(kRetryPause);
  }
  if (mode != "wal") {
    return Status::runtime(impl.path + ": could not switch the database to WAL mode (got \"" +
                           mode + "\"); is it on a file system without shared memory?");
  }
  PLANNER_RETURN_IF_ERROR(impl.exec("PRAGMA synchronous = NORMAL"));
  PLANNER_RETURN_IF_ERROR(
      impl.exec("PRAGMA cache_size = -" + std::to_string(options.page_cache_KiB)));
  return impl.exec("PRAGMA foreign_keys = ON");
}

}  // namespace

Result<Transaction> Database::Impl::begin(bool write) {
  const int next = depth + 1;
  const std::string sql = next == 1 ? (write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED")
                                    : "SAVEPOINT sp" + std::to_string(next);
  PLANNER_RETURN_IF_ERROR(exec(sql));
  depth = next;
  return Transaction(this, next);
}

Result<Database> Database::open(const std::string& path, const OpenOptions& options) {
  if (path.empty()) return Status::invalid_input("the database path is empty");
  // What the path is, before SQLite sees it: a device (/dev/null), a FIFO or a symbolic link loop
  // is a wrong --db, not an I/O error.
  const Status file = check_regular_file(path, std::numeric_limits<std::size_t>::max());
  if (file.code() == StatusCode::kNotFound) {
    if (options.mode == OpenMode::kMustExist) {
      return Status::not_found(path + ": no such database (give an existing one with --db PATH)");
    }
  } else if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    return Status::invalid_input(path + ": is a directory, not a database file");
  } else if (file.code() == StatusCode::kInvalidInput) {
    return Status::invalid_input(file.message() + " (a planner database file)");
  }

  auto impl = std::make_unique<Impl>();
  impl->path = path;
  int flags = SQLITE_OPEN_READWRITE;
  if (options.mode == OpenMode::kCreateIfMissing) flags |= SQLITE_OPEN_CREATE;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  impl->conn.reset(raw);  // closed on every path, even when the open failed
  if (rc != SQLITE_OK) {
    return Status::runtime(path + ": cannot open the database (" +
                           (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)) + ")");
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, static_cast<int>(options.busy_timeout.count()));

  PLANNER_RETURN_IF_ERROR(detail::check_header(*impl));
  PLANNER_RETURN_IF_ERROR(configure(*impl, options));
  PLANNER_RETURN_IF_ERROR(detail::migrate(*impl));
  return Database(std::move(impl));
}

Database::Database(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Database::Database(Database&& other) noexcept = default;
Database& Database::operator=(Database&& other) noexcept = default;
Database::~Database() = default;

const std::string& Database::path() const {
  return impl_->path;
}

int Database::schema_version() const {
  return impl_->version;
}

Result<Transaction> Database::write() {
  return impl_->begin(/*write=*/true);
}

Result<Transaction> Database::read() {
  return impl_->begin(/*write=*/false);
}

Status Database::integrity_check() {
  std::string problems;
  for (const char* pragma : {"PRAGMA integrity_check", "PRAGMA foreign_key_check"}) {
    PLANNER_ASSIGN_OR_RETURN(auto stmt, impl_->prepare(pragma));
    while (true) {
      PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
      if (!row) break;
      std::string line = stmt->text(0);
      if (line == "ok") continue;
      if (std::string_view(pragma) == "PRAGMA foreign_key_check") {
        line = "table " + line + " row " + stmt->text(1) + " refers to a missing " + stmt->text(2);
      }
      problems += "\n" + line;
    }
  }
  if (problems.empty()) return Status::ok();
  return Status::runtime(impl_->path + ": integrity check failed:" + problems);
}

Status Database::vacuum() {
  if (impl_->depth > 0) return Status::internal("vacuum() called inside a transaction");
  PLANNER_RETURN_IF_ERROR(impl_->exec("PRAGMA wal_checkpoint(TRUNCATE)"));
  PLANNER_RETURN_IF_ERROR(impl_->exec("VACUUM"));
  return impl_->exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

Transaction::Transaction(Database::Impl* impl, int depth) : impl_(impl), depth_(depth) {}

Transaction::Transaction(Transaction&& other) noexcept
    : impl_(other.impl_), depth_(other.depth_), open_(std::exchange(other.open_, false)) {}

Transaction::~Transaction() {
  if (open_) (void)finish(/*commit=*/false);
}

Status Transaction::commit() {
  if (!open_) return Status::internal("commit() on a finished transaction");
  return finish(/*commit=*/true);
}

Status Transaction::finish(bool commit) {
  assert(impl_->depth == depth_ && "transactions must end in the reverse order they began");
  const std::string savepoint = "sp" + std::to_string(depth_);
  if (commit) {
    PLANNER_RETURN_IF_ERROR(impl_->exec(depth_ == 1 ? "COMMIT" : "RELEASE " + savepoint));
  } else {
    // SQLite may already have rolled back after a failed statement; a second rollback then only
    // reports that no transaction is open, which is fine.
    (void)impl_->exec(depth_ == 1 ? "ROLLBACK"
                                  : "ROLLBACK TO " + savepoint + "; RELEASE " + savepoint);
  }
  open_ = false;
  impl_->depth = depth_ - 1;
  return Status::ok();
}

}  // namespace planner::store
