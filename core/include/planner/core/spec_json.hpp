// JSON readers and writers for the domain model (used by loaders, presets and other libraries'
// document types). Each read_*_fields() reads the fields of `obj`, calls obj.finish() and returns
// true when it added no diagnostic.
#pragma once

#include "planner/core/catalog.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/plan.hpp"

namespace planner {

// Checks "schema_version" and "kind" on a document's root object.
bool read_document_header(JsonObject& root, std::string_view expected_kind);

bool read_model_fields(JsonObject& obj, ModelSpec& out);
bool read_gpu_fields(JsonObject& obj, GpuSpec& out);
bool read_training_fields(JsonObject& obj, TrainingSpec& out);
// `dp` may be absent; it is then left at 0 for the caller to derive.
bool read_parallel_fields(JsonObject& obj, ParallelConfig& out);
bool read_cluster_fields(JsonObject& obj, const Catalog& catalog, ClusterSpec& out);
bool read_plan_fields(JsonObject& obj, const Catalog& catalog, Plan& out);

// Field objects without a document header.
Json to_json(const ModelSpec& model);
Json to_json(const GpuSpec& gpu);
// A price record in the schema of price files (prices.hpp).
Json to_json(const PriceEntry& price);
Json to_json(const TrainingSpec& training);
Json to_json(const ParallelConfig& parallel);
Json to_json(const ClusterSpec& cluster);
Json to_json(const Plan& plan);

// Adds "schema_version" and "kind" in front of a field object.
Json as_document(std::string_view kind, const Json& fields);

}  // namespace planner
