// planner profile list|show|export|import|delete: the hardware profiles `planner calibrate` stored
// in the database. A profile exported to JSON is a profile document (kind "profile") with its
// provenance; it can be imported into another database, given to --profile as a file, or shipped
// in core/presets/profiles for the hardware it was measured on.
#include <ctime>
#include <filesystem>

#include "app.hpp"
#include "db_options.hpp"
#include "output.hpp"
#include "planner/app/profiles.hpp"
#include "planner/core/loaders.hpp"
#include "planner/sim/profiles.hpp"
#include "planner/store/profiles.hpp"

namespace planner::cli {
namespace {

struct ProfileArgs {
  std::string name;
  std::string file;
  std::string output;
  bool replace = false;
  bool samples = false;
  DbOptions db;
};

std::string date_of(std::int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M", std::gmtime(&t));
  return text;
}

Status list_command(const CliContext& ctx, const ProfileArgs& a) {
  PLANNER_ASSIGN_OR_RETURN(store::Database db, open_existing_db(a.db));
  PLANNER_ASSIGN_OR_RETURN(std::vector<store::HardwareProfile> profiles, store::list_profiles(db));
  if (ctx.json) {
    Json out = Json::array();
    for (const store::HardwareProfile& p : profiles) {
      Json j{{"name", p.name},
             {"description", p.description},
             {"samples", p.sample_count},
             {"created_unix_ms", p.created_unix_ms}};
      if (p.run) j["run"] = p.run->value;
      out.push_back(std::move(j));
    }
    *ctx.out << out.dump(2) << '\n';
    return Status::ok();
  }
  if (profiles.empty()) {
    *ctx.out << "no hardware profiles in " << a.db.path << " (planner calibrate makes one)\n";
    return Status::ok();
  }
  Table t({{"name"},
           {"created (UTC)"},
           {"samples", Align::kRight},
           {"run", Align::kRight},
           {"description"}});
  for (const store::HardwareProfile& p : profiles) {
    t.add_row({p.name, date_of(p.created_unix_ms), std::to_string(p.sample_count),
               p.run ? std::to_string(p.run->value) : "-", p.description});
  }
  t.print(*ctx.out);
  return Status::ok();
}

Status show_command(const CliContext& ctx, const ProfileArgs& a) {
  PLANNER_ASSIGN_OR_RETURN(store::Database db, open_existing_db(a.db));
  PLANNER_ASSIGN_OR_RETURN(store::HardwareProfile stored, store::get_profile(db, a.name));
  PLANNER_ASSIGN_OR_RETURN(HardwareProfile p, app::stored_profile(db, a.name));
  std::vector<store::CalibrationSample> samples;
  if (a.samples) {
    PLANNER_ASSIGN_OR_RETURN(samples, store::get_calibration_samples(db, stored.id));
  }
  if (ctx.json) {
    Json out = to_json(p);
    if (a.samples) {
      Json rows = Json::array();
      for (const store::CalibrationSample& s : samples) {
        rows.push_back({{"benchmark", s.benchmark},
                        {"shape", s.shape},
                        {"precision", s.precision},
                        {"bytes", s.bytes.raw()},
                        {"group_size", s.group_size},
                        {"iterations", s.iterations},
                        {"time_us", to_microseconds(s.time)}});
      }
      out["samples"] = rows;
    }
    *ctx.out << out.dump(2) << '\n';
    return Status::ok();
  }
  const ComputeProfile& c = p.compute;
  KeyValues kv;
  kv.add("name", p.name);
  kv.add("description", p.description);
  kv.add("source", p.source);
  for (const auto& [key, value] : p.provenance)
    kv.add("  " + key, value);
  kv.add("created", date_of(stored.created_unix_ms) + " UTC" +
                        (stored.run ? ", run " + std::to_string(stored.run->value) : ""));
  kv.add("samples", std::to_string(stored.sample_count));
  for (const auto& [precision, name] : EnumTraits<Precision>::kNames) {
    const GemmRate& r = c.gemm_rate(precision);
    if (r.rate.raw() > 0) {
      kv.add("gemm " + std::string(name), fmt(to_tflops_per_s(r.rate) * 1e3, 1) + " GFLOP/s");
    }
  }
  kv.add("gemm k overhead", std::to_string(c.gemm_k_overhead) + " elements");
  kv.add("attention", fmt(to_tflops_per_s(c.attention_forward) * 1e3, 1) + " GFLOP/s forward, " +
                          fmt(to_tflops_per_s(c.attention_backward) * 1e3, 1) + " backward");
  kv.add("memory bandwidth", fmt(to_GBps(c.memory_bandwidth), 2) + " GB/s");
  for (const auto& [kind, name] : EnumTraits<OpKind>::kNames) {
    const Bandwidth b = c.memory_bound[static_cast<std::size_t>(kind)];
    if (b.raw() > 0) kv.add("  " + std::string(name), fmt(to_GBps(b), 2) + " GB/s");
  }
  kv.add("kernel overhead", fmt(to_microseconds(c.kernel_overhead), 2) + " us");
  if (c.host_cores > 0) {
    kv.add("host cores", std::to_string(c.host_cores) + ", oversubscribed efficiency " +
                             fmt(c.oversubscribed_efficiency, 3));
  }
  for (const LinkProfile& l : p.network.links) {
    kv.add("link " + l.kind, "efficiency " + fmt(l.efficiency, 3) + ", latency " +
                                 fmt(to_microseconds(l.latency), 2) + " us");
  }
  for (const ProtocolProfile& pr : p.network.protocols) {
    kv.add("protocol " + pr.name,
           "base " + fmt(to_microseconds(pr.base_latency), 2) + " us, step " +
               fmt(to_microseconds(pr.step(LinkClassLatency::kNvlink)), 2) + " / " +
               fmt(to_microseconds(pr.step(LinkClassLatency::kPcie)), 2) + " / " +
               fmt(to_microseconds(pr.step(LinkClassLatency::kNetwork)), 2) +
               " us (nvlink / pcie / network)");
  }
  const AlgorithmEfficiency& e = p.network.algorithm_efficiency;
  kv.add("algorithms", "ring " + fmt(e.ring, 3) + ", all_to_all " + fmt(e.all_to_all, 3) +
                           ", p2p " + fmt(e.p2p, 3));
  kv.print(*ctx.out);
  if (a.samples) {
    *ctx.out << '\n';
    Table t({{"benchmark"},
             {"shape"},
             {"ranks", Align::kRight},
             {"bytes", Align::kRight},
             {"time (us)", Align::kRight}});
    for (const store::CalibrationSample& s : samples) {
      t.add_row({s.benchmark, s.shape, std::to_string(s.group_size), std::to_string(s.bytes.raw()),
                 fmt(to_microseconds(s.time), 2)});
    }
    t.print(*ctx.out);
  }
  return Status::ok();
}

Status export_command(const CliContext& ctx, const ProfileArgs& a) {
  PLANNER_ASSIGN_OR_RETURN(store::Database db, open_existing_db(a.db));
  PLANNER_ASSIGN_OR_RETURN(HardwareProfile p, app::stored_profile(db, a.name));
  const std::string text = to_json_text(p);
  if (a.output.empty() || a.output == "-") {
    *ctx.out << text;
    if (!text.ends_with('\n')) *ctx.out << '\n';
    return Status::ok();
  }
  PLANNER_RETURN_IF_ERROR(write_text_file_atomic(a.output, text));
  if (!ctx.json) *ctx.out << "wrote profile " << p.name << " to " << a.output << '\n';
  return Status::ok();
}

Status import_command(const CliContext& ctx, const ProfileArgs& a) {
  PLANNER_ASSIGN_OR_RETURN(std::optional<store::Database> db, open_recording_db(a.db));
  if (!db) return Status::invalid_input("planner profile import needs a database (not --no-db)");
  PLANNER_ASSIGN_OR_RETURN(std::string name, app::import_profile(*db, a.file, a.name, a.replace));
  if (!ctx.json) *ctx.out << "imported profile " << name << " into " << a.db.path << '\n';
  return Status::ok();
}

Status delete_command(const CliContext& ctx, const ProfileArgs& a) {
  PLANNER_ASSIGN_OR_RETURN(store::Database db, open_existing_db(a.db));
  PLANNER_RETURN_IF_ERROR(store::delete_profile(db, a.name));
  if (!ctx.json) *ctx.out << "deleted profile " << a.name << " from " << a.db.path << '\n';
  return Status::ok();
}

}  // namespace

void register_profile_commands(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "profile", "Hardware profiles stored in the database (planner calibrate makes them)");
  cmd->require_subcommand(1);
  auto a = std::make_shared<ProfileArgs>();
  using Fn = Status (*)(const CliContext&, const ProfileArgs&);
  auto sub = [&](const char* name, const char* help, Fn fn) {
    CLI::App* s = cmd->add_subcommand(name, help);
    add_json_flag(s, ctx);
    s->callback([&ctx, a, fn] { ctx.action = [&ctx, a, fn] { return fn(ctx, *a); }; });
    return s;
  };
  CLI::App* list = sub("list", "List the stored profiles", list_command);
  add_db_path_option(list, a->db);
  CLI::App* show = sub("show", "A stored profile's parameters and provenance", show_command);
  show->add_option("name", a->name, "Profile name")->required();
  show->add_flag("--samples", a->samples, "Also list the calibration samples it was fitted to");
  add_db_path_option(show, a->db);
  CLI::App* exp =
      sub("export", "Write a stored profile as a profile document (JSON)", export_command);
  exp->add_option("name", a->name, "Profile name")->required();
  exp->add_option("-o,--output", a->output, "File to write (default: standard output)");
  add_db_path_option(exp, a->db);
  CLI::App* imp = sub("import", "Store a profile document (JSON) in the database", import_command);
  imp->add_option("file", a->file, "Profile document (kind \"profile\")")
      ->required()
      ->type_name("PROFILE.json");
  imp->add_option("--name", a->name, "Store it under this name (default: its own)");
  imp->add_flag("--replace", a->replace, "Replace a stored profile of the same name");
  add_db_options(imp, a->db);
  CLI::App* del = sub("delete", "Delete a stored profile and its samples", delete_command);
  del->add_option("name", a->name, "Profile name")->required();
  add_db_path_option(del, a->db);
}

}  // namespace planner::cli
