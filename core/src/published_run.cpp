#include "planner/core/published_run.hpp"

#include <algorithm>
#include <cctype>
#include <type_traits>
#include <unordered_set>

#include "planner/core/diagnostics.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/loaders.hpp"

namespace planner {
namespace {

// A whole file of published runs is small (the reference file is under 100 kB); this bounds what
// a mistaken path can make the reader load.
constexpr std::size_t kMaxFileBytes = 16u << 20;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A field that may be null or missing (both mean "not published").
template <class T, class Range>
void nullable(JsonObject& obj, std::string_view key, std::optional<T>& out, Range range) {
  const Json* v = obj.child(key, Need::kOptional);
  if (v == nullptr || v->is_null()) return;
  T x{};
  if (obj.read(key, x, Need::kRequired, range)) out = x;
}

void nullable(JsonObject& obj, std::string_view key, std::optional<bool>& out) {
  const Json* v = obj.child(key, Need::kOptional);
  if (v == nullptr || v->is_null()) return;
  bool x = false;
  if (obj.read(key, x, Need::kRequired)) out = x;
}

void nullable_text(JsonObject& obj, std::string_view key, std::string& out) {
  const Json* v = obj.child(key, Need::kOptional);
  if (v == nullptr || v->is_null()) return;
  obj.read(key, out, Need::kRequired, /*allow_empty=*/true);
}

constexpr IntRange kPositive{1};
constexpr IntRange kNonNegative{0};
constexpr RealRange kPositiveReal{0.0, 1e300, true};
constexpr RealRange kFraction{0.0, 1.0, true};

void read_model(JsonObject& m, PublishedRun& r) {
  nullable_text(m, "name", r.model.name);
  nullable(m, "params_billion", r.model.params_billion, kPositiveReal);
  nullable(m, "active_params_billion", r.model.active_params_billion, kPositiveReal);
  nullable(m, "layers", r.model.layers, kPositive);
  nullable(m, "hidden", r.model.hidden, kPositive);
  nullable(m, "heads", r.model.heads, kPositive);
  nullable(m, "kv_heads", r.model.kv_heads, kPositive);
  nullable(m, "ffn_hidden", r.model.ffn_hidden, kPositive);
  nullable(m, "seq_len", r.model.seq_len, kPositive);
  nullable(m, "vocab", r.model.vocab, kPositive);
  nullable(m, "experts", r.model.experts, kPositive);
  nullable(m, "top_k", r.model.top_k, kPositive);
  nullable(m, "shared_experts", r.model.shared_experts, kNonNegative);
  nullable(m, "expert_ffn_hidden", r.model.expert_ffn_hidden, kPositive);
  nullable_text(m, "arch_source", r.model.arch_source);
  nullable_text(m, "arch_notes", r.model.arch_notes);
  m.finish();
}

void read_hardware(JsonObject& h, PublishedRun& r) {
  nullable_text(h, "gpu", r.hardware.gpu);
  nullable(h, "num_gpus", r.hardware.num_gpus, kPositive);
  nullable(h, "gpus_per_node", r.hardware.gpus_per_node, kPositive);
  nullable_text(h, "intra_node", r.hardware.intra_node);
  nullable_text(h, "inter_node", r.hardware.inter_node);
  nullable(h, "nvlink_GBps", r.hardware.nvlink_GBps, RealRange{0.0, 1e6});
  nullable(h, "nics_per_node", r.hardware.nics_per_node, kNonNegative);
  nullable(h, "nic_Gbps", r.hardware.nic_Gbps, RealRange{0.0, 1e7, true});
  nullable_text(h, "nic_kind", r.hardware.nic_kind);
  nullable_text(h, "fabric", r.hardware.fabric);
  nullable(h, "oversubscription", r.hardware.oversubscription,
           RealRange{1.0, 1024.0, false, "down:up, e.g. 2 for 2:1"});
  h.finish();
}

void read_parallel(JsonObject& p, PublishedRun& r) {
  PublishedParallel& out = r.parallel;
  nullable(p, "tp", out.tp, kPositive);
  nullable(p, "pp", out.pp, kPositive);
  nullable(p, "dp", out.dp, kPositive);
  nullable(p, "cp", out.cp, kPositive);
  nullable(p, "ep", out.ep, kPositive);
  nullable(p, "etp", out.etp, kPositive);
  nullable(p, "sp", out.sp);
  nullable(p, "virtual_stages", out.virtual_stages, kPositive);
  nullable(p, "first_stage_layers", out.first_stage_layers, kPositive);
  nullable(p, "last_stage_layers", out.last_stage_layers, kPositive);
  nullable(p, "zero_stage", out.zero_stage, IntRange{0, 3});
  nullable(p, "micro_batch", out.micro_batch, kPositive);
  nullable(p, "global_batch", out.global_batch, kPositive);
  const Json* rc = p.child("recompute", Need::kOptional);
  if (rc != nullptr && !rc->is_null()) {
    Recompute v = Recompute::kNone;
    if (p.read_enum("recompute", v, Need::kRequired)) out.recompute = v;
  }
  p.finish();
}

void read_measured(JsonObject& m, PublishedRun& r) {
  PublishedMeasured& out = r.measured;
  nullable(m, "tflops_per_gpu", out.tflops_per_gpu, kPositiveReal);
  nullable(m, "mfu", out.mfu, kFraction);
  nullable(m, "hfu", out.hfu, kFraction);
  nullable(m, "step_time_s", out.step_time_s, kPositiveReal);
  nullable(m, "tokens_per_s", out.tokens_per_s, kPositiveReal);
  nullable(m, "tokens_per_s_per_gpu", out.tokens_per_s_per_gpu, kPositiveReal);
  nullable(m, "memory_gb", out.memory_gb, kPositiveReal);
  nullable(m, "gpu_hours_per_trillion_tokens", out.gpu_hours_per_trillion_tokens, kPositiveReal);
  nullable(m, "pretraining_gpu_hours", out.pretraining_gpu_hours, kPositiveReal);
  nullable(m, "pretraining_tokens", out.pretraining_tokens, kPositiveReal);
  m.finish();
}

// Derived values are open-ended: every number is kept, "how" is the formula; anything else is an
// error.
void read_derived(JsonObject& d, const Json& value, PublishedRun& r) {
  if (!value.is_object()) return;
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string& key = it.key();
    if (key == "how") {
      nullable_text(d, key, r.derived_how);
    } else if (it->is_null()) {
      d.accept(key);
    } else if (it->is_number()) {
      double x = 0;
      if (d.read(key, x, Need::kRequired, RealRange{-1e300})) r.derived.emplace_back(key, x);
    } else {
      d.error(key,
              "expected a number (derived values are numbers; the formula goes in \"how\"), "
              "got " +
                  describe_json(*it));
    }
  }
  d.finish();
}

// "YYYY", "YYYY-MM" or "YYYY-MM-DD" with a valid month and day.
std::optional<PublishedDate> parse_date(std::string_view text) {
  auto digits = [&](std::size_t at, std::size_t n) -> std::optional<int> {
    if (at + n > text.size()) return std::nullopt;
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (std::isdigit(static_cast<unsigned char>(text[i])) == 0) return std::nullopt;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  PublishedDate d;
  const auto year = digits(0, 4);
  if (!year || *year < 1900 || *year > 2100) return std::nullopt;
  d.year = *year;
  if (text.size() == 4) return d;
  const auto month = digits(5, 2);
  if (text[4] != '-' || !month || *month < 1 || *month > 12) return std::nullopt;
  d.month = *month;
  if (text.size() == 7) return d;
  const auto day = digits(8, 2);
  if (text.size() != 10 || text[7] != '-' || !day || *day < 1) return std::nullopt;
  constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (*day > kDays[d.month - 1]) return std::nullopt;
  d.day = *day;
  return d;
}

void nullable_enum_field(JsonObject& obj, std::string_view key, auto& out) {
  const Json* v = obj.child(key, Need::kOptional);
  if (v == nullptr || v->is_null()) return;
  typename std::remove_reference_t<decltype(out)>::value_type e{};
  if (obj.read_enum(key, e, Need::kRequired)) out = e;
}

void read_overlap(JsonObject& o, OverlapSpec& out) {
  nullable(o, "grad_reduce", out.grad_reduce);
  nullable(o, "param_gather", out.param_gather);
  nullable(o, "tp_comm", out.tp_comm);
  nullable(o, "p2p", out.p2p);
  o.finish();
}

// Reads one record into `r`; problems land in `diag` with pointers under `pointer`.
void read_record(const Json& value, const std::string& pointer, PublishedRun& r,
                 Diagnostics& diag) {
  JsonObject rec(value, pointer, diag);
  if (!rec.valid()) return;
  rec.read("id", r.id, Need::kRequired);
  nullable_text(rec, "source", r.source);
  nullable_text(rec, "notes", r.notes);
  nullable_text(rec, "source_id", r.source_id);
  nullable_text(rec, "precision", r.precision);
  nullable_text(rec, "flops_convention", r.flops_convention);
  nullable_text(rec, "software_source", r.software_source);
  if (const Json* date = rec.child("release_date", Need::kOptional);
      date != nullptr && !date->is_null()) {
    std::string text;
    if (rec.read("release_date", text, Need::kRequired)) {
      r.release_date = parse_date(text);
      if (!r.release_date) {
        rec.error("release_date",
                  "expected a date \"YYYY\", \"YYYY-MM\" or \"YYYY-MM-DD\", got \"" + text + "\"");
      }
    }
  }
  nullable_enum_field(rec, "stack", r.stack);
  nullable_enum_field(rec, "attention", r.attention);
  if (const Json* o = rec.child("overlap", Need::kOptional); o != nullptr && !o->is_null()) {
    JsonObject obj(*o, rec.pointer_of("overlap"), diag);
    if (obj.valid()) read_overlap(obj, r.overlap);
  }
  if (const Json* grade = rec.child("reliability", Need::kOptional);
      grade != nullptr && !grade->is_null()) {
    Reliability g = Reliability::kC;
    if (rec.read_enum("reliability", g, Need::kRequired)) r.reliability = g;
  }
  if (const Json* m = rec.child("model", Need::kRequired)) {
    JsonObject obj(*m, rec.pointer_of("model"), diag);
    if (obj.valid()) read_model(obj, r);
  }
  if (const Json* h = rec.child("hardware", Need::kRequired)) {
    JsonObject obj(*h, rec.pointer_of("hardware"), diag);
    if (obj.valid()) read_hardware(obj, r);
  }
  if (const Json* p = rec.child("parallel", Need::kRequired)) {
    JsonObject obj(*p, rec.pointer_of("parallel"), diag);
    if (obj.valid()) read_parallel(obj, r);
  }
  if (const Json* m = rec.child("measured", Need::kOptional); m != nullptr && !m->is_null()) {
    JsonObject obj(*m, rec.pointer_of("measured"), diag);
    if (obj.valid()) read_measured(obj, r);
  }
  if (const Json* d = rec.child("derived", Need::kOptional); d != nullptr && !d->is_null()) {
    JsonObject obj(*d, rec.pointer_of("derived"), diag);
    read_derived(obj, *d, r);
  }
  rec.finish();
}

bool is_alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}
bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// Years a source can plausibly be dated with.
constexpr int kFirstYear = 2010;
constexpr int kLastYear = 2039;

// Conference and journal abbreviations that sources glue a two-digit year to ("SC21",
// "ICML22"), lower-case.
constexpr std::string_view kVenues[] = {
    "sc",      "icml",  "iclr",  "neurips", "nips",   "mlsys", "osdi",  "sosp", "nsdi",   "atc",
    "eurosys", "isca",  "micro", "hpca",    "asplos", "ppopp", "ipdps", "hpdc", "socc",   "acl",
    "emnlp",   "naacl", "cvpr",  "iccv",    "eccv",   "aaai",  "kdd",   "vldb", "sigmod", "ics"};

}  // namespace

