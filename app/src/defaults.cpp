#include "planner/app/defaults.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include "planner/core/catalog.hpp"

namespace planner::app {

const DefaultScenario& default_scenario() {
  static const DefaultScenario kScenario;
  return kScenario;
}

CalendarDate today() {
  const auto now = std::chrono::system_clock::now();
  return date_from_days(std::chrono::floor<std::chrono::days>(now).time_since_epoch().count());
}

std::int64_t default_seq_length(const ModelSpec& model) {
  if (model.pretrain_seq_len > 0) return model.pretrain_seq_len;
  if (model.max_seq_len > 0) return std::min(model.max_seq_len, kMaxDefaultSeqLength);
  return kFallbackSeqLength;
}

std::int64_t default_global_batch(std::int64_t seq_length) {
  return std::max<std::int64_t>(1, kDefaultBatchTokens / std::max<std::int64_t>(1, seq_length));
}

Json default_scenario_document() {
  const DefaultScenario& d = default_scenario();
  const Catalog& catalog = builtin_catalog();
  const ModelSpec* model = catalog.find_model(d.model);
  const GpuSpec* gpu = catalog.find_gpu(d.gpu);
  const std::int64_t seq = model != nullptr ? default_seq_length(*model) : kFallbackSeqLength;
  Json doc;
  doc["schema_version"] = 1;
  doc["kind"] = "sweep";
  doc["models"] = Json::array({std::string(d.model)});
  doc["training"] = {{"global_batch_size", default_global_batch(seq)},
                     {"seq_length", seq},
                     {"precision", "bf16"},
                     {"optimizer", "adam"}};
  doc["clusters"] = Json::array({{{"gpu", gpu != nullptr ? gpu->name : std::string(d.gpu)},
                                  {"gpus", Json::array({d.gpus})}}});
  doc["search"] = {{"top_k", d.top_k}, {"keep", d.keep}};
  return doc;
}

}  // namespace planner::app
