#include "planner/kernels/cpu/activation.hpp"

#include <cassert>

#include "cpu/vector_math.hpp"

namespace planner::kernels::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;              // GPT-2 / Megatron-LM tanh-GeLU coefficient

// The tanh-GeLU through s = 0.5 (1 + tanh(u)) = 1 / (1 + e^{-2u}), u = sqrt(2/pi) (x + 0.044715
// x^3): gelu(x) = x s and gelu'(x) = s + 2 x s (1 - s) du/dx (1 - tanh^2 = 4 s (1 - s)). Written
// with tanh, 1 + tanh(u) cancels for x below about -2 and loses up to 1e-3 relative in the
// gradient. Saturates without special cases (e^{-2u} -> inf or 0).
inline float gelu_half_one_plus_tanh(float v) {
  const float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
  return 1.0f / (1.0f + detail::exp_approx(-2.0f * u));
}

inline float sigmoid(float g) {
  return 1.0f / (1.0f + detail::exp_approx(-g));
}

}  // namespace

PLANNER_CPU_KERNEL
void gelu_forward(const float* x, std::int64_t n, float* y) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v * gelu_half_one_plus_tanh(v);
  }
}

PLANNER_CPU_KERNEL
void gelu_backward(const float* x, const float* dy, std::int64_t n, float* dx) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float s = gelu_half_one_plus_tanh(v);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = dy[i] * (s + 2.0f * v * s * (1.0f - s) * du);
  }
}

PLANNER_CPU_KERNEL
void swiglu_forward(const float* gate, const float* up, std::int64_t rows, std::int64_t cols,
                    std::int64_t ld_in, float* out) {
  assert(ld_in >= cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* g = gate + r * ld_in;
    const float* u = up + r * ld_in;
    float* o = out + r * cols;
    for (std::int64_t c = 0; c < cols; ++c)
      o[c] = g[c] * sigmoid(g[c]) * u[c];
  }
}

PLANNER_CPU_KERNEL
void swiglu_backward(const float* gate, const float* up, const float* dout, std::int64_t rows,
                     std::int64_t cols, std::int64_t ld_in, float* dgate, float* dup) {
  assert(ld_in >= cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* g = gate + r * ld_in;
    const float* u = up + r * ld_in;
    const float* d = dout + r * cols;
    float* dg = dgate + r * ld_in;
    float* du = dup + r * ld_in;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float s = sigmoid(g[c]);
      const float silu = g[c] * s;
      const float dsilu = s * (1.0f + g[c] * (1.0f - s));
      const float grad = d[c];
      const float up_value = u[c];  // read before writing: dgate/dup may alias gate/up
      dg[c] = grad * up_value * dsilu;
      du[c] = grad * silu;
    }
  }
}

}  // namespace planner::kernels::cpu
