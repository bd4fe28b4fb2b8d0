#include "planner/app/profiles.hpp"

#include <filesystem>
#include <map>
#include <memory>

#include "planner/core/loaders.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/sim/profiles.hpp"
#include "planner/store/profiles.hpp"

namespace planner::app {
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
                                        const DatabaseRef& db) {
  if (spec.empty()) return default_profile_for(gpu);
  return read_profile(spec, db);
}

Result<HardwareProfile> read_profile(const std::string& spec, const DatabaseRef& db) {
  if (spec.empty()) return Status::invalid_input("a hardware profile needs a name or a file");
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

Result<std::string> import_profile(store::Database& db, const std::string& path,
                                   const std::string& name, bool replace) {
  PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  PLANNER_ASSIGN_OR_RETURN(HardwareProfile p, sim::parse_profile(text, path));
  if (!name.empty()) p.name = name;
  store::NewProfile np;
  np.name = p.name;
  np.description = p.description;
  np.parameters_json = to_json_text(p);
  Json provenance(p.provenance);
  provenance["imported_from"] = std::filesystem::absolute(path).lexically_normal().string();
  np.provenance = provenance.dump();
  PLANNER_RETURN_IF_ERROR(
      store::put_profile(db, np, {},
                         replace ? store::ProfileWrite::kReplace : store::ProfileWrite::kCreate)
          .status());
  return p.name;
}

Status use_profile(search::SweepRequest& request, const std::string& spec, const DatabaseRef& db) {
  std::map<std::string, std::shared_ptr<const HardwareProfile>> by_gpu;
  for (search::SweepScenario& sc : request.scenarios) {
    std::shared_ptr<const HardwareProfile>& profile = by_gpu[sc.gpu.name];
    if (!profile) {
      PLANNER_ASSIGN_OR_RETURN(HardwareProfile p, resolve_profile(spec, sc.gpu, db));
      profile = std::make_shared<const HardwareProfile>(std::move(p));
    }
    sc.profile = profile;
  }
  return Status::ok();
}

}  // namespace planner::app
