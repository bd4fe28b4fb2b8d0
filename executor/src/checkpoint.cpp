#include "planner/exec/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "planner/core/json_reader.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/store/hash.hpp"
#include "planner/store/plans.hpp"
#include "wire.hpp"

namespace planner::exec {
namespace {

namespace fs = std::filesystem;

constexpr char kShardMagic[8] = {'P', 'L', 'N', 'R', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t kShardFormat = 1;
constexpr std::size_t kShaHexLength = 64;
constexpr std::string_view kStepPrefix = "step-";
constexpr std::string_view kManifestKind = "checkpoint";
// Shards are read whole; a rank's state beyond this is refused rather than read into memory.
constexpr std::size_t kMaxShardBytes = std::size_t{1} << 40;

// A parameter group's layout as a shard records it (bytes of each buffer).
struct GroupLayout {
  std::int64_t elements = 0;
  std::int64_t padded = 0;
  std::int64_t shard_begin = 0;
  std::int64_t shard_end = 0;
  std::int64_t param_bytes = 0;
  std::int64_t exp_avg_bytes = 0;
  std::int64_t exp_avg_sq_bytes = 0;
  bool operator==(const GroupLayout&) const = default;
};

GroupLayout layout_of(const ParamGroup& g) {
  return {g.elements,      g.padded,          g.shard_begin,       g.shard_end,
          g.param.bytes(), g.exp_avg.bytes(), g.exp_avg_sq.bytes()};
}

std::string describe(const GroupLayout& l) {
  return std::to_string(l.elements) + " parameters (padded " + std::to_string(l.padded) +
         ", shard " + std::to_string(l.shard_begin) + ".." + std::to_string(l.shard_end) + ")";
}

std::string sys_error(const std::string& what, const std::string& path) {
  return path + ": " + what + ": " + std::strerror(errno);
}

Result<std::string> read_binary_file(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return Status::not_found(path + ": cannot read: " + ec.message());
  if (size > kMaxShardBytes) return Status::invalid_input(path + ": larger than a shard can be");
  std::string bytes(static_cast<std::size_t>(size), '\0');
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::runtime(sys_error("cannot open", path));
  const std::size_t got = std::fread(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  if (got != bytes.size()) return Status::runtime(path + ": short read");
  return bytes;
}

// The first error among the ranks' statuses, agreed on by every rank: each rank passes its own
// outcome; rank 0 gathers them and broadcasts the verdict, naming the rank that failed. `what`
// names the phase in messages about ranks that do not report.
Status agree(World& world, const Status& mine, double timeout_s, const std::string& what) {
  std::string msg;
  put<std::int32_t>(msg, static_cast<std::int32_t>(mine.code()));
  msg += mine.message();
  PLANNER_ASSIGN_OR_RETURN(std::vector<std::optional<std::string>> all,
                           world.gather(msg, Deadline::after(timeout_s)));
  std::string verdict;
  if (world.rank() == 0) {
    StatusCode code = StatusCode::kOk;
    std::string text;
    for (std::size_t r = 0; r < all.size() && code == StatusCode::kOk; ++r) {
      if (!all[r]) {
        code = StatusCode::kTimeout;
        text = "rank " + std::to_string(r) + " did not report " + what + " within " +
               std::to_string(static_cast<long long>(timeout_s)) + " s";
        continue;
      }
      Reader rd(*all[r]);
      const auto c = static_cast<StatusCode>(rd.get<std::int32_t>());
      if (c == StatusCode::kOk) continue;
      code = c;
      text = "rank " + std::to_string(r) + ": " + all[r]->substr(sizeof(std::int32_t));
    }
    put<std::int32_t>(verdict, static_cast<std::int32_t>(code));
    verdict += text;
  }
  PLANNER_ASSIGN_OR_RETURN(std::string got, world.broadcast(verdict, Deadline::after(timeout_s)));
  Reader rd(got);
  const auto code = static_cast<StatusCode>(rd.get<std::int32_t>());
  if (!rd.ok()) return Status::internal("malformed verdict from rank 0");
  if (code == StatusCode::kOk) return Status::ok();
  return Status(code, got.substr(sizeof(std::int32_t)));
}

}  // namespace

std::string plan_fingerprint(const Plan& plan) {
  return store::sha256_hex(store::canonical_json(as_document("plan", to_json(plan))));
}

std::string checkpoint_step_dir(const std::string& dir, std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "%s%08lld", kStepPrefix.data(), static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::string checkpoint_shard_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank-%05d.shard", rank);
  return name;
}

std::string manifest_to_json(const CheckpointManifest& m) {
  Json shards = Json::array();
  for (const CheckpointShard& s : m.shards) {
    shards.push_back(
        {{"rank", s.rank}, {"file", s.file}, {"bytes", s.bytes}, {"sha256", s.sha256}});
  }
  Json doc{{"schema_version", kSchemaVersion},
           {"kind", kManifestKind},
           {"step", m.step},
           {"world_size", m.world_size},
           {"plan_sha256", m.plan_sha256},
           {"plan", m.plan},
           {"shards", shards}};
  return doc.dump(2) + "\n";
}

Result<CheckpointManifest> parse_manifest(std::string_view text, std::string_view source) {
  Diagnostics diag{std::string(source)};
  const std::optional<Json> json = parse_json_text(text, diag);
  if (!json) return diag.to_status();
  CheckpointManifest m;
  JsonObject root(*json, "", diag);
  if (root.valid() && read_document_header(root, kManifestKind)) {
    root.read("step", m.step, Need::kRequired);
    root.read("world_size", m.world_size, Need::kRequired, {1, 1 << 24});
    root.read("plan_sha256", m.plan_sha256, Need::kRequired);
    root.read("plan", m.plan, Need::kRequired, true);
    if (const Json* shards = root.child("shards", Need::kRequired)) {
      if (!shards->is_array()) {
        diag.add("/shards", "expected an array, got " + describe_json(*shards));
      } else {
        for (std::size_t i = 0; i < shards->size(); ++i) {
          const std::string ptr = "/shards/" + std::to_string(i);
          JsonObject o((*shards)[i], ptr, diag);
          if (!o.valid()) continue;
          CheckpointShard s;
          o.read("rank", s.rank, Need::kRequired);
          o.read("file", s.file, Need::kRequired);
          o.read("bytes", s.bytes, Need::kRequired);
          o.read("sha256", s.sha256, Need::kRequired);
          o.finish();
          if (s.rank != static_cast<int>(i)) {
            diag.add(ptr + "/rank", "expected shard " + std::to_string(i) + " here, got rank " +
                                        std::to_string(s.rank));
          }
          if (s.file != checkpoint_shard_name(static_cast<int>(i))) {
            diag.add(ptr + "/file", "expected \"" + checkpoint_shard_name(static_cast<int>(i)) +
                                        "\", got \"" + s.file + "\"");
          }
          if (s.sha256.size() != kShaHexLength) {
            diag.add(ptr + "/sha256", "expected 64 hexadecimal digits");
          }
          m.shards.push_back(std::move(s));
        }
      }
    }
    root.finish();
    if (diag.empty() && static_cast<int>(m.shards.size()) != m.world_size) {
      diag.add("/shards", "expected " + std::to_string(m.world_size) +
                              " shards (world_size), got " + std::to_string(m.shards.size()));
    }
    if (diag.empty() && m.plan_sha256.size() != kShaHexLength) {
      diag.add("/plan_sha256", "expected 64 hexadecimal digits");
    }
  }
  if (!diag.empty()) return diag.to_status();
  return m;
}

Result<std::optional<std::string>> latest_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return std::optional<std::string>();
  std::optional<std::string> best;
  std::string best_name;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kStepPrefix, 0) != 0 || !e.is_directory()) continue;
    if (!fs::exists(e.path() / kCheckpointManifestName)) continue;  // interrupted
    // Step directories are zero-padded, so names order as steps do.
    if (!best || name > best_name) {
      best = e.path().string();
      best_name = name;
    }
  }
  if (ec) return Status::runtime(dir + ": cannot list: " + ec.message());
  return best;
}

