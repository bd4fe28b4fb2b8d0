#include "planner/core/parallel_config.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <utility>

namespace planner {

std::optional<double> parse_capacity_factor(std::string_view text) {
  if (text == "dropless") return 0.0;
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !(v > 0 && v <= kMaxCapacityFactor))
    return std::nullopt;
  return v;
}

std::string capacity_factor_text(double factor) {
  if (factor == 0) return "dropless";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", factor);
  return buf;
}

std::string short_label(const ParallelConfig& p) {
  std::string s = "tp" + std::to_string(p.tp) + " pp" + std::to_string(p.written_pp()) + " dp" +
                  std::to_string(p.written_dp());
  if (p.cp > 1) s += " cp" + std::to_string(p.cp);
  if (p.ep > 1) s += " ep" + std::to_string(p.ep);
  if (p.etp > 0 && p.etp != p.tp) s += " etp" + std::to_string(p.etp);
  if (p.moe_capacity_factor == 0) s += " dropless";
  if (p.moe_capacity_factor > 0) {
    std::string cf = std::to_string(p.moe_capacity_factor);
    cf.erase(cf.find_last_not_of('0') + 1);
    if (!cf.empty() && cf.back() == '.') cf.pop_back();
    s += " cf" + cf + (p.moe_pad_to_capacity ? "-pad" : "");
  }
  if (p.moe_imbalance > 1.0) {
    std::string r = std::to_string(p.moe_imbalance);
    r.erase(r.find_last_not_of('0') + 1);
    if (!r.empty() && r.back() == '.') r.pop_back();
    s += " skew" + r;
  }
  if (p.moe_fp8_dispatch) s += " fp8-a2a";
  if (p.moe_a2a == MoeA2a::kHierarchical) s += " hier-a2a";
  if (p.moe_a2a_overlap) s += " a2a-overlap";
  if (p.sequence_parallel) s += " sp";
  s += " mb" + std::to_string(p.micro_batch_size);
  if (p.written_pp() > 1) {
    s += " " + std::string(schedule_name(p));
    if (p.schedule == Schedule::kInterleaved) s += "/v" + std::to_string(p.virtual_stages);
    if (p.first_stage_layers > 0) s += " first" + std::to_string(p.first_stage_layers);
    if (p.last_stage_layers > 0) s += " last" + std::to_string(p.last_stage_layers);
    if (!p.layout.empty()) s += " layout" + layout_text(p.layout);
  }
  if (p.recompute != Recompute::kNone) s += " rc-" + std::string(to_string(p.recompute));
  if (p.recompute == Recompute::kSelective && p.recompute_modules != kDefaultRecomputeModules) {
    s += ":" + recompute_modules_text(p.recompute_modules);
  }
  if (p.zero_stage > 0) s += " zero" + std::to_string(p.zero_stage);
  if (p.offload != Offload::kNone) s += " offload-" + std::string(to_string(p.offload));
  if (p.dp_sync == DpSync::kParameterServer) s += " ps" + std::to_string(p.param_servers);
  return s;
}

std::string recompute_modules_text(std::uint8_t modules) {
  std::string s;
  for (const auto& [module, name] : EnumTraits<RecomputeModule>::kNames) {
    if ((modules & module_bit(module)) == 0) continue;
    if (!s.empty()) s += ',';
    s += name;
  }
  return s;
}

Result<std::uint8_t> parse_recompute_modules(std::string_view text) {
  std::uint8_t modules = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t end = text.find_first_of(",+ ", i);
    const std::string_view name = text.substr(i, end == std::string_view::npos ? end : end - i);
    if (!name.empty()) {
      const auto module = parse_enum<RecomputeModule>(name);
      if (!module) {
        return Status::invalid_input("unknown recompute module \"" + std::string(name) +
                                     "\": expected " + enum_choices<RecomputeModule>());
      }
      modules |= module_bit(*module);
    }
    if (end == std::string_view::npos) break;
    i = end + 1;
  }
  return modules;
}

Result<std::uint8_t> parse_recompute_modules(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& name : names)
    joined += name + ",";
  return parse_recompute_modules(joined);
}

namespace {

// The layout text with its repetitions expanded; an error past `kMaxLayoutSymbols` symbols.
constexpr std::size_t kMaxLayoutSymbols = 1'000'000;

class LayoutExpander {
 public:
  explicit LayoutExpander(std::string_view text) : text_(text) {}

  Result<std::string> run() {
    PLANNER_ASSIGN_OR_RETURN(std::string out, sequence(0));
    if (pos_ < text_.size()) return error("an unmatched ')'");
    return out;
  }

