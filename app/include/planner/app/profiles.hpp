// Hardware profiles by name, for every action that predicts (simulate, sweep, exec's stored
// prediction, the desktop app): a built-in preset, a profile file, or a profile `planner calibrate`
// stored in the database. The one place a front-end turns a profile name into a profile.
#pragma once

#include <string>
#include <string_view>

#include "planner/app/database.hpp"
#include "planner/core/gpu_spec.hpp"
#include "planner/core/hardware_profile.hpp"
#include "planner/core/status.hpp"
#include "planner/search/sweep.hpp"
#include "planner/store/database.hpp"

namespace planner::app {

// The profile stored in `db` under `name`, parsed (its parameters JSON is a profile document;
// errors name the profile and the database). kNotFound listing the stored names.
Result<HardwareProfile> stored_profile(store::Database& db, std::string_view name);

// `spec` as a path (contains '/' or ends in .json), else a built-in preset name, else a profile
// stored in `db` (unless it is disabled or its file does not exist). Empty `spec`: the GPU's
// default profile (default_profile_for(): its preset, else one derived from its datasheet).
// kNotFound naming what was tried.
Result<HardwareProfile> resolve_profile(const std::string& spec, const GpuSpec& gpu,
                                        const DatabaseRef& db);
// A profile by name alone (a non-empty `spec`, looked up as resolve_profile() does).
Result<HardwareProfile> read_profile(const std::string& spec, const DatabaseRef& db);

// Stores the profile document at `path` in `db` under its name (or `name` when not empty), with
// the file it came from in its provenance; `replace` overwrites a stored profile of that name.
// Returns the stored profile's name.
Result<std::string> import_profile(store::Database& db, const std::string& path,
                                   const std::string& name, bool replace);

// Gives every scenario of `request` the profile `spec` names for its GPU (resolve_profile(),
// once per GPU type: the scenarios of one GPU share it).
Status use_profile(search::SweepRequest& request, const std::string& spec, const DatabaseRef& db);

}  // namespace planner::app