Result<std::string> encode_shard(const ModelState& state, Device& device, int rank, int world_size,
                                 std::int64_t step, std::string_view plan_sha256) {
  if (plan_sha256.size() != kShaHexLength) return Status::internal("bad plan fingerprint");
  std::int64_t data = 0;
  for (const ParamGroup& g : state.groups()) {
    data += g.param.bytes() + g.exp_avg.bytes() + g.exp_avg_sq.bytes();
  }
  std::string out;
  out.reserve(static_cast<std::size_t>(data) + 1024);
  out.append(kShardMagic, sizeof(kShardMagic));
  put(out, kShardFormat);
  put<std::int32_t>(out, rank);
  put<std::int32_t>(out, world_size);
  put<std::int64_t>(out, step);
  put<std::int64_t>(out, state.steps());
  out.append(plan_sha256);
  put<std::int32_t>(out, static_cast<std::int32_t>(state.groups().size()));
  for (const ParamGroup& g : state.groups())
    put(out, layout_of(g));
  for (const ParamGroup& g : state.groups()) {
    for (const DeviceBuffer* b : {&g.param, &g.exp_avg, &g.exp_avg_sq}) {
      if (b->empty()) continue;
      const std::size_t at = out.size();
      out.resize(at + static_cast<std::size_t>(b->bytes()));
      PLANNER_RETURN_IF_ERROR(device.copy_to_host(out.data() + at, b->data(), b->bytes()));
    }
  }
  return out;
}

