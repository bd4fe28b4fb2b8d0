// The corpus of bad inputs under tests/data/bad/: each NAME.json has NAME.expected holding the
// exact diagnostics `planner validate` must print for it (file named without its directory).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "planner/core/catalog.hpp"
#include "planner/core/loaders.hpp"
#include "support/command.hpp"

namespace planner {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> bad_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(PLANNER_TEST_DATA_DIR) / "bad")) {
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

TEST(BadInputs, CorpusIsLargeEnough) {
  EXPECT_GE(bad_files().size(), 30u);
}

TEST(BadInputs, EachFileGivesItsExactErrors) {
  DocumentTypes types;
  register_core_documents(types, builtin_catalog());
  for (const fs::path& file : bad_files()) {
    const fs::path expected_path = fs::path(file).replace_extension(".expected");
    ASSERT_TRUE(fs::exists(expected_path)) << "missing " << expected_path.filename();
    auto text = read_text_file(file.string());
    ASSERT_TRUE(text) << text.status().message();
    Diagnostics diag(file.filename().string());
    types.validate(*text, diag);
    EXPECT_FALSE(diag.empty()) << file.filename() << " was accepted";
    EXPECT_EQ(diag.to_string(), trim_trailing_newlines(testing::slurp(expected_path.string())))
        << file.filename();
  }
}

}  // namespace
}  // namespace planner