std::optional<double> PublishedRun::derived_value(std::string_view key) const {
  for (const auto& [k, v] : derived) {
    if (k == key) return v;
  }
  return std::nullopt;
}

std::optional<double> PublishedRun::step_time_s() const {
  if (measured.step_time_s) return measured.step_time_s;
  return derived_value("step_time_s");
}

std::optional<double> PublishedRun::tflops_per_gpu() const {
  if (measured.tflops_per_gpu) return measured.tflops_per_gpu;
  return derived_value("tflops_per_gpu");
}

std::optional<double> PublishedRun::mfu() const {
  if (measured.mfu) return measured.mfu;
  return derived_value("mfu");
}

std::optional<double> PublishedRun::tokens_per_s() const {
  if (measured.tokens_per_s) return measured.tokens_per_s;
  if (auto v = derived_value("tokens_per_s")) return v;
  std::optional<double> per_gpu = measured.tokens_per_s_per_gpu;
  if (!per_gpu) per_gpu = derived_value("tokens_per_s_per_gpu");
  if (per_gpu && hardware.num_gpus) return *per_gpu * static_cast<double>(*hardware.num_gpus);
  return std::nullopt;
}

std::optional<int> year_in_text(std::string_view text) {
  std::optional<int> year;
  auto take = [&](int y) {
    if (y >= kFirstYear && y <= kLastYear && (!year || y > *year)) year = y;
  };
  const std::string low = lower(text);
  const std::size_t n = low.size();
  for (std::size_t i = 0; i < n; ++i) {
    // arXiv identifiers: arXiv:YYMM.NNNN(N) and arxiv.org/abs/YYMM.NNNNN.
    if (low.compare(i, 6, "arxiv:") == 0 || low.compare(i, 10, "arxiv.org/") == 0) {
      std::size_t j = low.find_first_of("0123456789", i);
      if (j != std::string::npos && j + 9 <= n && j - i <= 16) {
        bool id = low[j + 4] == '.';
        for (std::size_t k = j; k < j + 4; ++k)
          id = id && is_digit(low[k]);
        for (std::size_t k = j + 5; k < j + 9; ++k)
          id = id && is_digit(low[k]);
        const int month = (low[j + 2] - '0') * 10 + (low[j + 3] - '0');
        if (id && month >= 1 && month <= 12) take(2000 + (low[j] - '0') * 10 + (low[j + 1] - '0'));
      }
    }
    if (!is_digit(low[i]) || (i > 0 && is_digit(low[i - 1]))) continue;
    std::size_t end = i;
    while (end < n && is_digit(low[end]))
      ++end;
    const std::size_t len = end - i;
    const bool alnum_after = end < n && is_alnum(low[end]);
    // A decimal number, a version or an arXiv id: "24.07", "2104.04473".
    const bool decimal = (end + 1 < n && low[end] == '.' && is_digit(low[end + 1])) ||
                         (i >= 2 && low[i - 1] == '.' && is_digit(low[i - 2]));
    if (alnum_after || decimal) continue;
    const int value = std::stoi(low.substr(i, std::min<std::size_t>(len, 9)));
    if (len == 4 && (i == 0 || !is_alnum(low[i - 1]))) {
      take(value);
    } else if (len == 2) {
      // 'YY and ’YY (the right single quotation mark is three bytes in UTF-8).
      const bool apostrophe =
          (i >= 1 && low[i - 1] == '\'') || (i >= 3 && low.compare(i - 3, 3, "\u2019") == 0);
      bool venue = false;
      if (!apostrophe && i > 0 && std::isalpha(static_cast<unsigned char>(low[i - 1])) != 0) {
        std::size_t start = i;
        while (start > 0 && std::isalpha(static_cast<unsigned char>(low[start - 1])) != 0)
          --start;
        const std::string_view word(low.data() + start, i - start);
        venue = std::find(std::begin(kVenues), std::end(kVenues), word) != std::end(kVenues);
      }
      if (apostrophe || venue) take(2000 + value);
    }
  }
  return year;
}

