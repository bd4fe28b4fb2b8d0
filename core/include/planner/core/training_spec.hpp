// What is trained and for how long: batch, sequence, precision, optimizer, token budget.
//
// JSON (kind "training", or the "training" object of a plan): global_batch_size (sequences),
// seq_length (tokens), precision (fp32 | tf32 | bf16 | fp16 | fp8), fp8_recipe (delayed | current |
// mxfp8 | blockwise; fp8 only, default delayed: Megatron-core's), optimizer (adam | adamw | sgd),
// token_budget (tokens to train on; optional), seed (for executed runs).
#pragma once

#include <cstdint>

#include "planner/core/enums.hpp"

namespace planner {

struct TrainingSpec {
  std::int64_t global_batch_size = 0;
  std::int64_t seq_length = 0;
  Precision precision = Precision::kBf16;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // how fp8 tensors are scaled (precision fp8)
  Optimizer optimizer = Optimizer::kAdam;
  double token_budget = 0;  // 0 = not set
  std::int64_t seed = 1234;

  std::int64_t tokens_per_step() const { return global_batch_size * seq_length; }
};

}  // namespace planner
