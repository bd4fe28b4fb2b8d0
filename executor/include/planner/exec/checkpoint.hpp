// Checkpoints of an executed run: every K steps each rank writes its shard of the training state,
// and `--resume` continues from the newest complete checkpoint with exactly the numbers an
// uninterrupted run would have produced.
//
// What a shard holds (one per rank): for every parameter group of the rank's ModelState
// (model_state.hpp) its parameters (the padded flat buffer) and optimizer state (first moment or
// SGD momentum, and Adam's second moment, over the rank's ZeRO shard), and Adam's step counter.
// Gradients are not saved: the optimizer op zeroes them at the end of every step. The data
// position is the step index (the synthetic token stream and the initialisation are counter-based,
// synthetic_data.hpp; nothing else draws random numbers), kept in the manifest.
//
// Layout on disk (DIR is the --checkpoint-dir; on several nodes a shared file system):
//   DIR/step-00000012/rank-00003.shard   rank 3's shard after 12 completed steps
//   DIR/step-00000012/manifest.json      written last, by rank 0, once every shard is on disk
// Every file is written to a temporary name, flushed to disk and renamed, so a checkpoint is
// complete exactly when its manifest exists; a run killed while writing one leaves a step
// directory without a manifest, which resume ignores.
//
// The manifest (a JSON document, kind "checkpoint", schema_version 1):
//   {step, world_size, plan_sha256, plan, shards: [{rank, file, bytes, sha256}]}
// step counts completed steps (training resumes with step `step`, 0-based); plan_sha256 is the
// SHA-256 of the plan's canonical JSON (plan_fingerprint).
//
// A shard file: a fixed header (magic "PLNRCKPT", format version, rank, world size, step, Adam's
// step count, the plan's SHA-256, the parameter groups' layout) followed by the buffers as raw
// native-endian floats. Resume refuses, with the reason and the file, a checkpoint of another plan
// or world size, a shard whose size or SHA-256 differs from the manifest, and a shard whose header
// or group layout does not match the rank's state (e.g. another bucket size). Every rank checks
// its shard completely before any rank changes its state, so a refused checkpoint is never half
// loaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/plan.hpp"
#include "planner/core/status.hpp"
#include "planner/exec/backend.hpp"
#include "planner/exec/model_state.hpp"

namespace planner::exec {

inline constexpr std::string_view kCheckpointManifestName = "manifest.json";

struct CheckpointShard {
  int rank = 0;
  std::string file;  // relative to the step directory
  std::int64_t bytes = 0;
  std::string sha256;  // hex
};

struct CheckpointManifest {
  std::int64_t step = 0;  // completed steps; training resumes with this step index
  int world_size = 0;
  std::string plan_sha256;
  std::string plan;                     // the plan's name (for messages)
  std::vector<CheckpointShard> shards;  // index = rank
};

// Where checkpoints go and what they belong to.
struct CheckpointConfig {
  std::string dir;
  std::string plan_sha256;  // plan_fingerprint(plan)
  std::string plan_name;
};

// SHA-256 (hex) of the plan's canonical JSON: equal for equal plans, whatever their file's layout.
std::string plan_fingerprint(const Plan& plan);

// DIR/step-00000012.
std::string checkpoint_step_dir(const std::string& dir, std::int64_t step);
std::string checkpoint_shard_name(int rank);

std::string manifest_to_json(const CheckpointManifest& manifest);
// Strict: unknown keys, a wrong kind or schema_version, or shards not numbered 0..world_size-1
// are errors naming `source` and the JSON pointer.
Result<CheckpointManifest> parse_manifest(std::string_view text, std::string_view source);

// The step directory of the newest checkpoint in `dir` that has a manifest; nullopt when there is
// none (a missing `dir` included). Step directories without a manifest (interrupted) are skipped.
Result<std::optional<std::string>> latest_checkpoint(const std::string& dir);

// This rank's shard of `state` (see the header). Reads the buffers back from the device.
Result<std::string> encode_shard(const ModelState& state, Device& device, int rank, int world_size,
                                 std::int64_t step, std::string_view plan_sha256);

// A shard checked against a rank's state, ready to apply.
struct DecodedShard {
  std::int64_t step = 0;
  std::int64_t optimizer_steps = 0;
  std::string bytes;  // the whole file; the buffers start at data_offset
  std::size_t data_offset = 0;
};

// Checks `bytes` (read from `source`) against this rank's `state` and the expected rank, world
// size, step and plan; changes nothing. kInvalidInput naming `source` and what differs.
Result<DecodedShard> check_shard(std::string bytes, std::string_view source,
                                 const ModelState& state, int rank, int world_size,
                                 std::int64_t step, std::string_view plan_sha256);
// Copies a checked shard into `state`.
Status apply_shard(const DecodedShard& shard, ModelState& state, Device& device);

// Writes `bytes` to `path` atomically and durably: a temporary file in the same directory, fsync,
// rename, fsync of the directory.
Status write_file_durably(const std::string& path, std::string_view bytes);

// Collective over `world`: every rank writes its shard of `state` for `step` completed steps, then
// rank 0 writes the manifest. Every rank returns the same outcome (an error names the rank that
// failed); control messages wait at most `timeout_s`.
Status save_checkpoint(World& world, const ModelState& state, Device& device,
                       const CheckpointConfig& config, std::int64_t step, double timeout_s);

// Collective over `world`: rank 0 picks the newest complete checkpoint in config.dir and checks
// its manifest (plan, world size); every rank reads and checks its shard; only when every rank's
// shard is good does every rank load it. Returns the step to resume with. Errors (the same on
// every rank): kNotFound when there is no complete checkpoint, kInvalidInput for a mismatched or
// corrupt one (naming the file and the rank).
Result<std::int64_t> load_checkpoint(World& world, ModelState& state, Device& device,
                                     const CheckpointConfig& config, double timeout_s);

}  // namespace planner::exec
