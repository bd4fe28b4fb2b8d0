#include "planner/fit/accuracy.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <thread>

#include "planner/core/diagnostics.hpp"
#include "planner/core/flops.hpp"
#include "planner/sim/fabric.hpp"
#include "planner/topo/link_kind.hpp"

namespace planner::fit {
namespace {

// FlashAttention's first release: Dao et al., "FlashAttention: Fast and Memory-Efficient Exact
// Attention with IO-Awareness", arXiv:2205.14135 (May 2022).
constexpr int kFlashAttentionYear = 2022;
// Megatron-core's --overlap-grad-reduce / --overlap-param-gather (Megatron-LM, 2023); earlier
// Megatron-LM reduced gradients after the backward pass.
constexpr int kMegatronOverlapYear = 2023;
// Years a source can plausibly be dated with (arXiv ids such as 2104.04473 are not years).
constexpr int kFirstYear = 2010;
constexpr int kLastYear = 2039;
// Megatron-LM pads the vocabulary to a multiple of 128 × tp (--make-vocab-size-divisible-by).
constexpr std::int64_t kVocabPadding = 128;
// GPT-2's BPE vocabulary as Megatron-LM pads it, for GPT-style records without a vocabulary.
constexpr std::int64_t kGpt2PaddedVocab = 51200;
// Scores of the topology match (see the header).
constexpr int kLinkTechScore = 2;
constexpr int kTokenScore = 1;
// Name tokens shorter than this ("p5", "x1") match too much free text to mean anything.
constexpr std::size_t kMinToken = 3;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool is_alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

// True when `word` occurs in `text` (both lower-case) with no letter or digit on either side.
bool has_word(std::string_view text, std::string_view word) {
  for (std::size_t at = text.find(word); at != std::string_view::npos;
       at = text.find(word, at + 1)) {
    const bool left = at == 0 || !is_alnum(text[at - 1]);
    const std::size_t end = at + word.size();
    const bool right = end >= text.size() || !is_alnum(text[end]);
    if (left && right) return true;
  }
  return false;
}

std::string trim(std::string_view s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a])))
    ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1])))
    --b;
  return std::string(s.substr(a, b - a));
}

// The text before a parenthesised remark: "A100-SXM4 (DGX A100; ...)" → "A100-SXM4".
std::string strip_remark(std::string_view text) {
  return trim(text.substr(0, std::min(text.size(), text.find('('))));
}

std::vector<std::string> tokens(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : lower(text)) {
    if (is_alnum(c)) {
      cur += c;
    } else {
      if (cur.size() >= kMinToken) out.push_back(cur);
      cur.clear();
    }
  }
  if (cur.size() >= kMinToken) out.push_back(cur);
  return out;
}

// The latest year between kFirstYear and kLastYear that `text` names as a number of its own
// ("2021-04-08", "et al. 2019"; not "2104.04473" or the digits of a commit hash).
std::optional<int> latest_year(std::string_view text) {
  std::optional<int> year;
  for (std::size_t i = 0; i + 4 <= text.size(); ++i) {
    if (i > 0 && is_alnum(text[i - 1])) continue;
    bool digits = true;
    for (std::size_t j = i; j < i + 4; ++j)
      digits = digits && std::isdigit(static_cast<unsigned char>(text[j])) != 0;
    if (!digits) continue;
    const std::size_t end = i + 4;
    if (end < text.size() && is_alnum(text[end])) continue;
    if (end + 1 < text.size() && text[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(text[end + 1])) != 0) {
      continue;  // a decimal number or an arXiv id
    }
    const int y = std::stoi(std::string(text.substr(i, 4)));
    if (y >= kFirstYear && y <= kLastYear && (!year || y > *year)) year = y;
  }
  return year;
}

