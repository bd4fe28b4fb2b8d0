#include "planner/fit/accuracy.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <span>
#include <tuple>

#include "planner/core/diagnostics.hpp"
#include "planner/core/flops.hpp"
#include "planner/core/model_partition.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/fit/moe_record_model.hpp"
#include "planner/fit/run_predictor.hpp"
#include "planner/sim/fabric.hpp"
#include "planner/topo/cluster_numbers.hpp"
#include "planner/topo/link_kind.hpp"
#include "planner/topo/placement.hpp"

namespace planner::fit {
namespace {

// FlashAttention's first release: Dao et al., "FlashAttention: Fast and Memory-Efficient Exact
// Attention with IO-Awareness", arXiv:2205.14135 (May 2022).
constexpr int kFlashAttentionYear = 2022;
// Megatron-LM's fused scale-mask-softmax kernels (megatron/fused_kernels) came with its 2020
// releases; Megatron-LM v1 (Shoeybi et al., arXiv:1909.08053, September 2019) ran PyTorch's softmax
// and dropout on the materialised scores.
constexpr int kMegatronFusedSoftmaxYear = 2020;
// Megatron-core's --overlap-grad-reduce / --overlap-param-gather (Megatron-LM, 2023); earlier
// Megatron-LM reduced gradients after the backward pass.
constexpr int kMegatronCoreYear = 2023;
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
};

// The GPU family: the name without its memory size ("A100-SXM4-80GB" → "A100-SXM4").
std::string gpu_family(const std::string& name) {
  const std::size_t dash = name.rfind('-');
  if (dash == std::string::npos) return lower(name);
  const std::string tail = lower(name.substr(dash + 1));
  return tail.ends_with("gb") ? lower(name.substr(0, dash)) : lower(name);
}

// Words of a GPU's description that name no part: vendors, product lines, form factors.
constexpr std::string_view kGpuFillerWords[] = {"nvidia", "amd",         "instinct", "tesla", "gpu",
                                                "gpus",   "accelerator", "tensor",   "core"};

// A GPU named in free text ("NVIDIA A100-SXM4-80GB", "AMD Instinct MI300X", "GB200 NVL72", "H100
// 80GB HBM3"): the presets one of its words names (a preset's name or alias, or the start of its
// name: "a100" for A100-SXM4-40GB and -80GB), vendor words dropped; a memory size among the words
// ("40GB") picks that variant, else the smallest of one part's variants.
Result<const GpuSpec*> gpu_from_words(const std::string& text, const std::string& base,
                                      const Catalog& catalog, std::vector<ChosenField>& notes) {
  std::vector<std::string> words;
  std::string cur;
  for (char c : lower(base) + " ") {
    if (c == ' ' || c == ',' || c == '/' || c == ';') {
      if (!cur.empty()) words.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  std::vector<const GpuSpec*> named;
  std::optional<long> memory_gb;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (std::find(std::begin(kGpuFillerWords), std::end(kGpuFillerWords), w) !=
        std::end(kGpuFillerWords)) {
      continue;
    }
    char* end = nullptr;
    const long size = std::strtol(w.c_str(), &end, 10);
    if (end != w.c_str() && size > 0 &&
        (std::string_view(end) == "gb" ||
         (*end == '\0' && i + 1 < words.size() && words[i + 1] == "gb"))) {
      memory_gb = size;
      continue;
    }
    for (const GpuSpec& g : catalog.gpus()) {
      if (!g.matches(w) && !lower(g.name).starts_with(w + "-")) continue;
      if (std::find(named.begin(), named.end(), &g) == named.end()) named.push_back(&g);
    }
  }
  if (memory_gb) {
    std::vector<const GpuSpec*> sized;
    const std::string tag = "-" + std::to_string(*memory_gb) + "gb";
    for (const GpuSpec* g : named) {
      if (lower(g->name).find(tag) != std::string::npos) sized.push_back(g);
    }
    if (!sized.empty()) named = sized;
  }
  if (named.empty()) {
    return Status::not_found("no GPU preset matches \"" + text + "\" (planner gpu list)");
  }
  // A PCIe card is another part than the SXM module of the same name (lower clocks and power, no
  // NVLink switch): only a preset of that form stands for it.
  if (std::find(words.begin(), words.end(), "pcie") != words.end()) {
    std::erase_if(
        named, [](const GpuSpec* g) { return lower(g->name).find("pcie") == std::string::npos; });
    if (named.empty()) {
      return Status::not_found("\"" + text +
                               "\" names a PCIe card, and no GPU preset is one (planner gpu list)");
    }
  }
  const std::string family = gpu_family(named.front()->name);
  for (const GpuSpec* g : named) {
    if (gpu_family(g->name) != family) {
      return Status::not_found("\"" + text + "\" names more than one GPU preset (" +
                               named.front()->name + ", " + g->name + "; planner gpu list)");
    }
  }
  const GpuSpec* best =
      *std::min_element(named.begin(), named.end(),
                        [](const GpuSpec* a, const GpuSpec* b) { return a->hbm < b->hbm; });
  notes.push_back(
      {"gpu", best->name,
       "the record's \"" + text + "\"" +
           (named.size() > 1 ? ": the smallest of the " + std::to_string(named.size()) +
                                   " variants it names, which every published batch fits"
                             : std::string())});
  return best;
}

Result<const GpuSpec*> map_gpu(const std::string& text, const Catalog& catalog,
                               std::vector<ChosenField>& notes) {
  const std::string low = lower(text);
  for (const GpuRefusal& r : kGpuRefusals) {
    if (has_word(low, r.keyword)) return Status::not_found(std::string(r.reason));
  }
  std::string base = strip_remark(text);
  if (base.empty()) return Status::invalid_input("hardware.gpu is not published");
  // "B200 in GB200 NVL72": the GPU as a system holds it, when a GPU preset has the system's name
  // and holds that GPU (GB200-B200-186GB); else the GPU's own name.
  if (const std::size_t in = lower(base).find(" in "); in != std::string::npos) {
    const std::string part = trim(base.substr(0, in));
    const std::string system = trim(base.substr(in + 4));
    const std::string first = system.substr(0, system.find(' '));
    const GpuSpec* g = catalog.find_gpu(first);
    if (g != nullptr && !part.empty() && lower(g->name).find(lower(part)) != std::string::npos) {
      notes.push_back(
          {"gpu", g->name,
           "the record's \"" + text + "\": the " + part + " of the " + first + " preset"});
      return g;
    }
    base = part;
  }
  // "V100-SXM3-32GB (DGX-2H)": a variant of the named part (a preset whose name extends it) that
  // the remark names by one of the variant's aliases, e.g. the DGX-2H's higher-clocked module; an
  // alias the part's own name holds ("A100" of "A100-SXM4") names no variant.
  if (const std::size_t open = low.find('('); open != std::string::npos) {
    const std::string_view remark = std::string_view(low).substr(open);
    const std::string part = lower(base);
    for (const GpuSpec& g : catalog.gpus()) {
      const std::string name = lower(g.name);
      if (name.size() <= part.size() || !name.starts_with(part)) continue;
      for (const std::string& alias : g.aliases) {
        if (has_word(part, lower(alias)) || !has_word(remark, lower(alias))) continue;
        notes.push_back({"gpu", g.name,
                         "the record's \"" + text + "\": its remark names the " + g.name +
                             " variant (alias \"" + alias + "\")"});
        return &g;
      }
    }
  }
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
  if (best == nullptr) return gpu_from_words(text, base, catalog, notes);
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

// The topology a record states in numbers (hardware.nvlink_GBps, nics_per_node, nic_Gbps, ...).
Result<topo::TopologySpec> topology_of_numbers(const PublishedRun& run, const GpuSpec& gpu,
                                               std::int64_t gpus, std::vector<ChosenField>& notes) {
  const PublishedHardware& h = run.hardware;
  if (!h.gpus_per_node) {
    return Status::invalid_input("the hardware numbers need hardware.gpus_per_node");
  }
  topo::ClusterNumbers n;
  n.gpus_per_node = *h.gpus_per_node;
  const int nodes = static_cast<int>((gpus + n.gpus_per_node - 1) / n.gpus_per_node);
  if (h.nvlink_GBps) {
    n.nvlink_GBps = *h.nvlink_GBps;
  } else {
    n.nvlink_GBps = to_GBps(gpu.nvlink_bandwidth);
    notes.push_back({"/hardware/nvlink_GBps", fmt_value(n.nvlink_GBps),
                     "not stated: the " + gpu.name + " preset's NVLink rate per direction"});
  }
  n.nics = h.nics_per_node.value_or(0);
  n.nic_Gbps = h.nic_Gbps.value_or(0);
  if (nodes > 1 && (n.nics == 0 || n.nic_Gbps <= 0)) {
    return Status::invalid_input("the hardware numbers join " + std::to_string(nodes) +
                                 " nodes but do not state hardware.nics_per_node and nic_Gbps");
  }
  if (!h.nic_kind.empty()) {
    const auto kind = parse_enum<topo::LinkKind>(h.nic_kind);
    if (!kind || topo::link_class(*kind) != topo::LinkClass::kNetwork) {
      return Status::invalid_input("hardware.nic_kind \"" + h.nic_kind +
                                   "\" is not a network link kind (ib-edr, ib-hdr, ib-ndr, "
                                   "ib-xdr, ethernet, roce, efa)");
    }
    n.nic_kind = kind;
  }
  if (!h.fabric.empty()) {
    const auto fabric = parse_enum<topo::FabricType>(h.fabric);
    if (!fabric || *fabric == topo::FabricType::kNone) {
      return Status::invalid_input("hardware.fabric \"" + h.fabric +
                                   "\" is not fat-tree, rail-optimized or leaf-spine");
    }
    n.fabric = *fabric;
  } else if (nodes > 1) {
    notes.push_back({"/hardware/fabric", "fat-tree", "not stated: a non-blocking fat-tree"});
  }
  n.oversubscription = h.oversubscription.value_or(1.0);
  PLANNER_ASSIGN_OR_RETURN(topo::TopologySpec spec, topo::topology_from_numbers(n, gpu, nodes));
  notes.push_back({"topology", spec.name, "the record's hardware numbers: " + spec.notes});
  return spec;
}

// A node's scale-out network as free text states it: "8x 200 Gb/s HDR InfiniBand", "4 × 100
// Gbps Omni-Path", "8x50 GB/s" (bytes): NICs, Gb/s each and the link kind its words name
// (InfiniBand of that rate when none).
struct TextNetwork {
  int nics = 0;
  double gbps = 0;
  std::string kind;
};

std::optional<TextNetwork> network_in_text(std::string_view text) {
  const std::string t = lower(text);
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(t[i])) == 0 ||
        (i > 0 && (std::isalnum(static_cast<unsigned char>(t[i - 1])) != 0 || t[i - 1] == '.'))) {
      continue;
    }
    char* end = nullptr;
    const long nics = std::strtol(t.c_str() + i, &end, 10);
    std::size_t at = static_cast<std::size_t>(end - t.c_str());
    while (at < t.size() && t[at] == ' ')
      ++at;
    if (t.compare(at, 1, "x") == 0) {
      at += 1;
    } else if (t.compare(at, 2, "\u00d7") == 0) {
      at += 2;
    } else {
      continue;
    }
    while (at < t.size() && t[at] == ' ')
      ++at;
    const double gbps = std::strtod(t.c_str() + at, &end);
    at = static_cast<std::size_t>(end - t.c_str());
    while (at < t.size() && t[at] == ' ')
      ++at;
    const bool unit = t.compare(at, 4, "gb/s") == 0 || t.compare(at, 4, "gbps") == 0 ||
                      t.compare(at, 5, "gbit/") == 0 || t.compare(at, 2, "g ") == 0;
    if (nics < 1 || nics > 64 || gbps <= 0 || gbps > 1e4 || !unit) continue;
    // "GB/s" (a capital B) is bytes: the Megatron MoE zoo's "InfiniBand 8x50 GB/s" is 400 Gb/s.
    const bool bytes = at + 1 < text.size() && text[at + 1] == 'B';
    TextNetwork n;
    n.nics = static_cast<int>(nics);
    n.gbps = bytes ? 8 * gbps : gbps;
    for (const auto& [word, kind] : {std::pair<std::string_view, std::string_view>{"ndr", "ib-ndr"},
                                     {"hdr", "ib-hdr"},
                                     {"edr", "ib-edr"},
                                     {"xdr", "ib-xdr"},
                                     {"roce", "roce"},
                                     {"efa", "efa"},
                                     {"ethernet", "ethernet"}}) {
      if (has_word(t, word)) {
        n.kind = kind;
        break;
      }
    }
    return n;
  }
  return std::nullopt;
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
    // A rack-scale NVLink domain's GPUs stated as the node's (72 for a GB200 NVL72 of 4-GPU
    // trays) name the same machine.
    const int domain = t.nvlink_domain ? t.gpus_per_node() * t.nvlink_domain->nodes : 0;
    if (run.hardware.gpus_per_node && *run.hardware.gpus_per_node != t.gpus_per_node() &&
        *run.hardware.gpus_per_node != domain) {
      continue;
    }
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
  if (run.hardware.gpus_per_node && *run.hardware.gpus_per_node != spec.gpus_per_node()) {
    reason += "; the record's " + std::to_string(*run.hardware.gpus_per_node) +
              " GPUs per node are its NVLink domain's, whose nodes hold " +
              std::to_string(spec.gpus_per_node());
  }
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

// The families by a word of the model's name, as their Hugging Face configs and papers describe
// them: Llama's layout (DeepSeek LLM, InternLM, Baichuan 7B, Granite, OLMo with a LayerNorm),
// Gemma's GeGLU, MPT's and BLOOM's ALiBi, Falcon's and GPT-NeoX's (Pythia's) rotary GeLU models,
// OPT's learned positions (its ReLU MLP costs what a GeLU one does), Nemotron-4's squared ReLU.
constexpr Family kFamilies[] = {
    {"llama", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"mistral", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"mixtral", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"qwen", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"deepseek", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"internlm", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"baichuan", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"granite", MlpKind::kSwiglu, NormKind::kRmsNorm, PositionEmbedding::kRope, false, false},
    {"olmo", MlpKind::kSwiglu, NormKind::kLayerNorm, PositionEmbedding::kRope, false, false},
    {"gemma", MlpKind::kGeglu, NormKind::kRmsNorm, PositionEmbedding::kRope, true, false},
    {"mpt", MlpKind::kGelu, NormKind::kLayerNorm, PositionEmbedding::kAlibi, true, false},
    {"bloom", MlpKind::kGelu, NormKind::kLayerNorm, PositionEmbedding::kAlibi, true, true},
    {"falcon", MlpKind::kGelu, NormKind::kLayerNorm, PositionEmbedding::kRope, true, false},
    {"pythia", MlpKind::kGelu, NormKind::kLayerNorm, PositionEmbedding::kRope, false, true},
    {"neox", MlpKind::kGelu, NormKind::kLayerNorm, PositionEmbedding::kRope, false, true},
    {"opt", MlpKind::kGelu, NormKind::kLayerNorm, PositionEmbedding::kLearned, true, true},
    {"nemotron", MlpKind::kSquaredRelu, NormKind::kLayerNorm, PositionEmbedding::kRope, false,
     false},
};
constexpr Family kGptFamily{
    "gpt", MlpKind::kGelu, NormKind::kLayerNorm, PositionEmbedding::kLearned, true, true};

// A mixture-of-experts record takes the whole structure of the MoE preset of its shape (routed
// and shared experts, dense first layers, MLA, Mamba mixers, layer pattern); a shape no preset
// has is built from the record's fields and the config keys its notes quote
// (moe_record_model.hpp).
Result<ModelSpec> map_moe_model(const PublishedRun& published, const Catalog& catalog,
                                std::vector<ChosenField>& notes) {
  PublishedRun run = published;
  if (!run.model.expert_ffn_hidden && run.model.ffn_hidden) {
    // Mixtral's and DBRX's experts are each a whole FFN (their configs' intermediate_size).
    run.model.expert_ffn_hidden = run.model.ffn_hidden;
    notes.push_back({"/model/expert_ffn_hidden", std::to_string(*run.model.ffn_hidden),
                     "not published: each expert as wide as the FFN (ffn_hidden), as Mixtral's "
                     "and DBRX's are"});
  }
  const PublishedModel& m = run.model;
  const std::pair<const char*, bool> required[] = {
      {"layers", m.layers.has_value()},   {"hidden", m.hidden.has_value()},
      {"heads", m.heads.has_value()},     {"top_k", m.top_k.has_value()},
      {"seq_len", m.seq_len.has_value()}, {"expert_ffn_hidden", m.expert_ffn_hidden.has_value()}};
  for (const auto& [name, present] : required) {
    if (!present) return Status::invalid_input(std::string("model.") + name + " is not published");
  }
  const std::int64_t shared_ffn = m.shared_experts.value_or(0) * *m.expert_ffn_hidden;
  // The layers, attention and experts of a preset; its dense FFN width, shared experts and
  // vocabulary may be written differently for the same model (Llama 4's intermediate_size is its
  // experts' width, intermediate_size_mlp its dense layers'; a padded vocabulary).
  // A record counts layers as the model's config does: Qwen3-Next's 48 are planner's 96 blocks,
  // a Gated DeltaNet or attention mixer and an MoE each (Nemotron-H's config counts every block).
  auto config_layers = [](const ModelSpec& p) {
    return p.is_hybrid() && p.mamba && p.mamba->delta() ? p.num_layers / 2 : p.num_layers;
  };
  auto same_experts = [&](const ModelSpec& p) {
    return p.is_moe() && config_layers(p) == *m.layers && p.hidden == *m.hidden &&
           p.heads == *m.heads && (!m.kv_heads || p.kv_heads == *m.kv_heads) &&
           p.moe->num_experts == *m.experts && p.moe->top_k == *m.top_k &&
           p.moe->expert_ffn_hidden == *m.expert_ffn_hidden;
  };
  auto differences = [&](const ModelSpec& p) {
    std::string out;
    auto note = [&](std::string_view field, std::int64_t record, std::int64_t kept) {
      out += (out.empty() ? "" : ", ") + std::string(field) + " " + std::to_string(record) +
             " (the preset's " + std::to_string(kept) + ")";
    };
    if (m.ffn_hidden && p.ffn_hidden != *m.ffn_hidden)
      note("ffn_hidden", *m.ffn_hidden, p.ffn_hidden);
    if (m.shared_experts && p.moe->shared_ffn() != shared_ffn) {
      note("shared expert FFN", shared_ffn, p.moe->shared_ffn());
    }
    if (m.vocab && p.vocab != *m.vocab) note("vocab", *m.vocab, p.vocab);
    return out;
  };
  // The preset of the same shape, else the first with the same experts.
  const ModelSpec* preset = nullptr;
  std::string differs;
  for (const ModelSpec& p : catalog.models()) {
    if (!same_experts(p)) continue;
    std::string d = differences(p);
    if (preset == nullptr || (d.empty() && !differs.empty())) {
      preset = &p;
      differs = std::move(d);
    }
    if (differs.empty()) break;
  }
  ModelSpec out;
  if (preset != nullptr) {
    out = *preset;
    if (m.vocab) out.vocab = *m.vocab;
  } else {
    PLANNER_ASSIGN_OR_RETURN(out, moe_model_from_record(run, catalog, notes));
  }
  out.max_seq_len = std::max(out.max_seq_len, *m.seq_len);
  if (out.mtp_layers > 0) {
    // Multi-token prediction is a training option (Megatron's --mtp-num-layers): NVIDIA's tables
    // label DeepSeek-V3 rows "w/ MTP" or "w/o MTP".
    const std::string text = lower(run.notes);
    if (has_word(text, "w/o mtp") || has_word(text, "no mtp") ||
        text.find("no multi-token") != std::string::npos) {
      out.mtp_layers = 0;
      notes.push_back({"/model/mtp_layers", "0", "the record trains without the MTP module"});
    } else if (text.find("w/ mtp") == std::string::npos &&
               text.find("mtp depth") == std::string::npos) {
      notes.push_back({"/model/mtp_layers", std::to_string(out.mtp_layers),
                       "not stated: the model's MTP module as " +
                           (preset != nullptr ? preset->name + " defines it"
                                              : std::string("the record's notes give it"))});
    }
  }
  if (preset == nullptr) return out;
  std::string what = "experts, top-k, expert and shared-expert FFN";
  if (out.moe->first_dense_layers > 0) what += ", first dense layers";
  if (out.mla) what += ", multi-head latent attention";
  if (out.mamba) what += ", Mamba-2 mixers and layer pattern";
  if (out.mtp_layers > 0) what += ", MTP layers";
  what += ", MLP, norm, positions, embeddings";
  if (!m.vocab) what += ", vocabulary";
  notes.push_back(
      {"model structure", preset->name,
       differs.empty()
           ? "the MoE model preset of the same shape (" + what + ")"
           : "the MoE model preset of the same layers, attention and experts (" + what +
                 "); the record's " + differs +
                 " describe the same model otherwise: the preset's structure kept" +
                 (m.vocab && *m.vocab != preset->vocab ? ", the record's vocabulary taken" : "")});
  return out;
}

Result<ModelSpec> map_model(const PublishedRun& run, const Catalog& catalog,
                            std::vector<ChosenField>& notes) {
  const PublishedModel& m = run.model;
  if (m.is_moe()) return map_moe_model(run, catalog, notes);
  const std::pair<const char*, bool> required[] = {{"layers", m.layers.has_value()},
                                                   {"hidden", m.hidden.has_value()},
                                                   {"heads", m.heads.has_value()},
                                                   {"ffn_hidden", m.ffn_hidden.has_value()},
                                                   {"seq_len", m.seq_len.has_value()}};
  for (const auto& [name, present] : required) {
    if (!present) return Status::invalid_input(std::string("model.") + name + " is not published");
  }
  const std::optional<int> noted_head_dim = head_dim_from_notes(m.arch_notes);
  if (!noted_head_dim && *m.hidden % *m.heads != 0) {
    return Status::invalid_input("model.heads (" + std::to_string(*m.heads) +
                                 ") does not divide model.hidden (" + std::to_string(*m.hidden) +
                                 ") and model.arch_notes give no head_dim");
  }
  ModelSpec out;
  out.name = m.name.empty() ? run.id : m.name;
  out.family = "published";
  out.source = run.source;
  out.num_layers = *m.layers;
  out.hidden = *m.hidden;
  out.heads = *m.heads;
  out.kv_heads = m.kv_heads.value_or(*m.heads);
  out.head_dim = noted_head_dim.value_or(static_cast<int>(*m.hidden / *m.heads));
  if (noted_head_dim && *noted_head_dim * *m.heads != *m.hidden) {
    notes.push_back({"/model/head_dim", std::to_string(*noted_head_dim),
                     "from the record's notes: heads narrower or wider than hidden / heads"});
  }
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
      // Short keywords ("opt", "mpt") only as words of their own ("OPT-175B", not "adopted").
      const bool named = candidate.keyword.size() <= kMinToken
                             ? has_word(name, candidate.keyword)
                             : name.find(candidate.keyword) != std::string::npos;
      if (named) {
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

// The training precision a record's text names and, for fp8, the scaling recipe it names first
// (delayed scaling, Megatron-core's default, when it names none).
Result<std::pair<Precision, Fp8Recipe>> map_precision(const std::string& text,
                                                      std::vector<ChosenField>& notes) {
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
  std::string why = "from \"" + text + "\"";
  Fp8Recipe recipe = Fp8Recipe::kDelayed;
  if (p == Precision::kFp8) {
    struct Recipe {
      std::string_view word;
      Fp8Recipe recipe;
      std::string_view name;
    };
    constexpr Recipe kRecipes[] = {
        {"mxfp8", Fp8Recipe::kMxfp8, "MXFP8 (1×32 block scaling)"},
        {"fp8-mx", Fp8Recipe::kMxfp8, "MXFP8 (1×32 block scaling)"},
        {"1x32", Fp8Recipe::kMxfp8, "MXFP8 (1×32 block scaling)"},
        {"32x32", Fp8Recipe::kMxfp8, "MXFP8-type (32×32 block scaling)"},
        {"blockwise", Fp8Recipe::kBlockwise, "blockwise FP8 (1×128 / 128×128 scaling)"},
        {"block-wise", Fp8Recipe::kBlockwise, "blockwise FP8 (1×128 / 128×128 scaling)"},
        {"128x128", Fp8Recipe::kBlockwise, "blockwise FP8 (1×128 / 128×128 scaling)"},
        {"fp8-cs", Fp8Recipe::kCurrent, "FP8 per-tensor current scaling"},
        {"current scaling", Fp8Recipe::kCurrent, "FP8 per-tensor current scaling"},
        {"delayed scaling", Fp8Recipe::kDelayed, "FP8 per-tensor delayed scaling"}};
    std::string named;
    std::size_t first = std::string::npos;
    for (const Recipe& r : kRecipes) {
      const std::size_t at = t.find(r.word);
      if (at < first) {
        first = at;
        named = r.name;
        recipe = r.recipe;
      }
    }
    why = (named.empty() ? std::string("no recipe named: delayed scaling, Megatron-core's default")
                         : named) +
          " (fp8_recipe " + std::string(to_string(recipe)) + "), " + why +
          "; every recipe's GEMMs run at the profile's FP8 rate, its quantization costs its bytes";
  }
  notes.push_back({"precision", std::string(to_string(p)), why});
  return std::pair{p, recipe};
}

// ---- software

std::string stack_text(SoftwareStack s) {
  return std::string(to_string(s));
}

// The stack a record's free text names (see the header), with the reason.
std::pair<SoftwareStack, std::string> infer_stack(const PublishedRun& run) {
  const std::string text = lower(run.source + " " + run.notes + " " + run.precision);
  auto names = [&](std::initializer_list<std::string_view> words) -> std::string {
    for (std::string_view w : words) {
      if (text.find(w) != std::string::npos) return std::string(w);
    }
    return {};
  };
  if (auto w = names({"megatron-deepspeed", "megatron deepspeed"}); !w.empty()) {
    return {SoftwareStack::kMegatronDeepSpeed, "the record's text names " + w};
  }
  // "DeepSpeed + Megatron", "Megatron-LM and DeepSpeed" (MT-NLG, BLOOM): Megatron's model code
  // on DeepSpeed's engine.
  if (!names({"deepspeed"}).empty() && !names({"megatron"}).empty() &&
      names({"megatron-core", "megatron core", "megatron-bridge", "nemo"}).empty()) {
    return {SoftwareStack::kMegatronDeepSpeed,
            "the record's text names both DeepSpeed and Megatron: Megatron's model code on "
            "DeepSpeed's engine"};
  }
  if (auto w = names({"automodel"}); !w.empty()) {
    return {SoftwareStack::kFsdp, "the record's text names " + w +
                                      " (NeMo AutoModel: PyTorch-native FSDP2, not Megatron-core)"};
  }
  if (auto w = names({"megatron-bridge", "nemo"}); !w.empty()) {
    return {SoftwareStack::kNemo, "the record's text names " + w};
  }
  if (auto w = names({"deepspeed"}); !w.empty()) {
    return {SoftwareStack::kDeepSpeed, "the record's text names " + w};
  }
  // Megatron-core's own FSDP (Megatron-FSDP) runs under Megatron-core: named before "fsdp".
  if (auto w = names({"megatron-core", "megatron core", "megatron-fsdp"}); !w.empty()) {
    return {SoftwareStack::kMegatronCore, "the record's text names " + w};
  }
  if (auto w =
          names({"fsdp", "fully sharded data parallel", "torchtitan", "composer", "llm-foundry"});
      !w.empty()) {
    return {SoftwareStack::kFsdp, "the record's text names " + w};
  }
  if (text.find("megatron") != std::string::npos) {
    const std::optional<int> year = run_year(run);
    if (year && *year < kMegatronCoreYear) {
      return {SoftwareStack::kMegatronLm, "the record's text names Megatron and it is dated " +
                                              std::to_string(*year) + ", before Megatron-core (" +
                                              std::to_string(kMegatronCoreYear) + ")"};
    }
    return {SoftwareStack::kMegatronCore,
            "the record's text names Megatron" +
                (year ? ", dated " + std::to_string(*year) : std::string(", undated"))};
  }
  return {SoftwareStack::kMegatronCore, "no framework named: the default stack"};
}

std::pair<AttentionImpl, std::string> infer_attention(const PublishedRun& run,
                                                      SoftwareStack stack) {
  const std::string text = lower(run.source + " " + run.notes);
  for (std::string_view w : {"flashattention", "flash attention", "flash-attention"}) {
    if (text.find(w) != std::string::npos) {
      return {AttentionImpl::kFlash, "the record's text names FlashAttention"};
    }
  }
  if (stack == SoftwareStack::kMegatronLm || stack == SoftwareStack::kMegatronDeepSpeed) {
    if (const std::optional<int> year = run_year(run); year && *year < kMegatronFusedSoftmaxYear) {
      return {AttentionImpl::kUnfused,
              "dated " + std::to_string(*year) +
                  ", before Megatron-LM's fused scale-mask-softmax kernels (" +
                  std::to_string(kMegatronFusedSoftmaxYear) +
                  "): PyTorch's softmax on the materialised scores, as Megatron-LM v1 ran it"};
    }
    return {AttentionImpl::kFusedSoftmax,
            stack_text(stack) +
                " runs Megatron's fused scale-mask-softmax attention (flash "
                "attention was opt-in) and the record names no FlashAttention"};
  }
  const std::optional<int> year = run_year(run);
  if (year && *year < kFlashAttentionYear) {
    return {AttentionImpl::kUnfused,
            "dated " + std::to_string(*year) +
                ", before FlashAttention (2022, arXiv:2205.14135): scores materialised"};
  }
  return {AttentionImpl::kFlash,
          "fused attention kernels, the default of frameworks since FlashAttention (2022)"};
}

std::string bool_text(bool b) {
  return b ? "true" : "false";
}

}  // namespace

SoftwareSetup resolve_software(const PublishedRun& run) {
  SoftwareSetup out;
  out.source = run.software_source;
  const std::string stated_why;  // the record's software_source says why, once
  if (run.stack) {
    out.stack = *run.stack;
    out.fields.push_back({"stack", stack_text(out.stack), true, stated_why});
  } else {
    auto [stack, why] = infer_stack(run);
    out.stack = stack;
    out.fields.push_back({"stack", stack_text(stack), false, why});
  }
  if (run.attention) {
    out.attention = *run.attention;
    out.fields.push_back({"attention", std::string(to_string(out.attention)), true, stated_why});
  } else {
    auto [attention, why] = infer_attention(run, out.stack);
    out.attention = attention;
    out.fields.push_back({"attention", std::string(to_string(attention)), false, why});
  }
  const bool reduces_after_backward = !overlaps_grad_reduce(out.stack);
  const std::string stack_why =
      reduces_after_backward
          ? stack_text(out.stack) +
                (out.stack == SoftwareStack::kMegatronLm
                     ? " all-reduces the gradients after the backward pass (overlap came with "
                       "Megatron-core, 2023)"
                     : " reduces the gradients after the pipeline's last backward pass "
                       "(DeepSpeed PipelineEngine)")
          : stack_text(out.stack) + " overlaps it with the backward pass by default";
  auto resolve = [&](const char* name, const std::optional<bool>& stated,
                     std::optional<bool>& into) {
    if (stated) {
      into = stated;
      out.fields.push_back({std::string("overlap/") + name, bool_text(*stated), true, stated_why});
    } else {
      into = !reduces_after_backward;
      out.fields.push_back({std::string("overlap/") + name, bool_text(*into), false, stack_why});
    }
  };
  resolve("grad_reduce", run.overlap.grad_reduce, out.overlap.grad_reduce);
  resolve("param_gather", run.overlap.param_gather, out.overlap.param_gather);
  if (run.overlap.tp_comm) {
    out.overlap.tp_comm = run.overlap.tp_comm;
    out.fields.push_back({"overlap/tp_comm", bool_text(*run.overlap.tp_comm), true,
                          "where tp > 1 with sequence parallelism"});
  } else {
    out.overlap.tp_comm = overlaps_tp_comm(out.stack);
    out.fields.push_back(
        {"overlap/tp_comm", bool_text(*out.overlap.tp_comm), false,
         *out.overlap.tp_comm
             ? stack_text(out.stack) +
                   "'s performance recipes overlap the sequence-parallel all-gathers and "
                   "reduce-scatters with their GEMMs (Transformer Engine userbuffers), where tp > "
                   "1 with sequence parallelism"
             : "Megatron-core's default (--tp-comm-overlap off)"});
  }
  if (run.overlap.p2p) {
    out.overlap.p2p = run.overlap.p2p;
    out.fields.push_back({"overlap/p2p", bool_text(*run.overlap.p2p), true,
                          *run.overlap.p2p ? "the simulator does not model this overlap yet" : ""});
  }
  return out;
}

Result<PublishedStep> published_step(const PublishedRun& run, const Plan& plan,
                                     FlopConvention convention) {
  const std::int64_t gpus = plan.parallel.world_size();
  const double tokens = static_cast<double>(plan.training.global_batch_size) *
                        static_cast<double>(plan.training.seq_length);
  if (run.measured.step_time_s) {
    return PublishedStep{*run.measured.step_time_s, PublishedBasis::kStepTime, "measured"};
  }
  if (auto step = run.derived_value("step_time_s")) {
    return PublishedStep{*step, PublishedBasis::kDerivedStepTime,
                         run.derived_how.empty() ? "derived by the record" : run.derived_how};
  }
  if (auto rate = run.tokens_per_s()) {
    return PublishedStep{tokens / *rate, PublishedBasis::kTokensPerSecond,
                         "global batch × sequence / " + fmt_value(*rate) + " tokens/s"};
  }
  const std::optional<double> tflops = run.tflops_per_gpu();
  const std::optional<double> mfu = run.mfu();
  if (!tflops && !mfu) {
    return Status::invalid_input("publishes no step time, tokens/s, TFLOP/s per GPU or MFU");
  }
  // MFU without a named convention is MFU as PaLM defined the term (Chowdhery et al. 2022, App. B:
  // 6N + the attention's FLOPs per token, no recompute); a bare TFLOP/s could count either way.
  const bool mfu_as_defined = convention == FlopConvention::kUnknown && mfu.has_value();
  if (mfu_as_defined) convention = FlopConvention::kPalm;
  const std::optional<Flops> flops = published_step_flops(convention, plan);
  if (!flops) {
    return Status::invalid_input(
        "no step time or tokens/s, and " + std::string(tflops ? "TFLOP/s" : "MFU") +
        " under an unknown FLOP convention (\"" + run.flops_convention + "\")");
  }
  std::string conv(to_string(convention));
  if (mfu_as_defined) conv += " (no convention named: MFU as PaLM defined it)";
  if (tflops && !mfu_as_defined) {
    return PublishedStep{step_seconds_from_rate(*flops, FlopRate(*tflops * 1e12), gpus),
                         PublishedBasis::kTflopsPerGpu,
                         conv + " FLOPs per step / (" + fmt_value(*tflops) + " TFLOP/s × " +
                             std::to_string(gpus) + " GPUs)"};
  }
  const Precision peak_precision =
      plan.gpu.supports(Precision::kBf16) ? Precision::kBf16 : Precision::kFp16;
  const FlopRate peak = plan.gpu.peak_for(peak_precision);
  if (peak.raw() <= 0) return Status::invalid_input(plan.gpu.name + " has no 16-bit peak");
  return PublishedStep{
      step_seconds_from_rate(*flops, FlopRate(*mfu * peak.raw()), gpus), PublishedBasis::kMfu,
      conv + " FLOPs per step / (MFU " + fmt_value(*mfu) + " × " + fmt_value(peak.raw() / 1e12) +
          " TFLOP/s " + std::string(to_string(peak_precision)) + " dense peak × " +
          std::to_string(gpus) + " GPUs)"};
}

namespace {

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

// Phrases of benchmarks that force-balance MoE routing (Megatron's
// --moe-router-force-load-balancing, AutoModel's fake balanced gate, NVIDIA's table footnotes).
constexpr std::string_view kForceBalanced[] = {
    "force-balance",        "forcedbalance",      "force_load_balancing",  "force-load-balancing",
    "force load balancing", "fake balanced gate", "forced token balancing"};
// Phrases of records that say their routing was the router's own, which win over the phrases
// above in the notes (the Megatron-MoE model zoo's dropless rows quote the force-balancing flag
// to say how their forced twins were run), not in the record's id.
constexpr std::string_view kUnforced[] = {"unforced", "no force balancing", "no force-balancing",
                                          "not force-balanced", "real router load"};

// ep and etp of an MoE record; tp, cp and dp are set.
Status map_expert_parallel(const PublishedRun& run, RunSetup& s) {
  const PublishedParallel& p = run.parallel;
  ParallelConfig& c = s.plan.parallel;
  const MoeSpec& moe = *s.plan.model.moe;
  if (p.etp) {
    c.etp = *p.etp;
  } else {
    c.etp = c.tp;
    s.assumptions.push_back({"/parallel/etp", std::to_string(c.tp),
                             "not published: tp, Megatron-core's default "
                             "(--expert-tensor-parallel-size unset)"});
  }
  const std::int64_t stage = static_cast<std::int64_t>(c.tp) * c.cp * c.dp;
  if (p.ep) {
    c.ep = *p.ep;
  } else {
    // Chosen like the other null fields: every size the experts and the stage's ranks allow.
    s.ep_null = true;
    for (int e = 1; e <= moe.num_experts; ++e) {
      if (moe.num_experts % e == 0 && stage % (static_cast<std::int64_t>(c.etp) * e) == 0) {
        s.expert_parallel.push_back(e);
      }
    }
    return Status::ok();
  }
  if (moe.num_experts % c.ep != 0) {
    return Status::invalid_input("parallel.ep " + std::to_string(c.ep) + " does not divide the " +
                                 std::to_string(moe.num_experts) + " experts");
  }
  if (stage % (static_cast<std::int64_t>(c.etp) * c.ep) != 0) {
    return Status::invalid_input(
        "parallel.etp × ep (" + std::to_string(c.etp) + " × " + std::to_string(c.ep) +
        ") does not divide the " + std::to_string(stage) +
        " ranks of a pipeline stage (tp·cp·dp): Megatron-core cannot form the expert groups, so "
        "the record's parallel fields contradict each other");
  }
  return Status::ok();
}

// The first number after `key` in `text` ("capacity-factor 1.0" → 1.0), or nullopt.
std::optional<double> number_after(std::string_view text, std::string_view key) {
  const std::size_t at = text.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t i = at + key.size();
  while (i < text.size() && (text[i] == ' ' || text[i] == '=' || text[i] == ':'))
    ++i;
  std::size_t end = i;
  while (end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[end])) != 0 || text[end] == '.'))
    ++end;
  if (end == i) return std::nullopt;
  const std::string digits(text.substr(i, end - i));
  char* stop = nullptr;
  const double v = std::strtod(digits.c_str(), &stop);
  if (stop != digits.c_str() + digits.size()) return std::nullopt;
  return v;
}

