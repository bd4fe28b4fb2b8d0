#include "profile_resolve.hpp"

#include <filesystem>

#include "planner/core/loaders.hpp"
#include "planner/sim/profiles.hpp"
#include "planner/store/profiles.hpp"

namespace planner::cli {
namespace {

bool is_path(const std::string& s) {
  return s.find('/') != std::string::npos || s.ends_with(".json");
}

}  // namespace

Result<HardwareProfile> stored_profile(store::Database& db, std::string_view name) {
  PLANNER_ASSIGN_OR_RETURN(store::HardwareProfile stored, store::get_profile(db, name));
  return sim::parse_profile(stored.parameters_json,
                            "profile \"" + std::string(name) + "\" in " + db.path());
}

Result<HardwareProfile> resolve_profile(const std::string& spec, const GpuSpec& gpu,
                                        const DbOptions& db) {
  if (spec.empty()) {
    if (const HardwareProfile* p = builtin_profile_for(gpu)) return *p;
    return derive_profile(gpu);
  }
  if (is_path(spec)) {
    PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(spec));
    return sim::parse_profile(text, spec);
  }
  auto preset = builtin_profile(spec);
  if (preset || db.disabled || !std::filesystem::exists(db.path)) return preset;
  PLANNER_ASSIGN_OR_RETURN(store::Database database, open_existing_db(db));
  auto stored = stored_profile(database, spec);
  if (!stored && stored.status().code() == StatusCode::kNotFound) {
    return Status::not_found(preset.status().message() + "; no profile \"" + spec + "\" in " +
                             db.path + " either");
  }
  return stored;
}

}  // namespace planner::cli
