#include "planner/core/published_run.hpp"

#include <algorithm>
#include <cctype>
#include <initializer_list>
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

// Marks the keys of `value` that are not in `known` as understood and lists them (as pointers
// relative to the record) in `unknown`.
void collect_unknown(JsonObject& obj, const Json& value,
                     std::initializer_list<std::string_view> known, const std::string& prefix,
                     std::vector<std::string>& unknown) {
  if (!value.is_object()) return;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    unknown.push_back(prefix + "/" + json_pointer_escape(it.key()));
    obj.accept(it.key());
  }
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

void read_model(JsonObject& m, const Json& value, PublishedRun& r) {
  collect_unknown(m, value,
                  {"name", "params_billion", "layers", "hidden", "heads", "kv_heads", "ffn_hidden",
                   "seq_len", "vocab"},
                  "/model", r.unknown_keys);
  nullable_text(m, "name", r.model.name);
  nullable(m, "params_billion", r.model.params_billion, kPositiveReal);
  nullable(m, "layers", r.model.layers, kPositive);
  nullable(m, "hidden", r.model.hidden, kPositive);
  nullable(m, "heads", r.model.heads, kPositive);
  nullable(m, "kv_heads", r.model.kv_heads, kPositive);
  nullable(m, "ffn_hidden", r.model.ffn_hidden, kPositive);
  nullable(m, "seq_len", r.model.seq_len, kPositive);
  nullable(m, "vocab", r.model.vocab, kPositive);
  m.finish();
}

void read_hardware(JsonObject& h, const Json& value, PublishedRun& r) {
  collect_unknown(h, value, {"gpu", "num_gpus", "gpus_per_node", "intra_node", "inter_node"},
                  "/hardware", r.unknown_keys);
  nullable_text(h, "gpu", r.hardware.gpu);
  nullable(h, "num_gpus", r.hardware.num_gpus, kPositive);
  nullable(h, "gpus_per_node", r.hardware.gpus_per_node, kPositive);
  nullable_text(h, "intra_node", r.hardware.intra_node);
  nullable_text(h, "inter_node", r.hardware.inter_node);
  h.finish();
}

void read_parallel(JsonObject& p, const Json& value, PublishedRun& r) {
  collect_unknown(p, value,
                  {"tp", "pp", "dp", "cp", "ep", "sp", "virtual_stages", "zero_stage",
                   "micro_batch", "global_batch", "recompute"},
                  "/parallel", r.unknown_keys);
  PublishedParallel& out = r.parallel;
  nullable(p, "tp", out.tp, kPositive);
  nullable(p, "pp", out.pp, kPositive);
  nullable(p, "dp", out.dp, kPositive);
  nullable(p, "cp", out.cp, kPositive);
  nullable(p, "ep", out.ep, kPositive);
  nullable(p, "sp", out.sp);
  nullable(p, "virtual_stages", out.virtual_stages, kPositive);
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

void read_measured(JsonObject& m, const Json& value, PublishedRun& r) {
  collect_unknown(m, value,
                  {"tflops_per_gpu", "mfu", "hfu", "step_time_s", "tokens_per_s",
                   "tokens_per_s_per_gpu", "memory_gb"},
                  "/measured", r.unknown_keys);
  PublishedMeasured& out = r.measured;
  nullable(m, "tflops_per_gpu", out.tflops_per_gpu, kPositiveReal);
  nullable(m, "mfu", out.mfu, kFraction);
  nullable(m, "hfu", out.hfu, kFraction);
  nullable(m, "step_time_s", out.step_time_s, kPositiveReal);
  nullable(m, "tokens_per_s", out.tokens_per_s, kPositiveReal);
  nullable(m, "tokens_per_s_per_gpu", out.tokens_per_s_per_gpu, kPositiveReal);
  nullable(m, "memory_gb", out.memory_gb, kPositiveReal);
  m.finish();
}

// Derived values are open-ended: every number is kept, "how" is the formula; anything else is an
// unknown key.
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
      r.unknown_keys.push_back("/derived/" + json_pointer_escape(key));
      d.accept(key);
    }
  }
  d.finish();
}

// Reads one record into `r`; problems land in `diag` with pointers under `pointer`.
void read_record(const Json& value, const std::string& pointer, PublishedRun& r,
                 Diagnostics& diag) {
  JsonObject rec(value, pointer, diag);
  if (!rec.valid()) return;
  rec.read("id", r.id, Need::kRequired);
  collect_unknown(rec, value,
                  {"id", "source", "notes", "model", "hardware", "parallel", "precision",
                   "measured", "derived", "flops_convention", "reliability"},
                  "", r.unknown_keys);
  nullable_text(rec, "source", r.source);
  nullable_text(rec, "notes", r.notes);
  nullable_text(rec, "precision", r.precision);
  nullable_text(rec, "flops_convention", r.flops_convention);
  if (const Json* grade = rec.child("reliability", Need::kOptional);
      grade != nullptr && !grade->is_null()) {
    Reliability g = Reliability::kC;
    if (rec.read_enum("reliability", g, Need::kRequired)) r.reliability = g;
  }
  if (const Json* m = rec.child("model", Need::kRequired)) {
    JsonObject obj(*m, rec.pointer_of("model"), diag);
    read_model(obj, *m, r);
  }
  if (const Json* h = rec.child("hardware", Need::kRequired)) {
    JsonObject obj(*h, rec.pointer_of("hardware"), diag);
    read_hardware(obj, *h, r);
  }
  if (const Json* p = rec.child("parallel", Need::kRequired)) {
    JsonObject obj(*p, rec.pointer_of("parallel"), diag);
    read_parallel(obj, *p, r);
  }
  if (const Json* m = rec.child("measured", Need::kOptional); m != nullptr && !m->is_null()) {
    JsonObject obj(*m, rec.pointer_of("measured"), diag);
    read_measured(obj, *m, r);
  }
  if (const Json* d = rec.child("derived", Need::kOptional); d != nullptr && !d->is_null()) {
    JsonObject obj(*d, rec.pointer_of("derived"), diag);
    read_derived(obj, *d, r);
  }
  rec.finish();
}

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
  return FlopConvention::kUnknown;
}

bool counts_recompute(FlopConvention convention) {
  return convention == FlopConvention::kMegatronEq3;
}

}  // namespace planner
