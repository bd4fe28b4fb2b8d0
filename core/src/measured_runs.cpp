#include "planner/core/measured_runs.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

#include "planner/core/diagnostics.hpp"
#include "planner/core/loaders.hpp"

namespace planner {
namespace {

// A measured sweep is small (vTrain's largest file is under 100 kB); this bounds what a mistaken
// path can make the reader load.
constexpr std::size_t kMaxFileBytes = 16u << 20;

enum Column {
  kGpus,
  kGlobalBatch,
  kMicroBatch,
  kHidden,
  kHeads,
  kLayers,
  kSeq,
  kTp,
  kDp,
  kPp,
  kTimeMs,
  kNumColumns
};

constexpr std::array<std::string_view, kNumColumns> kColumnNames{"gpus",
                                                                 "global batch",
                                                                 "micro batch",
                                                                 "hidden size",
                                                                 "attention heads",
                                                                 "# layers",
                                                                 "sequence length",
                                                                 "tensor parallelism",
                                                                 "data parallelism",
                                                                 "pipeline parallelism",
                                                                 "iteration time (ms)"};

std::string trim(std::string_view s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a])) != 0)
    ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1])) != 0)
    --b;
  return std::string(s.substr(a, b - a));
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::string> split_csv(std::string_view line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == ',') {
      out.push_back(trim(line.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

std::optional<std::int64_t> parse_positive_int(const std::string& s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 1 || v > (std::int64_t{1} << 40)) {
    return std::nullopt;
  }
  return v;
}

std::optional<double> parse_positive_real(const std::string& s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v <= 0) {
    return std::nullopt;
  }
  return v;
}

// The scale-out network of a node, as a "# Network:" line states it.
struct NodeNetwork {
  int nics = kVtrainNicsPerNode;
  double nic_Gbps = kVtrainNicGbps;
  std::string kind{kVtrainNicKind};
  bool stated = false;
};

// "4 x 200 Gb/s ib-hdr" (the kind optional: InfiniBand of that rate, else Ethernet, as a
// topology in numbers takes it); nullopt when it does not read so.
std::optional<NodeNetwork> parse_network(std::string_view text) {
  const std::string t = lower(trim(text));
  const std::size_t x = t.find('x');
  if (x == std::string::npos) return std::nullopt;
  const auto nics = parse_positive_int(trim(std::string_view(t).substr(0, x)));
  std::string rest = trim(std::string_view(t).substr(x + 1));
  const std::size_t unit = rest.find("gb/s");
  if (!nics || *nics > 64 || unit == std::string::npos) return std::nullopt;
  const auto rate = parse_positive_real(trim(std::string_view(rest).substr(0, unit)));
  if (!rate || *rate > 1e5) return std::nullopt;
  NodeNetwork n;
  n.nics = static_cast<int>(*nics);
  n.nic_Gbps = *rate;
  n.kind = trim(std::string_view(rest).substr(unit + 4));
  n.stated = true;
  return n;
}

// The record a vTrain row describes (see the header).
PublishedRun vtrain_record(const std::array<std::int64_t, kNumColumns>& v, double time_ms,
                           const std::string& source, const NodeNetwork& network) {
  PublishedRun r;
  r.id = "L" + std::to_string(v[kLayers]) + "-h" + std::to_string(v[kHidden]) + "-g" +
         std::to_string(v[kGpus]) + "-b" + std::to_string(v[kGlobalBatch]) + "-mb" +
         std::to_string(v[kMicroBatch]) + "-tp" + std::to_string(v[kTp]) + "-dp" +
         std::to_string(v[kDp]) + "-pp" + std::to_string(v[kPp]);
  r.source = source;
  r.stack = SoftwareStack::kMegatronDeepSpeed;
  r.attention = AttentionImpl::kFusedSoftmax;
  r.overlap.grad_reduce = false;
  r.overlap.param_gather = false;
  r.overlap.tp_comm = false;
  r.overlap.p2p = false;
  r.software_source =
      "vTrain's measurement setting: Megatron-DeepSpeed with Megatron's fused scale-mask-softmax "
      "attention, gradients all-reduced after the backward pass (no bucketing), no ZeRO";
  r.model.name = "GPT L" + std::to_string(v[kLayers]) + " h" + std::to_string(v[kHidden]);
  r.model.layers = static_cast<int>(v[kLayers]);
  r.model.hidden = v[kHidden];
  r.model.heads = static_cast<int>(v[kHeads]);
  r.model.ffn_hidden = 4 * v[kHidden];
  r.model.seq_len = v[kSeq];
  r.model.vocab = kVtrainVocab;
  r.hardware.gpu = std::string(kVtrainGpu);
  r.hardware.num_gpus = v[kGpus];
  r.hardware.gpus_per_node = kVtrainGpusPerNode;
  if (v[kGpus] <= kVtrainGpusPerNode) {
    r.hardware.intra_node = "NVLink3 + NVSwitch (one node of 8 A100)";
    r.hardware.inter_node = "n/a (one node)";
  } else {
    // Nodes of 8 joined by the network the file states, else vTrain's multi-node cluster's.
    r.hardware.intra_node = "NVLink3 + NVSwitch (nodes of 8 A100)";
    r.hardware.nics_per_node = network.nics;
    r.hardware.nic_Gbps = network.nic_Gbps;
    r.hardware.nic_kind = network.kind;
    std::string rate = std::to_string(network.nic_Gbps);
    rate.erase(rate.find_last_not_of('0') + 1);
    if (rate.back() == '.') rate.pop_back();
    r.hardware.inter_node =
        std::to_string(network.nics) + " x " + rate + " Gb/s per node" +
        (network.kind.empty() ? "" : " (" + network.kind + ")") +
        (network.stated ? " (the file's \"# Network:\" line)"
                        : " (not in the file: vTrain's multi-node cluster, 800 Gb/s of InfiniBand "
                          "HDR per node; a \"# Network: N x G Gb/s KIND\" line states another)");
  }
  PublishedParallel& p = r.parallel;
  p.tp = static_cast<int>(v[kTp]);
  p.pp = static_cast<int>(v[kPp]);
  p.dp = static_cast<int>(v[kDp]);
  p.cp = 1;
  p.ep = 1;
  p.sp = false;
  p.virtual_stages = 1;
  p.zero_stage = 0;
  p.micro_batch = v[kMicroBatch];
  p.global_batch = v[kGlobalBatch];
  p.recompute = Recompute::kFull;
  r.precision = "fp16 mixed precision";
  r.measured.step_time_s = time_ms / 1000.0;
  r.reliability = Reliability::kA;
  return r;
}

}  // namespace

