// The cuda backend as a loadable module (private to executor/).
//
// The cuda backend (cuda_backend.cpp, cuda_device.cpp, planner::kernels_cuda) links cuBLAS, NCCL
// and the static CUDA runtime. Linked into `planner`, every command, `planner --version`
// included, loaded those libraries (about 220 MB and up to 2 s). Instead the backend is a module,
// libplanner_cuda_backend.so, that planner loads with dlopen the first time the cuda backend is
// asked for (cuda_module()); the binary starts, and runs everything else, without the CUDA
// libraries present. The module is found in <bin>/../<libdir>/planner next to the executable (the
// build tree has the install layout), or at $PLANNER_CUDA_BACKEND.
#pragma once

#include <memory>
#include <string>

#include "planner/core/status.hpp"
#include "planner/core/version.hpp"
#include "planner/exec/backend.hpp"
#include "planner/kernels/device_info.hpp"

namespace planner::exec {

// What the module hands planner. A module of another build (another layout of these types) is
// refused by its `build` stamp.
struct CudaModule {
  const char* build;  // cuda_module_build() of the build that made the module
  kernels::CudaInventory (*inventory)();
  Result<std::unique_ptr<Backend>> (*make_backend)(World& world, const BackendOptions& options);
  // The module carries its own copy of the executor's polling code: it keeps its books in the
  // loading program's (bounded_wait.hpp), set once when the module is loaded.
  void (*use_host_wait_state)(void* state);
};

// The module's entry point: extern "C" const CudaModule* planner_cuda_module().
inline constexpr const char* kCudaModuleEntry = "planner_cuda_module";

// The file name of the module.
inline constexpr const char* kCudaModuleFile = "libplanner_cuda_backend.so";

// This build's stamp: version, commit, build type and compiler (version.hpp).
inline std::string cuda_module_build() {
  return std::string(build::kVersion) + " " + build::kGitCommit + " " + build::kBuildType + " " +
         build::kCompiler;
}

// Loads the module on first use (thread-safe) and returns it; kUnavailable saying what failed
// (the file is missing, a CUDA library is missing, a module of another build).
Result<const CudaModule*> cuda_module();

// kUnavailable for a machine without a usable GPU, with the reason the inventory gives.
inline Status cuda_needs_gpu(const kernels::CudaInventory& inventory) {
  if (!inventory.devices.empty()) return Status::ok();
  return Status::unavailable(
      "the cuda backend needs an NVIDIA GPU with a working driver, and this machine has none (" +
      (inventory.reason.empty() ? std::string("no CUDA devices") : inventory.reason) +
      "); the cpu backend runs anywhere");
}

}  // namespace planner::exec