// True when `text` names token dropping: `word` not followed by "less" ("token-dropless").
bool names_token_drop(std::string_view text) {
  for (std::string_view word : {"tokendrop", "token drop", "token-drop"}) {
    for (std::size_t at = text.find(word); at != std::string_view::npos;
         at = text.find(word, at + 1)) {
      if (text.substr(at + word.size(), 4) != "less") return true;
    }
  }
  return false;
}

// Token routing of an MoE record (moe_routing.hpp) from its id and notes: token dropping with a
// capacity factor or dropless, and whether the benchmark force-balanced the routing.
void map_routing(const PublishedRun& run, RunSetup& s) {
  ParallelConfig& c = s.plan.parallel;
  const std::string text = lower(run.id + " " + run.notes);
  if (names_token_drop(text)) {
    const std::optional<double> factor = number_after(text, "capacity-factor");
    const bool pad_stated = text.find("pad-expert-input-to-capacity") != std::string::npos;
    c.moe_capacity_factor = factor.value_or(1.0);
    c.moe_pad_to_capacity = pad_stated || !factor;
    std::string why =
        factor ? "the record's --moe-expert-capacity-factor" +
                     std::string(pad_stated ? " and --moe-pad-expert-input-to-capacity" : "")
               : "token dropping, capacity factor not stated: 1.0 padded to capacity, the "
                 "defaults of NeMo's and Megatron-Bridge's token-drop setting "
                 "(moe_expert_capacity_factor 1.0, moe_pad_expert_input_to_capacity)";
    if (c.moe_pad_to_capacity) why += "; every expert computes its capacity, balanced or not";
    s.assumptions.push_back({"routing",
                             "capacity factor " + fmt_value(c.moe_capacity_factor) +
                                 (c.moe_pad_to_capacity ? ", padded" : ""),
                             why});
    return;
  }
  c.moe_capacity_factor = 0;
  auto names = [](std::string_view in, std::span<const std::string_view> words) {
    return std::any_of(words.begin(), words.end(),
                       [&](std::string_view w) { return in.find(w) != std::string_view::npos; });
  };
  // The record's id says it first ("..._forcedbalance"), then its notes.
  const bool forced_id = names(lower(run.id), kForceBalanced);
  const bool unforced = !forced_id && names(text, kUnforced);
  const bool balanced = forced_id || (!unforced && names(text, kForceBalanced));
  c.moe_imbalance = 1.0;
  s.assumptions.push_back(
      {"routing", "dropless, imbalance 1",
       std::string(text.find("dropless") != std::string::npos
                       ? "the record says dropless"
                       : "not stated: dropless, Megatron-core's default "
                         "(--moe-expert-capacity-factor unset)") +
           (balanced   ? "; the benchmark force-balances the routing"
            : unforced ? "; the record's routing is the router's own, not force-balanced, and it "
                         "states no imbalance: modelled balanced, so expect the step to be "
                         "predicted too fast"
                       : "; routing balance not stated: balanced")});
}

