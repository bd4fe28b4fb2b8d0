#include "planner/kernels/cpu/moe.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace planner::kernels::cpu {
namespace {

// Indices of the n largest of `values` (count of them), descending, ties to the lower index.
void top_n(const float* values, int count, int n, const char* allowed, int* out) {
  for (int j = 0; j < n; ++j) {
    int best = -1;
    for (int e = 0; e < count; ++e) {
      if (allowed != nullptr && !allowed[e]) continue;
      bool taken = false;
      for (int i = 0; i < j && !taken; ++i)
        taken = out[i] == e;
      if (taken) continue;
      if (best < 0 || values[e] > values[best]) best = e;
    }
    out[j] = best;
  }
}

}  // namespace

void moe_route(const float* logits, std::int64_t rows, const MoeRouteConfig& c, float* scores,
               std::int32_t* experts, float* weights) {
  const int n = c.experts;
  const int groups = std::max(1, c.groups);
  const int per_group = n / groups;
  std::vector<char> allowed(static_cast<std::size_t>(n));
  std::vector<float> group_score(static_cast<std::size_t>(groups));
  std::vector<int> chosen(static_cast<std::size_t>(std::max(c.top_k, groups)));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * n;
    float* s = scores + r * n;
    if (c.sigmoid) {
      for (int e = 0; e < n; ++e)
        s[e] = 1.0f / (1.0f + std::exp(-x[e]));
    } else {
      const float mx = *std::max_element(x, x + n);
      float sum = 0;
      for (int e = 0; e < n; ++e) {
        s[e] = std::exp(x[e] - mx);
        sum += s[e];
      }
      for (int e = 0; e < n; ++e)
        s[e] /= sum;
    }
    std::fill(allowed.begin(), allowed.end(), 1);
    if (groups > 1 && c.group_top_k < groups) {
      for (int g = 0; g < groups; ++g) {
        const float* gs = s + g * per_group;
        if (c.sigmoid) {
          int best[2] = {-1, -1};
          top_n(gs, per_group, std::min(2, per_group), nullptr, best);
          group_score[static_cast<std::size_t>(g)] =
              gs[best[0]] + (per_group > 1 ? gs[best[1]] : 0);
        } else {
          group_score[static_cast<std::size_t>(g)] = *std::max_element(gs, gs + per_group);
        }
      }
      top_n(group_score.data(), groups, c.group_top_k, nullptr, chosen.data());
      std::fill(allowed.begin(), allowed.end(), 0);
      for (int i = 0; i < c.group_top_k; ++i) {
        const int g = chosen[static_cast<std::size_t>(i)];
        std::fill(allowed.begin() + g * per_group, allowed.begin() + (g + 1) * per_group, 1);
      }
    }
    std::vector<int> pick(static_cast<std::size_t>(c.top_k));
    top_n(s, n, c.top_k, allowed.data(), pick.data());
    float total = 0;
    for (int j = 0; j < c.top_k; ++j)
      total += s[pick[static_cast<std::size_t>(j)]];
    for (int j = 0; j < c.top_k; ++j) {
      const int e = pick[static_cast<std::size_t>(j)];
      experts[r * c.top_k + j] = e;
      weights[r * c.top_k + j] = s[e] / total;
    }
  }
}

void moe_route_backward(const float* scores, const std::int32_t* experts, const float* weights,
                        const float* dweights, std::int64_t rows, const MoeRouteConfig& c,
                        float* dlogits) {
  const int n = c.experts;
  const int k = c.top_k;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* s = scores + r * n;
    const std::int32_t* idx = experts + r * k;
    const float* w = weights + r * k;
    const float* dw = dweights + r * k;
    float* dx = dlogits + r * n;
    // w_j = s_j / S: dL/ds_j = (dw_j - sum_l dw_l w_l) / S over the chosen experts.
    float total = 0, dot = 0;
    for (int j = 0; j < k; ++j) {
      total += s[idx[j]];
      dot += dw[j] * w[j];
    }
    std::fill(dx, dx + n, 0.0f);
    if (c.sigmoid) {
      for (int j = 0; j < k; ++j) {
        const float se = s[idx[j]];
        dx[idx[j]] = (dw[j] - dot) / total * se * (1.0f - se);
      }
      continue;
    }
    // Softmax: dlogit_e = p_e (ds_e - sum_e' ds_e' p_e'), ds nonzero on the chosen experts.
    float inner = 0;
    for (int j = 0; j < k; ++j)
      inner += (dw[j] - dot) / total * s[idx[j]];
    for (int e = 0; e < n; ++e)
      dx[e] = -s[e] * inner;
    for (int j = 0; j < k; ++j)
      dx[idx[j]] += s[idx[j]] * (dw[j] - dot) / total;
  }
}

void gather_rows(const float* src, const std::int32_t* index, std::int64_t rows, std::int64_t cols,
                 float* dst) {
  for (std::int64_t i = 0; i < rows; ++i)
    std::copy(src + index[i] * cols, src + (index[i] + 1) * cols, dst + i * cols);
}

void moe_combine(const float* src, const std::int32_t* pos, const float* w, std::int64_t rows,
                 std::int64_t k, std::int64_t cols, bool accumulate, float* dst) {
  for (std::int64_t t = 0; t < rows; ++t) {
    float* out = dst + t * cols;
    if (!accumulate) std::fill(out, out + cols, 0.0f);
    for (std::int64_t j = 0; j < k; ++j) {
      const float weight = w != nullptr ? w[t * k + j] : 1.0f;
      const float* in = src + static_cast<std::int64_t>(pos[t * k + j]) * cols;
      for (std::int64_t c = 0; c < cols; ++c)
        out[c] += weight * in[c];
    }
  }
}

void moe_combine_backward(const float* dy, const float* src, const std::int32_t* pos,
                          const float* w, std::int64_t rows, std::int64_t k, std::int64_t cols,
                          float* dsrc, float* dw) {
  for (std::int64_t t = 0; t < rows; ++t) {
    const float* g = dy + t * cols;
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t p = pos[t * k + j];
      const float weight = w[t * k + j];
      const float* in = src + p * cols;
      float* out = dsrc + p * cols;
      float dot = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        out[c] = weight * g[c];
        dot += g[c] * in[c];
      }
      dw[t * k + j] = dot;
    }
  }
}

}  // namespace planner::kernels::cpu
