#include "planner/core/loaders.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

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

namespace {

// "a FIFO (named pipe)", "a character device", ...: what a file that is not regular is.
std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

Status check_regular_file(const std::string& path, std::size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    struct stat link {};
    switch (err) {
      case ENOENT:
        if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
          return Status::not_found(path + ": a symbolic link to a file that does not exist");
        }
        return Status::not_found(path + ": no such file");
      case ELOOP:
        return Status::invalid_input(path +
                                     ": a symbolic link loop (too many levels of "
                                     "symbolic links)");
      case ENOTDIR:
        return Status::invalid_input(path + ": a component of the path is not a directory");
      case ENAMETOOLONG:
        return Status::invalid_input(path + ": file name too long");
      case EACCES:
        return Status::invalid_input(path + ": permission denied");
      default:
        return Status::runtime(path + ": cannot read: " + std::strerror(err));
    }
  }
  if (S_ISDIR(st.st_mode)) return Status::invalid_input(path + ": is a directory, expected a file");
  if (!S_ISREG(st.st_mode)) {
    return Status::invalid_input(path + ": is " + file_kind(st.st_mode) +
                                 ", expected a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return Status::invalid_input(path + ": file is " + std::to_string(st.st_size) +
                                 " bytes, larger than the " + std::to_string(max_bytes) +
                                 "-byte limit for planner inputs");
  }
  return Status::ok();
}

Result<std::string> read_text_file(const std::string& path, std::size_t max_bytes) {
  // The type and size are checked before anything is read: a FIFO would block forever, a device
  // (/dev/zero) never ends.
  PLANNER_RETURN_IF_ERROR(check_regular_file(path, max_bytes));
  // Non-blocking, in case the path was replaced by a FIFO since the check; fstat() below then
  // refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == EACCES) return Status::invalid_input(path + ": permission denied");
    return Status::runtime(path + ": cannot open: " + std::strerror(err));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::invalid_input(path + ": is not a regular file");
  }
  // Read at most max_bytes + 1 bytes whatever the size said: the file may grow while it is read.
  std::string text;
  text.resize(std::min<std::size_t>(static_cast<std::size_t>(st.st_size), max_bytes) + 1);
  std::size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (got > max_bytes) break;
      text.resize(std::min(max_bytes + 1, std::max<std::size_t>(2 * got, 4096)));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::runtime(path + ": read error: " + std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_bytes) {
    return Status::invalid_input(path + ": file is larger than the " + std::to_string(max_bytes) +
                                 "-byte limit for planner inputs");
  }
  text.resize(got);
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
                                                 if (p.dp == 0) p.dp = p.dualpipe ? 2 : 1;
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
