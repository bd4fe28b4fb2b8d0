#include "planner/core/loaders.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "planner/core/spec_json.hpp"

namespace planner {
namespace {

// Parses `text` as a document of `kind` and reads it with `reader`.
template <class T, class Reader>
Result<T> parse_document(std::string_view text, std::string_view source, std::string_view kind,
                         Reader&& reader) {
  Diagnostics diag{std::string(source)};
  auto json = parse_json_text(text, diag);
  if (!json) return diag.to_status();
  JsonObject root(*json, "", diag);
  T out{};
  if (root.valid()) {
    read_document_header(root, kind);
    reader(root, out);
  }
  if (!diag.empty()) return diag.to_status();
  return out;
}

std::string dump(const Json& j) {
  return j.dump(2) + "\n";
}

}  // namespace

Result<std::string> read_text_file(const std::string& path, std::size_t max_bytes) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return Status::not_found(path + ": no such file");
  }
  if (std::filesystem::is_directory(status)) {
    return Status::invalid_input(path + ": is a directory, expected a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::runtime(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return Status::runtime(path + ": read error");
  std::string text = std::move(buf).str();
  if (text.size() > max_bytes) {
    return Status::invalid_input(path + ": file is " + std::to_string(text.size()) +
                                 " bytes, larger than the " + std::to_string(max_bytes) +
                                 "-byte limit for planner documents");
  }
  return text;
}

Status write_text_file_atomic(const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::runtime(path + ": cannot write: " + std::strerror(errno));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return Status::runtime(path + ": write failed: " + std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::runtime(path + ": cannot replace: " + err);
  }
  return Status::ok();
}

Result<ModelSpec> parse_model(std::string_view text, std::string_view source) {
  return parse_document<ModelSpec>(text, source, "model",
                                   [](JsonObject& o, ModelSpec& m) { read_model_fields(o, m); });
}

Result<GpuSpec> parse_gpu(std::string_view text, std::string_view source) {
  return parse_document<GpuSpec>(text, source, "gpu",
                                 [](JsonObject& o, GpuSpec& g) { read_gpu_fields(o, g); });
}

Result<TrainingSpec> parse_training(std::string_view text, std::string_view source) {
  return parse_document<TrainingSpec>(
      text, source, "training", [](JsonObject& o, TrainingSpec& t) { read_training_fields(o, t); });
}

Result<ParallelConfig> parse_parallel(std::string_view text, std::string_view source) {
  auto result = parse_document<ParallelConfig>(text, source, "parallel",
                                               [](JsonObject& o, ParallelConfig& p) {
                                                 read_parallel_fields(o, p);
                                                 if (p.dp == 0) p.dp = 1;
                                               });
  return result;
}

Result<ClusterSpec> parse_cluster(std::string_view text, std::string_view source,
                                  const Catalog& catalog) {
  return parse_document<ClusterSpec>(text, source, "cluster", [&](JsonObject& o, ClusterSpec& c) {
    read_cluster_fields(o, catalog, c);
  });
}

Result<Plan> parse_plan(std::string_view text, std::string_view source, const Catalog& catalog) {
  return parse_document<Plan>(text, source, "plan",
                              [&](JsonObject& o, Plan& p) { read_plan_fields(o, catalog, p); });
}

Result<ModelSpec> load_model_file(const std::string& path) {
  PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_model(text, path);
}

Result<Plan> load_plan_file(const std::string& path, const Catalog& catalog) {
  PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_plan(text, path, catalog);
}

std::string to_json_text(const ModelSpec& model) {
  return dump(as_document("model", to_json(model)));
}
std::string to_json_text(const GpuSpec& gpu) {
  return dump(as_document("gpu", to_json(gpu)));
}
std::string to_json_text(const Plan& plan) {
  return dump(as_document("plan", to_json(plan)));
}

void DocumentTypes::add(std::string kind, std::string description, Check check) {
  entries_.push_back({std::move(kind), std::move(description), std::move(check)});
}

std::vector<std::string> DocumentTypes::kinds() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_)
    out.push_back(e.kind);
  return out;
}

const std::string& DocumentTypes::description(std::string_view kind) const {
  static const std::string kEmpty;
  for (const Entry& e : entries_) {
    if (e.kind == kind) return e.description;
  }
  return kEmpty;
}

void DocumentTypes::validate(std::string_view text, Diagnostics& diag) const {
  auto json = parse_json_text(text, diag);
  if (!json) return;
  JsonObject root(*json, "", diag);
  if (!root.valid()) return;
  int version = 0;
  if (root.read("schema_version", version, Need::kRequired, {1, 1000}) &&
      version != kSchemaVersion) {
    root.error("schema_version", "unsupported schema_version " + std::to_string(version) +
                                     " (this planner reads version " +
                                     std::to_string(kSchemaVersion) + ")");
  }
  std::string kind;
  if (!root.read("kind", kind, Need::kRequired)) return;
  for (const Entry& e : entries_) {
    if (e.kind == kind) {
      e.check(root, diag);
      return;
    }
  }
  std::string known;
  for (const Entry& e : entries_)
    known += (known.empty() ? "" : ", ") + e.kind;
  root.error("kind", "unknown document kind \"" + kind + "\"; expected one of: " + known);
}

void register_core_documents(DocumentTypes& types, const Catalog& catalog) {
  types.add("model", "a transformer architecture", [](JsonObject& root, Diagnostics&) {
    ModelSpec m;
    read_model_fields(root, m);
  });
  types.add("gpu", "an accelerator type with peaks, memory and prices",
            [](JsonObject& root, Diagnostics&) {
              GpuSpec g;
              read_gpu_fields(root, g);
            });
  types.add("training", "batch, sequence length, precision, optimizer, token budget",
            [](JsonObject& root, Diagnostics&) {
              TrainingSpec t;
              read_training_fields(root, t);
            });
  types.add("parallel", "a parallel configuration (tp, pp, dp, ...)",
            [](JsonObject& root, Diagnostics&) {
              ParallelConfig p;
              read_parallel_fields(root, p);
            });
  types.add("cluster", "nodes, GPUs per node, GPU type, topology",
            [&catalog](JsonObject& root, Diagnostics&) {
              ClusterSpec c;
              read_cluster_fields(root, catalog, c);
            });
  types.add("plan", "model + cluster + training + parallel config",
            [&catalog](JsonObject& root, Diagnostics&) {
              Plan p;
              read_plan_fields(root, catalog, p);
            });
}

}  // namespace planner
