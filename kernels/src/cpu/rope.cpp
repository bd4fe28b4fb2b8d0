#include "planner/kernels/cpu/rope.hpp"

#include <cassert>
#include <cmath>

#include "cpu/vector_math.hpp"

namespace planner::kernels::cpu {
namespace {

// Rotates every head of x by the table's angles, or by their negatives when inverse is set (sin
// flips sign; cos is even).
PLANNER_CPU_KERNEL
void rotate(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
            std::int64_t head_dim, bool inverse, float* x) {
  const std::int64_t half = head_dim / 2;
  const float sign = inverse ? -1.0f : 1.0f;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < seq; ++s) {
      const float* cosv = table + s * head_dim;
      const float* sinv = cosv + half;
      for (std::int64_t h = 0; h < heads; ++h) {
        float* lo = x + ((b * seq + s) * heads + h) * head_dim;
        float* hi = lo + half;
        for (std::int64_t p = 0; p < half; ++p) {
          const float a = lo[p];
          const float c = hi[p];
          const float sn = sign * sinv[p];
          lo[p] = a * cosv[p] - c * sn;
          hi[p] = c * cosv[p] + a * sn;
        }
      }
    }
  }
}

}  // namespace

void rope_table(const std::int32_t* positions, std::int64_t seq, std::int64_t head_dim,
                double theta, float* table) {
  assert(head_dim % 2 == 0 && theta > 0);
  const std::int64_t half = head_dim / 2;
  for (std::int64_t s = 0; s < seq; ++s) {
    for (std::int64_t p = 0; p < half; ++p) {
      const double inv_freq =
          std::pow(theta, -2.0 * static_cast<double>(p) / static_cast<double>(head_dim));
      const double angle = static_cast<double>(positions[s]) * inv_freq;
      table[s * head_dim + p] = static_cast<float>(std::cos(angle));
      table[s * head_dim + half + p] = static_cast<float>(std::sin(angle));
    }
  }
}

void rope_forward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                  std::int64_t head_dim, float* x) {
  rotate(table, batch, seq, heads, head_dim, false, x);
}

void rope_backward(const float* table, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                   std::int64_t head_dim, float* dx) {
  rotate(table, batch, seq, heads, head_dim, true, dx);
}

}  // namespace planner::kernels::cpu
