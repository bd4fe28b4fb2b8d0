// Hardware profiles: fitted model parameters for a machine, with the raw calibration measurements
// they came from (issue 9's `planner calibrate` writes them; `--profile NAME` reads them).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::store {

// Stores a profile and its samples in one transaction. `parameters_json` must be valid JSON; the
// name must not be empty. With ProfileWrite::kCreate an existing name is StatusCode::kInvalidInput;
// with kReplace the old profile and its samples are replaced.
Result<ProfileId> put_profile(Database& db, const NewProfile& profile,
                              std::span<const CalibrationSample> samples,
                              ProfileWrite mode = ProfileWrite::kCreate);

// StatusCode::kNotFound (listing the known names) when there is no such profile.
Result<HardwareProfile> get_profile(Database& db, std::string_view name);
// All profiles, by name.
Result<std::vector<HardwareProfile>> list_profiles(Database& db);
// The samples of a profile, in the order they were stored.
Result<std::vector<CalibrationSample>> get_calibration_samples(Database& db, ProfileId profile);
// Deletes a profile and its samples; StatusCode::kNotFound when there is none.
Status delete_profile(Database& db, std::string_view name);

}  // namespace planner::store