// How an MoE record's tokens cross between ranks (ParallelConfig::moe_a2a) from its notes: a
// record naming DeepEP or HybridEP, or describing node-limited dispatch (DeepSeek-V3's own
// kernels: IB to the GPU of the same in-node index, then NVLink), sends them hierarchically; one
// naming the alltoall dispatcher, or naming several dispatchers (a table that lists the options
// without saying which one ran), does not state it, and gets Megatron-core's default.
void map_dispatcher(const PublishedRun& run, RunSetup& s) {
  const std::string text = lower(run.id + " " + run.notes + " " + run.hardware.inter_node);
  auto names = [&](std::initializer_list<std::string_view> words) {
    return std::any_of(words.begin(), words.end(),
                       [&](std::string_view w) { return text.find(w) != std::string::npos; });
  };
  const bool hierarchical = names({"deepep", "hybridep"});
  const bool node_limited = names({"node-limited", "at most 4 nodes"});
  const bool flat = names({"alltoall", "dispatcher a2a"});
  ParallelConfig& c = s.plan.parallel;
  if ((hierarchical || node_limited) && !flat) {
    c.moe_a2a = MoeA2a::kHierarchical;
    s.assumptions.push_back(
        {"/parallel/moe_a2a", "hierarchical",
         hierarchical
             ? "the record's text names " + std::string(names({"deepep"}) ? "DeepEP" : "HybridEP") +
                   ": a token crosses the network once per node, then NVLink"
             : "the record describes node-limited dispatch: a token crosses the network "
               "once per node, to the GPU of the same in-node index, then NVLink"});
    return;
  }
  c.moe_a2a = MoeA2a::kNccl;
  s.assumptions.push_back(
      {"/parallel/moe_a2a", "nccl",
       flat && !hierarchical
           ? "the record names the alltoall dispatcher"
           : std::string(hierarchical ? "the record names several dispatchers without saying "
                                        "which one ran"
                                      : "not stated") +
                 ": Megatron-core's default dispatcher (alltoall, NCCL's all-to-all)"});
}

