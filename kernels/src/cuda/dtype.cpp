#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

std::string_view to_string(DType type) {
  switch (type) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
  }
  return "unknown";
}

std::size_t dtype_size(DType type) {
  switch (type) {
    case DType::kF32:
      return sizeof(float);
    case DType::kBF16:
      return sizeof(bf16);
    case DType::kF16:
      return sizeof(fp16);
  }
  return 0;
}

}  // namespace planner::kernels::cuda
