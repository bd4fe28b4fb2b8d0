// The catalogue of known GPUs and models: the built-in presets (embedded in the binary from
// core/presets/) plus whatever a caller adds from user files.
//
// Lookups ignore case and accept aliases ("h100" finds "H100-SXM5-80GB"). A failed lookup is a
// kNotFound Status that lists the known names.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/gpu_spec.hpp"
#include "planner/core/model_spec.hpp"
#include "planner/core/status.hpp"

namespace planner {

class Catalog {
 public:
  // Parses every embedded preset; fails (naming the preset) when one is malformed.
  static Result<Catalog> load_builtin();

  const std::vector<GpuSpec>& gpus() const { return gpus_; }
  const std::vector<ModelSpec>& models() const { return models_; }

  Result<GpuSpec> gpu(std::string_view name) const;
  Result<ModelSpec> model(std::string_view name) const;
  const GpuSpec* find_gpu(std::string_view name) const;
  const ModelSpec* find_model(std::string_view name) const;

  // Gives every GPU the records of `records` that name it (PriceEntry::gpu is its name or an
  // alias), then GPUs with "price_as" (and no record of their own) the other GPU's records.
  // load_builtin() attaches the catalogue's prices (prices.hpp).
  Status attach_prices(std::span<const PriceEntry> records);

  // Adds or replaces (by name) an entry.
  void add(GpuSpec gpu);
  void add(ModelSpec model);

 private:
  std::vector<GpuSpec> gpus_;
  std::vector<ModelSpec> models_;
};

// The built-in catalogue, parsed on first use. The presets are checked by tests, so this never
// fails in a released build; if it did, it would return an empty catalogue.
const Catalog& builtin_catalog();

}  // namespace planner
