// Every planner document loader on arbitrary bytes: none may crash, hang, exhaust memory or trip
// the sanitizers; what loads is used (parameter counts, the memory estimate), so values that
// validate but overflow later are found too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "planner/core/catalog.hpp"
#include "planner/core/hardware_profile.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/memory.hpp"
#include "planner/core/prices.hpp"
#include "planner/core/published_run.hpp"
#include "planner/search/sweep_spec.hpp"
#include "planner/sim/profiles.hpp"
#include "planner/topo/topology_catalog.hpp"
#include "planner/topo/topology_json.hpp"

namespace {

const planner::DocumentTypes& document_types() {
  static const planner::DocumentTypes types = [] {
    planner::DocumentTypes t;
    planner::register_core_documents(t, planner::builtin_catalog());
    planner::topo::register_topology_documents(t);
    planner::sim::register_profile_documents(t);
    planner::search::register_sweep_documents(
        t, planner::builtin_catalog(),
        [](std::string_view name) { return planner::topo::resolve_topology(name); });
    return t;
  }();
  return types;
}

void use(const planner::ModelSpec& m) {
  volatile std::int64_t sink = m.total_params() + m.active_params() + m.non_embedding_params();
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const planner::Catalog& catalog = planner::builtin_catalog();

  planner::Diagnostics diag("fuzz.json");
  document_types().validate(text, diag);
  (void)diag.to_string();

  if (auto m = planner::parse_model(text, "fuzz.json")) use(*m);
  (void)planner::parse_gpu(text, "fuzz.json");
  (void)planner::parse_training(text, "fuzz.json");
  (void)planner::parse_parallel(text, "fuzz.json");
  (void)planner::parse_cluster(text, "fuzz.json", catalog);
  if (auto plan = planner::parse_plan(text, "fuzz.json", catalog)) {
    use(plan->model);
    (void)plan->num_microbatches();
    (void)planner::estimate_memory(plan->model, plan->training, plan->parallel, plan->gpu, {});
  }
  (void)planner::sim::parse_profile(text, "fuzz.json");
  (void)planner::parse_published_runs(text, "fuzz.json");
  (void)planner::parse_price_file(text, "fuzz.json");
  return 0;
}
