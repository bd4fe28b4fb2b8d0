// Hardware profiles by name for the commands that predict (`planner simulate --profile`, `planner
// exec --profile`, and `planner sweep --profile`): a built-in preset, a profile file, or a profile
// `planner calibrate` stored in the database.
#pragma once

#include <string>
#include <string_view>

#include "db_options.hpp"
#include "planner/core/gpu_spec.hpp"
#include "planner/core/hardware_profile.hpp"
#include "planner/core/status.hpp"
#include "planner/store/database.hpp"

namespace planner::cli {

// The profile stored in `db` under `name`, parsed (its parameters JSON is a profile document;
// errors name the profile and the database). kNotFound listing the stored names.
Result<HardwareProfile> stored_profile(store::Database& db, std::string_view name);

// `spec` as a path (contains '/' or ends in .json), else a built-in preset name, else a profile
// stored in the database of `db` (unless --no-db or the file does not exist). Empty `spec`: the
// preset for `gpu`, else one derived from its datasheet. kNotFound naming what was tried.
Result<HardwareProfile> resolve_profile(const std::string& spec, const GpuSpec& gpu,
                                        const DbOptions& db);

}  // namespace planner::cli
