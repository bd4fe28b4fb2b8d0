#include "planner/core/moe_routing.hpp"

#include <algorithm>
#include <cmath>

namespace planner {

MoeRouting moe_routing(const ModelSpec& m, const ParallelConfig& p, std::int64_t seq) {
  MoeRouting r;
  if (!m.is_moe()) return r;
  const double cf = p.moe_capacity_factor >= 0 ? p.moe_capacity_factor : m.moe->capacity_factor;
  r.dropless = cf <= 0;
  r.capacity_factor = r.dropless ? 0.0 : cf;
  const bool sp = p.sequence_parallel && p.tp > 1;
  const std::int64_t tokens = p.micro_batch_size * (seq / p.cp);
  r.tokens_in = sp ? tokens / p.tp : tokens;
  const std::int64_t etp = p.expert_tp();
  const std::int64_t experts = m.moe->num_experts;
  r.local_experts = experts / p.ep;
  r.expert_ffn = m.moe->expert_ffn_hidden / etp;
  const double routed = static_cast<double>(r.tokens_in * etp * m.moe->top_k * p.ep);
  r.mean = routed / static_cast<double>(experts);
  const double imbalance = std::max(1.0, p.moe_imbalance);
  const bool padded = !r.dropless && p.moe_pad_to_capacity;
  if (r.dropless) {
    r.hot = imbalance;
  } else if (padded) {
    r.hot = cf;
  } else {
    r.hot = std::min(imbalance, cf);
  }
  const double el = static_cast<double>(r.local_experts);
  const double factor = padded ? cf : (el - 1.0 + r.hot) / el;
  r.per_expert =
      static_cast<std::int64_t>(std::ceil(factor * routed / static_cast<double>(experts)));
  r.received = (r.per_expert * r.local_experts + etp - 1) / etp;
  return r;
}

}  // namespace planner
