// The README's set-up commands are the contract with a newcomer: CI must run the test command
// exactly.
#include <gtest/gtest.h>

#include "support/command.hpp"

namespace planner {
namespace {

std::string line_after_marker(const std::string& text, const std::string& marker) {
  auto at = text.find(marker);
  if (at == std::string::npos) return {};
  at = text.find("```sh\n", at);
  if (at == std::string::npos) return {};
  at += 6;
  return text.substr(at, text.find('\n', at) - at);
}

TEST(Readme, CiRunsTheReadmeTestCommand) {
  const std::string readme = testing::slurp(std::string(PLANNER_SOURCE_DIR) + "/README.md");
  const std::string ci = testing::slurp(std::string(PLANNER_SOURCE_DIR) + "/.ci/run");
  const std::string command = line_after_marker(readme, "<!-- test-command:");
  ASSERT_FALSE(command.empty()) << "README.md has no test-command block";
  EXPECT_NE(ci.find("\n" + command + "\n"), std::string::npos)
      << ".ci/run does not run the README's test command: " << command;
}

}  // namespace
}  // namespace planner
