// Hardware profiles as the simulator reads them: core's profile documents
// (core/hardware_profile.hpp) with their link kinds checked against the topology's.
#pragma once

#include <string_view>
#include <vector>

#include "planner/core/hardware_profile.hpp"
#include "planner/core/loaders.hpp"

namespace planner::sim {

// The topology link kinds ("nvlink4", "ib-ndr", ...) a profile's links may name.
std::vector<std::string_view> link_kind_names();

// parse_profile() with the link kinds checked; `text` is a profile document (from a file, or the
// parameters JSON of a profile stored in the database).
Result<HardwareProfile> parse_profile(std::string_view text, std::string_view source);

// Registers kind "profile" for `planner validate`.
void register_profile_documents(DocumentTypes& types);

}  // namespace planner::sim
