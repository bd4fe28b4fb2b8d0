// How a model is split across GPUs, in Megatron-LM's vocabulary.
//
//   tp   tensor parallel size          (column/row-parallel GEMMs inside a layer)
//   pp   pipeline parallel size        (layers split into stages)
//   dp   data parallel size            (model replicas; world = tp x cp x dp x pp)
//   cp   context parallel size         (the sequence split across ranks, ring attention)
//   ep   expert parallel size          (MoE experts spread over ep ranks; ep divides dp, as in
//                                       Megatron-core where expert parallelism is carved out of dp)
//   sequence_parallel                  (Korthikanti et al.: norms/dropout sharded along the
//   sequence
//                                       inside the tp group; needs tp > 1 to matter)
//   micro_batch_size, virtual_stages (vpp), schedule, recompute, zero_stage (0-3), offload,
//   order (rank-grid order, innermost first; default "tp-cp-ep-dp-pp"), dp_sync (allreduce or
//   parameter-server with param_servers server ranks), overlap_grad_reduce, overlap_param_gather.
//
// num_microbatches = global_batch_size / (dp x micro_batch_size).
#pragma once

#include <cstdint>
#include <string>

#include "planner/core/enums.hpp"

namespace planner {

inline constexpr std::string_view kDefaultRankOrder = "tp-cp-ep-dp-pp";

struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int cp = 1;
  int ep = 1;
  bool sequence_parallel = false;
  std::int64_t micro_batch_size = 1;
  int virtual_stages = 1;
  Schedule schedule = Schedule::k1F1B;
  Recompute recompute = Recompute::kNone;
  int zero_stage = 0;
  Offload offload = Offload::kNone;
  std::string order{kDefaultRankOrder};
  DpSync dp_sync = DpSync::kAllReduce;
  int param_servers = 0;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;

  std::int64_t world_size() const { return static_cast<std::int64_t>(tp) * pp * dp * cp; }
  // Model-parallel ranks holding one replica.
  std::int64_t model_parallel_size() const { return static_cast<std::int64_t>(tp) * pp * cp; }
  bool operator==(const ParallelConfig&) const = default;
};

// "tp8 pp8 dp16 mb1 1f1b sel zero1": a compact one-line label for tables and logs.
std::string short_label(const ParallelConfig& p);

}  // namespace planner
