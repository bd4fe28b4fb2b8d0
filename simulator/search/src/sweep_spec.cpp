#include "planner/search/sweep_spec.hpp"

#include <algorithm>

#include <cmath>

#include "planner/core/rank_grid.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/topo/topology_catalog.hpp"

namespace planner::search {
namespace {

constexpr double kSecondsPerDay = 86400;
constexpr double kSecondsPerMinute = 60;
constexpr std::int64_t kMaxAxis = 1 << 20;
constexpr std::int64_t kMaxGpus = 1 << 24;

// Reads an array at `key` whose elements `each` reads (it reports its own problems at the element's
// pointer and returns false on them). A missing optional key leaves `out` untouched.
template <class T, class Each>
void read_list(JsonObject& obj, std::string_view key, Need need, std::vector<T>& out, Each&& each) {
  const Json* j = obj.child(key, need);
  if (j == nullptr) return;
  const std::string pointer = obj.pointer_of(key);
  if (!j->is_array()) {
    obj.diagnostics().add(pointer, "expected an array, got " + describe_json(*j));
    return;
  }
  if (j->empty()) {
    obj.diagnostics().add(pointer, "must not be empty (leave the key out for every value)");
    return;
  }
  std::vector<T> values;
  for (std::size_t i = 0; i < j->size(); ++i) {
    T v{};
    if (each((*j)[i], pointer + "/" + std::to_string(i), v)) values.push_back(v);
  }
  out = std::move(values);
}

auto int_item(Diagnostics& diag, std::int64_t min, std::int64_t max) {
  return [&diag, min, max](const Json& j, const std::string& pointer, auto& out) {
    if (!j.is_number_integer()) {
      diag.add(pointer, "expected an integer, got " + describe_json(j));
      return false;
    }
    const std::int64_t v = j.get<std::int64_t>();
    if (v < min || v > max) {
      diag.add(pointer, "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                            ", got " + std::to_string(v));
      return false;
    }
    out = static_cast<std::remove_reference_t<decltype(out)>>(v);
    return true;
  };
}

template <class E>
auto enum_item(Diagnostics& diag) {
  return [&diag](const Json& j, const std::string& pointer, E& out) {
    if (!j.is_string()) {
      diag.add(pointer, "expected a string, got " + describe_json(j));
      return false;
    }
    if (auto v = parse_enum<E>(j.get<std::string>())) {
      out = *v;
      return true;
    }
    diag.add(pointer,
             "expected one of " + enum_choices<E>() + "; got \"" + j.get<std::string>() + "\"");
    return false;
  };
}

auto bool_item(Diagnostics& diag) {
  return [&diag](const Json& j, const std::string& pointer, bool& out) {
    if (!j.is_boolean()) {
      diag.add(pointer, "expected true or false, got " + describe_json(j));
      return false;
    }
    out = j.get<bool>();
    return true;
  };
}

// A capacity factor (0 < f <= 64) or "dropless" (0).
auto capacity_item(Diagnostics& diag) {
  return [&diag](const Json& j, const std::string& pointer, double& out) {
    std::optional<double> v;
    if (j.is_string() && j.get<std::string>() == "dropless") v = 0.0;
    if (j.is_number() && j.get<double>() > 0 && j.get<double>() <= kMaxCapacityFactor)
      v = j.get<double>();
    if (!v) {
      diag.add(pointer,
               "expected \"dropless\" or a capacity factor (tokens per expert over the "
               "mean) above 0 and at most 64, got " +
                   describe_json(j));
      return false;
    }
    out = *v;
    return true;
  };
}

// A set of recompute modules: a list of their names, or one string of them joined by '+' or ','.
auto modules_item(Diagnostics& diag) {
  return [&diag](const Json& j, const std::string& pointer, std::uint8_t& out) {
    std::vector<std::string> names;
    if (j.is_string()) names.push_back(j.get<std::string>());
    if (j.is_array()) {
      for (const Json& name : j) {
        if (!name.is_string()) {
          names.clear();
          break;
        }
        names.push_back(name.get<std::string>());
      }
    }
    if (names.empty()) {
      diag.add(pointer, "expected a list of recompute modules (" + enum_choices<RecomputeModule>() +
                            "), got " + describe_json(j));
      return false;
    }
    auto modules = parse_recompute_modules(names);
    if (!modules) {
      diag.add(pointer, modules.status().message());
      return false;
    }
    out = *modules;
    return true;
  };
}

auto order_item(Diagnostics& diag) {
  return [&diag](const Json& j, const std::string& pointer, std::string& out) {
    if (!j.is_string() || !RankGrid::create(AxisSizes{}, j.get<std::string>())) {
      diag.add(pointer,
               "expected a '-'-separated permutation of tp, cp, ep, dp, pp (innermost first), "
               "got " +
                   describe_json(j));
      return false;
    }
    out = j.get<std::string>();
    return true;
  };
}

// A section object at `key`; `read` reads its fields and calls finish().
template <class Read>
void section(JsonObject& obj, std::string_view key, Need need, Read&& read) {
  const Json* j = obj.child(key, need);
  if (j == nullptr) return;
  JsonObject o(*j, obj.pointer_of(key), obj.diagnostics());
  if (!o.valid()) return;
  read(o);
  o.finish();
}

void read_space(JsonObject& o, SearchSpace& s) {
  Diagnostics& d = o.diagnostics();
  read_list(o, "tp", Need::kOptional, s.tp, int_item(d, 1, kMaxAxis));
  read_list(o, "pp", Need::kOptional, s.pp, int_item(d, 1, kMaxAxis));
  read_list(o, "dp", Need::kOptional, s.dp, int_item(d, 1, kMaxAxis));
  read_list(o, "cp", Need::kOptional, s.cp, int_item(d, 1, kMaxAxis));
  read_list(o, "ep", Need::kOptional, s.ep, int_item(d, 1, kMaxAxis));
  read_list(o, "micro_batch_size", Need::kOptional, s.micro_batch_sizes, int_item(d, 1, 1'000'000));
  read_list(o, "virtual_stages", Need::kOptional, s.virtual_stages, int_item(d, 2, 1024));
  read_list(o, "schedule", Need::kOptional, s.schedules, enum_item<Schedule>(d));
  read_list(o, "recompute", Need::kOptional, s.recompute, enum_item<Recompute>(d));
  read_list(o, "recompute_modules", Need::kOptional, s.recompute_modules, modules_item(d));
  read_list(o, "zero_stage", Need::kOptional, s.zero_stages, int_item(d, 0, 3));
  read_list(o, "sequence_parallel", Need::kOptional, s.sequence_parallel, bool_item(d));
  read_list(o, "order", Need::kOptional, s.orders, order_item(d));
  read_list(o, "overlap", Need::kOptional, s.overlap, bool_item(d));
  read_list(o, "moe_a2a_overlap", Need::kOptional, s.moe_a2a_overlap, bool_item(d));
  read_list(o, "moe_a2a", Need::kOptional, s.moe_a2a, enum_item<MoeA2a>(d));
  read_list(o, "etp", Need::kOptional, s.etp, int_item(d, 1, kMaxAxis));
  read_list(o, "moe_capacity_factor", Need::kOptional, s.moe_capacity, capacity_item(d));
  o.read("moe_imbalance", s.moe_imbalance, Need::kOptional,
         {1.0, 1000.0, false, "the hottest expert's tokens over the mean: 1 is balanced"});
  o.read("tp_within_nvlink", s.tp_within_nvlink, Need::kOptional);
  if (bool uneven = false; o.read("uneven_stages", uneven, Need::kOptional)) {
    s.uneven_stages = uneven;
  }
}

}  // namespace

std::string cloud_instance_names() {
  std::string names;
  for (const topo::TopologySpec& t : topo::builtin_topologies().all()) {
    if (!t.instance.empty()) names += (names.empty() ? "" : ", ") + t.instance;
  }
  return names;
}

Result<topo::TopologySpec> resolve_cloud_instance(std::string_view name) {
  const topo::TopologySpec* topology = topo::builtin_topologies().find(name);
  if (topology == nullptr) {
    return Status::invalid_input("unknown cloud instance \"" + std::string(name) +
                                 "\"; known instances: " + cloud_instance_names());
  }
  if (topology->instance.empty()) {
    return Status::invalid_input("topology " + topology->name +
                                 " is no cloud instance (it names no provider and instance); "
                                 "known instances: " +
                                 cloud_instance_names());
  }
  return *topology;
}

bool read_sweep_fields(JsonObject& root, const Catalog& catalog, const TopologyResolver& topologies,
                       SweepRequest& out) {
  Diagnostics& diag = root.diagnostics();
  const std::size_t before = diag.size();
  std::string name;
  root.read("name", name, Need::kOptional);

  // Models: preset names or inline model objects.
  std::vector<ModelSpec> models;
  if (const Json* j = root.child("models", Need::kRequired)) {
    const std::string pointer = root.pointer_of("models");
    if (!j->is_array() || j->empty()) {
      diag.add(pointer,
               "expected a non-empty array of model names or objects, got " + describe_json(*j));
    } else {
      for (std::size_t i = 0; i < j->size(); ++i) {
        const Json& m = (*j)[i];
        const std::string at = pointer + "/" + std::to_string(i);
        if (m.is_string()) {
          auto found = catalog.model(m.get<std::string>());
          if (found) {
            models.push_back(*found);
          } else {
            diag.add(at, found.status().message());
          }
        } else {
          JsonObject mo(m, at, diag);
          ModelSpec spec;
          if (mo.valid() && read_model_fields(mo, spec)) models.push_back(spec);
        }
      }
    }
  }
  TrainingSpec training;
  bool have_training = false;
  if (const Json* j = root.child("training", Need::kRequired)) {
    JsonObject to(*j, root.pointer_of("training"), diag);
    have_training = to.valid() && read_training_fields(to, training);
  }

  struct ClusterEntry {
    GpuSpec gpu;
    topo::TopologySpec topology;
    std::vector<int> gpus;
    int min_gpus = 0;
    std::optional<Offering> offering;
    std::optional<double> price;
    std::string provider;
    bool priced_at_instance = false;
    std::string origin;
  };
  std::vector<ClusterEntry> clusters;
  if (const Json* j = root.child("clusters", Need::kRequired)) {
    const std::string pointer = root.pointer_of("clusters");
    if (!j->is_array() || j->empty()) {
      diag.add(pointer, "expected a non-empty array of clusters, got " + describe_json(*j));
    } else {
      for (std::size_t i = 0; i < j->size(); ++i) {
        JsonObject co((*j)[i], pointer + "/" + std::to_string(i), diag);
        if (!co.valid()) continue;
        ClusterEntry c;
        c.origin = pointer + "/" + std::to_string(i);
        if (!diag.source().empty()) c.origin = diag.source() + ": " + c.origin;
        bool ok = true;
        // "instance": a cloud instance, whose topology preset gives the GPU and the network and
        // whose provider's price the scenario is costed at.
        std::optional<topo::TopologySpec> instance;
        const bool have_instance = co.has("instance");
        std::string instance_name;
        if (co.read("instance", instance_name, Need::kOptional)) {
          auto t = resolve_cloud_instance(instance_name);
          if (t) {
            instance = std::move(t).value();
          } else {
            co.error("instance", t.status().message());
          }
        }
        if (have_instance && !instance) ok = false;
        if (have_instance && co.has("topology")) {
          co.error("topology",
                   "give either an instance or a topology: the instance brings its own topology");
          ok = false;
        }
        std::string gpu_name;
        const bool have_gpu =
            co.read("gpu", gpu_name, have_instance ? Need::kOptional : Need::kRequired);
        if (!have_gpu && instance) gpu_name = instance->gpu;
        const std::string gpu_field = have_gpu ? "gpu" : "instance";
        if (!gpu_name.empty()) {
          auto g = catalog.gpu(gpu_name);
          if (g) {
            c.gpu = *g;
            const std::string problem =
                have_training ? precision_problem(c.gpu, training.precision) : std::string();
            if (!problem.empty()) {
              co.error(gpu_field,
                       problem + ", which " + root.pointer_of("training") + "/precision asks for");
              ok = false;
            }
            const std::string recipe =
                have_training ? fp8_recipe_problem(c.gpu, training) : std::string();
            if (!recipe.empty()) {
              co.error(gpu_field,
                       recipe + ", which " + root.pointer_of("training") + "/fp8_recipe asks for");
              ok = false;
            }
          } else {
            co.error(gpu_field, g.status().message());
            ok = false;
          }
        } else {
          ok = false;
        }
        std::string topology;
        const bool have_topology = co.read("topology", topology, Need::kOptional);
        read_list(co, "gpus", Need::kRequired, c.gpus, int_item(diag, 1, kMaxGpus));
        co.read("min_gpus", c.min_gpus, Need::kOptional, {1, kMaxGpus});
        if (c.min_gpus > 0 && !c.gpus.empty() &&
            c.min_gpus > *std::max_element(c.gpus.begin(), c.gpus.end())) {
          co.error("min_gpus", "must be at most the largest of gpus (" +
                                   std::to_string(*std::max_element(c.gpus.begin(), c.gpus.end())) +
                                   "), got " + std::to_string(c.min_gpus));
          ok = false;
        }
        Offering offering{};
        if (co.read_enum("offering", offering, Need::kOptional)) c.offering = offering;
        double price = 0;
        if (co.read("usd_per_gpu_hour", price, Need::kOptional, {0.0, 1000.0, true})) {
          c.price = price;
        }
        if (co.read("provider", c.provider, Need::kOptional) && have_instance) {
          co.error("provider", "give either an instance or a provider: the instance names its own");
          ok = false;
        }
        if (ok) {
          auto t = instance        ? Result<topo::TopologySpec>(*instance)
                   : have_topology ? topologies(topology)
                                   : topo::topology_for_gpu(c.gpu);
          if (!t) {
            co.error(have_topology ? "topology" : "gpu", t.status().message());
            ok = false;
          } else if (!c.gpu.matches(t->gpu)) {
            co.error(instance ? "instance" : "topology",
                     (instance ? "instance " + instance->instance + " (topology " + t->name + ")"
                               : "topology " + t->name) +
                         " has " + t->gpu + " GPUs, not " + c.gpu.name);
            ok = false;
          } else {
            c.topology = *t;
            c.priced_at_instance = instance.has_value();
            for (int gpus : c.gpus) {
              const std::string problem = node_count_problem(c.topology, gpus);
              if (problem.empty()) continue;
              co.error("gpus", problem);
              ok = false;
              break;
            }
          }
        }
        co.finish();
        if (ok && !c.gpus.empty()) clusters.push_back(std::move(c));
      }
    }
  }

  section(root, "space", Need::kOptional, [&](JsonObject& o) { read_space(o, out.space); });
  section(root, "constraints", Need::kOptional, [&](JsonObject& o) {
    double budget = 0, days = 0;
    if (o.read("budget_usd", budget, Need::kOptional, {0.0, 1e15, true})) {
      out.constraints.budget_usd = budget;
    }
    if (o.read("deadline_days", days, Need::kOptional, {0.0, 1e6, true})) {
      out.constraints.deadline_s = days * kSecondsPerDay;
    }
  });
  section(root, "pricing", Need::kOptional, [&](JsonObject& o) {
    o.read_enum("offering", out.pricing.offering, Need::kOptional);
    if (const Json* prices = o.child("usd_per_gpu_hour", Need::kOptional)) {
      JsonObject po(*prices, o.pointer_of("usd_per_gpu_hour"), diag);
      if (po.valid()) {
        for (auto it = prices->begin(); it != prices->end(); ++it) {
          double usd = 0;
          if (!po.read(it.key(), usd, Need::kRequired, {0.0, 1000.0, true})) continue;
          if (!catalog.find_gpu(it.key())) {
            po.error(it.key(), "unknown GPU \"" + it.key() + "\"");
            continue;
          }
          out.pricing.overrides.push_back({it.key(), Usd(usd)});
        }
        po.finish();
      }
    }
    o.read("usd_per_kWh", out.pricing.usd_per_kwh, Need::kOptional, {0.0, 100.0});
    o.read("pue", out.pricing.pue, Need::kOptional, {1.0, 10.0});
  });
  section(root, "failures", Need::kOptional, [&](JsonObject& o) {
    FailureModel& f = out.failures;
    o.read("interruptions_per_gpu_hour", f.interruptions_per_gpu_hour, Need::kOptional, {0.0, 1.0});
    o.read("spot_preemptions_per_node_hour", f.spot_preemptions_per_node_hour, Need::kOptional,
           {0.0, 100.0});
    double gbps = 0, minutes = 0;
    if (o.read("checkpoint_GBps", gbps, Need::kOptional, {0.0, 1e6, true})) {
      f.checkpoint_bandwidth = GBps(gbps);
    }
    if (o.read("restart_minutes", minutes, Need::kOptional, {0.0, 1e5})) {
      f.restart = seconds(minutes * kSecondsPerMinute);
    }
  });
  section(root, "search", Need::kOptional, [&](JsonObject& o) {
    o.read("top_k", out.options.top_k, Need::kOptional, {0, 10000});
    o.read("keep", out.options.keep, Need::kOptional, {0, 1'000'000});
  });
  root.finish();
  if (diag.size() != before || !have_training) return false;

  out.scenarios.clear();
  for (const ModelSpec& m : models) {
    for (const ClusterEntry& c : clusters) {
      for (int gpus : c.gpus) {
        SweepScenario sc;
        sc.model = m;
        sc.training = training;
        sc.gpu = c.gpu;
        sc.topology = c.topology;
        sc.max_gpus = gpus;
        sc.min_gpus = c.min_gpus;
        sc.origin = c.origin;
        sc.priced_at_instance = c.priced_at_instance;
        if (c.offering || c.price || !c.provider.empty()) {
          PricingOptions p = out.pricing;
          if (c.offering) p.offering = *c.offering;
          if (!c.provider.empty()) p.provider = c.provider;
          if (c.price) p.overrides.insert(p.overrides.begin(), {c.gpu.name, Usd(*c.price)});
          sc.pricing = p;
        }
        out.scenarios.push_back(std::move(sc));
      }
    }
  }
  if (!name.empty() && out.scenarios.size() == 1) out.scenarios.front().name = name;
  return true;
}

Result<SweepRequest> parse_sweep_spec(std::string_view text, std::string_view source,
                                      const Catalog& catalog, const TopologyResolver& topologies) {
  Diagnostics diag{std::string(source)};
  auto json = parse_json_text(text, diag);
  if (!json) return diag.to_status();
  JsonObject root(*json, "", diag);
  if (!root.valid()) return diag.to_status();
  SweepRequest out;
  if (read_document_header(root, "sweep")) read_sweep_fields(root, catalog, topologies, out);
  if (!diag.empty()) return diag.to_status();
  return out;
}

void register_sweep_documents(DocumentTypes& types, const Catalog& catalog,
                              TopologyResolver topologies) {
  types.add("sweep", "a batch of sweep scenarios: models x clusters x GPU counts, one search space",
            [&catalog, topologies](JsonObject& root, Diagnostics&) {
              SweepRequest request;
              read_sweep_fields(root, catalog, topologies, request);
            });
}

}  // namespace planner::search
