#include "process_tree.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "support/command.hpp"

namespace planner::testing {
namespace {

// (pid, parent pid, state) of every process, from /proc/<pid>/stat.
struct ProcInfo {
  pid_t pid;
  pid_t ppid;
  char state;
};

std::vector<ProcInfo> all_processes() {
  std::vector<ProcInfo> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = slurp(e.path().string() + "/stat");
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; it ends at the last ')'.
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = '?';
    long ppid = 0;
    rest >> state >> ppid;
    out.push_back({static_cast<pid_t>(std::atol(name.c_str())), static_cast<pid_t>(ppid), state});
  }
  return out;
}

// Whether the environment of `pid` holds "K=V".
bool has_env(pid_t pid, const std::string& entry) {
  std::string env = slurp("/proc/" + std::to_string(pid) + "/environ");
  std::replace(env.begin(), env.end(), '\0', '\n');
  return ("\n" + env).find("\n" + entry + "\n") != std::string::npos;
}

}  // namespace

std::vector<pid_t> processes_with_env(const std::vector<std::string>& entries) {
  std::vector<pid_t> out;
  for (const ProcInfo& p : all_processes()) {
    if (p.state == 'Z') continue;
    if (std::all_of(entries.begin(), entries.end(),
                    [&](const std::string& e) { return has_env(p.pid, e); })) {
      out.push_back(p.pid);
    }
  }
  return out;
}

bool process_alive(pid_t pid) {
  for (const ProcInfo& p : all_processes()) {
    if (p.pid == pid) return p.state != 'Z' && p.state != 'X';
  }
  return false;
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

Background::Background(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const std::string& dir)
    : out_path_(dir + "/bg.out"), err_path_(dir + "/bg.err") {
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    // Ends with the test even when the test itself is killed (a ctest timeout): daemons such as
    // slurmctld would otherwise outlive it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int out_fd = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in_fd = ::open("/dev/null", O_RDONLY);
    ::dup2(in_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    for (const std::string& kv : env)
      ::putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
}

Background::~Background() {
  kill_all();
  wait(std::chrono::seconds(10));
  // Ranks re-parented to init after their launcher died are no longer descendants: kill the ones
  // seen earlier too.
  for (pid_t p : seen_) {
    if (process_alive(p)) ::kill(p, SIGKILL);
  }
}

std::string Background::out() const {
  return slurp(out_path_);
}

std::string Background::err() const {
  return slurp(err_path_);
}

bool Background::wait_for_err(const std::function<bool(const std::string&)>& ready,
                              std::chrono::seconds timeout) {
  return wait_until(
             [&] {
               if (ready(err())) return true;
               int status = 0;
               if (!exit_code_ && ::waitpid(pid_, &status, WNOHANG) == pid_) {
                 exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
               }
               return exit_code_.has_value() && !ready(err());
             },
             timeout) &&
         ready(err());
}

std::optional<int> Background::wait(std::chrono::seconds timeout) {
  if (exit_code_) return exit_code_;
  wait_until(
      [&] {
        int status = 0;
        const pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
          exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        } else if (r < 0) {
          exit_code_ = -1;  // not our child any more
        }
        return exit_code_.has_value();
      },
      timeout);
  return exit_code_;
}

std::vector<pid_t> Background::descendants() const {
  const std::vector<ProcInfo> procs = all_processes();
  std::vector<pid_t> out;
  std::vector<pid_t> frontier = {pid_};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    for (const ProcInfo& p : procs) {
      if (p.ppid == parent && p.state != 'Z') {
        out.push_back(p.pid);
        frontier.push_back(p.pid);
      }
    }
  }
  return out;
}

std::optional<pid_t> Background::rank_pid(int rank) const {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (pid_t p : descendants()) {
    if (has_env(p, want)) {
      const_cast<Background*>(this)->seen_.push_back(p);
      return p;
    }
  }
  return std::nullopt;
}

void Background::kill_all() {
  // Stop every process first, then kill them: killed one by one, a survivor could notice a dead
  // peer and react (mark its run failed) before its own turn, which a lost node does not allow.
  const std::vector<pid_t> job = descendants();
  if (!exit_code_) ::kill(pid_, SIGSTOP);
  for (pid_t p : job)
    ::kill(p, SIGSTOP);
  for (pid_t p : job) {
    seen_.push_back(p);
    ::kill(p, SIGKILL);
  }
  if (!exit_code_) ::kill(pid_, SIGKILL);
}

}  // namespace planner::testing
