// Bad-input corpora: folders of NAME.json files, each with NAME.expected holding the exact
// diagnostics `planner validate` prints for it (the file named without its directory).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "planner/core/loaders.hpp"
#include "support/command.hpp"

namespace planner::testing {

// The .json files of a corpus folder, sorted.
inline std::vector<std::filesystem::path> corpus_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Validates every file of the corpus with `types` and expects exactly its .expected diagnostics;
// `also(file, text, diagnostics)` may check more per file.
inline void expect_corpus_diagnostics(
    const std::filesystem::path& dir, const DocumentTypes& types,
    const std::function<void(const std::filesystem::path&, const std::string&, const Diagnostics&)>&
        also = {}) {
  for (const std::filesystem::path& file : corpus_files(dir)) {
    const std::filesystem::path expected_path =
        std::filesystem::path(file).replace_extension(".expected");
    ASSERT_TRUE(std::filesystem::exists(expected_path)) << "missing " << expected_path.filename();
    auto text = read_text_file(file.string());
    ASSERT_TRUE(text) << text.status().message();
    Diagnostics diag(file.filename().string());
    types.validate(*text, diag);
    EXPECT_FALSE(diag.empty()) << file.filename() << " was accepted";
    std::string expected = slurp(expected_path.string());
    while (!expected.empty() && (expected.back() == '\n' || expected.back() == '\r'))
      expected.pop_back();
    EXPECT_EQ(diag.to_string(), expected) << file.filename();
    if (also) also(file, *text, diag);
  }
}

}  // namespace planner::testing
