// planner validate FILE...: checks planner documents of any kind and reports every problem.
#include <iostream>

#include "app.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/loaders.hpp"
#include "planner/search/sweep_spec.hpp"
#include "planner/sim/profiles.hpp"
#include "planner/topo/topology_catalog.hpp"
#include "planner/topo/topology_json.hpp"

namespace planner::cli {
namespace {

// Every document kind this build understands.
DocumentTypes all_document_types(const Catalog& catalog) {
  DocumentTypes types;
  register_core_documents(types, catalog);
  topo::register_topology_documents(types);
  sim::register_profile_documents(types);
  search::register_sweep_documents(
      types, catalog, [](std::string_view name) { return topo::resolve_topology(name); });
  return types;
}

Status validate_files(const CliContext& ctx, const std::vector<std::string>& files) {
  const DocumentTypes types = all_document_types(*ctx.catalog);
  std::ostream& out = *ctx.out;
  int invalid = 0;
  bool runtime_failure = false;
  Json report = Json::array();
  for (const std::string& file : files) {
    Diagnostics diag(file);
    auto text = read_text_file(file);
    Json entry{{"file", file}};
    if (!text) {
      diag.add("", text.status().message().substr(file.size() + 2));
      if (text.status().code() == StatusCode::kRuntime) runtime_failure = true;
    } else {
      types.validate(*text, diag);
    }
    entry["ok"] = diag.empty();
    Json errors = Json::array();
    for (const Diagnostic& d : diag.items()) {
      errors.push_back({{"pointer", d.pointer}, {"message", d.message}});
    }
    entry["errors"] = errors;
    report.push_back(entry);
    if (!diag.empty()) ++invalid;
    if (!ctx.json) {
      if (diag.empty()) {
        out << file << ": ok\n";
      } else {
        out << diag.to_string() << '\n';
      }
    }
  }
  if (ctx.json) out << Json{{"files", report}, {"invalid", invalid}}.dump(2) << '\n';
  if (invalid == 0) return Status::ok();
  std::string summary =
      std::to_string(invalid) + " of " + std::to_string(files.size()) + " file(s) invalid";
  return runtime_failure ? Status::runtime(summary) : Status::invalid_input(summary);
}

}  // namespace

void register_validate_command(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Check planner documents (model, gpu, cluster, training, parallel, plan, ...) and "
      "print every problem");
  auto files = std::make_shared<std::vector<std::string>>();
  cmd->add_option("FILE", *files, "Documents to check")->required();
  add_json_flag(cmd, ctx);
  cmd->callback(
      [&ctx, files] { ctx.action = [&ctx, files] { return validate_files(ctx, *files); }; });
}

}  // namespace planner::cli
