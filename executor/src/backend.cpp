#include "planner/exec/backend.hpp"

namespace planner::exec {

// Defined in cpu_backend.cpp.
Result<std::unique_ptr<Backend>> make_cpu_backend(World& world, const BackendOptions& options);

namespace {

// The GPU backend's name; it is built with the CUDA toolkit (kernels/, issue "GPU backend").
constexpr std::string_view kCudaBackend = "cuda";

}  // namespace

std::vector<std::string> backend_names() {
  return {"cpu"};
}

Status check_backend_name(std::string_view name) {
  for (const std::string& known : backend_names()) {
    if (name == known) return Status::ok();
  }
  if (name == kCudaBackend) {
    return Status::unavailable(
        "the cuda backend is not part of this build (it needs the CUDA toolkit and NCCL); "
        "available backends: cpu");
  }
  return Status::invalid_input("unknown backend \"" + std::string(name) +
                               "\": expected one of: cpu");
}

Result<std::unique_ptr<Backend>> make_backend(std::string_view name, World& world,
                                              const BackendOptions& options) {
  PLANNER_RETURN_IF_ERROR(check_backend_name(name));
  return make_cpu_backend(world, options);
}

}  // namespace planner::exec
