#include "planner/app/database.hpp"

#include <charconv>

#include "planner/store/runs.hpp"

namespace planner::app {

Result<std::optional<store::Database>> open_recording_db(const DatabaseRef& ref) {
  if (ref.disabled) return std::optional<store::Database>();
  PLANNER_ASSIGN_OR_RETURN(store::Database db, store::Database::open(ref.path));
  return std::optional<store::Database>(std::move(db));
}

Result<store::Database> open_existing_db(const DatabaseRef& ref) {
  store::OpenOptions open;
  open.mode = store::OpenMode::kMustExist;
  return store::Database::open(ref.path, open);
}

Result<store::RunId> resolve_run(store::Database& db, const std::string& text) {
  if (text == "last" || text == "latest") return store::latest_run(db);
  std::int64_t id = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size() || id < 1) {
    return Status::invalid_input(
        "RUN must be a run id (see `planner db list`) or \"last\"; got \"" + text + "\"");
  }
  PLANNER_RETURN_IF_ERROR(store::require_run(db, store::RunId{id}));
  return store::RunId{id};
}

}  // namespace planner::app