Result<std::vector<PublishedRun>> parse_vtrain_csv(std::string_view text, std::string_view source) {
  const std::string file(source);
  std::vector<PublishedRun> runs;
  std::vector<std::string> problems;
  auto problem = [&](std::size_t line, const std::string& what) {
    problems.push_back(file + ": line " + std::to_string(line) + ": " + what);
  };
  std::string source_text;
  NodeNetwork network;
  std::array<int, kNumColumns> column_of{};
  bool have_header = false;
  std::size_t width = 0;
  std::map<std::string, std::size_t> first_line_of;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string t = trim(line);
    if (t.empty()) {
      if (end == text.size()) break;
      continue;
    }
    if (t[0] == '#') {
      const std::string body = trim(std::string_view(t).substr(1));
      if (source_text.empty() && lower(body).starts_with("source:")) {
        source_text = trim(std::string_view(body).substr(7));
      } else if (lower(body).starts_with("network:")) {
        const std::string what = trim(std::string_view(body).substr(8));
        if (auto n = parse_network(what)) {
          network = *n;
        } else {
          problem(line_no,
                  "\"# Network:\" expected NICS x GBPS Gb/s [KIND] per node (e.g. \"4 x "
                  "200 Gb/s ib-hdr\"), got \"" +
                      what + "\"");
        }
      }
      continue;
    }
    const std::vector<std::string> cells = split_csv(t);
    if (!have_header) {
      column_of.fill(-1);
      for (std::size_t i = 0; i < cells.size(); ++i) {
        const std::string name = lower(cells[i]);
        const auto it = std::find(kColumnNames.begin(), kColumnNames.end(), name);
        if (it == kColumnNames.end()) {
          problem(line_no, "unknown column \"" + cells[i] + "\" (expected vTrain's columns: " +
                               "GPUs, global batch, micro batch, hidden size, attention heads, "
                               "# layers, sequence length, tensor parallelism, data parallelism, "
                               "pipeline parallelism, iteration time (ms))");
          continue;
        }
        const std::size_t c = static_cast<std::size_t>(it - kColumnNames.begin());
        if (column_of[c] >= 0) problem(line_no, "column \"" + cells[i] + "\" appears twice");
        column_of[c] = static_cast<int>(i);
      }
      for (std::size_t c = 0; c < kNumColumns; ++c) {
        if (column_of[c] < 0) {
          problem(line_no, "missing column \"" + std::string(kColumnNames[c]) + "\"");
        }
      }
      if (!problems.empty()) break;
      have_header = true;
      width = cells.size();
      continue;
    }
    if (cells.size() != width) {
      problem(line_no,
              "expected " + std::to_string(width) + " values, got " + std::to_string(cells.size()));
      continue;
    }
    std::array<std::int64_t, kNumColumns> v{};
    double time_ms = 0;
    bool ok = true;
    for (std::size_t c = 0; c < kNumColumns; ++c) {
      const std::string& cell = cells[static_cast<std::size_t>(column_of[c])];
      if (c == kTimeMs) {
        if (auto x = parse_positive_real(cell)) {
          time_ms = *x;
        } else {
          problem(line_no, "column \"" + std::string(kColumnNames[c]) +
                               "\": expected a positive number, got \"" + cell + "\"");
          ok = false;
        }
      } else if (auto x = parse_positive_int(cell)) {
        v[c] = *x;
      } else {
        problem(line_no, "column \"" + std::string(kColumnNames[c]) +
                             "\": expected a positive integer, got \"" + cell + "\"");
        ok = false;
      }
    }
    if (!ok) continue;
    if (v[kGpus] != v[kTp] * v[kDp] * v[kPp]) {
      problem(line_no, "GPUs (" + std::to_string(v[kGpus]) + ") is not tp x dp x pp (" +
                           std::to_string(v[kTp] * v[kDp] * v[kPp]) + ")");
      continue;
    }
    if (v[kGlobalBatch] % (v[kDp] * v[kMicroBatch]) != 0) {
      problem(line_no, "global batch (" + std::to_string(v[kGlobalBatch]) +
                           ") is not a multiple of data parallelism x micro batch (" +
                           std::to_string(v[kDp] * v[kMicroBatch]) + ")");
      continue;
    }
    if (v[kHidden] % v[kHeads] != 0) {
      problem(line_no, "attention heads (" + std::to_string(v[kHeads]) +
                           ") does not divide hidden size (" + std::to_string(v[kHidden]) + ")");
      continue;
    }
    if (v[kGpus] > kVtrainGpusPerNode && v[kGpus] % kVtrainGpusPerNode != 0) {
      problem(line_no, "GPUs (" + std::to_string(v[kGpus]) +
                           ") beyond one node is not whole nodes of " +
                           std::to_string(kVtrainGpusPerNode));
      continue;
    }
    PublishedRun r = vtrain_record(v, time_ms, source_text.empty() ? file : source_text, network);
    if (auto [it, fresh] = first_line_of.emplace(r.id, line_no); !fresh) {
      problem(line_no,
              "the same configuration as line " + std::to_string(it->second) + " (" + r.id + ")");
      continue;
    }
    r.index = runs.size();
    runs.push_back(std::move(r));
  }
  if (problems.empty() && !have_header) {
    problems.push_back(file + ": no header row (expected vTrain's CSV columns)");
  }
  if (problems.empty() && runs.empty()) problems.push_back(file + ": no measured configurations");
  if (!problems.empty()) {
    std::string msg;
    for (const std::string& p : problems)
      msg += (msg.empty() ? "" : "\n") + p;
    return Status::invalid_input(msg);
  }
  return runs;
}

Result<std::vector<PublishedRun>> load_measured_runs_file(const std::string& path) {
  PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(path, kMaxFileBytes));
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') return parse_published_runs(text, path);
  return parse_vtrain_csv(text, path);
}

}  // namespace planner
