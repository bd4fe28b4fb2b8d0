// planner gpu list | show NAME
#include <iostream>
#include <map>

#include "app.hpp"
#include "output.hpp"
#include "planner/core/spec_json.hpp"

namespace planner::cli {
namespace {

std::string peak(const GpuSpec& g, Precision p) {
  return g.supports(p) ? fmt(to_tflops_per_s(g.peak_for(p)), 1) : "-";
}

Status gpu_list(const CliContext& ctx) {
  std::ostream& out = *ctx.out;
  if (ctx.json) {
    Json arr = Json::array();
    for (const GpuSpec& g : ctx.catalog->gpus())
      arr.push_back(to_json(g));
    out << arr.dump(2) << '\n';
    return Status::ok();
  }
  Table t({{"NAME"},
           {"VENDOR"},
           {"ARCH"},
           {"BF16 TFLOP/s", Align::kRight},
           {"FP8 TFLOP/s", Align::kRight},
           {"HBM GiB", Align::kRight},
           {"HBM GB/s", Align::kRight},
           {"NVLINK GB/s", Align::kRight},
           {"TDP W", Align::kRight},
           {"$/GPU-h", Align::kRight},
           {"SOURCE", Align::kRight}});
  std::map<std::string, int> source_ids;
  std::vector<std::string> sources;
  for (const GpuSpec& g : ctx.catalog->gpus()) {
    auto [it, inserted] = source_ids.emplace(g.source, static_cast<int>(sources.size()) + 1);
    if (inserted) sources.push_back(g.source);
    const PriceEntry* price = g.price_for(Offering::kOnDemand);
    if (price == nullptr && !g.prices.empty()) price = &g.prices.front();
    const std::string fp16_or_bf16 =
        g.supports(Precision::kBf16) ? peak(g, Precision::kBf16) : peak(g, Precision::kFp16) + "*";
    t.add_row({g.name, g.vendor, g.arch, fp16_or_bf16, peak(g, Precision::kFp8),
               fmt(to_GiB(g.hbm), 0), fmt(to_GBps(g.hbm_bandwidth), 0),
               g.nvlink_bandwidth.raw() > 0 ? fmt(to_GBps(g.nvlink_bandwidth), 0) : "-",
               g.tdp_watts > 0 ? fmt(g.tdp_watts, 0) : "-",
               price ? fmt(price->usd_per_gpu_hour.raw(), 2) : "-",
               "[" + std::to_string(it->second) + "]"});
  }
  t.print(out);
  out << "\nPeaks are dense (no sparsity); * = fp16 where the part has no bf16. NVLink is per "
         "direction per GPU.\n$/GPU-h is the on-demand price a plan is costed at by default; "
         "`planner price show NAME` says which and why.\n\nSources:\n";
  for (std::size_t i = 0; i < sources.size(); ++i) {
    out << "  [" << i + 1 << "] " << sources[i] << '\n';
  }
  return Status::ok();
}

Status gpu_show(const CliContext& ctx, const std::string& name) {
  PLANNER_ASSIGN_OR_RETURN(GpuSpec g, ctx.catalog->gpu(name));
  std::ostream& out = *ctx.out;
  if (ctx.json) {
    out << as_document("gpu", to_json(g)).dump(2) << '\n';
    return Status::ok();
  }
  KeyValues kv;
  kv.add("name", g.name);
  if (!g.aliases.empty()) {
    std::string a;
    for (const auto& s : g.aliases)
      a += (a.empty() ? "" : ", ") + s;
    kv.add("aliases", a);
  }
  kv.add("vendor / arch", g.vendor + " " + g.arch);
  for (const auto& [p, pname] : EnumTraits<Precision>::kNames) {
    kv.add("peak " + std::string(pname),
           g.supports(p) ? fmt(to_tflops_per_s(g.peak_for(p)), 1) + " TFLOP/s (dense)"
                         : "not supported");
  }
  kv.add("HBM", fmt(to_GiB(g.hbm), 0) + " GiB at " + fmt(to_GBps(g.hbm_bandwidth), 0) + " GB/s");
  kv.add("NVLink", g.nvlink_bandwidth.raw() > 0
                       ? fmt(to_GBps(g.nvlink_bandwidth), 0) + " GB/s per direction"
                       : "none");
  kv.add("PCIe", fmt(to_GBps(g.pcie_bandwidth), 1) + " GB/s per direction");
  kv.add("TDP", g.tdp_watts > 0 ? fmt(g.tdp_watts, 0) + " W" : "unknown");
  kv.add("source", g.source);
  if (!g.notes.empty()) kv.add("notes", g.notes);
  kv.print(out);
  out << '\n';
  if (g.prices.empty()) {
    out << "No catalogue prices: give one with --price when planning.\n";
    return Status::ok();
  }
  if (g.price_as) {
    out << "Priced as " << g.price_as->gpu << " (" << g.price_as->reason << "); "
        << "`planner price show " << g.name << "` shows its prices.\n";
    return Status::ok();
  }
  Table t(
      {{"OFFERING"}, {"$/GPU-h", Align::kRight}, {"PROVIDER"}, {"INSTANCE"}, {"DATE"}, {"SOURCE"}});
  for (const PriceEntry& p : g.prices) {
    t.add_row({std::string(to_string(p.offering)), fmt(p.usd_per_gpu_hour.raw(), 3), p.provider,
               p.instance, p.date, p.source});
  }
  t.print(out);
  return Status::ok();
}

}  // namespace

void register_gpu_commands(CLI::App& app, CliContext& ctx) {
  CLI::App* gpu = app.add_subcommand("gpu", "GPU presets: datasheet peaks, memory, prices");
  gpu->require_subcommand(1);

  CLI::App* list = gpu->add_subcommand("list", "List the built-in GPUs with their sources");
  add_json_flag(list, ctx);
  list->callback([&ctx] { ctx.action = [&ctx] { return gpu_list(ctx); }; });

  CLI::App* show = gpu->add_subcommand("show", "Show one GPU in full, with its prices");
  auto name = std::make_shared<std::string>();
  show->add_option("NAME", *name, "GPU name or alias (e.g. H100, a100-80gb)")->required();
  add_json_flag(show, ctx);
  show->callback([&ctx, name] { ctx.action = [&ctx, name] { return gpu_show(ctx, *name); }; });
}

}  // namespace planner::cli
