#include "planner/kernels/device_info.hpp"

namespace planner::kernels {

CudaInventory cuda_inventory() {
  CudaInventory inv;
  inv.reason =
      "this build of planner has no CUDA backend (the CUDA toolkit and NCCL were not found "
      "at configure time)";
  return inv;
}

}  // namespace planner::kernels
