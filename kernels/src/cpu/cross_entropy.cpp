#include "planner/kernels/cpu/cross_entropy.hpp"

#include <cassert>
#include <cmath>

#include "cpu/vector_math.hpp"

namespace planner::kernels::cpu {
namespace {

PLANNER_CPU_KERNEL
float row_sum_exp(const float* row, std::int64_t n, float shift) {
  return detail::sum_of(
      n, [row, shift](std::int64_t i) { return detail::exp_approx(row[i] - shift); });
}

float row_target_logit(const float* row, std::int64_t vocab_local, std::int64_t vocab_start,
                       std::int32_t target) {
  const std::int64_t col = static_cast<std::int64_t>(target) - vocab_start;
  return col >= 0 && col < vocab_local ? row[col] : 0.0f;
}

}  // namespace

PLANNER_CPU_KERNEL
void cross_entropy_local_max(const float* logits, std::int64_t tokens, std::int64_t vocab_local,
                             float* max) {
  for (std::int64_t t = 0; t < tokens; ++t)
    max[t] = detail::max(logits + t * vocab_local, vocab_local);
}

void cross_entropy_local_sum_exp(const float* logits, std::int64_t tokens, std::int64_t vocab_local,
                                 const float* global_max, float* sum_exp) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    sum_exp[t] = row_sum_exp(logits + t * vocab_local, vocab_local, global_max[t]);
  }
}

void cross_entropy_local_target_logit(const float* logits, std::int64_t tokens,
                                      std::int64_t vocab_local, std::int64_t vocab_start,
                                      const std::int32_t* targets, float* target_logit) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    target_logit[t] =
        row_target_logit(logits + t * vocab_local, vocab_local, vocab_start, targets[t]);
  }
}

void cross_entropy_loss(std::int64_t tokens, const float* global_max, const float* global_sum_exp,
                        const float* global_target_logit, float* loss, float* lse) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float l = global_max[t] + std::log(global_sum_exp[t]);
    lse[t] = l;
    loss[t] = l - global_target_logit[t];
  }
}

PLANNER_CPU_KERNEL
void cross_entropy_backward(const float* logits, std::int64_t tokens, std::int64_t vocab_local,
                            std::int64_t vocab_start, const std::int32_t* targets, const float* lse,
                            float grad_scale, float* dlogits) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * vocab_local;
    float* drow = dlogits + t * vocab_local;
    const float shift = lse[t];
    const std::int64_t col = static_cast<std::int64_t>(targets[t]) - vocab_start;
    const bool holds_target = col >= 0 && col < vocab_local;
    const float target_logit = holds_target ? row[col] : 0.0f;  // read before an in-place overwrite
    for (std::int64_t v = 0; v < vocab_local; ++v) {
      drow[v] = grad_scale * detail::exp_approx(row[v] - shift);
    }
    if (holds_target) drow[col] = grad_scale * (detail::exp_approx(target_logit - shift) - 1.0f);
  }
}

void cross_entropy_forward(const float* logits, std::int64_t tokens, std::int64_t vocab,
                           const std::int32_t* targets, float* loss, float* lse) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    assert(targets[t] >= 0 && targets[t] < vocab);
    const float* row = logits + t * vocab;
    float m = 0;
    cross_entropy_local_max(row, 1, vocab, &m);
    const float s = row_sum_exp(row, vocab, m);
    const float target = row_target_logit(row, vocab, 0, targets[t]);
    cross_entropy_loss(1, &m, &s, &target, &loss[t], &lse[t]);
  }
}

}  // namespace planner::kernels::cpu