Result<DecodedShard> check_shard(std::string bytes, std::string_view source,
                                 const ModelState& state, int rank, int world_size,
                                 std::int64_t step, std::string_view plan_sha256) {
  const std::string src(source);
  auto bad = [&](const std::string& what) { return Status::invalid_input(src + ": " + what); };
  if (bytes.size() < sizeof(kShardMagic) ||
      std::memcmp(bytes.data(), kShardMagic, sizeof(kShardMagic)) != 0) {
    return bad("not a planner checkpoint shard");
  }
  Reader rd(std::string_view(bytes).substr(sizeof(kShardMagic)));
  const auto format = rd.get<std::uint32_t>();
  const auto shard_rank = rd.get<std::int32_t>();
  const auto shard_world = rd.get<std::int32_t>();
  const auto shard_step = rd.get<std::int64_t>();
  const auto optimizer_steps = rd.get<std::int64_t>();
  const std::string sha = rd.text(kShaHexLength);
  const auto groups = rd.get<std::int32_t>();
  if (!rd.ok()) return bad("truncated header");
  if (format != kShardFormat) {
    return bad("shard format " + std::to_string(format) + ", this build reads format " +
               std::to_string(kShardFormat));
  }
  if (shard_rank != rank || shard_world != world_size) {
    return bad("written by rank " + std::to_string(shard_rank) + " of " +
               std::to_string(shard_world) + ", expected rank " + std::to_string(rank) + " of " +
               std::to_string(world_size));
  }
  if (shard_step != step) {
    return bad("holds step " + std::to_string(shard_step) + ", the manifest says " +
               std::to_string(step));
  }
  if (sha != plan_sha256) return bad("belongs to another plan (plan sha256 " + sha + ")");
  const auto& mine = state.groups();
  if (groups != static_cast<std::int32_t>(mine.size())) {
    return bad("holds " + std::to_string(groups) + " parameter groups, this rank has " +
               std::to_string(mine.size()) + " (another model, parallel layout or bucket size?)");
  }
  std::int64_t data = 0;
  for (std::size_t g = 0; g < mine.size(); ++g) {
    const auto l = rd.get<GroupLayout>();
    if (!rd.ok()) return bad("truncated header");
    const GroupLayout want = layout_of(mine[g]);
    if (!(l == want)) {
      return bad("parameter group " + std::to_string(g) + " holds " + describe(l) +
                 ", this rank's holds " + describe(want) +
                 " (another model, parallel layout or bucket size?)");
    }
    data += l.param_bytes + l.exp_avg_bytes + l.exp_avg_sq_bytes;
  }
  const std::size_t offset = sizeof(kShardMagic) + rd.offset();
  const std::size_t expected = offset + static_cast<std::size_t>(data);
  if (bytes.size() != expected) {
    return bad((bytes.size() < expected ? "truncated: " : "too long: ") +
               std::to_string(bytes.size()) + " bytes, expected " + std::to_string(expected));
  }
  DecodedShard out;
  out.step = shard_step;
  out.optimizer_steps = optimizer_steps;
  out.bytes = std::move(bytes);
  out.data_offset = offset;
  return out;
}

