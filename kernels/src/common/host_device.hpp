// PLANNER_HOST_DEVICE marks a function that the CPU kernels and the CUDA kernels share: compiled
// for both host and device by nvcc, a plain inline function for the C++ compiler. Internal to
// planner::kernels.
#pragma once

#if defined(__CUDACC__)
#define PLANNER_HOST_DEVICE __host__ __device__
#else
#define PLANNER_HOST_DEVICE
#endif
