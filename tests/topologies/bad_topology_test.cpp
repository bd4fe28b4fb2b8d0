// The corpus of bad topology documents under tests/data/bad-topology/ (NAME.json with the exact
// diagnostics in NAME.expected). Kept apart from tests/data/bad/ so core's corpus test needs no
// topo library.
#include <gtest/gtest.h>

#include "planner/core/catalog.hpp"
#include "planner/topo/topology_json.hpp"
#include "support/corpus.hpp"

namespace planner::topo {
namespace {

const std::string kBad = std::string(PLANNER_TEST_DATA_DIR) + "/bad-topology";

TEST(BadTopologies, CorpusCoversTheRequiredErrors) {
  std::vector<std::string> names;
  for (const auto& f : planner::testing::corpus_files(kBad))
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
  planner::testing::expect_corpus_diagnostics(
      kBad, types,
      [](const std::filesystem::path& file, const std::string& text, const Diagnostics& diag) {
        // The loader reports the same problems.
        auto parsed = parse_topology(text, file.filename().string());
        ASSERT_FALSE(parsed) << file.filename();
        EXPECT_EQ(parsed.status().message(), diag.to_string()) << file.filename();
      });
}

}  // namespace
}  // namespace planner::topo
