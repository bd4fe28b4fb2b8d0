// Resource limits on what planner reads, in one place.
//
// Every input planner reads (documents, Hugging Face configs, sweep specs, topologies, profiles,
// published runs) passes through read_text_file() and parse_json_text(), which enforce these
// bounds before anything is interpreted, so no input can exhaust memory or time: a file over a
// limit is bad input (exit code 2) naming the file, the JSON pointer and the limit.
//
// The bounds sit far above anything a real document needs (the largest shipped document has 2,057
// values, 25 keys in one object, 6 levels of nesting and an 818-byte string) and far below what
// would cost more than a second or 200 MB to read.
#pragma once

#include <cstddef>
#include <cstdint>

namespace planner::limits {

// Bytes of one input file. Larger files are refused before they are read.
inline constexpr std::size_t kMaxFileBytes = std::size_t{64} << 20;

// Levels of nested arrays and objects (the document itself is level 1).
inline constexpr int kMaxNestingDepth = 64;

// Values (objects, arrays, strings, numbers, booleans, nulls) in one document.
inline constexpr std::int64_t kMaxValues = 1'000'000;

// Keys of one object.
inline constexpr std::int64_t kMaxObjectKeys = 10'000;

// Bytes of one object key.
inline constexpr std::size_t kMaxKeyBytes = 256;

// Bytes of one string value (sources, notes, descriptions).
inline constexpr std::size_t kMaxStringBytes = 64 * 1024;

// Bytes of a name (a model, GPU, topology, plan, profile or cluster name, an alias).
inline constexpr std::size_t kMaxNameBytes = 256;

// Diagnostics kept for one input; the rest are counted ("and 1,234 more problems").
inline constexpr std::size_t kMaxDiagnostics = 200;

// Unknown keys reported one by one per object; the rest are counted in one diagnostic.
inline constexpr std::size_t kMaxUnknownKeysReported = 20;

// Shapes of a model document (and of an imported Hugging Face config): layers, widths (hidden,
// ffn), attention heads, experts, vocabulary and positions.
inline constexpr std::int64_t kMaxLayers = 100'000;
inline constexpr std::int64_t kMaxModelDim = 10'000'000;
inline constexpr std::int64_t kMaxHeads = 1'000'000;
inline constexpr std::int64_t kMaxExperts = 1'000'000;
inline constexpr std::int64_t kMaxVocab = 100'000'000;
inline constexpr std::int64_t kMaxPositions = 1'000'000'000;

// GPUs in one node (a cluster document's gpus_per_node, a topology's node), and devices of any
// kind in one node. Routes between a node's GPUs are kept for every pair, so a node costs
// O(GPUs^2): 1,024 GPUs is above every shipped system (a GB200 NVL72 rack is 72) and builds in
// well under a second.
inline constexpr int kMaxGpusPerNode = 1024;
inline constexpr int kMaxNodeDevices = 4096;

// Nodes of one cluster (a cluster document, a topology, a sweep's largest GPU count).
inline constexpr int kMaxNodes = 1'000'000;

// Parameters of one model (elements). Checked in 128-bit arithmetic when a model is read, so
// every count derived from a valid model (bytes of weights, gradients and optimizer state, FLOPs
// per token) fits in 64 bits: 10^15 is 1,000 x the largest dense model trained so far.
inline constexpr std::int64_t kMaxModelParams = 1'000'000'000'000'000;

// Bytes of one layer's activations for one micro-batch (an upper bound, checked with the plan):
// 2^60, an exbibyte, so sums of the memory estimate's terms stay exact in 64 bits.
inline constexpr std::int64_t kMaxActivationBytes = std::int64_t{1} << 60;

}  // namespace planner::limits
