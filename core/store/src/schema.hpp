// Internal to planner::store: the schema and its forward migrations, in one place.
#pragma once

#include <cstdint>
#include <span>

#include "impl.hpp"

namespace planner::store::detail {

// PRAGMA application_id of a planner database: "PLNR" in ASCII. A database with another non-zero
// application id belongs to another program and is refused.
inline constexpr std::int32_t kApplicationId = 0x504C4E52;

// One step from schema version `version - 1` to `version`.
struct Migration {
  int version;
  const char* description;
  const char* sql;
};

// Every migration, in order; the last one's version is kSchemaVersion.
std::span<const Migration> migrations();

// Reads the header (user_version, application_id) and refuses a file that is not a SQLite
// database, a foreign database and a too-new one, before anything is written. Sets impl.version.
Status check_header(Database::Impl& impl);

// Brings the database from its current version to kSchemaVersion in one write transaction
// (re-checking the header under the write lock). Sets impl.version.
Status migrate(Database::Impl& impl);

}  // namespace planner::store::detail
