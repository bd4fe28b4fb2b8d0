// Runs a command line for integration tests and captures its exit code, stdout and stderr.
#pragma once

#include <string>
#include <vector>

namespace planner::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `argv` (argv[0] is a path) without a shell, with extra environment entries "K=V", optional
// stdin text, and a wall-clock limit after which the child is killed (exit_code is then -9).
CommandResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::string>& env = {}, const std::string& input = {},
                          int timeout_seconds = 120);

// A fresh empty directory under the system temporary directory, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

#ifdef PLANNER_CLI_PATH
// Runs the planner binary under test with `args`.
inline CommandResult run_planner(std::vector<std::string> args) {
  args.insert(args.begin(), PLANNER_CLI_PATH);
  return run_command(args);
}
#endif

// Reads a whole file ("" when it cannot be read).
std::string slurp(const std::string& path);
void write_file(const std::string& path, const std::string& text);

}  // namespace planner::testing
