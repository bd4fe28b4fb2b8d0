#include "planner/exec/outcome.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "planner/store/database.hpp"
#include "planner/store/runs.hpp"

namespace planner::exec {

std::string OutcomeFile::fresh_path(std::string_view what) {
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("planner-" + std::string(what) + "-" + std::to_string(::getpid()) + ".outcome"))
          .string();
  std::error_code ec;
  std::filesystem::remove(path, ec);
  return path;
}

void OutcomeFile::run(std::int64_t id) const {
  append("run " + std::to_string(id));
}

void OutcomeFile::exit(int code) const {
  append("exit " + std::to_string(code));
}

OutcomeFile::Read OutcomeFile::read(const std::string& path) {
  Read out;
  std::ifstream in(path);
  std::string key;
  std::int64_t value = 0;
  while (in >> key >> value) {
    if (key == "run") out.run = value;
    if (key == "exit") out.exit = static_cast<int>(value);
  }
  return out;
}

void OutcomeFile::append(const std::string& line) const {
  if (path_.empty()) return;
  std::ofstream out(path_, std::ios::app);
  out << line << '\n';
}

Status settle_outcome(const std::string& outcome_file, const std::string& db_path,
                      const std::string& launcher, int launcher_code, const std::string& cause) {
  const OutcomeFile::Read outcome = OutcomeFile::read(outcome_file);
  std::error_code ec;
  std::filesystem::remove(outcome_file, ec);
  if (outcome.exit) {
    if (*outcome.exit == 0) return Status::ok();
    return Status(*outcome.exit == 2 ? StatusCode::kInvalidInput : StatusCode::kRuntime, "");
  }
  const std::string why = "the job ended (" + launcher + " exit code " +
                          std::to_string(launcher_code) +
                          ") before rank 0 reported the outcome: " + cause;
  if (outcome.run && !db_path.empty()) {
    store::OpenOptions open;
    open.mode = store::OpenMode::kMustExist;
    auto db = store::Database::open(db_path, open);
    auto run = db ? store::get_run(*db, store::RunId{*outcome.run})
                  : Result<store::RunRecord>(db.status());
    if (run && run->status == store::RunStatus::kRunning) {
      PLANNER_RETURN_IF_ERROR(store::fail_run(*db, run->id, why));
      return Status::runtime(why + "; run " + std::to_string(run->id.value) + " marked failed");
    }
  }
  return Status::runtime(why);
}

}  // namespace planner::exec
