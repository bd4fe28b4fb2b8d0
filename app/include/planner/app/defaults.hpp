// The scenario both front-ends start from: `planner sweep` without arguments and the desktop app's
// new scenario plan the same training run with the same search, so what one shows the other shows.
//
// Llama 3 8B on up to 64 H100 GPUs (the first topology preset with H100s), global batches of 4 Mi
// tokens in sequences of the model's pre-training length (8,192: 512 sequences), bf16 with Adam,
// the Chinchilla token budget (20 tokens per parameter), every plan estimated and the best 32
// simulated.
#pragma once

#include <cstdint>
#include <string_view>

#include "planner/core/json_reader.hpp"
#include "planner/core/model_spec.hpp"
#include "planner/core/prices.hpp"
#include "planner/core/training_spec.hpp"
#include "planner/search/sweep.hpp"

namespace planner::app {

struct DefaultScenario {
  std::string_view model = "llama3-8b";
  std::string_view gpu = "h100";
  int gpus = 64;
  int top_k = search::kDefaultTopK;
  int keep = search::kDefaultKeep;
};

// Default global batch: 4 Mi tokens per step (the Llama 3 405B pre-training batch at its start,
// Dubey et al. 2024, arXiv:2407.21783, section 3.4.1), in sequences of the chosen length.
inline constexpr std::int64_t kDefaultBatchTokens = std::int64_t{4} << 20;
// Sequence length when neither the user nor the model gives one.
inline constexpr std::int64_t kFallbackSeqLength = 2048;
// The longest default sequence for a model that does not state its pre-training length: its
// maximum (a Hugging Face config's max_position_embeddings) is usually a long-context extension's
// (Llama 3.1: 131,072 after pre-training at 8,192; Mistral NeMo: 1,048,576), and pre-training
// runs of 2024-2025 used 4,096-8,192 tokens (Llama 3, DeepSeek-V3 at 4,096, Qwen3 at 4,096).
inline constexpr std::int64_t kMaxDefaultSeqLength = 8192;

const DefaultScenario& default_scenario();

// The sequence length a plan of `model` trains at unless given one: the model's pre-training length
// where it states one; else its maximum up to kMaxDefaultSeqLength; else kFallbackSeqLength.
std::int64_t default_seq_length(const ModelSpec& model);
// The global batch (in sequences of `seq_length`) a scenario uses unless given one:
// kDefaultBatchTokens of tokens, at least one sequence.
std::int64_t default_global_batch(std::int64_t seq_length);

// Today's date (UTC, the system clock): what catalogue prices are aged against (a price older than
// 12 months is flagged, core/pricing.hpp) unless the user names another day.
CalendarDate today();

// The default scenario as a sweep document (what `planner sweep --spec` reads and the desktop app
// edits); parsing it gives the request `planner sweep` builds without arguments.
Json default_scenario_document();

}  // namespace planner::app