std::optional<int> run_year(const PublishedRun& run) {
  if (run.release_date) return run.release_date->year;
  return year_in_text(run.source);
}

std::string source_key(const PublishedRun& run) {
  if (!run.source_id.empty()) return run.source_id;
  const std::string& text = run.source;
  const std::string low = lower(text);
  // An arXiv identifier.
  for (std::size_t at = low.find("arxiv"); at != std::string::npos;
       at = low.find("arxiv", at + 1)) {
    const std::size_t j = low.find_first_of("0123456789", at);
    if (j == std::string::npos || j - at > 16 || j + 9 > low.size() || low[j + 4] != '.') continue;
    std::size_t end = j + 5;
    while (end < low.size() && is_digit(low[end]))
      ++end;
    if (end - (j + 5) >= 4) return "arXiv:" + text.substr(j, end - j);
  }
  // A repository reference: owner/repo, then a path (before or after "@commit:").
  auto word_char = [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; };
  for (std::size_t slash = text.find('/'); slash != std::string::npos;
       slash = text.find('/', slash + 1)) {
    std::size_t a = slash;
    while (a > 0 && word_char(text[a - 1]))
      --a;
    std::size_t b = slash + 1;
    while (b < text.size() && word_char(text[b]))
      ++b;
    if (a == slash || b == slash + 1 || (a > 0 && text[a - 1] != ' ' && text[a - 1] != '(')) {
      continue;
    }
    std::string key = text.substr(a, b - a);
    std::size_t rest = b;
    const bool pinned = rest < text.size() && text[rest] == '@';
    if (pinned) {
      // owner/repo@commit:path or owner/repo@commit path
      std::size_t c = rest + 1;
      while (c < text.size() && is_alnum(text[c]))
        ++c;
      if (c == text.size() || (text[c] != ':' && text[c] != ' ')) return key;
      rest = c + 1;
    } else if (rest < text.size() && text[rest] == ' ') {
      ++rest;
    } else {
      continue;
    }
    std::size_t end = rest;
    while (end < text.size() && text[end] != ' ' && text[end] != '@' && text[end] != ',' &&
           text[end] != ';' && text[end] != '(')
      ++end;
    const std::string path = text.substr(rest, end - rest);
    // "owner/repo path": a path has a slash or a file extension ("TFLOP/s per GPU" is no
    // repository).
    if (path.find('/') == std::string::npos && path.find('.') == std::string::npos) {
      if (pinned) return key;
      continue;
    }
    return key + "/" + path;
  }
  const std::size_t cut = text.find_first_of(",;(");
  std::string head = text.substr(0, cut);
  while (!head.empty() && std::isspace(static_cast<unsigned char>(head.back())) != 0)
    head.pop_back();
  std::size_t start = 0;
  while (start < head.size() && std::isspace(static_cast<unsigned char>(head[start])) != 0)
    ++start;
  head = head.substr(start);
  return head.empty() ? run.id : head;
}

