#include "planner/core/process.hpp"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <fstream>
#include <optional>
#include <sstream>

namespace planner {
namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

struct ProcStat {
  char state = '?';
  std::string start_ticks;
};

// The state letter and start time of `pid` from /proc/<pid>/stat, or nullopt when there is no
// such entry.
std::optional<ProcStat> proc_stat(std::int64_t pid) {
  const std::string line = first_line("/proc/" + std::to_string(pid) + "/stat");
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields count from the
  // last ')'. The start time is field 22 of the line, the 20th after the comm.
  const auto paren = line.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(paren + 1));
  ProcStat st;
  std::string field;
  for (int i = 0; i < 20 && fields >> field; ++i) {
    if (i == 0) st.state = field.empty() ? '?' : field[0];
    if (i == 19) st.start_ticks = field;
  }
  return st;
}

}  // namespace

ProcessState process_state(std::int64_t pid) {
  if (pid <= 0) return ProcessState::kGone;
  const auto st = proc_stat(pid);
  if (!st) {
    // No entry: gone where /proc works (it has one for this process), else ask the kernel.
    if (proc_stat(::getpid())) return ProcessState::kGone;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM ? ProcessState::kRunning
                                                                     : ProcessState::kGone;
  }
  switch (st->state) {
    case 'Z':
    case 'X':
    case 'x':
      return ProcessState::kGone;
    case 'T':
    case 't':
      return ProcessState::kStopped;
    default:
      return ProcessState::kRunning;
  }
}

std::string process_start_token(std::int64_t pid) {
  const std::string boot = first_line("/proc/sys/kernel/random/boot_id");
  const auto st = proc_stat(pid);
  if (boot.empty() || !st || st->start_ticks.empty()) return {};
  return boot + "/" + st->start_ticks;
}

std::string host_name() {
  // POSIX allows host names up to HOST_NAME_MAX (255) bytes.
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "unknown";
  return name.data();
}

}  // namespace planner
