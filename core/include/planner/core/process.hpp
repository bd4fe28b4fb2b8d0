// Whether a process on this host still runs: for runs whose recording process died (store) and
// for ranks of a job that died or were stopped (executor), told apart from slow ones.
//
// Linux reports processes in /proc/<pid>/stat; elsewhere only "alive or gone" is known, from
// kill(pid, 0). A zombie (exited, not yet reaped by its parent) is gone.
#pragma once

#include <cstdint>
#include <string>

namespace planner {

enum class ProcessState {
  kRunning,  // alive (running, sleeping or waiting)
  kStopped,  // stopped by a signal (SIGSTOP, SIGTSTP) or a debugger
  kGone,     // no such process, or a zombie
};

ProcessState process_state(std::int64_t pid);

// What tells process `pid` apart from a later process that reuses its pid: the boot and the
// process's start time ("<boot id>/<clock ticks after boot>"); empty where /proc does not say.
std::string process_start_token(std::int64_t pid);

// This machine's host name ("unknown" when it cannot be read).
std::string host_name();

}  // namespace planner