Result<std::vector<PublishedRun>> parse_published_runs(std::string_view text,
                                                       std::string_view source) {
  Diagnostics diag{std::string(source)};
  std::optional<Json> doc = parse_json_text(text, diag);
  if (!doc) return diag.to_status();
  if (!doc->is_array()) {
    diag.add("", "expected an array of published runs, got " + describe_json(*doc));
    return diag.to_status();
  }
  std::vector<PublishedRun> runs;
  std::unordered_set<std::string> ids;
  for (std::size_t i = 0; i < doc->size(); ++i) {
    PublishedRun r;
    r.index = i;
    Diagnostics local;
    const std::string pointer = "/" + std::to_string(i);
    read_record((*doc)[i], pointer, r, local);
    const std::string who = r.id.empty() ? std::string() : " (run " + r.id + ")";
    for (const Diagnostic& d : local.items())
      diag.add(d.pointer, d.message + who);
    if (!r.id.empty() && !ids.insert(r.id).second) {
      diag.add(pointer + "/id", "duplicate run id \"" + r.id + "\"");
    }
    runs.push_back(std::move(r));
  }
  PLANNER_RETURN_IF_ERROR(diag.to_status());
  return runs;
}

Result<std::vector<PublishedRun>> load_published_runs_file(const std::string& path) {
  PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(path, kMaxFileBytes));
  return parse_published_runs(text, path);
}

FlopConvention flop_convention_of(std::string_view text) {
  const std::string t = lower(text);
  auto has = [&](std::string_view word) { return t.find(word) != std::string::npos; };
  if (has("mosaicml")) return FlopConvention::kMosaicMl;
  if (has("megatron") &&
      (has("eq.(3)") || has("eq. (3)") || has("eq (3)") || has("2019 accounting"))) {
    return FlopConvention::kMegatronEq3;
  }
  if ((has("nemo") || has("megatron")) && has("model")) return FlopConvention::kMegatronModel;
  if (has("palm") || has("llama 3") || has("llama3") || has("6n") || has("6*n") || has("6·n")) {
    return FlopConvention::kPalm;
  }
  return FlopConvention::kUnknown;
}

bool counts_recompute(FlopConvention convention) {
  return convention == FlopConvention::kMegatronEq3;
}

}  // namespace planner