std::string fmt_value(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

template <class T>
std::string join(const std::vector<T>& values, const std::function<std::string(const T&)>& show) {
  std::string out;
  for (const T& v : values)
    out += (out.empty() ? "" : ", ") + show(v);
  return out;
}

// ---- GPU

struct GpuRefusal {
  std::string_view keyword;
  std::string_view reason;
};

// Hardware texts that name parts no preset describes, with the reason planner refuses them.
constexpr GpuRefusal kGpuRefusals[] = {
    {"tpu", "TPUs are not modelled: planner's profiles and topologies describe GPUs"},
    {"dgx-2h",
     "V100-SXM3 in DGX-2H servers runs at 450 W and higher clocks (about 130 TFLOP/s fp16 peak, "
     "reference data hardware_specs.json V100 notes), which no GPU preset or profile describes"},
};

// The GPU family: the name without its memory size ("A100-SXM4-80GB" → "A100-SXM4").
std::string gpu_family(const std::string& name) {
  const std::size_t dash = name.rfind('-');
  if (dash == std::string::npos) return lower(name);
  const std::string tail = lower(name.substr(dash + 1));
  return tail.ends_with("gb") ? lower(name.substr(0, dash)) : lower(name);
}

Result<const GpuSpec*> map_gpu(const std::string& text, const Catalog& catalog,
                               std::vector<ChosenField>& notes) {
  const std::string low = lower(text);
  for (const GpuRefusal& r : kGpuRefusals) {
    if (has_word(low, r.keyword)) return Status::not_found(std::string(r.reason));
  }
  const std::string base = strip_remark(text);
  if (base.empty()) return Status::invalid_input("hardware.gpu is not published");
  if (const GpuSpec* g = catalog.find_gpu(base)) {
    if (g->name != text) notes.push_back({"gpu", g->name, "the record's \"" + text + "\""});
    return g;
  }
  const GpuSpec* best = nullptr;
  int variants = 0;
  for (const GpuSpec& g : catalog.gpus()) {
    if (gpu_family(g.name) != lower(base)) continue;
    ++variants;
    if (best == nullptr || g.hbm < best->hbm) best = &g;
  }
  if (best == nullptr) {
    return Status::not_found("no GPU preset matches \"" + text + "\" (planner gpu list)");
  }
  notes.push_back({"gpu", best->name,
                   "\"" + text + "\" does not state the memory size: the smallest of the " +
                       std::to_string(variants) + " " + base +
                       " variants, which every published batch fits"});
  return best;
}

// ---- topology

std::string_view link_tech_word(topo::LinkKind kind) {
  switch (kind) {
    case topo::LinkKind::kIbEdr:
      return "edr";
    case topo::LinkKind::kIbHdr:
      return "hdr";
    case topo::LinkKind::kIbNdr:
      return "ndr";
    case topo::LinkKind::kIbXdr:
      return "xdr";
    case topo::LinkKind::kRoce:
      return "roce";
    case topo::LinkKind::kEfa:
      return "efa";
    case topo::LinkKind::kEthernet:
      return "ethernet";
    default:
      return {};
  }
}

Result<topo::TopologySpec> map_topology(const PublishedRun& run, const GpuSpec& gpu,
                                        const Catalog& catalog,
                                        const topo::TopologyCatalog& topologies,
                                        std::vector<ChosenField>& notes) {
  const std::string text =
      lower(run.hardware.gpu + " " + run.hardware.intra_node + " " + run.hardware.inter_node);
  const topo::TopologySpec* best = nullptr;
  int best_score = -1;
  std::string best_why;
  for (const topo::TopologySpec& t : topologies.all()) {
    const GpuSpec* tg = catalog.find_gpu(t.gpu);
    if (tg == nullptr) continue;
    const bool exact = tg->name == gpu.name;
    if (!exact && (gpu_family(tg->name) != gpu_family(gpu.name) || tg->arch != gpu.arch)) continue;
    if (run.hardware.gpus_per_node && *run.hardware.gpus_per_node != t.gpus_per_node()) continue;
    int score = 0;
    std::string why;
    const std::string_view tech = link_tech_word(t.fabric.host_link.kind);
    if (!tech.empty() && has_word(text, tech)) {
      score += kLinkTechScore;
      why += std::string(tech);
    }
    std::vector<std::string> words = tokens(t.name);
    for (const std::string& a : t.aliases) {
      for (std::string& w : tokens(a))
        words.push_back(std::move(w));
    }
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    for (const std::string& w : words) {
      if (w == tech || !has_word(text, w)) continue;
      score += kTokenScore;
      why += (why.empty() ? "" : ", ") + w;
    }
    const int total = 2 * score + (exact ? 1 : 0);
    if (total > best_score) {
      best = &t;
      best_score = total;
      best_why = why;
    }
  }
  if (best == nullptr) {
    return Status::not_found(
        "no topology preset has " + gpu.name + " GPUs" +
        (run.hardware.gpus_per_node
             ? " with " + std::to_string(*run.hardware.gpus_per_node) + " per node"
             : std::string()));
  }
  topo::TopologySpec spec = *best;
  std::string reason = best_why.empty() ? "the preset with the record's GPU (the interconnect text "
                                          "names nothing more specific)"
                                        : "the hardware text names " + best_why;
  if (spec.gpu != gpu.name) {
    reason += "; its " + spec.gpu + " replaced by the record's " + gpu.name + " (same node layout)";
    spec.gpu = gpu.name;
  }
  notes.push_back({"topology", best->name, reason});
  return spec;
}

// ---- model

struct Family {
  std::string_view keyword;
  MlpKind mlp;
  NormKind norm;
  PositionEmbedding position;
  bool tied;
  bool bias;
};

constexpr Family kFamilies[] = {
    {"llama", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"mistral", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"mixtral", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"qwen", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"gemma", MlpKind::kGeglu, NormKind::kRmsNorm, PositionEmbedding::kRope, true, false},
    {"mpt", MlpKind::kGelu, NormKind::kLayerNorm, PositionEmbedding::kAlibi, true, false},
};
constexpr Family kGptFamily{
    "gpt", MlpKind::kGelu, NormKind::kLayerNorm, PositionEmbedding::kLearned, true, true};

Result<ModelSpec> map_model(const PublishedRun& run, const Catalog& catalog,
                            std::vector<ChosenField>& notes) {
  const PublishedModel& m = run.model;
  const std::pair<const char*, bool> required[] = {{"layers", m.layers.has_value()},
                                                   {"hidden", m.hidden.has_value()},
                                                   {"heads", m.heads.has_value()},
                                                   {"ffn_hidden", m.ffn_hidden.has_value()},
                                                   {"seq_len", m.seq_len.has_value()}};
  for (const auto& [name, present] : required) {
    if (!present) return Status::invalid_input(std::string("model.") + name + " is not published");
  }
  if (*m.hidden % *m.heads != 0) {
    return Status::invalid_input("model.heads (" + std::to_string(*m.heads) +
                                 ") does not divide model.hidden (" + std::to_string(*m.hidden) +
                                 ")");
  }
  ModelSpec out;
  out.name = m.name.empty() ? run.id : m.name;
  out.family = "published";
  out.source = run.source;
  out.num_layers = *m.layers;
  out.hidden = *m.hidden;
  out.heads = *m.heads;
  out.kv_heads = m.kv_heads.value_or(*m.heads);
  out.head_dim = static_cast<int>(*m.hidden / *m.heads);
  out.ffn_hidden = *m.ffn_hidden;
  out.max_seq_len = *m.seq_len;
  if (!m.kv_heads) {
    notes.push_back(
        {"/model/kv_heads", std::to_string(out.heads), "not published: multi-head attention"});
  }
  if (out.heads % out.kv_heads != 0) {
    return Status::invalid_input("model.kv_heads (" + std::to_string(out.kv_heads) +
                                 ") does not divide model.heads (" + std::to_string(out.heads) +
                                 ")");
  }
  const ModelSpec* preset = nullptr;
  for (const ModelSpec& p : catalog.models()) {
    if (p.is_moe() || p.num_layers != out.num_layers || p.hidden != out.hidden ||
        p.heads != out.heads || p.kv_heads != out.kv_heads || p.ffn_hidden != out.ffn_hidden) {
      continue;
    }
    if (m.vocab && p.vocab != *m.vocab) continue;
    preset = &p;
    break;
  }
  if (preset != nullptr) {
    out.mlp = preset->mlp;
    out.norm = preset->norm;
    out.position_embedding = preset->position_embedding;
    out.tied_embeddings = preset->tied_embeddings;
    out.bias = preset->bias;
    out.vocab = m.vocab.value_or(preset->vocab);
    notes.push_back({"model structure", preset->name,
                     "the model preset of the same shape (MLP, norm, positions, embeddings" +
                         std::string(m.vocab ? ")" : ", vocabulary)")});
  } else {
    const std::string name = lower(m.name);
    Family f = kGptFamily;
    for (const Family& candidate : kFamilies) {
      if (name.find(candidate.keyword) != std::string::npos) {
        f = candidate;
        break;
      }
    }
    out.mlp = f.mlp;
    out.norm = f.norm;
    out.position_embedding = f.position;
    out.tied_embeddings = f.tied;
    out.bias = f.bias;
    notes.push_back({"model structure", std::string(f.keyword) + "-style",
                     std::string(to_string(f.mlp)) + ", " + std::string(to_string(f.norm)) + ", " +
                         std::string(to_string(f.position)) + " positions, " +
                         (f.tied ? "tied" : "untied") + " embeddings" + (f.bias ? ", biases" : "") +
                         " (no preset of this shape; from the name)"});
    if (m.vocab) {
      out.vocab = *m.vocab;
    } else {
      out.vocab = kGpt2PaddedVocab;
      notes.push_back({"/model/vocab", std::to_string(out.vocab),
                       "not published: GPT-2's BPE vocabulary padded as Megatron-LM does"});
    }
  }
  return out;
}

// ---- training

Result<Precision> map_precision(const std::string& text, std::vector<ChosenField>& notes) {
  const std::string t = lower(text);
  Precision p = Precision::kBf16;
  if (t.find("fp8") != std::string::npos) {
    p = Precision::kFp8;
  } else if (t.find("bf16") != std::string::npos) {
    p = Precision::kBf16;
  } else if (t.find("fp16") != std::string::npos || t.find("half") != std::string::npos) {
    p = Precision::kFp16;
  } else if (t.find("tf32") != std::string::npos) {
    p = Precision::kTf32;
  } else if (t.find("fp32") != std::string::npos) {
    p = Precision::kFp32;
  } else {
    return Status::invalid_input("precision \"" + text +
                                 "\" names no fp8, bf16, fp16, tf32 or fp32");
  }
  notes.push_back({"precision", std::string(to_string(p)), "from \"" + text + "\""});
  return p;
}

sim::AttentionKernel map_attention(const PublishedRun& run, std::vector<ChosenField>& notes) {
  const std::string text = lower(run.source + " " + run.notes);
  if (text.find("flashattention") != std::string::npos ||
      text.find("flash attention") != std::string::npos ||
      text.find("flash-attention") != std::string::npos) {
    notes.push_back({"attention", "flash", "the record names FlashAttention"});
    return sim::AttentionKernel::kFlash;
  }
  if (auto year = latest_year(run.source); year && *year < kFlashAttentionYear) {
    notes.push_back({"attention", "unfused",
                     "the source is dated " + std::to_string(*year) +
                         ", before FlashAttention (2022, arXiv:2205.14135): scores materialised"});
    return sim::AttentionKernel::kUnfused;
  }
  notes.push_back({"attention", "flash",
                   "fused attention kernels, the default of frameworks since FlashAttention "
                   "(2022)"});
  return sim::AttentionKernel::kFlash;
}

// Megatron-LM before Megatron-core's --overlap-grad-reduce and --overlap-param-gather (2023)
// reduced the gradients after the whole backward pass (its local DDP's allreduce_gradients(),
// called once forward_backward_func returns) and gathered parameters after the optimizer step:
// a Megatron record dated before 2023 runs that way. Other frameworks (PyTorch DDP, FSDP) and
// later Megatron overlap them with the backward pass.
void map_grad_overlap(const PublishedRun& run, ParallelConfig& parallel,
                      std::vector<ChosenField>& notes) {
  const std::string text = lower(run.source + " " + run.notes);
  if (text.find("megatron") == std::string::npos) return;
  const std::optional<int> year = latest_year(run.source);
  if (!year || *year >= kMegatronOverlapYear) return;
  parallel.overlap_grad_reduce = false;
  parallel.overlap_param_gather = false;
  notes.push_back({"/parallel/overlap_grad_reduce", "false",
                   "Megatron-LM dated " + std::to_string(*year) +
                       ": gradients reduced after the backward pass (overlap came with "
                       "Megatron-core in 2023)"});
}

std::string show_int(const std::int64_t& v) {
  return std::to_string(v);
}
std::string show_int32(const int& v) {
  return std::to_string(v);
}
std::string show_bool(const bool& v) {
  return v ? "true" : "false";
}
std::string show_recompute(const Recompute& r) {
  return std::string(to_string(r));
}

// ---- parallel

Status map_parallel(const PublishedRun& run, RunSetup& s) {
  const PublishedParallel& p = run.parallel;
  if (!p.tp) return Status::invalid_input("parallel.tp is not published");
  if (!p.pp) return Status::invalid_input("parallel.pp is not published");
  if (!p.global_batch) return Status::invalid_input("parallel.global_batch is not published");
  if (p.ep && *p.ep > 1) {
    return Status::invalid_input("parallel.ep " + std::to_string(*p.ep) +
                                 ": the format carries no mixture-of-experts fields");
  }
  ParallelConfig& c = s.plan.parallel;
  c.tp = *p.tp;
  c.pp = *p.pp;
  const std::optional<std::int64_t> gpus = run.hardware.num_gpus;
  if (p.cp) {
    c.cp = *p.cp;
  } else if (p.dp && gpus && *gpus % (static_cast<std::int64_t>(c.tp) * c.pp * *p.dp) == 0) {
    c.cp = static_cast<int>(*gpus / (static_cast<std::int64_t>(c.tp) * c.pp * *p.dp));
    s.assumptions.push_back(
        {"/parallel/cp", std::to_string(c.cp), "not published: num_gpus / (tp·pp·dp)"});
  } else {
    c.cp = 1;
    s.assumptions.push_back({"/parallel/cp", "1", "not published"});
  }
  if (p.dp) {
    c.dp = *p.dp;
  } else if (gpus && *gpus % (static_cast<std::int64_t>(c.tp) * c.pp * c.cp) == 0) {
    c.dp = static_cast<int>(*gpus / (static_cast<std::int64_t>(c.tp) * c.pp * c.cp));
    s.assumptions.push_back(
        {"/parallel/dp", std::to_string(c.dp), "not published: num_gpus / (tp·pp·cp)"});
  } else {
    return Status::invalid_input("parallel.dp is not published and num_gpus does not give it");
  }
  if (gpus && *gpus != c.world_size()) {
    return Status::invalid_input("tp·pp·dp·cp = " + std::to_string(c.world_size()) +
                                 " but hardware.num_gpus is " + std::to_string(*gpus));
  }
  if (!gpus) {
    s.assumptions.push_back(
        {"/hardware/num_gpus", std::to_string(c.world_size()), "not published: tp·pp·dp·cp"});
  }
  c.ep = 1;
  s.plan.training.global_batch_size = *p.global_batch;
  const std::int64_t per_replica = *p.global_batch / c.dp;
  if (*p.global_batch % c.dp != 0) {
    return Status::invalid_input("parallel.global_batch (" + std::to_string(*p.global_batch) +
                                 ") is not a multiple of dp (" + std::to_string(c.dp) + ")");
  }
  // Candidates for the null fields.
  if (p.micro_batch) {
    s.micro_batches = {*p.micro_batch};
  } else {
    s.micro_batch_null = true;
    for (std::int64_t b = 1; b <= per_replica; b *= 2) {
      if (per_replica % b == 0) s.micro_batches.push_back(b);
    }
  }
  if (p.virtual_stages) {
    s.virtual_stages = {*p.virtual_stages};
  } else if (c.pp == 1) {
    s.virtual_stages = {1};
  } else {
    s.virtual_stages_null = true;
    s.virtual_stages = {1};
    const int layers = s.plan.model.num_layers;
    for (int v = 2; c.pp * v <= layers; ++v) {
      if (layers % (c.pp * v) == 0) s.virtual_stages.push_back(v);
    }
  }
  if (p.sp) {
    s.sequence_parallel = {*p.sp && c.tp > 1};
  } else if (c.tp == 1) {
    s.sequence_parallel = {false};
  } else {
    s.sp_null = true;
    s.sequence_parallel = {false, true};
  }
  if (p.zero_stage) {
    s.zero_stages = {*p.zero_stage};
  } else {
    s.zero_null = true;
    s.zero_stages = {0, 1};
  }
  if (p.recompute) {
    s.recomputes = {*p.recompute};
  } else {
    s.recompute_null = true;
    if (counts_recompute(s.convention)) {
      s.recomputes = {Recompute::kFull};
    } else {
      s.recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
    }
  }
  return Status::ok();
}

// ---- evaluation

struct Trial {
  std::size_t record = 0;  // index into the setups
  ParallelConfig parallel;
  bool check_memory = true;
  std::optional<sim::SimResult> result;
  Status status;
  double cost = 0;  // a rough size, to start the largest simulations first
};

void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& fn) {
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1))
      fn(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads && static_cast<std::size_t>(t) < n; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool)
    t.join();
}

