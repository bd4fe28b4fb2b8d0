#include "planner/exec/launch.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

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

Result<int> run_command(const LaunchCommand& command) {
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    bool replaced = false;
    for (const std::string& add : command.env) {
      if (entry.substr(0, entry.find('=') + 1) == add.substr(0, add.find('=') + 1)) replaced = true;
    }
    if (!replaced) env_store.push_back(entry);
  }
  env_store.insert(env_store.end(), command.env.begin(), command.env.end());
  std::vector<char*> argv;
  for (const std::string& a : command.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env_store)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0) {
    return Status::runtime("cannot start " + command.argv[0] + ": " + std::strerror(rc));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Status::runtime("waiting for " + command.argv[0] + " failed");
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace planner::exec
