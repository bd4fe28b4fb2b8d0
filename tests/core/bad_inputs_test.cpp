// The corpus of bad inputs under tests/data/bad/: each NAME.json has NAME.expected holding the
// exact diagnostics `planner validate` must print for it (file named without its directory).
#include <gtest/gtest.h>

#include "planner/core/catalog.hpp"
#include "planner/core/loaders.hpp"
#include "support/corpus.hpp"

namespace planner {
namespace {

const std::string kBad = std::string(PLANNER_TEST_DATA_DIR) + "/bad";

TEST(BadInputs, CorpusIsLargeEnough) {
  EXPECT_GE(testing::corpus_files(kBad).size(), 30u);
}

TEST(BadInputs, EachFileGivesItsExactErrors) {
  DocumentTypes types;
  register_core_documents(types, builtin_catalog());
  testing::expect_corpus_diagnostics(kBad, types);
}

}  // namespace
}  // namespace planner
