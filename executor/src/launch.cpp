#include "planner/exec/launch.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace planner::exec {

LaunchCommand local_launch_command(const LocalLaunch& launch,
                                   const std::vector<std::string>& program) {
  LaunchCommand cmd;
  cmd.argv = {launch.mpirun.empty() ? default_mpirun() : launch.mpirun, "-n",
              std::to_string(launch.ranks)};
  if (launch.ranks > launch.cores) {
    // More ranks than cores: Open MPI refuses unless told, and binding ranks to cores would pile
    // several onto one.
    cmd.argv.insert(cmd.argv.end(), {"--oversubscribe", "--bind-to", "none"});
  }
  // A rank that dies must not take the others down before they record the failure.
  cmd.argv.insert(cmd.argv.end(), {"--mca", "orte_enable_recovery", "1"});
  cmd.argv.insert(cmd.argv.end(), program.begin(), program.end());
  if (launch.as_root) {
    cmd.env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  }
  return cmd;
}

std::string default_mpirun() {
  if (const char* env = std::getenv("PLANNER_MPIRUN"); env != nullptr && *env != '\0') return env;
  return PLANNER_MPIEXEC;
}

Result<std::string> self_executable() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) return Status::runtime("cannot find this program's executable (/proc/self/exe)");
  path.resize(static_cast<std::size_t>(n));
  return path;
}

namespace {

// The environment of a child: ours, with the command's entries added or replacing ours.
std::vector<std::string> child_environment(const LaunchCommand& command) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    bool replaced = false;
    for (const std::string& add : command.env) {
      if (entry.substr(0, entry.find('=') + 1) == add.substr(0, add.find('=') + 1)) replaced = true;
    }
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), command.env.begin(), command.env.end());
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Spawns the command; with `io` its standard input and output are redirected to the given fds
// (the child's copies of the others closed).
Result<pid_t> spawn(const LaunchCommand& command, const posix_spawn_file_actions_t* io) {
  std::vector<std::string> env = child_environment(command);
  std::vector<std::string> args = command.argv;
  std::vector<char*> argv = pointers(args);
  std::vector<char*> envp = pointers(env);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0], io, nullptr, argv.data(), envp.data());
  if (rc != 0) {
    return Status::runtime("cannot start " + command.argv[0] + ": " + std::strerror(rc));
  }
  return pid;
}

Result<int> wait_exit(pid_t pid, const std::string& name) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Status::runtime("waiting for " + name + " failed");
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

Result<int> run_command(const LaunchCommand& command) {
  PLANNER_ASSIGN_OR_RETURN(pid_t pid, spawn(command, nullptr));
  return wait_exit(pid, command.argv[0]);
}

