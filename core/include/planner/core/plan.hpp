// A plan: everything needed to simulate or execute one training configuration.
//
// JSON document (kind "plan"):
//   { "schema_version": 1, "kind": "plan", "name": "...",
//     "model": "<model preset>" | { model fields },
//     "cluster": { cluster fields },          // gpu names a GPU preset
//     "training": { training fields },
//     "parallel": { parallel fields } }       // dp may be omitted: world / (tp x cp x pp)
#pragma once

#include <cstdint>
#include <string>

#include "planner/core/cluster_spec.hpp"
#include "planner/core/gpu_spec.hpp"
#include "planner/core/model_spec.hpp"
#include "planner/core/parallel_config.hpp"
#include "planner/core/training_spec.hpp"

namespace planner {

class Diagnostics;

struct Plan {
  std::string name;
  ModelSpec model;
  GpuSpec gpu;  // resolved from cluster.gpu
  ClusterSpec cluster;
  TrainingSpec training;
  ParallelConfig parallel;

  // Micro-batches per step per pipeline: global_batch_size / (dp x micro_batch_size).
  std::int64_t num_microbatches() const;
};

// Checks the rules that tie model, training, cluster and parallel config together (world size, head
// and layer divisibility, batch divisibility, expert counts, schedule requirements) and adds one
// diagnostic per violation, at the JSON pointer of the offending field ("/parallel/tp").
void check_plan(const Plan& plan, Diagnostics& diag);

// Why `gpu` cannot train with `training`'s fp8 recipe (MXFP8 needs a Blackwell GPU), or empty.
std::string fp8_recipe_problem(const GpuSpec& gpu, const TrainingSpec& training);

// The part of check_plan() that needs no cluster: whether `parallel` can run `model` with
// `training` at all (divisibility, batch, schedule, ZeRO/offload/parameter-server combinations).
// Pointers are as in a plan document ("/parallel/tp", "/training/seq_length").
void check_parallel(const ModelSpec& model, const TrainingSpec& training,
                    const ParallelConfig& parallel, Diagnostics& diag);

}  // namespace planner
