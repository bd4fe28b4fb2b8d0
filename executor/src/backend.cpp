#include "planner/exec/backend.hpp"

#ifdef PLANNER_HAVE_CUDA
#include "cuda_module.hpp"
#endif

namespace planner::exec {

// Defined in cpu_backend.cpp. The cuda backend is a module loaded on first use (cuda_module.hpp).
Result<std::unique_ptr<Backend>> make_cpu_backend(World& world, const BackendOptions& options);

namespace {

// The GPU backend's name; it is built with the CUDA toolkit and NCCL (PLANNER_HAVE_CUDA).
constexpr std::string_view kCudaBackend = "cuda";

}  // namespace

std::vector<std::string> backend_names() {
#ifdef PLANNER_HAVE_CUDA
  return {"cpu", std::string(kCudaBackend)};
#else
  return {"cpu"};
#endif
}

Status check_backend_name(std::string_view name) {
  std::string known_list;
  for (const std::string& known : backend_names()) {
    if (name == known) return Status::ok();
    known_list += (known_list.empty() ? "" : ", ") + known;
  }
  if (name == kCudaBackend) {
    return Status::unavailable(
        "the cuda backend is not part of this build (it needs the CUDA toolkit and NCCL); "
        "available backends: " +
        known_list);
  }
  return Status::invalid_input("unknown backend \"" + std::string(name) +
                               "\": expected one of: " + known_list);
}

Status check_backend_available(std::string_view name) {
  PLANNER_RETURN_IF_ERROR(check_backend_name(name));
  if (name != kCudaBackend) return Status::ok();
#ifdef PLANNER_HAVE_CUDA
  PLANNER_ASSIGN_OR_RETURN(const CudaModule* cuda, cuda_module());
  return cuda_needs_gpu(cuda->inventory());
#else
  return Status::ok();  // check_backend_name refused it
#endif
}

Result<std::unique_ptr<Backend>> make_backend(std::string_view name, World& world,
                                              const BackendOptions& options) {
  PLANNER_RETURN_IF_ERROR(check_backend_name(name));
#ifdef PLANNER_HAVE_CUDA
  if (name == kCudaBackend) {
    PLANNER_ASSIGN_OR_RETURN(const CudaModule* cuda, cuda_module());
    return cuda->make_backend(world, options);
  }
#endif
  return make_cpu_backend(world, options);
}

}  // namespace planner::exec
