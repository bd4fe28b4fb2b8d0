// Finding and loading libplanner_cuda_backend.so (cuda_module.hpp).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "cuda_module.hpp"
#include "planner/exec/bounded_wait.hpp"

namespace planner::exec {
namespace {

// Where the module may be: $PLANNER_CUDA_BACKEND, else beside the running executable at the
// install layout's relative path (PLANNER_CUDA_MODULE_DIR, e.g. "../lib/planner").
std::vector<std::string> candidates() {
  if (const char* env = std::getenv("PLANNER_CUDA_BACKEND"); env != nullptr && *env != '\0') {
    return {env};
  }
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / PLANNER_CUDA_MODULE_DIR / kCudaModuleFile)
                      .lexically_normal()
                      .string());
  }
  return out;
}

Result<const CudaModule*> load() {
  std::string tried;
  for (const std::string& path : candidates()) {
    if (!std::filesystem::exists(path)) {
      tried += (tried.empty() ? "" : ", ") + path + " (no such file)";
      continue;
    }
    // RTLD_LOCAL: the module's copies of planner's libraries stay its own.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = ::dlerror();
      return Status::unavailable(
          "the cuda backend could not be loaded: " + std::string(err != nullptr ? err : path) +
          " (it needs the CUDA toolkit's cuBLAS and NCCL libraries)");
    }
    using Entry = const CudaModule* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, kCudaModuleEntry));
    if (entry == nullptr) {
      return Status::unavailable(path + " is not a planner cuda backend (no " +
                                 std::string(kCudaModuleEntry) + ")");
    }
    const CudaModule* module = entry();
    if (module == nullptr || module->build != cuda_module_build()) {
      return Status::unavailable(path + " is from another build of planner (" +
                                 std::string(module != nullptr ? module->build : "?") +
                                 "); this planner is " + cuda_module_build());
    }
    module->use_host_wait_state(host_wait_state());
    return module;
  }
  return Status::unavailable("the cuda backend's module " + std::string(kCudaModuleFile) +
                             " was not found (looked for " + tried +
                             "; set PLANNER_CUDA_BACKEND to its path)");
}

}  // namespace

Result<const CudaModule*> cuda_module() {
  static const Result<const CudaModule*> module = load();
  return module;
}

}  // namespace planner::exec