// Megatron-core's --recompute-modules as a record's notes quote it ("--recompute-granularity
// selective --recompute-modules moe_act layernorm"): the names after the flag, up to the first
// word that is not one. Applies to the selective candidate (published or searched). Where the
// recompute is not published, an MoE run under Megatron-core (or NeMo) searches module sets too.
void map_recompute_modules(const PublishedRun& run, RunSetup& s) {
  const ModelSpec& m = s.plan.model;
  const SoftwareStack stack = s.software.stack;  // resolved before
  const bool megatron_core = stack == SoftwareStack::kMegatronCore || stack == SoftwareStack::kNemo;
  if (s.recompute_null && m.is_moe() && megatron_core &&
      std::find(s.recomputes.begin(), s.recomputes.end(), Recompute::kSelective) !=
          s.recomputes.end()) {
    // Not published: besides the attention core, the module sets MoE recipes combine, from the
    // cheap output-discarding ones (the experts' activation, the norms, MLA's up-projections) to
    // the dense MLPs and shared experts, and the whole MoE block (Megatron-Bridge's and the
    // Megatron-MoE model zoo's recipes, quoted from memory). The fastest that fits is chosen.
    using RM = RecomputeModule;
    const std::uint8_t cheap = module_bit(RM::kMoeAct) | module_bit(RM::kLayernorm) |
                               (m.mla ? module_bit(RM::kMlaUpProj) : 0);
    const std::uint8_t dense = cheap | module_bit(RM::kMlp) | module_bit(RM::kSharedExperts);
    const std::uint8_t block = dense | module_bit(RM::kMoe);
    s.recompute_modules = {kDefaultRecomputeModules, cheap, dense, block};
  }
  constexpr std::string_view kFlag = "--recompute-modules";
  const std::string text = lower(run.notes);
  const std::size_t at = text.find(kFlag);
  if (at == std::string::npos) return;
  std::uint8_t modules = 0;
  std::size_t i = at + kFlag.size();
  while (i < text.size()) {
    const std::size_t start = text.find_first_not_of(" =", i);
    if (start == std::string::npos) break;
    std::size_t end = start;
    while (end < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[end])) != 0 || text[end] == '_')) {
      ++end;
    }
    const auto module =
        parse_enum<RecomputeModule>(std::string_view(text).substr(start, end - start));
    if (!module) break;
    modules |= module_bit(*module);
    i = end;
  }
  const bool selective = std::find(s.recomputes.begin(), s.recomputes.end(),
                                   Recompute::kSelective) != s.recomputes.end();
  if (modules == 0 || !selective) return;
  s.plan.parallel.recompute_modules = modules;
  s.recompute_modules.clear();
  s.assumptions.push_back({"/parallel/recompute_modules", recompute_modules_text(modules),
                           "the record's text quotes Megatron-core's --recompute-modules (the "
                           "parts selective recompute runs again)"});
}

