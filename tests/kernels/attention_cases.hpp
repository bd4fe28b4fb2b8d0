// Attention shapes shared by the CPU and CUDA attention tests: a square block (q_len == kv_len,
// offsets 0) described by one parameterised case.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "planner/kernels/cpu/attention.hpp"

namespace planner::kernels::cpu::testing {

inline AttentionShape shape_of(std::int64_t batch, std::int64_t heads, std::int64_t kv_heads,
                               std::int64_t head_dim, std::int64_t len, bool causal) {
  AttentionShape s;
  s.batch = batch;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.q_len = len;
  s.kv_len = len;
  s.causal = causal;
  s.scale = attention_default_scale(head_dim);
  return s;
}

struct AttentionCase {
  std::int64_t batch, heads, kv_heads, head_dim, len;
  bool causal;

  AttentionShape shape() const { return shape_of(batch, heads, kv_heads, head_dim, len, causal); }
};

// e.g. "b2h4kv2d64s130Causal": the test-name suffix of a case.
inline std::string case_name(const AttentionCase& c) {
  return "b" + std::to_string(c.batch) + "h" + std::to_string(c.heads) + "kv" +
         std::to_string(c.kv_heads) + "d" + std::to_string(c.head_dim) + "s" +
         std::to_string(c.len) + (c.causal ? "Causal" : "Full");
}

// Names a case in ctest's test list instead of dumping its bytes.
inline void PrintTo(const AttentionCase& c, std::ostream* os) {
  *os << case_name(c);
}

}  // namespace planner::kernels::cpu::testing
