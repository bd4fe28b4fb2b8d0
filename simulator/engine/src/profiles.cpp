#include "planner/sim/profiles.hpp"

#include "planner/topo/link_kind.hpp"

namespace planner::sim {

std::vector<std::string_view> link_kind_names() {
  std::vector<std::string_view> out;
  for (const auto& [kind, name] : EnumTraits<topo::LinkKind>::kNames)
    out.push_back(name);
  return out;
}

Result<HardwareProfile> parse_profile(std::string_view text, std::string_view source) {
  return planner::parse_profile(text, source, link_kind_names());
}

void register_profile_documents(DocumentTypes& types) {
  register_profile_document(types, link_kind_names());
}

}  // namespace planner::sim
