// Loading and saving planner documents without touching JSON types.
//
// Every planner document is a JSON object with "schema_version" (currently 1) and "kind". Loaders
// are strict: an unknown key, a wrong type or an impossible value is an error naming the file and
// the JSON pointer, and all problems in a document are reported together (see diagnostics.hpp).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/catalog.hpp"
#include "planner/core/cluster_spec.hpp"
#include "planner/core/diagnostics.hpp"
#include "planner/core/gpu_spec.hpp"
#include "planner/core/limits.hpp"
#include "planner/core/model_spec.hpp"
#include "planner/core/parallel_config.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/status.hpp"
#include "planner/core/training_spec.hpp"

namespace planner {

inline constexpr int kSchemaVersion = 1;

// Reads a whole regular file. Its type and size are checked before it is read, and it is read with
// a cap, so a FIFO, a device (/dev/zero) or a growing file can neither hang nor exhaust memory.
// Errors: kNotFound when it does not exist (or is a dangling symbolic link); kInvalidInput when it
// is a directory, a FIFO, a device or a socket, a symbolic link loop, unreadable, or larger than
// `max_bytes`; kRuntime on I/O failure. Messages start with "<path>: ".
Result<std::string> read_text_file(const std::string& path,
                                   std::size_t max_bytes = limits::kMaxFileBytes);

// The checks of read_text_file() without reading: ok when `path` is a regular file of at most
// `max_bytes` bytes.
Status check_regular_file(const std::string& path, std::size_t max_bytes = limits::kMaxFileBytes);

// Writes `text` to `path` atomically (temporary file + rename).
Status write_text_file_atomic(const std::string& path, std::string_view text);

// Parsers: `source` names the input in messages (usually the path as the user gave it).
Result<ModelSpec> parse_model(std::string_view text, std::string_view source);
Result<GpuSpec> parse_gpu(std::string_view text, std::string_view source);
Result<TrainingSpec> parse_training(std::string_view text, std::string_view source);
Result<ParallelConfig> parse_parallel(std::string_view text, std::string_view source);
Result<ClusterSpec> parse_cluster(std::string_view text, std::string_view source,
                                  const Catalog& catalog);
Result<Plan> parse_plan(std::string_view text, std::string_view source, const Catalog& catalog);

Result<ModelSpec> load_model_file(const std::string& path);
Result<Plan> load_plan_file(const std::string& path, const Catalog& catalog);

// Serialisation as complete documents (with schema_version and kind), pretty-printed.
std::string to_json_text(const ModelSpec& model);
std::string to_json_text(const GpuSpec& gpu);
std::string to_json_text(const Plan& plan);

// Document kinds known to `planner validate`. Core registers model, gpu, training, parallel,
// cluster and plan; other libraries add theirs (topology, sweep, ...) through their own register
// functions.
class JsonObject;
class DocumentTypes {
 public:
  // `check` reads the document's fields (the header is already consumed) and calls finish().
  using Check = std::function<void(JsonObject& root, Diagnostics& diag)>;

  void add(std::string kind, std::string description, Check check);
  // Parses and checks a document of any registered kind; every problem lands in `diag`.
  void validate(std::string_view text, Diagnostics& diag) const;
  std::vector<std::string> kinds() const;
  const std::string& description(std::string_view kind) const;

 private:
  struct Entry {
    std::string kind;
    std::string description;
    Check check;
  };
  std::vector<Entry> entries_;
};

void register_core_documents(DocumentTypes& types, const Catalog& catalog);

}  // namespace planner
