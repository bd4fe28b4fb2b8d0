// The entry point of libplanner_cuda_backend.so (cuda_module.hpp): the only symbol it exports.
#include "cuda_module.hpp"
#include "planner/exec/bounded_wait.hpp"

namespace planner::exec {

// Defined in cuda_backend.cpp.
Result<std::unique_ptr<Backend>> make_cuda_backend(World& world, const BackendOptions& options);

}  // namespace planner::exec

extern "C" __attribute__((visibility("default"))) const planner::exec::CudaModule*
planner_cuda_module() {
  static const std::string build = planner::exec::cuda_module_build();
  static const planner::exec::CudaModule module{build.c_str(), &planner::kernels::cuda_inventory,
                                                &planner::exec::make_cuda_backend,
                                                &planner::exec::use_host_wait_state};
  return &module;
}
