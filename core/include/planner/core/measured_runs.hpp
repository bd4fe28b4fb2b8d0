// Files of measured training runs, read into published-run records (published_run.hpp) so that
// `planner accuracy` and its ranking report treat every format alike:
//   * a published-runs JSON array (the reference data's published_runs.json format);
//   * a measured sweep in vTrain's CSV format (VIA-Research/vTrain data/ground_truth_*.csv, the
//     reference data's vtrain_calibration.csv): '#' lines are comments, the first of them
//     "# Source: TEXT" naming the source; a header row with the columns
//       GPUs, global batch, micro batch, hidden size, attention heads, # layers,
//       sequence length, tensor parallelism, data parallelism, pipeline parallelism,
//       iteration time (ms)
//     in any order (names compared ignoring case and surrounding spaces; every one required, no
//     others), then one row per measured configuration.
// A vTrain row becomes a record in vTrain's setting (from vTrain's configs and code; see
// tests/data/reference/PROVENANCE.md): a GPT (GeLU MLP of 4 × hidden, LayerNorm, learned
// positions, multi-head attention, GPT-2 vocabulary 50257), fp16 mixed precision, full activation
// recompute, 1F1B (no virtual stages), no sequence parallelism, no ZeRO, Megatron-DeepSpeed
// (stack megatron-deepspeed, fused-softmax attention, gradients all-reduced after the backward
// pass, no other overlap), on "A100-SXM4" GPUs (the memory size is not stated) in nodes of 8:
// one node up to 8 GPUs; beyond, whole nodes joined by the network a "# Network: NICS x GBPS Gb/s
// [KIND]" comment line states per node (e.g. "# Network: 4 x 200 Gb/s ib-hdr"), else by vTrain's
// multi-node cluster's, 4 x 200 Gb/s InfiniBand HDR (800 Gb/s per node; vTrain's multi-node
// measurements are held out of the reference data, this is how they are read);
// measured.step_time_s = iteration time / 1000. Its id is
// "L<layers>-h<hidden>-g<GPUs>-b<global batch>-mb<micro batch>-tp<tp>-dp<dp>-pp<pp>".
// Errors name the file, the line and the column; rows whose GPUs differ from tp·dp·pp, or whose
// global batch is not a multiple of dp × micro batch, or more than 8 GPUs that are not whole
// nodes, and a "# Network:" line that does not read as above, are errors.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "planner/core/published_run.hpp"
#include "planner/core/status.hpp"

namespace planner {

// vTrain's setting for the records a vTrain CSV becomes.
inline constexpr std::int64_t kVtrainVocab = 50257;
inline constexpr int kVtrainGpusPerNode = 8;
inline constexpr std::string_view kVtrainGpu = "A100-SXM4";
inline constexpr int kVtrainNicsPerNode = 4;  // vTrain's multi-node cluster: 800 Gb/s per node
inline constexpr double kVtrainNicGbps = 200;
inline constexpr std::string_view kVtrainNicKind = "ib-hdr";

Result<std::vector<PublishedRun>> parse_vtrain_csv(std::string_view text, std::string_view source);

// Reads a file in either format: a JSON array (first non-blank character '[') or a vTrain CSV.
Result<std::vector<PublishedRun>> load_measured_runs_file(const std::string& path);

}  // namespace planner
