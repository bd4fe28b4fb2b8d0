// The corpus of bad topology documents under tests/data/bad-topology/: each NAME.json has
// NAME.expected holding the exact diagnostics `planner validate` prints for it (file named without
// its directory). Kept apart from tests/data/bad/ so core's corpus test needs no topo library.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "planner/core/catalog.hpp"
#include "planner/core/loaders.hpp"
#include "planner/topo/topology_json.hpp"
#include "support/command.hpp"

namespace planner::topo {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> bad_files() {
  std::vector<fs::path> files;
  for (const auto& entry :
       fs::directory_iterator(fs::path(PLANNER_TEST_DATA_DIR) / "bad-topology")) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string trim_trailing_newlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
    s.pop_back();
  return s;
}

TEST(BadTopologies, CorpusCoversTheRequiredErrors) {
  std::vector<std::string> names;
  for (const fs::path& f : bad_files())
    names.push_back(f.stem().string());
  for (const char* required : {"disconnected", "zero_bandwidth", "negative_bandwidth",
                               "unknown_link_kind", "dangling_endpoint", "duplicate_id"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), std::string("topology_") + required),
              names.end())
        << required;
  }
}

TEST(BadTopologies, EachFileGivesItsExactErrors) {
  DocumentTypes types;
  register_core_documents(types, builtin_catalog());
  register_topology_documents(types);
  for (const fs::path& file : bad_files()) {
    const fs::path expected_path = fs::path(file).replace_extension(".expected");
    ASSERT_TRUE(fs::exists(expected_path)) << "missing " << expected_path.filename();
    auto text = read_text_file(file.string());
    ASSERT_TRUE(text) << text.status().message();
    Diagnostics diag(file.filename().string());
    types.validate(*text, diag);
    EXPECT_FALSE(diag.empty()) << file.filename() << " was accepted";
    EXPECT_EQ(diag.to_string(),
              trim_trailing_newlines(planner::testing::slurp(expected_path.string())))
        << file.filename();
    // The loader reports the same problems.
    auto parsed = parse_topology(*text, file.filename().string());
    ASSERT_FALSE(parsed) << file.filename();
    EXPECT_EQ(parsed.status().message(), diag.to_string()) << file.filename();
  }
}

}  // namespace
}  // namespace planner::topo
