// planner price list [--gpu G] [--offering O] [--provider P] | show GPU
//
// The price catalogue (core/presets/prices, dated and sourced) and, with --prices FILE, a user's
// price file in the same schema. `list --json` writes the records in that schema, so its output
// is a price file one can edit and pass back with --prices.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>

#include "app.hpp"
#include "output.hpp"
#include "plan_args.hpp"
#include "planner/app/defaults.hpp"
#include "planner/core/pricing.hpp"
#include "planner/core/spec_json.hpp"

namespace planner::cli {
namespace {

struct PriceArgs {
  std::string gpu;
  std::string offering;
  std::string provider;
  std::vector<std::string> price_files;
  std::string today;
  bool csv = false;
};

Result<CalendarDate> today_of(const PriceArgs& a) {
  if (a.today.empty()) return app::today();
  auto d = parse_calendar_date(a.today);
  if (!d) return Status::invalid_input("--today: expected YYYY-MM-DD, got \"" + a.today + "\"");
  return *d;
}

Result<std::vector<PriceEntry>> user_prices(const PriceArgs& a) {
  std::vector<PriceEntry> all;
  for (const std::string& path : a.price_files) {
    PLANNER_ASSIGN_OR_RETURN(std::vector<PriceEntry> records, load_price_file(path));
    all.insert(all.end(), records.begin(), records.end());
  }
  return all;
}

// The catalogue GPU a record prices ("B200" -> "B200-SXM-180GB"), or the record's own name.
std::string gpu_name(const Catalog& catalog, const PriceEntry& p) {
  const GpuSpec* g = catalog.find_gpu(p.gpu);
  return g ? g->name : p.gpu;
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void print_csv(std::ostream& out, const Catalog& catalog, const std::vector<PriceEntry>& records) {
  out << "gpu,provider,instance,gpus_per_instance,offering,usd_per_instance_hour,usd_per_gpu_hour,"
         "region,date,period,source,notes,origin\n";
  for (const PriceEntry& p : records) {
    out << csv_escape(gpu_name(catalog, p)) << ',' << csv_escape(p.provider) << ','
        << csv_escape(p.instance) << ',' << p.gpus_per_instance << ',' << to_string(p.offering)
        << ',' << (p.usd_per_instance_hour ? fmt(p.usd_per_instance_hour->raw(), 6) : "") << ','
        << fmt(p.usd_per_gpu_hour.raw(), 6) << ',' << csv_escape(p.region) << ','
        << csv_escape(p.date) << ',' << p.period.label() << ',' << csv_escape(p.source) << ','
        << csv_escape(p.notes) << ',' << csv_escape(p.origin) << '\n';
  }
}

// The table: one row per record, sources as numbered notes below it.
void print_table(std::ostream& out, const Catalog& catalog, const std::vector<PriceEntry>& records,
                 const CalendarDate& today) {
  Table t({{"GPU"},
           {"PROVIDER"},
           {"INSTANCE"},
           {"GPUS", Align::kRight},
           {"$/GPU-h", Align::kRight},
           {"OFFERING"},
           {"REGION"},
           {"DATE"},
           {"SOURCE", Align::kRight}});
  std::map<std::string, int> source_ids;
  std::vector<std::string> sources;
  int stale = 0, undated = 0;
  for (const PriceEntry& p : records) {
    auto [it, inserted] = source_ids.emplace(p.source, static_cast<int>(sources.size()) + 1);
    if (inserted) sources.push_back(p.source);
    std::string date = p.period.label();
    if (const auto age = price_age_days(p, today); age && *age > kStaleAfterDays) {
      date += " *";
      ++stale;
    }
    if (!p.dated()) ++undated;
    t.add_row(
        {gpu_name(catalog, p), p.provider, p.instance, std::to_string(p.gpus_per_instance),
         fmt(p.usd_per_gpu_hour.raw(), 3), std::string(to_string(p.offering)),
         p.region.empty() ? "-" : p.region, date,
         (p.origin == "catalogue" ? "" : p.origin + " ") + "[" + std::to_string(it->second) + "]"});
  }
  t.print(out);
  out << "\n" << records.size() << " prices";
  if (stale > 0) {
    out << "; * " << stale << " older than 12 months (before "
        << date_from_days(today.days_since_epoch() - kStaleAfterDays).to_string() << ")";
  }
  if (undated > 0) out << "; " << undated << " undated (catalogue snapshots)";
  out << ". Full dates, regions and notes: --json or --csv.\n\nSources:\n";
  for (std::size_t i = 0; i < sources.size(); ++i)
    out << "  [" << i + 1 << "] " << sources[i] << '\n';
}

Status price_list(const CliContext& ctx, const PriceArgs& a) {
  const Catalog& catalog = *ctx.catalog;
  PLANNER_ASSIGN_OR_RETURN(CalendarDate today, today_of(a));
  std::optional<Offering> offering;
  if (!a.offering.empty()) {
    PLANNER_ASSIGN_OR_RETURN(offering, parse_flag<Offering>("--offering", a.offering));
  }
  const GpuSpec* gpu = nullptr;
  if (!a.gpu.empty()) {
    PLANNER_ASSIGN_OR_RETURN(GpuSpec g, catalog.gpu(a.gpu));
    gpu = catalog.find_gpu(g.name);
  }
  PLANNER_ASSIGN_OR_RETURN(std::vector<PriceEntry> records, user_prices(a));
  const std::span<const PriceEntry> builtin = builtin_prices();
  records.insert(records.end(), builtin.begin(), builtin.end());
  std::vector<PriceEntry> shown;
  bool provider_known = a.provider.empty();
  for (const PriceEntry& p : records) {
    if (!a.provider.empty() && same_provider(p.provider, a.provider)) provider_known = true;
    if (gpu != nullptr && !gpu->matches(p.gpu)) continue;
    if (offering && p.offering != *offering) continue;
    if (!a.provider.empty() && !same_provider(p.provider, a.provider)) continue;
    shown.push_back(p);
  }
  if (!provider_known) {
    std::vector<std::string> names;
    for (const PriceEntry& p : records) {
      if (std::none_of(names.begin(), names.end(),
                       [&](const std::string& n) { return same_provider(n, p.provider); })) {
        names.push_back(p.provider);
      }
    }
    std::sort(names.begin(), names.end());
    std::string list;
    for (const std::string& n : names)
      list += (list.empty() ? "" : ", ") + n;
    return Status::invalid_input("--provider: no prices from \"" + a.provider +
                                 "\"; providers: " + list);
  }
  // Catalogue order of GPUs, then offering, then price.
  auto gpu_rank = [&](const PriceEntry& p) {
    const auto& gpus = catalog.gpus();
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      if (gpus[i].matches(p.gpu)) return i;
    }
    return gpus.size();
  };
  std::stable_sort(shown.begin(), shown.end(), [&](const PriceEntry& x, const PriceEntry& y) {
    const auto gx = gpu_rank(x), gy = gpu_rank(y);
    if (gx != gy) return gx < gy;
    if (x.offering != y.offering) return x.offering < y.offering;
    return x.usd_per_gpu_hour < y.usd_per_gpu_hour;
  });
  std::ostream& out = *ctx.out;
  if (ctx.json) {
    Json arr = Json::array();
    for (const PriceEntry& p : shown)
      arr.push_back(to_json(p));
    out << arr.dump(2) << '\n';
    return Status::ok();
  }
  if (a.csv) {
    print_csv(out, catalog, shown);
    return Status::ok();
  }
  if (shown.empty()) {
    out << "No prices match";
    if (gpu != nullptr && gpu->price_as)
      out << " (" << gpu->name << " is priced as " << gpu->price_as->gpu << ")";
    out << ".\n";
    return Status::ok();
  }
  print_table(out, catalog, shown, today);
  return Status::ok();
}

Json chosen_json(const ChosenPrice& c) {
  Json j{{"offering", to_string(c.offering)},
         {"usd_per_gpu_hour", c.usd_per_gpu_hour.raw()},
         {"rule", c.rule}};
  if (c.entry) {
    j["price"] = to_json(*c.entry);
    if (!c.entry->priced_as.empty()) j["priced_as"] = c.entry->priced_as;
  }
  if (c.age_days) j["age_days"] = *c.age_days;
  j["stale"] = c.stale;
  j["undated"] = c.undated;
  j["warnings"] = c.warnings;
  return j;
}

Status price_show(const CliContext& ctx, const std::string& name, const PriceArgs& a) {
  const Catalog& catalog = *ctx.catalog;
  PLANNER_ASSIGN_OR_RETURN(GpuSpec g, catalog.gpu(name));
  PLANNER_ASSIGN_OR_RETURN(CalendarDate today, today_of(a));
  PLANNER_ASSIGN_OR_RETURN(std::vector<PriceEntry> files, user_prices(a));
  std::vector<Offering> offerings;
  if (!a.offering.empty()) {
    PLANNER_ASSIGN_OR_RETURN(Offering o, parse_flag<Offering>("--offering", a.offering));
    offerings.push_back(o);
  } else {
    for (const auto& [o, n] : EnumTraits<Offering>::kNames)
      offerings.push_back(o);
  }
  // The price a plan is costed at, per offering.
  std::vector<ChosenPrice> chosen;
  std::vector<std::string> missing;
  for (Offering o : offerings) {
    PriceQuery q;
    q.offering = o;
    q.provider = a.provider;
    auto c = choose_price(g, q, {}, files, today);
    if (c) {
      chosen.push_back(std::move(c).value());
    } else if (offerings.size() == 1) {
      return c.status();
    } else {
      missing.emplace_back(to_string(o));
    }
  }
  if (chosen.empty()) {
    PriceQuery q;
    q.provider = a.provider;
    return choose_price(g, q, {}, files, today).status();
  }
  std::vector<PriceEntry> records;
  for (const PriceEntry& p : files) {
    if (g.matches(p.gpu)) records.push_back(p);
  }
  records.insert(records.end(), g.prices.begin(), g.prices.end());
  std::ostream& out = *ctx.out;
  if (ctx.json) {
    Json defaults = Json::array();
    for (const ChosenPrice& c : chosen)
      defaults.push_back(chosen_json(c));
    Json prices = Json::array();
    for (const PriceEntry& p : records)
      prices.push_back(to_json(p));
    Json j{{"gpu", g.name}, {"today", today.to_string()}, {"chosen", defaults}, {"prices", prices}};
    if (g.price_as) j["price_as"] = {{"gpu", g.price_as->gpu}, {"reason", g.price_as->reason}};
    out << j.dump(2) << '\n';
    return Status::ok();
  }
  if (a.csv) {
    print_csv(out, catalog, records);
    return Status::ok();
  }
  out << g.name << ": the price a plan is costed at, per offering"
      << (a.provider.empty() ? "" : " (provider " + a.provider + ")") << "\n";
  Table t(
      {{"OFFERING"}, {"$/GPU-h", Align::kRight}, {"PROVIDER"}, {"INSTANCE"}, {"DATE"}, {"WHY"}});
  for (const ChosenPrice& c : chosen) {
    const PriceEntry& p = *c.entry;
    t.add_row({std::string(to_string(c.offering)), fmt(c.usd_per_gpu_hour.raw(), 3), p.provider,
               p.instance, p.period.label() + (c.stale ? " *" : ""), c.rule});
  }
  t.print(out);
  // A borrowed price says so once (its first warning); the others are per offering.
  std::vector<std::string> warnings;
  for (const ChosenPrice& c : chosen) {
    const bool borrowed = c.entry && !c.entry->priced_as.empty();
    for (std::size_t i = 0; i < c.warnings.size(); ++i) {
      const std::string line = borrowed && i == 0
                                   ? c.warnings[i]
                                   : std::string(to_string(c.offering)) + ": " + c.warnings[i];
      if (std::find(warnings.begin(), warnings.end(), line) == warnings.end()) {
        warnings.push_back(line);
      }
    }
  }
  for (const std::string& w : warnings)
    out << "warning: " << w << '\n';
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing)
      list += (list.empty() ? "" : ", ") + m;
    out << "No " << list << " price" << (a.provider.empty() ? "" : " from " + a.provider)
        << ": give one with --price " << g.name << "=USD_PER_GPU_HOUR or a price file.\n";
  }
  out << "\nDefault rule: " << kReferenceProvider
      << " (the reference provider) when it has the offering, else any provider; the largest "
         "instance, dated before undated, the newest, the cheapest. Override with --provider.\n";
  if (g.price_as) {
    out << "\n"
        << g.name << " is priced as " << g.price_as->gpu << ": " << g.price_as->reason << ".\n";
  }
  out << "\nAll prices of " << (g.price_as ? g.price_as->gpu : g.name) << ":\n";
  print_table(out, catalog, records, today);
  return Status::ok();
}

