// MLP activations, forward and backward. Conventions as in gemm.hpp. Backward kernels write (not
// accumulate) the input gradients, like every activation-gradient output in planner::kernels::cpu.
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

// GeLU, tanh approximation (Hendrycks & Gimpel 2016, "Gaussian Error Linear Units", sec. 2), the
// form GPT-2 and Megatron-LM train with:
//   y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
// y[i] = gelu(x[i]) for i < n; y may be x.
void gelu_forward(const float* x, std::int64_t n, float* y);

// dx[i] = dy[i] * gelu'(x[i]) for i < n, from the forward's input x; dx may be dy.
void gelu_backward(const float* x, const float* dy, std::int64_t n, float* dx);

// SwiGLU (Shazeer 2020, as in Llama): out = silu(gate) * up, silu(g) = g * sigmoid(g) = g / (1 +
// e^-g). gate and up are rows x cols matrices with row stride ld_in >= cols, so they can be two
// halves of one fused projection (gate = p, up = p + cols, ld_in = 2 * cols) or two separate ones
// (ld_in = cols). out is rows x cols, contiguous, and must not overlap gate or up.
void swiglu_forward(const float* gate, const float* up, std::int64_t rows, std::int64_t cols,
                    std::int64_t ld_in, float* out);

// Gradients of swiglu_forward: dgate = dout * up * silu'(gate), dup = dout * silu(gate), written
// with the same layout as gate and up (row stride ld_in); dout is rows x cols, contiguous. dgate
// and dup may be gate and up themselves (in place).
void swiglu_backward(const float* gate, const float* up, const float* dout, std::int64_t rows,
                     std::int64_t cols, std::int64_t ld_in, float* dgate, float* dup);

}  // namespace planner::kernels::cpu
