#include "planner/core/catalog.hpp"

#include <algorithm>
#include <span>

#include "planner/core/embedded.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/prices.hpp"

namespace planner::presets {
std::span<const EmbeddedFile> gpu_files();
std::span<const EmbeddedFile> model_files();
}  // namespace planner::presets

namespace planner {
namespace {

template <class T>
std::string known_names(const std::vector<T>& items) {
  std::vector<std::string> names;
  for (const T& item : items)
    names.push_back(item.name);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

template <class T>
const T* find_by_name(const std::vector<T>& items, std::string_view name) {
  for (const T& item : items) {
    if (item.matches(name)) return &item;
  }
  return nullptr;
}

template <class T>
void add_or_replace(std::vector<T>& items, T item) {
  for (T& existing : items) {
    if (existing.name == item.name) {
      existing = std::move(item);
      return;
    }
  }
  items.push_back(std::move(item));
}

}  // namespace

Result<Catalog> Catalog::load_builtin() {
  Catalog c;
  for (const EmbeddedFile& f : presets::gpu_files()) {
    auto gpu = parse_gpu(f.content, "preset gpus/" + std::string(f.name));
    if (!gpu) return gpu.status();
    c.add(std::move(gpu).value());
  }
  PLANNER_ASSIGN_OR_RETURN(std::vector<PriceEntry> prices, load_builtin_prices());
  PLANNER_RETURN_IF_ERROR(c.attach_prices(prices));
  for (const EmbeddedFile& f : presets::model_files()) {
    auto model = parse_model(f.content, "preset models/" + std::string(f.name));
    if (!model) return model.status();
    c.add(std::move(model).value());
  }
  return c;
}

Status Catalog::attach_prices(std::span<const PriceEntry> records) {
  for (GpuSpec& g : gpus_) {
    for (const PriceEntry& p : records) {
      if (g.matches(p.gpu)) g.prices.push_back(p);
    }
  }
  for (GpuSpec& g : gpus_) {
    if (!g.price_as) continue;
    const GpuSpec* other = find_gpu(g.price_as->gpu);
    if (other == nullptr || other == &g) {
      return Status::invalid_input("GPU " + g.name + ": /price_as/gpu: \"" + g.price_as->gpu +
                                   "\" is not another GPU of the catalogue");
    }
    if (other->price_as) {
      return Status::invalid_input("GPU " + g.name + ": /price_as/gpu: " + other->name +
                                   " is itself priced as another GPU; name that one");
    }
    if (!g.prices.empty()) {
      return Status::invalid_input("GPU " + g.name + ": /price_as: the price data has " +
                                   std::to_string(g.prices.size()) +
                                   " prices of its own; drop price_as");
    }
    for (const PriceEntry& p : other->prices) {
      PriceEntry borrowed = p;
      borrowed.priced_as = other->name;
      g.prices.push_back(std::move(borrowed));
    }
  }
  return Status::ok();
}

const GpuSpec* Catalog::find_gpu(std::string_view name) const {
  return find_by_name(gpus_, name);
}

const ModelSpec* Catalog::find_model(std::string_view name) const {
  return find_by_name(models_, name);
}

Result<GpuSpec> Catalog::gpu(std::string_view name) const {
  if (const GpuSpec* g = find_gpu(name)) return *g;
  return Status::not_found("unknown GPU \"" + std::string(name) +
                           "\"; known GPUs: " + known_names(gpus_));
}

Result<ModelSpec> Catalog::model(std::string_view name) const {
  if (const ModelSpec* m = find_model(name)) return *m;
  return Status::not_found("unknown model \"" + std::string(name) +
                           "\"; known models: " + known_names(models_));
}

void Catalog::add(GpuSpec gpu) {
  add_or_replace(gpus_, std::move(gpu));
}
void Catalog::add(ModelSpec model) {
  add_or_replace(models_, std::move(model));
}

const Catalog& builtin_catalog() {
  static const Catalog catalog = [] {
    auto loaded = Catalog::load_builtin();
    return loaded ? std::move(loaded).value() : Catalog{};
  }();
  return catalog;
}

}  // namespace planner
