// planner program: lowers one training step into per-rank operations (the step program that the
// simulator times and the executor runs) and shows it: a summary per rank, or one rank's ops.
#include <iostream>

#include "app.hpp"
#include "output.hpp"
#include "plan_args.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/lowering.hpp"
#include "planner/core/spec_json.hpp"

namespace planner::cli {
namespace {

struct ProgramArgs {
  PlanArgs config;
  std::string ranks = "stage";
  int rank = -1;
  std::size_t limit = 0;
};

Result<RankSubset> parse_subset(const std::string& s) {
  if (s == "all") return RankSubset::kAll;
  if (s == "replica") return RankSubset::kDataParallelReplica;
  if (s == "stage") return RankSubset::kOnePerStage;
  return Status::invalid_input("--ranks: expected all, replica or stage, got \"" + s + "\"");
}

// Summary columns: what each rank moves (collective sizes and sent messages), by axis.
enum Column { kTp, kCp, kEp, kDp, kPp, kPs, kHostCopy, kColumns };

int column_of(Stream s) {
  switch (s) {
    case Stream::kTpComm:
      return kTp;
    case Stream::kCpSend:
      return kCp;
    case Stream::kEpComm:
      return kEp;
    case Stream::kDpComm:
      return kDp;
    case Stream::kPpSend:
      return kPp;
    case Stream::kPsSend:
      return kPs;
    case Stream::kHostToDevice:
    case Stream::kDeviceToHost:
      return kHostCopy;
    default:
      return -1;
  }
}

std::string shape(const OpDesc& d) {
  auto x = [](std::int64_t v) { return std::to_string(v); };
  switch (d.kind) {
    case OpKind::kGemm:
      return x(d.m) + "x" + x(d.n) + "x" + x(d.k) + (d.batch > 1 ? " (" + x(d.batch) + ")" : "");
    case OpKind::kAttention:
      return x(d.batch) + "x" + x(d.m) + "x" + x(d.n) + "x" + x(d.k);
    case OpKind::kOptimizerStep:
      return x(d.n);
    default:
      return is_compute(d.kind) ? x(d.m) + "x" + x(d.n) : "";
  }
}

Json op_json(const StepProgram& p, const RankProgram& r, std::size_t i) {
  const Op& op = r.op(i);
  const OpDesc& d = p.desc(op);
  Json deps = Json::array();
  for (std::uint32_t dep : r.deps(i))
    deps.push_back(dep);
  Json group = nullptr;
  if (op.group >= 0) group = {{"axes", p.group(op.group).axes}, {"ranks", p.group(op.group).ranks}};
  return {{"index", i},
          {"id", to_string(op.id)},
          {"id_raw", op.id.raw()},
          {"kind", to_string(d.kind)},
          {"stream", to_string(d.stream)},
          {"precision", to_string(d.precision)},
          {"m", d.m},
          {"n", d.n},
          {"k", d.k},
          {"batch", d.batch},
          {"aux", d.aux},
          {"flags", d.flags},
          {"flops", d.flops.raw()},
          {"bytes_read", d.bytes_read.raw()},
          {"bytes_written", d.bytes_written.raw()},
          {"comm_bytes", d.comm_bytes.raw()},
          {"group", group},
          {"peer", op.peer},
          {"tag", op.tag},
          {"deps", deps}};
}

Status list_ops(const CliContext& ctx, const StepProgram& p, const RankProgram& r,
                std::size_t limit) {
  const std::size_t n = limit > 0 ? std::min(limit, r.size()) : r.size();
  if (ctx.json) {
    Json ops = Json::array();
    for (std::size_t i = 0; i < n; ++i)
      ops.push_back(op_json(p, r, i));
    *ctx.out << Json{{"rank", r.rank()}, {"stage", r.stage()}, {"ops", ops}}.dump(2) << '\n';
    return Status::ok();
  }
  Table t({{"#", Align::kRight},
           {"OP"},
           {"KIND"},
           {"STREAM"},
           {"SHAPE", Align::kRight},
           {"MFLOP", Align::kRight},
           {"MB", Align::kRight},
           {"GROUP / PEER"},
           {"DEPS"}});
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = r.op(i);
    const OpDesc& d = p.desc(op);
    std::string deps;
    for (std::uint32_t dep : r.deps(i))
      deps += (deps.empty() ? "" : ",") + std::to_string(dep);
    std::string target;
    if (op.group >= 0)
      target = p.group(op.group).axes + " (" + std::to_string(p.group(op.group).ranks.size()) + ")";
    if (op.peer >= 0) target = "rank " + std::to_string(op.peer) + " tag " + std::to_string(op.tag);
    const double bytes = is_compute(d.kind)
                             ? static_cast<double>((d.bytes_read + d.bytes_written).raw())
                             : static_cast<double>(d.comm_bytes.raw());
    t.add_row({std::to_string(i), to_string(op.id), std::string(to_string(d.kind)),
               std::string(to_string(d.stream)), shape(d),
               d.flops.raw() > 0 ? fmt(d.flops.raw() / 1e6, 1) : "", fmt(bytes / 1e6, 2), target,
               deps});
  }
  t.print(*ctx.out);
  if (n < r.size()) *ctx.out << "... " << r.size() - n << " more ops (--limit 0 for all)\n";
  return Status::ok();
}

Status program_report(const CliContext& ctx, const ProgramArgs& args) {
  PLANNER_ASSIGN_OR_RETURN(ResolvedPlan config, resolve_plan(*ctx.catalog, args.config));
  LowerOptions options;
  if (args.rank >= 0) {
    options.ranks = {args.rank};
  } else {
    PLANNER_ASSIGN_OR_RETURN(RankSubset subset, parse_subset(args.ranks));
    options.ranks = representative_ranks(config.parallel, subset);
  }
  PLANNER_ASSIGN_OR_RETURN(StepProgram prog,
                           lower(config.model, config.training, config.parallel, options));
  // A failed check is a lowering bug, not bad input.
  PLANNER_RETURN_IF_ERROR(check_program(prog));
  if (args.rank >= 0) return list_ops(ctx, prog, prog.ranks().front(), args.limit);

  std::ostream& out = *ctx.out;
  struct Row {
    int rank = 0;
    int stage = 0;
    std::size_t ops = 0;
    double flops = 0;
    std::array<double, kColumns> bytes{};
  };
  std::vector<Row> rows;
  for (const RankProgram& r : prog.ranks()) {
    Row row{r.rank(), r.stage(), r.size(), 0, {}};
    for (const Op& op : r.ops()) {
      const OpDesc& d = prog.desc(op);
      row.flops += d.flops.raw();
      const int c = column_of(d.stream);
      if (c >= 0) row.bytes[static_cast<std::size_t>(c)] += static_cast<double>(d.comm_bytes.raw());
    }
    rows.push_back(row);
  }
  const ProgramInfo& info = prog.info();
  if (ctx.json) {
    Json ranks = Json::array();
    for (const Row& r : rows) {
      ranks.push_back({{"rank", r.rank},
                       {"stage", r.stage},
                       {"ops", r.ops},
                       {"flops", r.flops},
                       {"tp_bytes", r.bytes[kTp]},
                       {"cp_bytes", r.bytes[kCp]},
                       {"ep_bytes", r.bytes[kEp]},
                       {"dp_bytes", r.bytes[kDp]},
                       {"pp_bytes", r.bytes[kPp]},
                       {"ps_bytes", r.bytes[kPs]},
                       {"host_copy_bytes", r.bytes[kHostCopy]}});
    }
    out << Json{{"schema_version", kSchemaVersion},
                {"kind", "step_program_summary"},
                {"model", config.model.name},
                {"parallel", to_json(config.parallel)},
                {"training", to_json(config.training)},
                {"microbatches", info.microbatches},
                {"world_size", info.world_size},
                {"param_servers", info.param_servers},
                {"complete", prog.complete()},
                {"total_ops", prog.total_ops()},
                {"descriptors", prog.descs().size()},
                {"memory_bytes", prog.memory_bytes()},
                {"ranks", ranks}}
               .dump(2)
        << '\n';
    return Status::ok();
  }
  out << config.model.name << " · " << short_label(config.parallel) << " · " << info.microbatches
      << " micro-batches · " << prog.ranks().size() << " of " << prog.total_ranks()
      << " ranks lowered · " << fmt_int(static_cast<long long>(prog.total_ops())) << " ops · "
      << prog.descs().size() << " distinct descriptors · "
      << fmt(static_cast<double>(prog.memory_bytes()) / (1 << 20), 1) << " MiB\n\n";
  Table t({{"RANK", Align::kRight},
           {"STAGE", Align::kRight},
           {"OPS", Align::kRight},
           {"TFLOP", Align::kRight},
           {"TP GB", Align::kRight},
           {"CP GB", Align::kRight},
           {"EP GB", Align::kRight},
           {"DP GB", Align::kRight},
           {"PP GB", Align::kRight},
           {"PS GB", Align::kRight},
           {"H<>D GB", Align::kRight}});
  for (const Row& r : rows) {
    std::vector<std::string> cells{std::to_string(r.rank), std::to_string(r.stage),
                                   std::to_string(r.ops), fmt(r.flops / 1e12, 2)};
    for (double b : r.bytes)
      cells.push_back(fmt(b / 1e9, 2));
    t.add_row(cells);
  }
  t.print(out);
  out << "\nTFLOP: GEMM and attention FLOPs this rank runs per step (recompute included). GB: "
         "collective sizes (nccl-tests convention) and messages sent, per axis.\n"
      << "check: ok ("
      << (prog.complete() ? "complete program: sends match receives, groups agree on their "
                            "collectives, and it runs to the end without deadlock"
                          : "the lowered ranks' structure, send/recv matching and collective "
                            "order; --ranks all to also check for deadlock")
      << ")\n`planner program ... --rank N` lists one rank's ops.\n";
  return Status::ok();
}

}  // namespace

void register_program_command(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "program", "Lower a training step into per-rank operations (the step program) and show it");
  auto a = std::make_shared<ProgramArgs>();
  add_plan_options(cmd, a->config);
  cmd->add_option("--ranks", a->ranks,
                  "Which ranks to lower: all, replica (data-parallel index 0) or stage (one per "
                  "pipeline stage, the default)");
  cmd->add_option("--rank", a->rank, "List the ops of this rank");
  cmd->add_option("--limit", a->limit, "With --rank: list at most this many ops (0: all)");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return program_report(ctx, *a); }; });
}

}  // namespace planner::cli
