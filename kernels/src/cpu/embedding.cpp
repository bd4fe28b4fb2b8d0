#include "planner/kernels/cpu/embedding.hpp"

#include <algorithm>
#include <cassert>

#include "planner/kernels/cpu/elementwise.hpp"

namespace planner::kernels::cpu {
namespace {

// Row of this rank's table for a token id, or -1 when another rank holds it.
inline std::int64_t local_row(std::int32_t id, std::int64_t vocab_start, std::int64_t vocab_rows) {
  const std::int64_t row = static_cast<std::int64_t>(id) - vocab_start;
  return row >= 0 && row < vocab_rows ? row : -1;
}

// dst[c] += src[c] (axpy with alpha 1 is exact, so this is a plain sum).
inline void add_row(const float* src, std::int64_t dim, float* dst) {
  axpy(dim, 1.0f, src, dst);
}

}  // namespace

void embedding_forward(const std::int32_t* ids, std::int64_t tokens, const float* weight,
                       std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                       float* out) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t row = local_row(ids[t], vocab_start, vocab_rows);
    float* o = out + t * dim;
    if (row < 0) {
      std::fill(o, o + dim, 0.0f);
    } else {
      std::copy(weight + row * dim, weight + (row + 1) * dim, o);
    }
  }
}

void embedding_backward(const std::int32_t* ids, std::int64_t tokens, const float* dout,
                        std::int64_t vocab_start, std::int64_t vocab_rows, std::int64_t dim,
                        float* dweight) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t row = local_row(ids[t], vocab_start, vocab_rows);
    if (row >= 0) add_row(dout + t * dim, dim, dweight + row * dim);
  }
}

void position_embedding_forward(const std::int32_t* positions, std::int64_t batch, std::int64_t seq,
                                const float* pos_weight, std::int64_t dim, float* x) {
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < seq; ++s) {
      assert(positions[s] >= 0);
      add_row(pos_weight + static_cast<std::int64_t>(positions[s]) * dim, dim,
              x + (b * seq + s) * dim);
    }
  }
}

void position_embedding_backward(const std::int32_t* positions, std::int64_t batch,
                                 std::int64_t seq, const float* dx, std::int64_t dim,
                                 float* dpos_weight) {
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < seq; ++s) {
      assert(positions[s] >= 0);
      add_row(dx + (b * seq + s) * dim, dim,
              dpos_weight + static_cast<std::int64_t>(positions[s]) * dim);
    }
  }
}

}  // namespace planner::kernels::cpu
