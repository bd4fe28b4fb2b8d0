#include <cuda_runtime_api.h>

#include "planner/kernels/device_info.hpp"

namespace planner::kernels {

CudaInventory cuda_inventory() {
  CudaInventory inv;
  inv.built = true;
  cudaRuntimeGetVersion(&inv.runtime_version);
  if (cudaDriverGetVersion(&inv.driver_version) != cudaSuccess) inv.driver_version = 0;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    inv.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return inv;
  }
  if (count == 0) inv.reason = "no CUDA devices";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    CudaDevice d;
    d.index = i;
    d.name = prop.name;
    d.compute_capability_major = prop.major;
    d.compute_capability_minor = prop.minor;
    d.memory_GiB = static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
    d.multiprocessors = prop.multiProcessorCount;
    inv.devices.push_back(d);
  }
  return inv;
}

}  // namespace planner::kernels
