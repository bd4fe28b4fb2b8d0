// planner topology list | show NAME [--nodes N] | dot NAME [--nodes N]
// NAME is a topology preset name or alias, or the path of a topology JSON file.
#include <iostream>
#include <map>
#include <numeric>
#include <tuple>

#include "app.hpp"
#include "output.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/topo/capacity.hpp"
#include "planner/topo/cluster.hpp"
#include "planner/topo/dot.hpp"
#include "planner/topo/topology_catalog.hpp"

namespace planner::cli {
namespace {

using topo::Cluster;
using topo::TopologySpec;

std::vector<int> gpus_of_node(const Cluster& c, int node) {
  std::vector<int> v(static_cast<std::size_t>(c.gpus_per_node()));
  std::iota(v.begin(), v.end(), node * c.gpus_per_node());
  return v;
}

// The per-GPU share of the NICs with every GPU of a node sending, or nullopt without a fabric.
Result<std::optional<Bandwidth>> node_injection(const Cluster& c) {
  if (c.spec().fabric.type == topo::FabricType::kNone) return std::optional<Bandwidth>{};
  PLANNER_ASSIGN_OR_RETURN(Bandwidth b, topo::injection_bandwidth(c, gpus_of_node(c, 0)));
  return std::optional<Bandwidth>{b};
}

std::string gbps(Bandwidth b) {
  return fmt(to_GBps(b), to_GBps(b) < 10 ? 2 : 1) + " GB/s";
}

// A cluster just big enough to show the node and its NVLink domain.
Result<Cluster> sample(const TopologySpec& spec) {
  return Cluster::build(spec, spec.nvlink_domain ? spec.nvlink_domain->nodes : 1);
}

Status topology_list(const CliContext& ctx) {
  const topo::TopologyCatalog& catalog = topo::builtin_topologies();
  if (catalog.all().empty()) return Status::internal("the built-in topology presets did not load");
  std::ostream& out = *ctx.out;
  Json arr = Json::array();
  Table t({{"NAME"},
           {"GPU"},
           {"GPUS/NODE", Align::kRight},
           {"NVLINK DOMAIN", Align::kRight},
           {"INTER-NODE/GPU", Align::kRight},
           {"FABRIC"},
           {"SOURCES"}});
  std::map<std::string, int> source_ids;
  std::vector<std::string> sources;
  for (const TopologySpec& spec : catalog.all()) {
    PLANNER_ASSIGN_OR_RETURN(Cluster c, sample(spec));
    PLANNER_ASSIGN_OR_RETURN(std::optional<Bandwidth> inject, node_injection(c));
    std::string refs;
    for (const std::string& s : spec.sources) {
      auto [it, inserted] = source_ids.emplace(s, static_cast<int>(sources.size()) + 1);
      if (inserted) sources.push_back(s);
      refs += "[" + std::to_string(it->second) + "]";
    }
    t.add_row({spec.name, spec.gpu, std::to_string(c.gpus_per_node()),
               std::to_string(c.nvlink_domain_size()), inject ? gbps(*inject) : "-",
               spec.fabric_summary(), refs});
    Json j{{"name", spec.name},
           {"aliases", spec.aliases},
           {"description", spec.description},
           {"gpu", spec.gpu},
           {"gpus_per_node", c.gpus_per_node()},
           {"nvlink_domain_gpus", c.nvlink_domain_size()},
           {"fabric", spec.fabric_summary()},
           {"sources", spec.sources}};
    j["inter_node_GBps_per_gpu"] = inject ? Json(to_GBps(*inject)) : Json(nullptr);
    if (!spec.instance.empty()) {
      j["provider"] = spec.provider;
      j["instance"] = spec.instance;
    }
    arr.push_back(j);
  }
  if (ctx.json) {
    out << arr.dump(2) << '\n';
    return Status::ok();
  }
  t.print(out);
  out << "\nINTER-NODE/GPU: each GPU's share of the NICs when every GPU of a node sends off-node, "
         "per direction.\n`planner topology show NAME` gives a cluster's devices, links and "
         "bisection.\n\nSources:\n";
  for (std::size_t i = 0; i < sources.size(); ++i)
    out << "  [" << i + 1 << "] " << sources[i] << '\n';
  return Status::ok();
}

Result<Cluster> load_cluster(const std::string& name, int nodes) {
  PLANNER_ASSIGN_OR_RETURN(TopologySpec spec, topo::resolve_topology(name));
  return Cluster::build(spec, nodes > 0 ? nodes : spec.default_nodes);
}

Status topology_show(const CliContext& ctx, const std::string& name, int nodes) {
  PLANNER_ASSIGN_OR_RETURN(Cluster c, load_cluster(name, nodes));
  const TopologySpec& spec = c.spec();
  PLANNER_ASSIGN_OR_RETURN(std::optional<Bandwidth> inject_node, node_injection(c));
  std::optional<Bandwidth> inject_one;
  if (inject_node) {
    PLANNER_ASSIGN_OR_RETURN(Bandwidth b, topo::injection_bandwidth(c, std::vector<int>{0}));
    inject_one = b;
  }
  PLANNER_ASSIGN_OR_RETURN(topo::GroupBandwidth node_group,
                           topo::group_bandwidth(c, gpus_of_node(c, 0)));
  const Bandwidth bisection = topo::bisection_bandwidth(c);

  std::map<topo::DeviceKind, int> devices;
  for (const topo::Device& d : c.devices())
    ++devices[d.kind];
  // Cables grouped by (kind, parallel links, bandwidth, latency).
  std::map<std::tuple<topo::LinkKind, int, double, std::int64_t>, int> cables;
  for (topo::LinkId id = 0; id < static_cast<topo::LinkId>(c.links().size()); id += 2) {
    const topo::Link& l = c.link(id);
    ++cables[{l.kind, l.count, l.bandwidth.raw(), l.latency.raw()}];
  }

  std::ostream& out = *ctx.out;
  if (ctx.json) {
    Json dev = Json::object();
    for (const auto& [kind, n] : devices)
      dev[std::string(to_string(kind))] = n;
    Json links = Json::array();
    for (const auto& [key, n] : cables) {
      const auto& [kind, count, bw, latency] = key;
      links.push_back({{"kind", to_string(kind)},
                       {"cables", n},
                       {"parallel_links", count},
                       {"bandwidth_GBps", bw / 1e9},
                       {"latency_ns", static_cast<double>(latency) / 1e3}});
    }
    Json j{{"name", spec.name},
           {"description", spec.description},
           {"gpu", spec.gpu},
           {"nodes", c.num_nodes()},
           {"gpus_per_node", c.gpus_per_node()},
           {"gpus", c.num_gpus()},
           {"fabric", spec.fabric_summary()},
           {"nvlink_domain_gpus", c.nvlink_domain_size()},
           {"node_intra_GBps_per_gpu", to_GBps(node_group.intra)},
           {"node_intra_class", to_string(node_group.intra_class)},
           {"bisection_GBps", to_GBps(bisection)},
           {"devices", dev},
           {"links", links},
           {"sources", spec.sources}};
    if (!spec.instance.empty()) {
      j["provider"] = spec.provider;
      j["instance"] = spec.instance;
    }
    j["injection_GBps_per_gpu"] =
        inject_node ? Json{{"one_gpu", to_GBps(*inject_one)}, {"whole_node", to_GBps(*inject_node)}}
                    : Json(nullptr);
    out << j.dump(2) << '\n';
    return Status::ok();
  }

  KeyValues kv;
  std::string aliases;
  for (const std::string& a : spec.aliases)
    aliases += (aliases.empty() ? " (aliases: " : ", ") + a;
  kv.add("name", spec.name + (aliases.empty() ? "" : aliases + ")"));
  kv.add("description", spec.description);
  kv.add("GPU", spec.gpu);
  if (!spec.instance.empty()) {
    kv.add("instance", spec.provider + " " + spec.instance + " (`planner price list --provider " +
                           spec.provider + "` for its prices)");
  }
  kv.add("cluster", std::to_string(c.num_nodes()) + " node(s) x " +
                        std::to_string(c.gpus_per_node()) +
                        " GPUs = " + std::to_string(c.num_gpus()) + " GPUs");
  kv.add("node layout", spec.node.generator.empty() ? "explicit devices and links"
                                                    : spec.node.generator + " generator");
  kv.add("fabric", spec.fabric_summary());
  kv.add("NVLink domain", std::to_string(c.nvlink_domain_size()) + " GPUs");
  if (c.gpus_per_node() > 1) {
    kv.add("GPUs of a node", gbps(node_group.intra) + " per GPU per direction over " +
                                 std::string(to_string(node_group.intra_class)));
  }
  kv.add("injection per GPU", inject_node ? gbps(*inject_one) + " alone, " + gbps(*inject_node) +
                                                " each when the whole node sends"
                                          : std::string("no scale-out fabric"));
  kv.add("bisection", gbps(bisection) + " per direction (first half of the GPUs to the second)");
  kv.print(out);

  out << '\n';
  Table dt({{"DEVICE"}, {"COUNT", Align::kRight}});
  for (const auto& [kind, n] : devices)
    dt.add_row({std::string(to_string(kind)), std::to_string(n)});
  dt.print(out);
  out << '\n';
  Table lt({{"LINK"},
            {"CABLES", Align::kRight},
            {"LINKS EACH", Align::kRight},
            {"PER DIRECTION", Align::kRight},
            {"LATENCY", Align::kRight}});
  for (const auto& [key, n] : cables) {
    const auto& [kind, count, bw, latency] = key;
    lt.add_row({std::string(to_string(kind)), std::to_string(n), std::to_string(count),
                topo::rate_text(kind, Bandwidth(bw)),
                fmt(static_cast<double>(latency) / 1e3, 0) + " ns"});
  }
  lt.print(out);
  out << "\nSources:\n";
  for (const std::string& s : spec.sources)
    out << "  - " << s << '\n';
  if (!spec.notes.empty()) out << "\nNotes: " << spec.notes << '\n';
  return Status::ok();
}

Status topology_dot(const CliContext& ctx, const std::string& name, int nodes) {
  PLANNER_ASSIGN_OR_RETURN(Cluster c, load_cluster(name, nodes));
  *ctx.out << topo::to_dot(c);
  return Status::ok();
}

}  // namespace

void register_topology_commands(CLI::App& app, CliContext& ctx) {
  CLI::App* topology =
      app.add_subcommand("topology", "Cluster topologies: nodes, NVLink domains, fabrics");
  topology->require_subcommand(1);

  CLI::App* list = topology->add_subcommand("list", "List the built-in topologies");
  add_json_flag(list, ctx);
  list->callback([&ctx] { ctx.action = [&ctx] { return topology_list(ctx); }; });

  const std::string name_help = "Topology preset name or alias, or a topology JSON file";
  const std::string nodes_help = "Node count (default: the topology's default_nodes)";
  CLI::App* show =
      topology->add_subcommand("show", "Show a cluster: devices, links, bandwidths, sources");
  auto show_name = std::make_shared<std::string>();
  auto show_nodes = std::make_shared<int>(0);
  show->add_option("NAME", *show_name, name_help)->required();
  show->add_option("--nodes", *show_nodes, nodes_help)->check(CLI::Range(1, 1'000'000));
  add_json_flag(show, ctx);
  show->callback([&ctx, show_name, show_nodes] {
    ctx.action = [&ctx, show_name, show_nodes] {
      return topology_show(ctx, *show_name, *show_nodes);
    };
  });

  CLI::App* dot = topology->add_subcommand("dot", "Print a cluster as a Graphviz DOT graph");
  auto dot_name = std::make_shared<std::string>();
  auto dot_nodes = std::make_shared<int>(0);
  dot->add_option("NAME", *dot_name, name_help)->required();
  dot->add_option("--nodes", *dot_nodes, nodes_help)->check(CLI::Range(1, 1'000'000));
  dot->callback([&ctx, dot_name, dot_nodes] {
    ctx.action = [&ctx, dot_name, dot_nodes] { return topology_dot(ctx, *dot_name, *dot_nodes); };
  });
}

}  // namespace planner::cli
