// How rank 0 of a job tells the planner process that launched it how the job ended.
//
// mpirun, in the recovery mode that lets rank 0 outlive a dead rank and record its failure, exits 0
// whatever the ranks did, and Slurm's PMIx plugin ends every rank of a job step when one dies; so
// the launching `planner exec` / `planner calibrate` reads the outcome from a file rank 0 appends
// to. Lines: "run <id>" once rank 0 recorded its run in the database, "exit <code>" at the end
// (0 ok, 1 runtime failure, 2 bad input; rank 0 printed the error itself). A file without an exit
// line means rank 0 itself died: the launcher then marks the run rank 0 had recorded failed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "planner/core/status.hpp"

namespace planner::exec {

class OutcomeFile {
 public:
  // `path` empty: reports nothing (every rank but 0 holds such a file).
  explicit OutcomeFile(std::string path) : path_(std::move(path)) {}

  // A path in the temporary directory unique to this process: "planner-<what>-<pid>.outcome"; the
  // file is removed if it exists.
  static std::string fresh_path(std::string_view what);

  void run(std::int64_t id) const;
  void exit(int code) const;

  struct Read {
    std::optional<std::int64_t> run;
    std::optional<int> exit;
  };
  static Read read(const std::string& path);

 private:
  void append(const std::string& line) const;
  std::string path_;
};

// After the job, in the launching process: the outcome rank 0 reported (ok, or an error with an
// empty message and the reported exit code's status: rank 0 printed the message), else a runtime
// failure saying that the job ended (`launcher` exited with `launcher_code`) before rank 0
// reported it and `cause`; in that case a run rank 0 had recorded in the database at `db_path`
// (empty: none) that is still running is marked failed with that reason. Removes the file.
Status settle_outcome(const std::string& outcome_file, const std::string& db_path,
                      const std::string& launcher, int launcher_code, const std::string& cause);

}  // namespace planner::exec
