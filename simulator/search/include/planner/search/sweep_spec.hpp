// The "sweep" document: a batch of scenarios (models × clusters × GPU counts) with one search
// space, constraints, prices and failure model, for `planner sweep --spec sweep.json`.
//
//   { "schema_version": 1, "kind": "sweep", "name": "...",
//     "models": ["gpt3-175b", { model fields }],          preset names or inline models
//     "training": { training fields },                   batch, sequence, precision, token budget
//     "clusters": [{ "gpu": "h100", "topology": "dgx-h100-superpod",   topology optional: the
//                    "gpus": [512, 1024], "min_gpus": 256,             first preset with the GPU
//                    "offering": "spot", "usd_per_gpu_hour": 2.49,      optional; "provider":
//                    "provider": "GCP" }],                             its catalogue price
//                  or { "instance": "p5.48xlarge", "gpus": [64] }:     a cloud instance (its
//                    topology preset's instance name, or the preset's name): its topology and
//                    GPU ("gpu" optional, must match; no "topology"), priced at its provider's
//                    catalogue price for the offering (planner sweep --instances)
//     "space": { "tp": [..], "pp": [..], "dp": [..], "cp": [..], "ep": [..],
//                "micro_batch_size": [..], "virtual_stages": [..], "schedule": ["1f1b", ..],
//                "recompute": [..], "zero_stage": [..], "sequence_parallel": [true, false],
//                "order": ["tp-cp-ep-dp-pp", ..], "overlap": [true, false],
//                "moe_a2a": ["nccl", "hierarchical"], "moe_a2a_overlap": [true, false],
//                "tp_within_nvlink": true,
//                "uneven_stages": false },                  every key optional; uneven_stages
//                                     true also searches the powers of two for pp that do not
//                                     divide the layers (a listed pp always is); absent: where 4
//                                     does not divide them (searches_uneven_stages)
//     "constraints": { "budget_usd": 2e6, "deadline_days": 30 },
//     "pricing": { "offering": "on-demand", "usd_per_gpu_hour": { "H100": 2.49 },
//                  "usd_per_kWh": 0.12, "pue": 1.2 },
//     "failures": { "interruptions_per_gpu_hour": 2e-5, "spot_preemptions_per_node_hour": 7e-5,
//                   "checkpoint_GBps": 100, "restart_minutes": 10 },
//     "search": { "top_k": 32, "keep": 100 } }
// Scenarios are every model × every cluster × every GPU count, in that order. Strict: unknown
// keys, wrong types and impossible values are errors at their JSON pointer.
#pragma once

#include <functional>
#include <string_view>

#include "planner/core/catalog.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/loaders.hpp"
#include "planner/search/sweep.hpp"
#include "planner/topo/topology_spec.hpp"

namespace planner::search {

// Turns a topology name from the document into a topology (the CLI resolves presets and files;
// the simulator reads no files itself).
using TopologyResolver = std::function<Result<topo::TopologySpec>(std::string_view name)>;

// The cloud instances of the topology presets, for messages: "p4d.24xlarge, p5.48xlarge, ...".
std::string cloud_instance_names();
// A cloud instance ("p5.48xlarge") or a topology preset that names one ("aws-p5"); kInvalidInput
// naming the instances that exist otherwise.
Result<topo::TopologySpec> resolve_cloud_instance(std::string_view name);

// Reads a sweep document's fields (header consumed) into `out`; every problem lands in the
// object's diagnostics. Returns true when there was none.
bool read_sweep_fields(JsonObject& root, const Catalog& catalog, const TopologyResolver& topologies,
                       SweepRequest& out);
// The whole document; kInvalidInput listing every problem ("sweep.json: /clusters/0/gpus/1: ...").
Result<SweepRequest> parse_sweep_spec(std::string_view text, std::string_view source,
                                      const Catalog& catalog, const TopologyResolver& topologies);

// Adds kind "sweep" to `planner validate`.
void register_sweep_documents(DocumentTypes& types, const Catalog& catalog,
                              TopologyResolver topologies);

}  // namespace planner::search