// Sequences per data-parallel replica of a record that publishes a rate but no global batch
// (map_parallel): a micro-batch of up to 8 sequences, as the Megatron-LM papers' runs of that
// time take (arXiv:1909.08053's 8.3B run: 512 sequences on 64 replicas).
constexpr std::int64_t kUnpublishedSequencesPerReplica = 8;

Status map_parallel(const PublishedRun& run, RunSetup& s) {
  const PublishedParallel& p = run.parallel;
  if (!p.tp) return Status::invalid_input("parallel.tp is not published");
  if (!p.pp) return Status::invalid_input("parallel.pp is not published");
  // A record that publishes a rate (TFLOP/s, MFU, tokens/s) and no step time measured the steady
  // state, which without pipelining depends on the batch only through the optimizer step's share
  // of it. Such a record without a global batch (a paper's single-GPU baseline) is simulated with
  // kUnpublishedSequencesPerReplica sequences per data-parallel replica; with pp > 1 the bubble
  // depends on the number of micro-batches, and the record is not modelled.
  const bool rate_only = !run.measured.step_time_s && !run.derived_value("step_time_s");
  if (!p.global_batch && (!rate_only || *p.pp > 1)) {
    return Status::invalid_input("parallel.global_batch is not published" +
                                 std::string(rate_only ? " (needed with pp > 1)" : ""));
  }
  const bool moe = s.plan.model.is_moe();
  if (!moe && p.ep && *p.ep > 1) {
    return Status::invalid_input("parallel.ep " + std::to_string(*p.ep) +
                                 " on a dense model (no model.experts)");
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
  if (moe) PLANNER_RETURN_IF_ERROR(map_expert_parallel(run, s));
  std::int64_t global_batch = 0;
  if (p.global_batch) {
    global_batch = *p.global_batch;
  } else {
    global_batch = kUnpublishedSequencesPerReplica * c.dp;
    s.assumptions.push_back(
        {"/parallel/global_batch", std::to_string(global_batch),
         "not published: " + std::to_string(kUnpublishedSequencesPerReplica) +
             " sequences per data-parallel replica (the record publishes a rate, which with pp "
             "1 depends on the batch only through the optimizer step's share of the step)"});
  }
  s.plan.training.global_batch_size = global_batch;
  const std::int64_t per_replica = global_batch / c.dp;
  if (global_batch % c.dp != 0) {
    return Status::invalid_input("parallel.global_batch (" + std::to_string(global_batch) +
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
  c.first_stage_layers = p.first_stage_layers.value_or(0);
  c.last_stage_layers = p.last_stage_layers.value_or(0);
  s.balanced_split = c.pp > 1 && s.plan.model.num_layers % c.pp != 0 && !p.first_stage_layers &&
                     !p.last_stage_layers;
  if (p.virtual_stages) {
    const int layers = s.plan.model.num_layers;
    const bool stated_split = p.first_stage_layers || p.last_stage_layers;
    auto splits = [&](int v) {
      return layers % (c.pp * v) == 0 ||
             (!stated_split && balanced_stage_split(layers, c.pp, v).has_value());
    };
    int v = *p.virtual_stages;
    if (c.pp > 1 && v > 1 && !splits(v)) {
      if (const auto layout = stated_split
                                  ? std::nullopt
                                  : balanced_layout(layers, c.pp, v, lm_head_units(s.plan.model))) {
        s.layout = *layout;
        s.balanced_split = false;
        s.assumptions.push_back(
            {"/parallel/layout", layout_text(*layout),
             "not published: pp " + std::to_string(c.pp) + " × " + std::to_string(v) +
                 " chunks cannot hold the " + std::to_string(layers) +
                 " layers in equal chunks or an uneven split of the stages; chunks of unequal "
                 "size (Megatron-core's --pipeline-model-parallel-layout \"" +
                 pipeline_layout_text(*layout, s.plan.model.mtp_layers) +
                 "\"), the layers, the embedding and the LM head with the loss shared evenly "
                 "over the virtual stages"});
      } else {
        // The stated first and last stage's layers do not split into the chunks, or there are
        // more chunks than layers.
        int w = v - 1;
        while (w > 1 && !splits(w))
          --w;
        s.assumptions.push_back(
            {"/parallel/virtual_stages", std::to_string(w),
             "published " + std::to_string(v) + ", but pp " + std::to_string(c.pp) + " × " +
                 std::to_string(v) + " chunks cannot hold the " + std::to_string(layers) +
                 " layers" +
                 (stated_split ? " with the stated first and last stage's layers"
                               : ", a layer or more each") +
                 ": the most that split"});
        v = w;
      }
    }
    if (c.pp > 1 && layers % (c.pp * v) != 0 && !stated_split && s.layout.empty()) {
      s.balanced_split = true;
    }
    s.virtual_stages = {v};
  } else if (c.pp == 1) {
    s.virtual_stages = {1};
  } else if (const std::string notes = lower(run.notes);
             notes.find("no interleaving") != std::string::npos ||
             notes.find("vp \"n/a\"") != std::string::npos) {
    // The field is empty because the source's table has no virtual-stage value ("VP n/a" in
    // Megatron-Bridge's tables): the pipeline is not interleaved.
    s.virtual_stages = {1};
    s.assumptions.push_back({"/parallel/virtual_stages", "1",
                             "the record's text says the pipeline is not interleaved"});
  } else {
    s.virtual_stages_null = true;
    s.virtual_stages = {1};
    const int layers = s.plan.model.num_layers;
    // The interleaved schedule where the stack runs it (not DeepSpeed's PipelineEngine): every v
    // whose chunks split the layers, and 2 and 4 chunks a stage where only chunks of unequal size
    // hold them (the balanced layout, as the sweep searches them).
    if (stack_runs(s.software.stack, Schedule::kInterleaved, c.pp)) {
      for (int v = 2; c.pp * v <= layers; ++v) {
        if (layers % (c.pp * v) == 0 ||
            (s.balanced_split && balanced_stage_split(layers, c.pp, v))) {
          s.virtual_stages.push_back(v);
        }
      }
      for (int v : {2, 4}) {
        if (std::find(s.virtual_stages.begin(), s.virtual_stages.end(), v) ==
                s.virtual_stages.end() &&
            c.pp * v <= layers &&
            balanced_layout(layers, c.pp, v, lm_head_units(s.plan.model)).has_value()) {
          s.virtual_stages.push_back(v);
        }
      }
      std::sort(s.virtual_stages.begin(), s.virtual_stages.end());
    }
  }
  std::optional<std::pair<int, int>> split;  // the balanced split, and how it was chosen
  std::string how;
  if (c.pp > 1 && lower(run.notes).find("dualpipe") != std::string::npos) {
    // DeepSeek-V3's DualPipe feeds micro-batches from both ends of the pipeline, rank r holding
    // stages r and pp - 1 - r; it is kept in its cut-in-half form (parallel_config.hpp). A record
    // naming it on an odd pp contradicts itself.
    if (Status folded = fold_dualpipe(c); !folded.is_ok()) {
      return Status::invalid_input("parallel.pp: the record names DualPipe; " + folded.message());
    }
    s.dualpipe = true;
    s.virtual_stages = {2};
    s.virtual_stages_null = false;
    s.balanced_split =
        !p.first_stage_layers && !p.last_stage_layers && s.plan.model.num_layers % c.pp != 0;
    s.assumptions.push_back(
        {"/parallel/schedule", "dualpipe",
         "the record names DualPipe (bidirectional, rank r holding stages r and pp - 1 - r); "
         "planner runs its cut-in-half form: dualpipev on pp / 2 = " +
             std::to_string(c.pp) +
             " stages, each mirrored pair of ranks a data-parallel replica (the same chunks, "
             "bubble and memory a GPU)"});
    if (s.balanced_split) split = balanced_v_split(s.plan.model.num_layers, c.pp);
    how = "the V's balanced split, ranks 0 and pp - 1 holding the embedding and the LM head";
  } else if (s.balanced_split) {
    // The split of the one virtual-stage count when it is known, else of one chunk a stage.
    const int v = s.virtual_stages.size() == 1 ? s.virtual_stages.front() : 1;
    split = balanced_stage_split(s.plan.model.num_layers, c.pp, v);
    how =
        "the balanced split, the embedding and the loss counted as a layer each (with virtual "
        "stages, the split for their number)";
  }
  if (split) {
    s.assumptions.push_back(
        {"/parallel/first_stage_layers",
         std::to_string(split->first) + ", last_stage_layers " + std::to_string(split->second),
         "not published: " + std::string(s.dualpipe ? "pp / 2 " : "pp ") + std::to_string(c.pp) +
             " does not divide the " + std::to_string(s.plan.model.num_layers) + " layers; " +
             how});
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

std::string candidates_text(const RunSetup& s, std::string_view field) {
  if (field == "micro_batch") {
    return join<std::int64_t>(s.micro_batches, show_int);
  }
  if (field == "virtual_stages") return join<int>(s.virtual_stages, show_int32);
  if (field == "sp") return join<bool>(s.sequence_parallel, show_bool);
  if (field == "zero_stage") return join<int>(s.zero_stages, show_int32);
  if (field == "ep") return join<int>(s.expert_parallel, show_int32);
  std::string out;
  for (Recompute r : s.recomputes) {
    if (r != Recompute::kSelective || s.recompute_modules.empty()) {
      out += (out.empty() ? "" : ", ") + show_recompute(r);
      continue;
    }
    for (std::uint8_t modules : s.recompute_modules) {
      out += (out.empty() ? "" : ", ") + std::string("selective (") +
             recompute_modules_text(modules) + ")";
    }
  }
  return out;
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
  add(s.ep_null, "ep", std::to_string(c.ep));
  if (s.recompute_null && counts_recompute(s.convention)) {
    out.chosen.push_back({"/parallel/recompute", "full",
                          "not published: the record's FLOP convention (Megatron eq. (3)) counts "
                          "the forward pass full recomputation repeats"});
  } else {
    std::string value(to_string(c.recompute));
    if (c.recompute == Recompute::kSelective && !s.recompute_modules.empty()) {
      value += " (" + recompute_modules_text(c.recompute_modules) + ")";
    }
    add(s.recompute_null, "recompute", value);
  }
  if (s.virtual_stages_null) {
    out.chosen.push_back({"/parallel/schedule", std::string(to_string(c.schedule)),
                          "follows virtual_stages (interleaved 1F1B when > 1)"});
  }
}

// A job larger than one rack-scale NVLink domain is placed in equal blocks, one per domain
// (topo::place_in_domain_blocks, Slurm's --segment), said in the assumptions.
void place_in_racks(RunSetup& s) {
  const int rack = s.topology.nvlink_domain ? s.topology.nvlink_domain->nodes : 0;
  const int block = topo::place_in_domain_blocks(s.topology, s.nodes);
  if (block == 0) return;
  s.assumptions.push_back(
      {"placement",
       std::to_string(s.nodes / block) + " racks × " + std::to_string(block) + " of " +
           std::to_string(rack) + " nodes",
       "the job's " + std::to_string(s.nodes) +
           " nodes in equal blocks, one per NVLink domain, so that parallel groups do not "
           "straddle racks (Slurm --segment, as NVIDIA places GB200 NVL72 jobs)"});
}

}  // namespace

Result<RunSetup> map_published_run(const PublishedRun& run, const Catalog& catalog,
                                   const topo::TopologyCatalog& topologies,
                                   std::span<const HardwareProfile> profiles) {
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
  PLANNER_ASSIGN_OR_RETURN(const auto precision, map_precision(run.precision, s.assumptions));
  s.plan.training.precision = precision.first;
  s.plan.training.fp8_recipe = precision.second;
  if (!gpu->supports(s.plan.training.precision)) {
    return Status::invalid_input(gpu->name + " has no " +
                                 std::string(to_string(s.plan.training.precision)) + " mode");
  }
  s.plan.training.seq_length = *run.model.seq_len;
  s.plan.training.optimizer = Optimizer::kAdam;
  s.convention = flop_convention_of(run.flops_convention);
  s.source = source_key(run);
  s.software = resolve_software(run);
  PLANNER_RETURN_IF_ERROR(map_parallel(run, s));
  map_recompute_modules(run, s);
  if (s.plan.model.is_moe()) {
    map_routing(run, s);
    if (s.plan.parallel.ep > 1 || !s.expert_parallel.empty()) map_dispatcher(run, s);
  }
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
  if (run.hardware.states_numbers()) {
    PLANNER_ASSIGN_OR_RETURN(
        s.topology, topology_of_numbers(run, *gpu, s.plan.parallel.world_size(), s.assumptions));
  } else {
    PLANNER_ASSIGN_OR_RETURN(s.topology,
                             map_topology(run, *gpu, catalog, topologies, s.assumptions));
    // A network the text states in numbers that the preset's nodes do not have (BLOOM's 4 x 100
    // Gb/s Omni-Path is not a DGX SuperPOD's 8 x 200 Gb/s): a topology of those numbers.
    if (auto stated = network_in_text(run.hardware.inter_node)) {
      const int nics = s.topology.node.count(topo::DeviceKind::kNic);
      const double gbps = to_GBps(s.topology.fabric.host_link.bandwidth) * 8;
      if (nics > 0 && (stated->nics != nics || std::abs(stated->gbps - gbps) > 0.05 * gbps)) {
        PublishedRun numbered = run;
        numbered.hardware.gpus_per_node =
            run.hardware.gpus_per_node.value_or(s.topology.gpus_per_node());
        numbered.hardware.nics_per_node = stated->nics;
        numbered.hardware.nic_Gbps = stated->gbps;
        numbered.hardware.nic_kind = stated->kind;
        s.assumptions.push_back(
            {"/hardware/nics_per_node", std::to_string(stated->nics),
             "the record's inter_node text states " + std::to_string(stated->nics) + " x " +
                 fmt_value(stated->gbps) + " Gb/s per node, unlike " + s.topology.name + "'s " +
                 std::to_string(nics) + " x " + fmt_value(gbps) + " Gb/s"});
        PLANNER_ASSIGN_OR_RETURN(
            s.topology,
            topology_of_numbers(numbered, *gpu, s.plan.parallel.world_size(), s.assumptions));
      }
    }
  }
  const int per_node = s.topology.gpus_per_node();
  s.nodes = static_cast<int>((s.plan.parallel.world_size() + per_node - 1) / per_node);
  place_in_racks(s);
  s.plan.cluster.gpu = gpu->name;
  s.plan.cluster.gpus_per_node = per_node;
  s.plan.cluster.nodes = s.nodes;
  s.plan.cluster.topology = s.topology.name;
  s.plan.name = run.id;
  PLANNER_ASSIGN_OR_RETURN(s.published, published_step(run, s.plan, s.convention));
  s.attention = sim::attention_kernel(s.software.attention);
  s.host = host_costs(s.software.stack);
  s.plan.parallel.overlap_grad_reduce = *s.software.overlap.grad_reduce;
  s.plan.parallel.overlap_param_gather = *s.software.overlap.param_gather;
  s.plan.parallel.async_tp_allreduce = async_tp_allreduce(s.software.stack);
  s.plan.parallel.tp_comm_overlap = *s.software.overlap.tp_comm;
  return s;
}

// The recompute candidates with their module sets.
std::vector<std::pair<Recompute, std::uint8_t>> recompute_choices(const RunSetup& s) {
  std::vector<std::pair<Recompute, std::uint8_t>> out;
  for (Recompute r : s.recomputes) {
    if (r != Recompute::kSelective || s.recompute_modules.empty()) {
      out.emplace_back(r, s.plan.parallel.recompute_modules);
      continue;
    }
    for (std::uint8_t modules : s.recompute_modules)
      out.emplace_back(r, modules);
  }
  return out;
}

std::vector<ParallelConfig> candidate_configs(const RunSetup& s, std::string* first_problem) {
  std::vector<ParallelConfig> out;
  const std::vector<int> eps =
      s.expert_parallel.empty() ? std::vector<int>{s.plan.parallel.ep} : s.expert_parallel;
  for (int ep : eps) {
    for (std::int64_t mb : s.micro_batches) {
      for (int v : s.virtual_stages) {
        for (bool sp : s.sequence_parallel) {
          for (int zero : s.zero_stages) {
            for (const auto& [r, modules] : recompute_choices(s)) {
              ParallelConfig c = s.plan.parallel;
              c.recompute_modules = modules;
              c.ep = ep;
              c.micro_batch_size = mb;
              c.virtual_stages = v;
              c.schedule = s.dualpipe ? Schedule::kDualPipeV
                                      : (v > 1 ? Schedule::kInterleaved : Schedule::k1F1B);
              const int layers = s.plan.model.num_layers;
              if (!s.layout.empty()) {  // for the one published virtual-stage count
                c.layout = s.layout;
              } else if (!s.dualpipe && v > 1 && layers % (c.pp * v) != 0 &&
                         !(s.balanced_split && balanced_stage_split(layers, c.pp, v))) {
                // A virtual-stage count only chunks of unequal size hold.
                auto layout = balanced_layout(layers, c.pp, v, lm_head_units(s.plan.model));
                if (!layout) continue;
                c.layout = std::move(*layout);
              } else if (s.balanced_split) {
                const auto split = s.dualpipe ? balanced_v_split(layers, c.pp)
                                              : balanced_stage_split(layers, c.pp, v);
                if (!split) continue;
                c.first_stage_layers = split->first;
                c.last_stage_layers = split->second;
              }
              c.sequence_parallel = sp;
              // The stack's tensor-parallel overlap needs sequence parallelism.
              c.tp_comm_overlap = s.plan.parallel.tp_comm_overlap && c.can_overlap_tp_comm();
              c.zero_stage = zero;
              c.recompute = r;
              Diagnostics diag;
              check_parallel(s.plan.model, s.plan.training, c, diag);
              if (diag.empty()) {
                out.push_back(std::move(c));
              } else if (first_problem != nullptr && first_problem->empty()) {
                const Diagnostic& d = diag.items().front();
                *first_problem = d.pointer + ": " + d.message;
              }
            }
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
    case FlopConvention::kPalm:
      // MosaicML's "model TFLOP/s" (MFU) counts three passes, recompute or not; PaLM's
      // 6N + 12·L·H·Q·T per token is the same count (H·Q = hidden).
      return mosaicml_flops(static_cast<double>(m.total_params()), batch, seq, m.num_layers,
                            m.hidden, /*recompute=*/false);
    case FlopConvention::kUnknown:
      break;
  }
  return std::nullopt;
}

void fill_accuracy(const RunSetup& s, const RunPrediction& pred, RunAccuracy& acc) {
  acc.candidates = pred.candidates;
  acc.out_of_memory = pred.out_of_memory;
  acc.forced_memory = pred.forced_memory;
  acc.chosen.clear();
  if (!pred.ok) {
    acc.modelled = false;
    acc.skip_reason = pred.failure;
    return;
  }
  const sim::SimResult& r = *pred.result;
  acc.modelled = true;
  acc.skip_reason.clear();
  acc.basis = s.published.basis;
  acc.published_how = s.published.how;
  acc.published = s.published.seconds;
  acc.software = s.software.fields;
  acc.software_source = s.software.source;
  acc.topology = s.topology.name;
  acc.nodes = s.nodes;
  acc.profile = s.profile->name;
  acc.attention = s.attention;
  acc.plan = s.plan;
  acc.plan.parallel = pred.parallel;
  acc.assumptions = s.assumptions;
  acc.step_time_s = to_seconds(r.step_time);
  acc.model_tflops_per_gpu = r.model_tflops_per_gpu;
  acc.mfu = r.mfu;
  acc.bubble_fraction = r.bubble_fraction;
  for (std::size_t b = 0; b < sim::kNumTimeBuckets; ++b)
    acc.exposed_s[b] = to_seconds(r.mean_buckets[b]);
  acc.peak_memory_gib = to_GiB(r.memory.peak);
  acc.predicted = acc.step_time_s;
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

Result<std::vector<MappedRun>> map_runs(std::span<const PublishedRun> runs,
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
  std::vector<MappedRun> out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const PublishedRun& run = runs[i];
    if (!options.only.empty() &&
        std::find(options.only.begin(), options.only.end(), run.id) == options.only.end()) {
      continue;
    }
    MappedRun m;
    m.input = i;
    m.accuracy.id = run.id;
    m.accuracy.source = source_key(run);
    m.accuracy.reliability = run.reliability;
    m.accuracy.gpu_type = run.hardware.gpu;
    auto setup = map_published_run(run, catalog, topologies, options.profiles);
    if (setup) m.accuracy.gpu_type = setup->plan.gpu.name;
    if (setup && !options.host_costs.empty()) {
      PLANNER_ASSIGN_OR_RETURN(setup->host, parse_host_costs(options.host_costs, setup->host));
    }
    if (only_gpu != nullptr && (!setup || setup->plan.gpu.name != only_gpu->name)) continue;
    if (!setup) {
      m.accuracy.skip_reason = setup.status().message();
    } else if (auto prepared = prepare_run(std::move(setup).value()); !prepared) {
      m.accuracy.skip_reason = prepared.status().message();
    } else {
      m.prepared = std::move(prepared).value();
    }
    out.push_back(std::move(m));
  }
  return out;
}

Result<AccuracyReport> evaluate_accuracy(std::span<const PublishedRun> runs,
                                         const AccuracyOptions& options, const Catalog& catalog,
                                         const topo::TopologyCatalog& topologies) {
  PLANNER_ASSIGN_OR_RETURN(std::vector<MappedRun> mapped,
                           map_runs(runs, options, catalog, topologies));
  std::vector<const PreparedRun*> prepared;
  for (const MappedRun& m : mapped) {
    if (m.prepared) prepared.push_back(&*m.prepared);
  }
  const std::vector<RunPrediction> predictions =
      predict_runs(prepared, resolve_threads(options.threads));
  AccuracyReport report;
  std::size_t next = 0;
  for (MappedRun& m : mapped) {
    if (m.prepared) {
      const RunPrediction& pred = predictions[next++];
      report.simulations += pred.candidates + (pred.forced_memory ? 1 : 0);
      fill_accuracy(m.prepared->setup, pred, m.accuracy);
    }
    report.runs.push_back(std::move(m.accuracy));
  }
  summarize_accuracy(report);
  return report;
}

RepeatedConfigurations repeated_configurations(std::span<const RunAccuracy> runs) {
  std::map<std::string, std::vector<const RunAccuracy*>> by_config;
  for (const RunAccuracy& r : runs) {
    if (!r.modelled || !(r.published > 0)) continue;
    Json plan = to_json(r.plan);
    plan.erase("name");  // the record's id
    plan["cluster"].erase("name");
    plan["model"].erase("name");
    plan["model"].erase("source");
    Json key = {{"plan", std::move(plan)},
                {"topology", r.topology},
                {"nodes", r.nodes},
                {"profile", r.profile},
                {"attention", to_string(r.attention)}};
    for (const SoftwareField& f : r.software)
      key[f.field] = f.value;
    by_config[key.dump()].push_back(&r);
  }
  RepeatedConfigurations out;
  double floor_total = 0, model_total = 0;
  for (const auto& [key, group] : by_config) {
    if (group.size() < 2) continue;
    ++out.configurations;
    out.runs += static_cast<int>(group.size());
    // The sum of |t / p - 1| is convex and piecewise linear in t with its corners at the
    // measurements, so its minimum is at one of them.
    auto cost = [&](double t) {
      double c = 0;
      for (const RunAccuracy* r : group)
        c += std::abs(t / r->published - 1);
      return c;
    };
    double best = cost(group.front()->published);
    double lo = group.front()->published, hi = lo;
    for (const RunAccuracy* r : group) {
      best = std::min(best, cost(r->published));
      lo = std::min(lo, r->published);
      hi = std::max(hi, r->published);
      model_total += std::abs(r->error_percent);
    }
    floor_total += 100 * best;
    if (hi / lo > out.widest_ratio) {
      out.widest_ratio = hi / lo;
      out.widest_id = group.front()->id;
    }
  }
  if (out.runs > 0) {
    out.floor_mape_percent = floor_total / out.runs;
    out.model_mape_percent = model_total / out.runs;
  }
  return out;
}

void summarize_accuracy(AccuracyReport& report) {
  report.modelled = report.skipped = 0;
  report.mape_percent = report.bias_percent = 0;
  report.worst_a_grade.reset();
  report.by_gpu_type.clear();
  report.by_source.clear();
  std::map<std::string, GpuTypeAccuracy> by_gpu;
  double total = 0, signed_total = 0;
  for (std::size_t i = 0; i < report.runs.size(); ++i) {
    const RunAccuracy& r = report.runs[i];
    if (!r.modelled) {
      ++report.skipped;
      continue;
    }
    ++report.modelled;
    const double e = std::abs(r.error_percent);
    total += e;
    signed_total += r.error_percent;
    GpuTypeAccuracy& g = by_gpu[r.gpu_type];
    g.gpu_type = r.gpu_type;
    ++g.runs;
    g.mape_percent += e;
    if (g.worst_id.empty() || e > std::abs(g.worst_error_percent)) {
      g.worst_id = r.id;
      g.worst_error_percent = r.error_percent;
    }
    auto src = std::find_if(report.by_source.begin(), report.by_source.end(),
                            [&](const SourceAccuracy& a) { return a.source == r.source; });
    if (src == report.by_source.end()) {
      report.by_source.push_back({r.source, 0, 0, 0});
      src = report.by_source.end() - 1;
    }
    ++src->runs;
    src->mape_percent += e;
    src->bias_percent += r.error_percent;
    if (r.reliability == Reliability::kA &&
        (!report.worst_a_grade || e > std::abs(report.runs[*report.worst_a_grade].error_percent))) {
      report.worst_a_grade = i;
    }
  }
  if (report.modelled > 0) {
    report.mape_percent = total / report.modelled;
    report.bias_percent = signed_total / report.modelled;
  }
  for (auto& [name, g] : by_gpu) {
    g.mape_percent /= g.runs;
    report.by_gpu_type.push_back(g);
  }
  for (SourceAccuracy& a : report.by_source) {
    a.mape_percent /= a.runs;
    a.bias_percent /= a.runs;
  }
  report.repeated = repeated_configurations(report.runs);
}

}  // namespace planner::fit