struct Prepared {
  std::size_t run = 0;  // index into the input runs
  RunSetup setup;
  std::shared_ptr<const topo::Cluster> cluster;
  std::shared_ptr<const sim::Fabric> fabric;
  std::vector<std::size_t> trials;
};

void run_trial(const Prepared& p, Trial& t) {
  sim::SimInput in;
  in.plan = p.setup.plan;
  in.plan.parallel = t.parallel;
  in.cluster = p.cluster;
  in.profile = p.setup.profile;
  in.fabric = p.fabric;
  in.options.ranks = RankSubset::kOnePerStage;
  in.options.run.keep_op_times = false;
  in.options.run.critical_path_top = 0;
  in.options.run.attention = p.setup.attention;
  in.options.check_memory = t.check_memory;
  auto r = simulate(in);
  if (r) {
    t.result = std::move(r).value();
  } else {
    t.status = r.status();
  }
}

std::string candidates_text(const RunSetup& s, std::string_view field) {
  if (field == "micro_batch") {
    return join<std::int64_t>(s.micro_batches, show_int);
  }
  if (field == "virtual_stages") return join<int>(s.virtual_stages, show_int32);
  if (field == "sp") return join<bool>(s.sequence_parallel, show_bool);
  if (field == "zero_stage") return join<int>(s.zero_stages, show_int32);
  return join<Recompute>(s.recomputes, show_recompute);
}

