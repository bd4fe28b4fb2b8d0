// Hugging Face config import on arbitrary bytes, then what `planner model import` does with the
// result: serialise it and load it back through the strict model loader, and count parameters.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "planner/core/hf_import.hpp"
#include "planner/core/loaders.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto model = planner::import_hf_config(text, "fuzz/config.json");
  if (!model) return 0;
  auto again = planner::parse_model(planner::to_json_text(*model), "imported fuzz/config.json");
  if (again) {
    volatile std::int64_t sink = again->total_params() + again->active_params();
    (void)sink;
  }
  return 0;
}
