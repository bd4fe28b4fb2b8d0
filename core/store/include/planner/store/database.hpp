// planner::store::Database: one connection to the project's SQLite database.
//
// The database is planner's memory of what it predicted and what it measured. Opening it:
//   - creates the file when allowed (OpenMode::kCreateIfMissing), or refuses a missing one;
//   - refuses, with a clear error (StatusCode::kInvalidInput), a file that is not a SQLite
//     database, a SQLite database that belongs to another application, and a database whose
//     schema version (PRAGMA user_version) is newer than this build knows (kSchemaVersion);
//   - switches it to WAL mode (readers never block the writer; a killed writer leaves the file
//     consistent) with synchronous=NORMAL (a committed transaction survives a killed process; only
//     an operating-system crash can lose the last commits, never consistency);
//   - sets a busy timeout, so concurrent writers in other processes wait for each other instead
//     of failing;
//   - applies the forward migrations (schema.hpp) up to kSchemaVersion in one transaction.
//
// Every write the store makes runs inside a transaction (Database::write()). Callers may group many
// writes into one transaction by holding their own: store functions called while a Transaction is
// open join it (as a SAVEPOINT), so either all of them land or none do.
//
// A Database is a single connection: use it from one thread at a time (one Database per thread;
// separate processes may share the file freely). It is movable, not copyable.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "planner/core/status.hpp"

namespace planner::store {

// Where the CLI records its runs unless told otherwise (`--db PATH`), relative to the working
// directory.
inline constexpr const char* kDefaultDatabasePath = "planner.db";

// The schema version this build creates and understands (PRAGMA user_version). Older databases are
// migrated forward on open; newer ones are refused.
inline constexpr int kSchemaVersion = 4;

enum class OpenMode {
  kCreateIfMissing,  // create an empty planner database when the file does not exist
  kMustExist,        // a missing file is StatusCode::kNotFound
};

struct OpenOptions {
  OpenMode mode = OpenMode::kCreateIfMissing;
  // How long a write waits for another process's write transaction before failing with
  // StatusCode::kTimeout.
  std::chrono::milliseconds busy_timeout{30000};
  // SQLite's page cache for this connection. Larger than SQLite's 2 MiB default so that a big
  // transaction (a sweep's results) does not spill pages into the log, and rewrite them there,
  // before it commits: 20% faster in bench_store's BM_StoreSweepResults.
  int page_cache_KiB = 32 * 1024;
};

class Transaction;

class Database {
 public:
  static Result<Database> open(const std::string& path, const OpenOptions& options = {});

  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  const std::string& path() const;
  // The schema version of the open database (always kSchemaVersion after a successful open).
  int schema_version() const;

  // Begins a write transaction (BEGIN IMMEDIATE: waits for other writers up to the busy timeout),
  // or a SAVEPOINT when one is already open on this connection. Transactions nest LIFO.
  Result<Transaction> write();
  // Begins a read transaction: a consistent snapshot that never blocks or waits for writers (a
  // SAVEPOINT when a transaction is already open).
  Result<Transaction> read();

  // Runs PRAGMA integrity_check; a runtime error listing the problems when it does not say "ok".
  Status integrity_check();
  // Checkpoints the write-ahead log into the main file and rebuilds it (VACUUM), returning the
  // space of deleted rows to the file system.
  Status vacuum();

  // The store's own sources reach the connection through this; it is opaque to everyone else.
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit Database(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A transaction (or savepoint) on a Database. Rolled back by the destructor unless committed.
class [[nodiscard]] Transaction {
 public:
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // Commits (or releases the savepoint). After a failed commit the transaction is still open and
  // the destructor rolls it back.
  Status commit();

 private:
  friend class Database;
  Transaction(Database::Impl* impl, int depth);
  Status finish(bool commit);

  Database::Impl* impl_;
  int depth_;  // 1 = the outermost transaction, >1 = a savepoint inside it
  bool open_ = true;
};

}  // namespace planner::store