void describe_choices(const RunSetup& s, const ParallelConfig& c, const std::string& how,
                      RunAccuracy& out) {
  auto add = [&](bool null, const char* field, std::string value) {
    if (!null) return;
    out.chosen.push_back({std::string("/parallel/") + field, std::move(value),
                          "not published: " + how + " of {" + candidates_text(s, field) + "}"});
  };
  add(s.micro_batch_null, "micro_batch", std::to_string(c.micro_batch_size));
  add(s.virtual_stages_null, "virtual_stages", std::to_string(c.virtual_stages));
  add(s.sp_null, "sp", c.sequence_parallel ? "true" : "false");
  add(s.zero_null, "zero_stage", std::to_string(c.zero_stage));
  if (s.recompute_null && counts_recompute(s.convention)) {
    out.chosen.push_back({"/parallel/recompute", "full",
                          "not published: the record's FLOP convention (Megatron eq. (3)) counts "
                          "the forward pass full recomputation repeats"});
  } else {
    add(s.recompute_null, "recompute", std::string(to_string(c.recompute)));
  }
  if (s.virtual_stages_null) {
    out.chosen.push_back({"/parallel/schedule", std::string(to_string(c.schedule)),
                          "follows virtual_stages (interleaved 1F1B when > 1)"});
  }
}

}  // namespace

