// A file embedded into the binary at build time (see cmake/PlannerEmbed.cmake).
#pragma once

#include <string_view>

namespace planner {

struct EmbeddedFile {
  std::string_view name;     // path relative to the folder it was embedded from
  std::string_view content;  // the file's bytes
};

}  // namespace planner