void add_common(CLI::App* cmd, PriceArgs& a, CliContext& ctx) {
  cmd->add_option("--offering", a.offering,
                  "on-demand, spot, reserved-1y, reserved-3y or capacity-block");
  cmd->add_option("--provider", a.provider, "only this provider's prices (e.g. AWS, GCP, Lambda)");
  cmd->add_option("--prices", a.price_files,
                  "a price file (the schema of `planner price list --json`) to include");
  cmd->add_option("--today", a.today,
                  "the date prices are aged against, YYYY-MM-DD (default: today); a price older "
                  "than 12 months is marked *");
  cmd->add_flag("--csv", a.csv, "CSV instead of a table");
  add_json_flag(cmd, ctx);
}

}  // namespace

void register_price_commands(CLI::App& app, CliContext& ctx) {
  CLI::App* price = app.add_subcommand(
      "price", "Cloud prices per GPU-hour: dated, sourced, per provider, instance and offering");
  price->require_subcommand(1);

  auto list_args = std::make_shared<PriceArgs>();
  CLI::App* list = price->add_subcommand("list",
                                         "List the catalogue's prices (filter by GPU, "
                                         "offering, provider)");
  list->add_option("--gpu", list_args->gpu, "GPU name or alias (e.g. H100, b200)");
  add_common(list, *list_args, ctx);
  list->callback([&ctx, list_args] {
    ctx.action = [&ctx, list_args] { return price_list(ctx, *list_args); };
  });

  auto show_args = std::make_shared<PriceArgs>();
  auto name = std::make_shared<std::string>();
  CLI::App* show = price->add_subcommand(
      "show", "The price a plan on this GPU is costed at, per offering, and why; then every price");
  show->add_option("GPU", *name, "GPU name or alias (e.g. H100, a100-80gb)")->required();
  add_common(show, *show_args, ctx);
  show->callback([&ctx, show_args, name] {
    ctx.action = [&ctx, show_args, name] { return price_show(ctx, *name, *show_args); };
  });
}

}  // namespace planner::cli