Result<RunSetup> map_published_run(const PublishedRun& run, const Catalog& catalog,
                                   const topo::TopologyCatalog& topologies,
                                   std::span<const HardwareProfile> profiles) {
  for (const std::string& key : run.unknown_keys) {
    if (key.starts_with("/model/") || key.starts_with("/parallel/") ||
        key.starts_with("/hardware/")) {
      return Status::invalid_input("unknown field " + key +
                                   ": planner cannot tell what it changes");
    }
  }
  RunSetup s;
  PLANNER_ASSIGN_OR_RETURN(const GpuSpec* gpu, map_gpu(run.hardware.gpu, catalog, s.assumptions));
  s.plan.gpu = *gpu;
  const HardwareProfile* profile = nullptr;
  for (const HardwareProfile& p : profiles) {
    if (profile == nullptr && p.describes(*gpu)) profile = &p;
  }
  if (profile == nullptr) profile = builtin_profile_for(*gpu);
  if (profile == nullptr) return Status::not_found("no hardware profile describes " + gpu->name);
  s.profile = std::make_shared<const HardwareProfile>(*profile);
  PLANNER_ASSIGN_OR_RETURN(s.plan.model, map_model(run, catalog, s.assumptions));
  PLANNER_ASSIGN_OR_RETURN(s.plan.training.precision, map_precision(run.precision, s.assumptions));
  if (!gpu->supports(s.plan.training.precision)) {
    return Status::invalid_input(gpu->name + " has no " +
                                 std::string(to_string(s.plan.training.precision)) + " mode");
  }
  s.plan.training.seq_length = *run.model.seq_len;
  s.plan.training.optimizer = Optimizer::kAdam;
  s.convention = flop_convention_of(run.flops_convention);
  if (auto step = run.step_time_s()) {
    s.metric = AccuracyMetric::kStepTime;
    s.published = *step;
  } else if (auto rate = run.tflops_per_gpu()) {
    if (s.convention == FlopConvention::kUnknown) {
      return Status::invalid_input(
          "no step time, and TFLOP/s under an unknown FLOP convention (\"" + run.flops_convention +
          "\")");
    }
    s.metric = AccuracyMetric::kTflopsPerGpu;
    s.published = *rate;
  } else {
    return Status::invalid_input("publishes neither a step time nor TFLOP/s per GPU");
  }
  PLANNER_RETURN_IF_ERROR(map_parallel(run, s));
  ModelSpec& model = s.plan.model;
  const std::int64_t tp = s.plan.parallel.tp;
  if (model.vocab % tp != 0) {
    const std::int64_t unit = kVocabPadding * tp;
    const std::int64_t padded = (model.vocab + unit - 1) / unit * unit;
    s.assumptions.push_back(
        {"/model/vocab", std::to_string(padded),
         std::to_string(model.vocab) + " padded to a multiple of 128·tp as Megatron-LM does"});
    model.vocab = padded;
  }
  PLANNER_ASSIGN_OR_RETURN(s.topology, map_topology(run, *gpu, catalog, topologies, s.assumptions));
  const int per_node = s.topology.gpus_per_node();
  s.nodes = static_cast<int>((s.plan.parallel.world_size() + per_node - 1) / per_node);
  s.plan.cluster.gpu = gpu->name;
  s.plan.cluster.gpus_per_node = per_node;
  s.plan.cluster.nodes = s.nodes;
  s.plan.cluster.topology = s.topology.name;
  s.plan.name = run.id;
  s.attention = map_attention(run, s.assumptions);
  map_grad_overlap(run, s.plan.parallel, s.assumptions);
  return s;
}

