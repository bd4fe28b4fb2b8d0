#include "planner/exec/device.hpp"

namespace planner::exec {

DType activation_type(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
    case Precision::kTf32:
      return DType::kFloat32;
    case Precision::kBf16:
      return DType::kBFloat16;
    case Precision::kFp16:
    case Precision::kFp8:
      return DType::kFloat16;
  }
  return DType::kFloat32;
}

Status Device::set_precision(Precision precision) {
  if (!supports(precision)) {
    return Status::invalid_input(description() + " does not train in " +
                                 std::string(to_string(precision)));
  }
  precision_ = precision;
  return Status::ok();
}

}  // namespace planner::exec
