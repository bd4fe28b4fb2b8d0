// CalibrationPoint: one measured operation a hardware profile can be fitted to (issue 9).
//
// An op of the step program's vocabulary (an OpDesc, described as the lowering describes it) and
// the wall time one such op took: a microbenchmark of `planner calibrate` (the executor's
// backends) or an op of an executed run. The simulator's fit (planner/fit/calibration.hpp) times
// the same OpDesc with its models, so the fitted parameters mean what the simulator does with them.
// The store keeps points as calibration samples: benchmark_name() and encode_shape() give the
// sample's benchmark and shape text, decode_point() rebuilds the point.
#pragma once

#include <string>
#include <string_view>

#include "planner/core/program.hpp"
#include "planner/core/status.hpp"
#include "planner/core/units.hpp"

namespace planner {

struct CalibrationPoint {
  OpDesc desc;            // compute: shape, FLOPs and bytes; communication: kind and comm_bytes
  bool backward = false;  // attention: the backward kernel
  int group_size = 1;     // communication: ranks taking part (a send/recv pair is 2)
  Time measured;          // wall time of one op
};

// The benchmark name of a point: the op kind ("gemm", "norm", "all_reduce", "send"), with
// "attention_backward" for backward attention.
std::string benchmark_name(const CalibrationPoint& point);
// The point's shape as text, "key=value" pairs separated by ',' (m, n, k, batch, aux, flops, read,
// written, comm, flags, stream; zeros left out), from which decode_point() rebuilds it.
std::string encode_shape(const CalibrationPoint& point);
// kInvalidInput naming the problem for an unknown benchmark or a malformed shape.
Result<CalibrationPoint> decode_point(std::string_view benchmark, std::string_view shape,
                                      Precision precision, int group_size, Time measured);

// True for collectives and point-to-point messages (program.hpp's is_collective or is_p2p).
inline bool is_communication(OpKind kind) {
  return is_collective(kind) || is_p2p(kind);
}

}  // namespace planner