std::vector<ParallelConfig> candidate_configs(const RunSetup& s) {
  std::vector<ParallelConfig> out;
  for (std::int64_t mb : s.micro_batches) {
    for (int v : s.virtual_stages) {
      for (bool sp : s.sequence_parallel) {
        for (int zero : s.zero_stages) {
          for (Recompute r : s.recomputes) {
            ParallelConfig c = s.plan.parallel;
            c.micro_batch_size = mb;
            c.virtual_stages = v;
            c.schedule = v > 1 ? Schedule::kInterleaved : Schedule::k1F1B;
            c.sequence_parallel = sp;
            c.zero_stage = zero;
            c.recompute = r;
            Diagnostics diag;
            check_parallel(s.plan.model, s.plan.training, c, diag);
            if (diag.empty()) out.push_back(std::move(c));
          }
        }
      }
    }
  }
  return out;
}

std::optional<Flops> published_step_flops(FlopConvention convention, const Plan& plan) {
  const ModelSpec& m = plan.model;
  const std::int64_t batch = plan.training.global_batch_size;
  const std::int64_t seq = plan.training.seq_length;
  switch (convention) {
    case FlopConvention::kMegatronEq3:
      return megatron_eq3_flops(batch, seq, m.num_layers, m.hidden, m.vocab);
    case FlopConvention::kMegatronModel:
      return megatron_model_flops(m, batch, seq);
    case FlopConvention::kMosaicMl:
      // Its "model TFLOP/s" (MFU) counts three passes, recompute or not.
      return mosaicml_flops(static_cast<double>(m.total_params()), batch, seq, m.num_layers,
                            m.hidden, /*recompute=*/false);
    case FlopConvention::kUnknown:
      break;
  }
  return std::nullopt;
}

