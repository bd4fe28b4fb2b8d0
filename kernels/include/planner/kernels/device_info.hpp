// What accelerators this process can use. Never fails: a build without CUDA, a machine without a
// driver, or any CUDA error all mean zero devices, with the reason in `reason`.
#pragma once

#include <string>
#include <vector>

namespace planner::kernels {

struct CudaDevice {
  int index = 0;
  std::string name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  double memory_GiB = 0;
  int multiprocessors = 0;
};

struct CudaInventory {
  bool built = false;       // the CUDA backend was compiled in
  int runtime_version = 0;  // e.g. 13000 for CUDA 13.0; 0 when unknown
  int driver_version = 0;   // 0 when no driver is installed
  std::vector<CudaDevice> devices;
  std::string reason;  // why there are no devices, when there are none
};

CudaInventory cuda_inventory();

}  // namespace planner::kernels
