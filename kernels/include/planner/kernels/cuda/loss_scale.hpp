// Loss scaling for fp16 on the GPU: the non-finite check and unscaling of gradients, mirroring
// cpu/loss_scale.hpp. The dynamic scale's update rule is host arithmetic: use
// cpu::DynamicLossScale with the flag below (copied to the host and reduced over ranks).
//
// Recipe per step: zero the int flag, run unscale_and_check on every gradient shard, all-reduce
// the flag with MAX over the ranks, copy it to the host and call DynamicLossScale::update(flag ==
// 0); skip the optimizer step when that returns false.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "planner/core/status.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

// Sets *found_nonfinite (a device int) to 1 when some x[i], i < n, is inf or NaN; never clears it,
// so one flag collects several arrays. (Every writer stores the same 1: no atomics needed.)
template <class T>
Status check_finite(const T* x, std::int64_t n, std::int32_t* found_nonfinite, cudaStream_t stream);

// x[i] *= inv_scale for i < n, and the check above on the values before scaling. In fp32 the
// products are bit-identical to cpu::unscale_and_check.
template <class T>
Status unscale_and_check(T* x, std::int64_t n, float inv_scale, std::int32_t* found_nonfinite,
                         cudaStream_t stream);

}  // namespace planner::kernels::cuda