Result<AccuracyReport> evaluate_accuracy(std::span<const PublishedRun> runs,
                                         const AccuracyOptions& options, const Catalog& catalog,
                                         const topo::TopologyCatalog& topologies) {
  for (const std::string& id : options.only) {
    if (std::none_of(runs.begin(), runs.end(), [&](const PublishedRun& r) { return r.id == id; })) {
      return Status::invalid_input("--only: no run with id \"" + id + "\"");
    }
  }
  const GpuSpec* only_gpu = nullptr;
  if (!options.gpu_type.empty()) {
    only_gpu = catalog.find_gpu(options.gpu_type);
    if (only_gpu == nullptr) {
      return Status::invalid_input("--gpu-type: no GPU preset \"" + options.gpu_type +
                                   "\" (planner gpu list)");
    }
  }
  AccuracyReport report;
  std::vector<Prepared> prepared;
  std::vector<Trial> trials;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const PublishedRun& run = runs[i];
    if (!options.only.empty() &&
        std::find(options.only.begin(), options.only.end(), run.id) == options.only.end()) {
      continue;
    }
    RunAccuracy acc;
    acc.id = run.id;
    acc.reliability = run.reliability;
    acc.gpu_type = run.hardware.gpu;
    auto setup = map_published_run(run, catalog, topologies, options.profiles);
    if (setup) acc.gpu_type = setup->plan.gpu.name;
    if (only_gpu != nullptr && (!setup || setup->plan.gpu.name != only_gpu->name)) continue;
    if (!setup) {
      acc.skip_reason = setup.status().message();
      report.runs.push_back(std::move(acc));
      continue;
    }
    Prepared p;
    p.run = report.runs.size();
    p.setup = std::move(setup).value();
    std::vector<ParallelConfig> configs = candidate_configs(p.setup);
    if (configs.empty()) {
      acc.skip_reason = "no combination of the candidate values is a valid configuration";
      report.runs.push_back(std::move(acc));
      continue;
    }
    auto cluster = topo::Cluster::build(p.setup.topology, p.setup.nodes);
    if (!cluster) {
      acc.skip_reason = cluster.status().message();
      report.runs.push_back(std::move(acc));
      continue;
    }
    p.cluster = std::make_shared<const topo::Cluster>(std::move(cluster).value());
    p.fabric = std::make_shared<const sim::Fabric>(
        sim::Fabric::build(*p.cluster, *p.setup.profile, /*balanced=*/true));
    for (ParallelConfig& c : configs) {
      Trial t;
      t.record = prepared.size();
      t.cost = static_cast<double>(c.pp) * p.setup.plan.model.num_layers *
               static_cast<double>(p.setup.plan.training.global_batch_size) /
               static_cast<double>(static_cast<std::int64_t>(c.dp) * c.micro_batch_size);
      t.parallel = std::move(c);
      p.trials.push_back(trials.size());
      trials.push_back(std::move(t));
    }
    report.runs.push_back(std::move(acc));
    prepared.push_back(std::move(p));
  }

  const int threads = options.threads > 0
                          ? options.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // Largest first, so the long simulations do not start last.
  std::vector<std::size_t> order(trials.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return trials[a].cost > trials[b].cost; });
  parallel_for(order.size(), threads, [&](std::size_t k) {
    Trial& t = trials[order[k]];
    run_trial(prepared[t.record], t);
  });
  report.simulations = static_cast<int>(trials.size());

  // Records none of whose candidates fit: simulate the one needing the least memory anyway.
  std::vector<Trial> forced;
  for (std::size_t pi = 0; pi < prepared.size(); ++pi) {
    const Prepared& p = prepared[pi];
    const Trial* smallest = nullptr;
    bool any_fits = false;
    for (std::size_t ti : p.trials) {
      const Trial& t = trials[ti];
      if (!t.result) continue;
      if (t.result->simulated) any_fits = true;
      if (smallest == nullptr || t.result->memory.peak < smallest->result->memory.peak) {
        smallest = &t;
      }
    }
    if (any_fits || smallest == nullptr) continue;
    Trial f;
    f.record = pi;
    f.parallel = smallest->parallel;
    f.check_memory = false;
    forced.push_back(std::move(f));
  }
  parallel_for(forced.size(), threads,
               [&](std::size_t k) { run_trial(prepared[forced[k].record], forced[k]); });
  report.simulations += static_cast<int>(forced.size());

  for (std::size_t pi = 0; pi < prepared.size(); ++pi) {
    const Prepared& p = prepared[pi];
    RunAccuracy& acc = report.runs[p.run];
    const RunSetup& s = p.setup;
    const Trial* best = nullptr;
    std::string failure;
    for (std::size_t ti : p.trials) {
      const Trial& t = trials[ti];
      ++acc.candidates;
      if (!t.result) {
        if (failure.empty()) failure = t.status.message();
        continue;
      }
      if (!t.result->simulated) {
        ++acc.out_of_memory;
        continue;
      }
      if (best == nullptr || t.result->step_time < best->result->step_time) best = &t;
    }
    for (const Trial& f : forced) {
      if (f.record == pi && f.result && f.result->simulated) {
        best = &f;
        acc.forced_memory = true;
      }
    }
    if (best == nullptr) {
      acc.skip_reason = failure.empty() ? "no candidate configuration could be simulated" : failure;
      continue;
    }
    const sim::SimResult& r = *best->result;
    acc.modelled = true;
    acc.metric = s.metric;
    acc.published = s.published;
    acc.topology = s.topology.name;
    acc.nodes = s.nodes;
    acc.profile = s.profile->name;
    acc.attention = s.attention;
    acc.plan = s.plan;
    acc.plan.parallel = best->parallel;
    acc.assumptions = s.assumptions;
    acc.step_time_s = to_seconds(r.step_time);
    acc.model_tflops_per_gpu = r.model_tflops_per_gpu;
    acc.mfu = r.mfu;
    acc.bubble_fraction = r.bubble_fraction;
    for (std::size_t b = 0; b < sim::kNumTimeBuckets; ++b)
      acc.exposed_s[b] = to_seconds(r.mean_buckets[b]);
    acc.peak_memory_gib = to_GiB(r.memory.peak);
    if (s.metric == AccuracyMetric::kStepTime) {
      acc.predicted = acc.step_time_s;
    } else {
      const std::optional<Flops> flops = published_step_flops(s.convention, acc.plan);
      acc.predicted = flops->raw() / acc.step_time_s /
                      static_cast<double>(acc.plan.parallel.world_size()) / 1e12;
    }
    acc.error_percent = 100.0 * (acc.predicted - acc.published) / acc.published;
    const std::string how =
        acc.forced_memory
            ? "none of " + std::to_string(acc.candidates) +
                  " candidates fits planner's memory model; simulated the smallest (" +
                  fmt_value(std::round(acc.peak_memory_gib * 10) / 10) + " GiB) anyway,"
            : "the fastest that fits (" + std::to_string(acc.candidates) + " simulated, " +
                  std::to_string(acc.out_of_memory) + " out of memory)";
    describe_choices(s, acc.plan.parallel, how, acc);
  }

  std::map<std::string, GpuTypeAccuracy> by_gpu;
  double total = 0;
  for (std::size_t i = 0; i < report.runs.size(); ++i) {
    const RunAccuracy& r = report.runs[i];
    if (!r.modelled) {
      ++report.skipped;
      continue;
    }
    ++report.modelled;
    const double e = std::abs(r.error_percent);
    total += e;
    GpuTypeAccuracy& g = by_gpu[r.gpu_type];
    g.gpu_type = r.gpu_type;
    ++g.runs;
    g.mape_percent += e;
    if (g.worst_id.empty() || e > std::abs(g.worst_error_percent)) {
      g.worst_id = r.id;
      g.worst_error_percent = r.error_percent;
    }
    if (r.reliability == Reliability::kA &&
        (!report.worst_a_grade || e > std::abs(report.runs[*report.worst_a_grade].error_percent))) {
      report.worst_a_grade = i;
    }
  }
  if (report.modelled > 0) report.mape_percent = total / report.modelled;
  for (auto& [name, g] : by_gpu) {
    g.mape_percent /= g.runs;
    report.by_gpu_type.push_back(g);
  }
  return report;
}

}  // namespace planner::fit