Result<CommandOutput> run_command_output(const LaunchCommand& command, std::string_view input) {
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
    for (int fd : {in[0], in[1], out[0], out[1]})
      if (fd >= 0) ::close(fd);
    return Status::runtime("cannot create pipes for " + command.argv[0]);
  }
  posix_spawn_file_actions_t io;
  posix_spawn_file_actions_init(&io);
  posix_spawn_file_actions_adddup2(&io, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&io, out[1], STDOUT_FILENO);
  Result<pid_t> pid = spawn(command, &io);
  posix_spawn_file_actions_destroy(&io);
  ::close(in[0]);
  ::close(out[1]);
  if (!pid) {
    ::close(in[1]);
    ::close(out[0]);
    return pid.status();
  }
  // The input (a batch script) is read whole before the program answers; a program that stops
  // reading early only ends the write (SIGPIPE is ignored for it).
  struct sigaction ignore {};
  struct sigaction previous {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);
  for (std::size_t done = 0; done < input.size();) {
    const ssize_t n = ::write(in[1], input.data() + done, input.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(in[1]);
  ::sigaction(SIGPIPE, &previous, nullptr);
  CommandOutput result;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  PLANNER_ASSIGN_OR_RETURN(result.exit_code, wait_exit(*pid, command.argv[0]));
  return result;
}

// ---- Slurm

std::string shell_quote(std::string_view text) {
  const bool plain = !text.empty() && text.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_-./=:,+@%") == std::string_view::npos;
  if (plain) return std::string(text);
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

Result<std::string> slurm_batch_script(const SlurmLaunch& launch,
                                       const std::vector<std::string>& program) {
  if (launch.ranks < 1 || launch.ranks_per_node < 1) {
    return Status::invalid_input("a Slurm job needs at least one rank and one rank per node");
  }
  const int per_node = std::min(launch.ranks_per_node, launch.ranks);
  const int needed = (launch.ranks + per_node - 1) / per_node;
  if (launch.nodes > 0 && launch.nodes < needed) {
    return Status::invalid_input("--nodes " + std::to_string(launch.nodes) + ": the plan places " +
                                 std::to_string(per_node) +
                                 " ranks per node (its cluster's gpus_per_node), so its " +
                                 std::to_string(launch.ranks) + " ranks need " +
                                 std::to_string(needed) + (needed == 1 ? " node" : " nodes"));
  }
  const int nodes = launch.nodes > 0 ? launch.nodes : needed;
  std::string s = "#!/bin/bash\n";
  if (!launch.comment.empty()) s += "# " + launch.comment + "\n";
  auto directive = [&](std::string_view key, const std::string& value) {
    s += "#SBATCH --" + std::string(key) + "=" + value + "\n";
  };
  directive("job-name", launch.job_name);
  directive("nodes", std::to_string(nodes));
  directive("ntasks", std::to_string(launch.ranks));
  directive("ntasks-per-node", std::to_string(per_node));
  if (!launch.partition.empty()) directive("partition", launch.partition);
  if (!launch.time.empty()) directive("time", launch.time);
  directive("output", launch.output.empty() ? std::string("planner-exec-%j.out") : launch.output);
  if (!launch.workdir.empty()) directive("chdir", launch.workdir);
  const bool settle = !launch.after_step.empty();
  s += "\n";
  if (settle) {
    s += "outcome=" + shell_quote(launch.outcome_dir.empty() ? "." : launch.outcome_dir) +
         "/planner-exec-\"$SLURM_JOB_ID\".outcome\n";
  }
  s +=
      "# One job step: every rank runs planner exec --launch none and joins the MPI world through\n"
      "# " +
      std::string(launch.mpi == "pmix" ? "PMIx" : launch.mpi) + ".\n";
  s += std::string(settle ? "" : "exec ") + "srun --mpi=" + shell_quote(launch.mpi) +
       " --kill-on-bad-exit=0 --ntasks=" + std::to_string(launch.ranks) +
       " --ntasks-per-node=" + std::to_string(per_node);
  for (const std::string& a : program)
    s += " " + shell_quote(a);
  if (!settle) return s + "\n";
  s += " --outcome-file \"$outcome\"\n";
  s += "# A rank that dies ends the whole step (Slurm's PMIx plugin), rank 0 included, before rank "
       "0\n"
       "# can record it: settle the run's outcome here. The job's exit code is the run's (0 ok, 1\n"
       "# failed, 2 refused).\n";
  s += "exec";
  for (const std::string& a : launch.after_step)
    s += " " + shell_quote(a);
  return s + " --outcome-file \"$outcome\" --settle \"$?\"\n";
}

std::string slurm_program(std::string_view name) {
  if (const char* dir = std::getenv("PLANNER_SLURM_BIN"); dir != nullptr && *dir != '\0') {
    return std::string(dir) + "/" + std::string(name);
  }
  return std::string(name);
}

Result<std::string> submit_batch_job(const std::string& script) {
  const LaunchCommand cmd{{slurm_program("sbatch"), "--parsable"}, {}};
  Result<CommandOutput> out = run_command_output(cmd, script);
  if (!out) {
    return Status::unavailable(out.status().message() +
                               " (is Slurm installed here? --dry-run prints the script)");
  }
  if (out->exit_code != 0) {
    return Status::runtime("sbatch refused the job (exit code " + std::to_string(out->exit_code) +
                           "; its message is above)");
  }
  // --parsable prints "jobid" or "jobid;cluster".
  std::string id = out->out.substr(0, out->out.find_first_of(";\r\n"));
  if (id.empty() || id.find_first_not_of("0123456789_") != std::string::npos) {
    return Status::runtime("sbatch answered \"" + out->out + "\", expected a job id");
  }
  return id;
}

bool SlurmJobState::finished() const {
  return !(state == "PENDING" || state == "RUNNING" || state == "CONFIGURING" ||
           state == "COMPLETING" || state == "SUSPENDED" || state == "REQUEUED" ||
           state == "RESIZING" || state == "SIGNALING" || state == "STAGE_OUT");
}

namespace {

// The value of `key`= in `scontrol show job -o` output ("" when absent).
std::string scontrol_field(const std::string& line, std::string_view key) {
  std::size_t at = 0;
  const std::string pat = std::string(key) + "=";
  while ((at = line.find(pat, at)) != std::string::npos) {
    if (at == 0 || line[at - 1] == ' ') {
      const std::size_t begin = at + pat.size();
      return line.substr(begin, line.find_first_of(" \n", begin) - begin);
    }
    at += pat.size();
  }
  return {};
}

}  // namespace

Result<std::optional<SlurmJobState>> query_slurm_job(const std::string& job_id) {
  const LaunchCommand cmd{{slurm_program("scontrol"), "show", "job", "-o", job_id}, {}};
  PLANNER_ASSIGN_OR_RETURN(CommandOutput out, run_command_output(cmd));
  if (out.exit_code != 0 || out.out.find("JobId=") == std::string::npos) {
    return std::optional<SlurmJobState>();  // purged from the controller's memory
  }
  SlurmJobState st;
  st.state = scontrol_field(out.out, "JobState");
  const std::string code = scontrol_field(out.out, "ExitCode");
  if (st.finished() && !code.empty()) {
    const std::size_t colon = code.find(':');
    const int exit = std::atoi(code.substr(0, colon).c_str());
    const int signal = colon == std::string::npos ? 0 : std::atoi(code.c_str() + colon + 1);
    st.exit_code = signal != 0 ? 128 + signal : exit;
  }
  return std::optional<SlurmJobState>(st);
}

Result<SlurmJobState> wait_for_slurm_job(
    const std::string& job_id, double poll_s, double timeout_s,
    const std::function<void(const SlurmJobState&)>& on_state) {
  const auto start = std::chrono::steady_clock::now();
  SlurmJobState last;
  while (true) {
    PLANNER_ASSIGN_OR_RETURN(std::optional<SlurmJobState> now, query_slurm_job(job_id));
    if (!now) {
      if (last.state.empty()) return Status::not_found("Slurm does not know job " + job_id);
      return last;  // purged after it ended
    }
    if (now->state != last.state && on_state) on_state(*now);
    last = *now;
    if (last.finished()) return last;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_s > 0 && waited > timeout_s) {
      return Status::timeout("job " + job_id + " still " + last.state + " after " +
                             std::to_string(static_cast<long long>(timeout_s)) + " s");
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
}

}  // namespace planner::exec
