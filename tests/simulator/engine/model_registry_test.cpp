// The model registry is bound to the code: every registered model is named by the code that
// implements it (implements(SimModel::k...) in simulator/engine), and every model the code names
// is registered, once, with what `planner sim-models` prints.
#include "planner/sim/model_registry.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace planner::sim {
namespace {

const std::filesystem::path kEngine =
    std::filesystem::path(PLANNER_SOURCE_DIR) / "simulator/engine";

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The enumerators of SimModel, in declaration order (from the registry's header).
std::vector<std::string> enumerators() {
  const std::string header = read(kEngine / "include/planner/sim/model_registry.hpp");
  const std::size_t open = header.find('{', header.find("enum class SimModel"));
  const std::size_t close = header.find('}', open);
  std::vector<std::string> out;
  const std::string body = header.substr(open + 1, close - open - 1);
  const std::regex name(R"((k\w+)\s*,?)");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), name); it != std::sregex_iterator();
       ++it)
    out.push_back((*it)[1]);
  return out;
}

// Where the engine's sources name each model: enumerator -> "file:line" of every
// implements(SimModel::kX) outside comments and the registry itself.
std::map<std::string, std::vector<std::string>> implementations() {
  std::map<std::string, std::vector<std::string>> out;
  const std::regex use(R"(implements\(\s*SimModel::(\w+)\s*\))");
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kEngine)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
    if (entry.path().stem() == "model_registry") continue;
    std::istringstream lines(read(entry.path()));
    std::string line;
    for (int n = 1; std::getline(lines, line); ++n) {
      const std::size_t code = line.find_first_not_of(' ');
      if (code != std::string::npos && line.compare(code, 2, "//") == 0) continue;
      const std::string where =
          entry.path().lexically_relative(kEngine).string() + ":" + std::to_string(n);
      for (auto it = std::sregex_iterator(line.begin(), line.end(), use);
           it != std::sregex_iterator(); ++it)
        out[(*it)[1]].push_back(where);
    }
  }
  return out;
}

TEST(ModelRegistry, EveryModelOnceInEnumOrderWithItsDescription) {
  const auto models = model_registry();
  ASSERT_EQ(models.size(), kNumSimModels);
  std::set<std::string> names;
  for (std::size_t i = 0; i < models.size(); ++i) {
    const ModelInfo& m = models[i];
    EXPECT_EQ(static_cast<std::size_t>(m.id), i) << m.name;
    EXPECT_EQ(&model_info(m.id), &m) << m.name;
    EXPECT_TRUE(names.insert(std::string(m.name)).second) << "registered twice: " << m.name;
    const std::set<std::string_view> categories{"engine", "compute", "collective", "network",
                                                "memory"};
    EXPECT_TRUE(categories.count(m.category)) << m.name << ": category " << m.category;
    EXPECT_FALSE(m.description.empty()) << m.name;
    EXPECT_FALSE(m.assumptions.empty()) << m.name;
    EXPECT_FALSE(m.source.empty()) << m.name;
  }
}

TEST(ModelRegistry, EveryRegisteredModelIsImplementedAndEveryImplementedOneRegistered) {
  const std::vector<std::string> ids = enumerators();
  ASSERT_EQ(ids.size(), kNumSimModels) << "the enumerators of SimModel were not all found";
  const auto used = implementations();
  std::string unused;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!used.count(ids[i])) unused += "\n  " + std::string(model_registry()[i].name);
  }
  EXPECT_TRUE(unused.empty()) << "registered, but no code in simulator/engine names it with "
                                 "implements(SimModel::...):"
                              << unused;
  std::string unregistered;
  for (const auto& [id, where] : used) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end())
      unregistered += "\n  SimModel::" + id + " at " + where.front();
  }
  EXPECT_TRUE(unregistered.empty()) << "named by the code but not registered:" << unregistered;
}

// The scan sees the implementations where they are (the ring in the collective planner) and
// does not take the registry's own files for one.
TEST(ModelRegistry, ScanFindsTheImplementations) {
  const auto used = implementations();
  ASSERT_TRUE(used.count("kRing"));
  EXPECT_NE(used.at("kRing").front().find("collectives.cpp"), std::string::npos);
  for (const auto& [id, where] : used) {
    for (const std::string& w : where)
      EXPECT_EQ(w.find("model_registry"), std::string::npos) << id << " at " << w;
  }
}

}  // namespace
}  // namespace planner::sim