Status apply_shard(const DecodedShard& shard, ModelState& state, Device& device) {
  std::size_t at = shard.data_offset;
  for (ParamGroup& g : state.groups()) {
    for (DeviceBuffer* b : {&g.param, &g.exp_avg, &g.exp_avg_sq}) {
      if (b->empty()) continue;
      PLANNER_RETURN_IF_ERROR(
          device.copy_from_host(b->data(), shard.bytes.data() + at, b->bytes()));
      at += static_cast<std::size_t>(b->bytes());
    }
    device.zero(g.grad.data(), g.grad.bytes());
  }
  state.set_steps(shard.optimizer_steps);
  return Status::ok();
}

Status write_file_durably(const std::string& path, std::string_view bytes) {
  const fs::path target(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::runtime(sys_error("cannot create", tmp));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const Status st = Status::runtime(sys_error("cannot write", tmp));
      ::close(fd);
      ::unlink(tmp.c_str());
      return st;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const Status st = Status::runtime(sys_error("cannot flush", tmp));
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const Status st = Status::runtime(sys_error("cannot rename into place", path));
    ::unlink(tmp.c_str());
    return st;
  }
  // The rename itself is durable once the directory is flushed.
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

Status save_checkpoint(World& world, const ModelState& state, Device& device,
                       const CheckpointConfig& config, std::int64_t step, double timeout_s) {
  const std::string step_dir = checkpoint_step_dir(config.dir, step);
  const std::string file = checkpoint_shard_name(world.rank());
  CheckpointShard mine;
  Status wrote = [&]() -> Status {
    std::error_code ec;
    fs::create_directories(step_dir, ec);
    if (ec) return Status::runtime(step_dir + ": cannot create: " + ec.message());
    PLANNER_ASSIGN_OR_RETURN(
        std::string bytes,
        encode_shard(state, device, world.rank(), world.size(), step, config.plan_sha256));
    PLANNER_RETURN_IF_ERROR(write_file_durably((fs::path(step_dir) / file).string(), bytes));
    mine = {world.rank(), file, static_cast<std::int64_t>(bytes.size()), store::sha256_hex(bytes)};
    return Status::ok();
  }();
  // Every shard is on disk (or some rank failed) before the manifest is written.
  std::string report;
  put<std::int32_t>(report, wrote.is_ok() ? 1 : 0);
  put<std::int64_t>(report, mine.bytes);
  report += wrote.is_ok() ? mine.sha256 : wrote.message();
  PLANNER_ASSIGN_OR_RETURN(std::vector<std::optional<std::string>> all,
                           world.gather(report, Deadline::after(timeout_s)));
  Status manifest_written;
  if (world.rank() == 0) {
    CheckpointManifest m;
    m.step = step;
    m.world_size = world.size();
    m.plan_sha256 = config.plan_sha256;
    m.plan = config.plan_name;
    for (std::size_t r = 0; r < all.size() && manifest_written.is_ok(); ++r) {
      if (!all[r]) {
        manifest_written = Status::timeout("checkpoint of step " + std::to_string(step) +
                                           ": rank " + std::to_string(r) + " did not report");
        break;
      }
      Reader rd(*all[r]);
      const bool ok = rd.get<std::int32_t>() == 1;
      const auto bytes = rd.get<std::int64_t>();
      const std::string rest = all[r]->substr(rd.offset());
      if (!ok) {
        manifest_written = Status::runtime("checkpoint of step " + std::to_string(step) +
                                           ": rank " + std::to_string(r) + ": " + rest);
        break;
      }
      m.shards.push_back(
          {static_cast<int>(r), checkpoint_shard_name(static_cast<int>(r)), bytes, rest});
    }
    if (manifest_written.is_ok()) {
      manifest_written = write_file_durably((fs::path(step_dir) / kCheckpointManifestName).string(),
                                            manifest_to_json(m));
    }
  }
  return agree(world, manifest_written, timeout_s, "the checkpoint's manifest");
}

Result<std::int64_t> load_checkpoint(World& world, ModelState& state, Device& device,
                                     const CheckpointConfig& config, double timeout_s) {
  // Rank 0 picks the checkpoint and checks its manifest; the others learn it from the broadcast.
  std::string chosen;  // rank 0: code | step dir | manifest text
  if (world.rank() == 0) {
    Status st = [&]() -> Status {
      PLANNER_ASSIGN_OR_RETURN(std::optional<std::string> dir, latest_checkpoint(config.dir));
      if (!dir) {
        return Status::not_found("no complete checkpoint in " + config.dir +
                                 " to resume from (a checkpoint is complete once its " +
                                 std::string(kCheckpointManifestName) + " is written)");
      }
      const std::string path = (fs::path(*dir) / kCheckpointManifestName).string();
      PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
      PLANNER_ASSIGN_OR_RETURN(CheckpointManifest m, parse_manifest(text, path));
      if (m.world_size != world.size()) {
        return Status::invalid_input(path + ": the checkpoint has " + std::to_string(m.world_size) +
                                     " ranks' shards, this run has " +
                                     std::to_string(world.size()) + " ranks");
      }
      if (m.plan_sha256 != config.plan_sha256) {
        return Status::invalid_input(path + ": the checkpoint belongs to another plan (\"" +
                                     m.plan + "\", sha256 " + m.plan_sha256.substr(0, 12) +
                                     "...), this run's plan \"" + config.plan_name +
                                     "\" has sha256 " + config.plan_sha256.substr(0, 12) +
                                     "...; resume with the plan it was written for");
      }
      if (fs::path(*dir).filename().string() !=
          fs::path(checkpoint_step_dir(config.dir, m.step)).filename().string()) {
        return Status::invalid_input(path + ": step " + std::to_string(m.step) +
                                     " does not match its directory");
      }
      put<std::int32_t>(chosen, 0);
      put<std::int64_t>(chosen, static_cast<std::int64_t>(dir->size()));
      chosen += *dir;
      chosen += text;
      return Status::ok();
    }();
    if (!st.is_ok()) {
      chosen.clear();
      put<std::int32_t>(chosen, static_cast<std::int32_t>(st.code()));
      chosen += st.message();
    }
  }
  PLANNER_ASSIGN_OR_RETURN(std::string got, world.broadcast(chosen, Deadline::after(timeout_s)));
  Reader rd(got);
  const auto code = static_cast<StatusCode>(rd.get<std::int32_t>());
  if (code != StatusCode::kOk) return Status(code, got.substr(sizeof(std::int32_t)));
  const std::string dir = rd.text(static_cast<std::size_t>(rd.get<std::int64_t>()));
  const std::string manifest_path = (fs::path(dir) / kCheckpointManifestName).string();
  PLANNER_ASSIGN_OR_RETURN(CheckpointManifest m,
                           parse_manifest(got.substr(rd.offset()), manifest_path));

  // Every rank checks its shard completely before any rank loads.
  const int rank = world.rank();
  Result<DecodedShard> shard = [&]() -> Result<DecodedShard> {
    const CheckpointShard& entry = m.shards[static_cast<std::size_t>(rank)];
    const std::string path = (fs::path(dir) / entry.file).string();
    PLANNER_ASSIGN_OR_RETURN(std::string bytes, read_binary_file(path));
    if (static_cast<std::int64_t>(bytes.size()) != entry.bytes) {
      return Status::invalid_input(path + ": " + std::to_string(bytes.size()) +
                                   " bytes, the manifest says " + std::to_string(entry.bytes) +
                                   " (truncated or overwritten)");
    }
    const std::string sha = store::sha256_hex(bytes);
    if (sha != entry.sha256) {
      return Status::invalid_input(path + ": checksum mismatch: sha256 " + sha +
                                   ", the manifest says " + entry.sha256 + " (corrupt shard)");
    }
    return check_shard(std::move(bytes), path, state, rank, world.size(), m.step,
                       config.plan_sha256);
  }();
  PLANNER_RETURN_IF_ERROR(agree(world, shard.status(), timeout_s, "its checkpoint shard"));
  PLANNER_RETURN_IF_ERROR(apply_shard(*shard, state, device));
  return m.step;
}

}  // namespace planner::exec