 private:
  Status error(const std::string& what) const {
    return Status::invalid_input("pipeline layout \"" + std::string(text_) + "\": " + what +
                                 " at character " + std::to_string(pos_ + 1));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == ','))
      ++pos_;
  }
  // "*n" after an item: n (1 when absent).
  Result<std::size_t> repeat() {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != '*') return std::size_t{1};
    ++pos_;
    skip_space();
    std::size_t n = 0;
    const char* begin = text_.data() + pos_;
    const auto [end, ec] = std::from_chars(begin, text_.data() + text_.size(), n);
    if (ec != std::errc() || n < 1) return error("'*' needs a count of 1 or more");
    pos_ += static_cast<std::size_t>(end - begin);
    return n;
  }
  Result<std::string> sequence(int depth) {
    std::string out;
    for (skip_space(); pos_ < text_.size() && text_[pos_] != ')'; skip_space()) {
      std::string item;
      if (text_[pos_] == '(') {
        if (depth >= kMaxDepth)
          return error("more than " + std::to_string(kMaxDepth) + " nested '('");
        ++pos_;
        PLANNER_ASSIGN_OR_RETURN(item, sequence(depth + 1));
        if (pos_ >= text_.size()) return error("a '(' without its ')'");
        ++pos_;
      } else if (std::string_view("EtmL|").find(text_[pos_]) != std::string_view::npos) {
        item = std::string(1, text_[pos_++]);
      } else {
        return error(std::string("'") + text_[pos_] +
                     "' is not E (embedding), t (layer), m (MTP), L (loss), '|', '(', ')' or '*'");
      }
      PLANNER_ASSIGN_OR_RETURN(const std::size_t n, repeat());
      if (n > kMaxLayoutSymbols || item.size() * n + out.size() > kMaxLayoutSymbols) {
        return error("more than " + std::to_string(kMaxLayoutSymbols) + " symbols");
      }
      for (std::size_t i = 0; i < n; ++i)
        out += item;
    }
    return out;
  }

  static constexpr int kMaxDepth = 32;
  std::string_view text_;
  std::size_t pos_ = 0;
};

// The runs of equal counts in layers[begin, end): (count, how many in a row), in order.
std::vector<std::pair<int, std::size_t>> runs(const std::vector<int>& layers, std::size_t begin,
                                              std::size_t end) {
  std::vector<std::pair<int, std::size_t>> out;
  for (std::size_t i = begin; i < end; ++i) {
    if (out.empty() || out.back().first != layers[i]) {
      out.emplace_back(layers[i], 1);
    } else {
      ++out.back().second;
    }
  }
  return out;
}

}  // namespace

Result<PipelineLayout> parse_pipeline_layout(std::string_view text) {
  PLANNER_ASSIGN_OR_RETURN(const std::string symbols, LayoutExpander(text).run());
  std::vector<std::string> entries(1);
  for (char c : symbols) {
    if (c == '|') {
      entries.emplace_back();
    } else {
      entries.back() += c;
    }
  }
  const auto fail = [&](const std::string& what) -> Result<PipelineLayout> {
    return Status::invalid_input("pipeline layout \"" + std::string(text) + "\": " + what);
  };
  PipelineLayout out;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string& e = entries[i];
    const bool first = i == 0, last = i + 1 == entries.size();
    const auto count = [&](char c) { return static_cast<int>(std::count(e.begin(), e.end(), c)); };
    if (count('E') > (first ? 1 : 0)) {
      return fail("'E' (the embedding) belongs once in the first virtual stage, found in stage " +
                  std::to_string(i));
    }
    if (count('L') > (last ? 1 : 0)) {
      return fail("'L' (the loss) belongs once in the last virtual stage, found in stage " +
                  std::to_string(i));
    }
    if (count('m') > 0 && !last) {
      return fail("'m' (an MTP module) belongs in the last virtual stage, found in stage " +
                  std::to_string(i));
    }
    out.layers.push_back(count('t'));
    out.mtp += count('m');
  }
  if (entries.size() < 2) return fail("one virtual stage: a layout needs '|' between stages");
  return out;
}

std::string pipeline_layout_text(const std::vector<int>& layers, int mtp) {
  if (layers.empty()) return {};
  const auto t = [](int n) {
    return n == 0 ? std::string() : n == 1 ? "t" : "t*" + std::to_string(n);
  };
  const std::size_t last = layers.size() - 1;
  std::string out = "E" + t(layers.front()) + (last > 0 ? "|" : "");
  // The runs of equal virtual stages between the first and the last.
  for (const auto& [n, times] : runs(layers, 1, last))
    out += times > 1 ? "(" + t(n) + "|)*" + std::to_string(times) : t(n) + "|";
  if (last > 0) out += t(layers.back());
  return out + std::string(static_cast<std::size_t>(std::max(0, mtp)), 'm') + "L";
}

std::string layout_text(const std::vector<int>& layers) {
  std::string out;
  for (const auto& [n, times] : runs(layers, 0, layers.size())) {
    out += (out.empty() ? "" : ",") + std::to_string(n);
    if (times > 1) out += "x" + std::to_string(times);
  }
  return out;
}

std::string_view schedule_name(const ParallelConfig& p) {
  return p.dualpipe ? "dualpipe" : to_string(p.schedule);
}

Status fold_dualpipe(ParallelConfig& p) {
  if (p.pp < 2 || p.pp % 2 != 0) {
    return Status::invalid_input(
        "the dualpipe schedule needs an even pp (its ranks pair up as r and pp - 1 - r, "
        "holding the same two stages), got " +
        std::to_string(p.pp));
  }
  p.pp /= 2;
  p.dp *= 2;
  p.schedule = Schedule::kDualPipeV;
  if (p.virtual_stages == 1) p.virtual_stages = 2;  // a rank's two stages; 2 may be written
  p.dualpipe = true;
  return Status::ok();
}

}  // namespace planner
