#include "planner/core/status.hpp"

#include <gtest/gtest.h>

namespace planner {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Status::invalid_input("must be positive, got " + std::to_string(v));
  return v;
}

Result<int> doubled(int v) {
  PLANNER_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

TEST(Status, ExitCodes) {
  EXPECT_EQ(Status::ok().exit_code(), 0);
  EXPECT_EQ(Status::invalid_input("x").exit_code(), 2);
  EXPECT_EQ(Status::not_found("x").exit_code(), 2);
  EXPECT_EQ(Status::runtime("x").exit_code(), 1);
  EXPECT_EQ(Status::timeout("x").exit_code(), 1);
  EXPECT_EQ(Status::unavailable("x").exit_code(), 1);
}

TEST(Status, ResultCarriesValueOrError) {
  auto ok = doubled(21);
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(*ok, 42);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(bad.status().message(), "must be positive, got -1");
}

TEST(Status, ContextPrefixesEveryLine) {
  Status s = Status::invalid_input("a\nb").with_context("file.json");
  EXPECT_EQ(s.message(), "file.json: a\nfile.json: b");
}

}  // namespace
}  // namespace planner
