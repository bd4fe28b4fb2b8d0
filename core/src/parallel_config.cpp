#include "planner/core/parallel_config.hpp"

#include <charconv>
#include <cstdio>

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
  for (const std::string& name : names) joined += name + ",";
  return parse_recompute_modules(joined);
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
