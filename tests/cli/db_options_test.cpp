// cli/db_options.hpp: --db and --no-db as every recording command gets them.
#include "db_options.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "support/command.hpp"

namespace planner::cli {
namespace {

// Parses `args` for a command with the recording options.
DbOptions parse(std::vector<std::string> args) {
  CLI::App app;
  DbOptions options;
  add_db_options(&app, options);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last-first
  app.parse(args);
  return options;
}

TEST(DbOptions, DefaultsToPlannerDbInTheWorkingDirectory) {
  const DbOptions options = parse({});
  EXPECT_EQ(options.path, "planner.db");
  EXPECT_FALSE(options.disabled);
}

TEST(DbOptions, DbChoosesTheFileAndNoDbRecordsNothing) {
  testing::TempDir dir;
  const DbOptions chosen = parse({"--db", dir.file("runs.db")});
  auto db = open_recording_db(chosen);
  ASSERT_TRUE(db) << db.status().message();
  ASSERT_TRUE(db->has_value());
  EXPECT_EQ((*db)->path(), dir.file("runs.db"));
  EXPECT_TRUE(std::filesystem::exists(dir.file("runs.db")));

  const DbOptions off = parse({"--no-db"});
  EXPECT_TRUE(off.disabled);
  auto none = open_recording_db(off);
  ASSERT_TRUE(none) << none.status().message();
  EXPECT_FALSE(none->has_value());

  EXPECT_THROW(parse({"--db", "x.db", "--no-db"}), CLI::ExcludesError);
}

TEST(DbOptions, ReadingNeedsAnExistingDatabase) {
  testing::TempDir dir;
  DbOptions options;
  options.path = dir.file("missing.db");
  auto db = open_existing_db(options);
  ASSERT_FALSE(db);
  EXPECT_EQ(db.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(options.path));
}

}  // namespace
}  // namespace planner::cli
