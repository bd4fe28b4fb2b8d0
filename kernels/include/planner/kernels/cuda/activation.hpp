// MLP activations on the GPU, forward and backward, mirroring cpu/activation.hpp (same formulas,
// layouts and aliasing rules; backward kernels write the input gradients). Conventions in
// dtype.hpp; T is float, bf16 or fp16, computed in fp32 (tanhf and expf from CUDA's math library,
// so fp32 results agree with the CPU's to a few ulps, not bitwise).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "planner/core/status.hpp"
#include "planner/kernels/cuda/dtype.hpp"

namespace planner::kernels::cuda {

// y[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for i < n; y may be x.
template <class T>
Status gelu_forward(const T* x, std::int64_t n, T* y, cudaStream_t stream);

// dx[i] = dy[i] * gelu'(x[i]); dx may be dy.
template <class T>
Status gelu_backward(const T* x, const T* dy, std::int64_t n, T* dx, cudaStream_t stream);

// out = silu(gate) * up; gate and up are rows x cols with row stride ld_in >= cols; out is
// rows x cols, contiguous, not overlapping gate or up.
template <class T>
Status swiglu_forward(const T* gate, const T* up, std::int64_t rows, std::int64_t cols,
                      std::int64_t ld_in, T* out, cudaStream_t stream);

// dgate = dout * up * silu'(gate), dup = dout * silu(gate), with gate/up's layout; may be in place.
template <class T>
Status swiglu_backward(const T* gate, const T* up, const T* dout, std::int64_t rows,
                       std::int64_t cols, std::int64_t ld_in, T* dgate, T* dup,
                       cudaStream_t stream);

}  // namespace planner::kernels::cuda
