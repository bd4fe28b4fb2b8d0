#include "planner/store/profiles.hpp"

#include <string>

#include "impl.hpp"
#include "planner/store/runs.hpp"

namespace planner::store {
namespace {

constexpr const char* kProfileColumns =
    "SELECT id, name, description, parameters_json, provenance, run_id, created_unix_ms, "
    "(SELECT count(*) FROM calibration_samples c WHERE c.profile_id = hardware_profiles.id) "
    "FROM hardware_profiles ";

HardwareProfile read_profile(detail::Statement& row) {
  HardwareProfile p;
  p.id = ProfileId{row.int64(0)};
  p.name = row.text(1);
  p.description = row.text(2);
  p.parameters_json = row.text(3);
  p.provenance = row.text(4);
  if (auto run = row.opt_int64(5)) p.run = RunId{*run};
  p.created_unix_ms = row.int64(6);
  p.sample_count = row.int64(7);
  return p;
}

Result<std::optional<ProfileId>> find_profile(Database& db, std::string_view name) {
  PLANNER_ASSIGN_OR_RETURN(auto stmt,
                           db.impl().prepare("SELECT id FROM hardware_profiles WHERE name = ?1"));
  stmt->bind(1, name);
  PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
  if (!row) return std::optional<ProfileId>();
  return std::optional<ProfileId>(ProfileId{stmt->int64(0)});
}

Status profile_not_found(Database& db, std::string_view name) {
  std::string known;
  auto profiles = list_profiles(db);
  if (profiles) {
    for (const HardwareProfile& p : *profiles)
      known += (known.empty() ? "" : ", ") + p.name;
  }
  return Status::not_found(
      "no hardware profile \"" + std::string(name) + "\" in " + db.impl().path +
      "; known profiles: " + (known.empty() ? "none (run planner calibrate)" : known));
}

}  // namespace

Result<ProfileId> put_profile(Database& db, const NewProfile& profile,
                              std::span<const CalibrationSample> samples, ProfileWrite mode) {
  if (profile.name.empty()) return Status::invalid_input("a hardware profile needs a name");
  PLANNER_RETURN_IF_ERROR(detail::check_json(
      profile.parameters_json, "the parameters of hardware profile \"" + profile.name + "\""));
  Database::Impl& impl = db.impl();
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, db.write());
  if (profile.run) PLANNER_RETURN_IF_ERROR(require_run(db, *profile.run));
  PLANNER_ASSIGN_OR_RETURN(std::optional<ProfileId> existing, find_profile(db, profile.name));
  if (existing) {
    if (mode == ProfileWrite::kCreate) {
      return Status::invalid_input("a hardware profile named \"" + profile.name +
                                   "\" already exists in " + impl.path);
    }
    PLANNER_RETURN_IF_ERROR(delete_profile(db, profile.name));
  }
  PLANNER_ASSIGN_OR_RETURN(auto insert,
                           impl.prepare("INSERT INTO hardware_profiles (name, description, "
                                        "parameters_json, provenance, run_id, created_unix_ms) "
                                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  insert->bind(1, profile.name);
  insert->bind(2, profile.description);
  insert->bind(3, profile.parameters_json);
  insert->bind(4, profile.provenance);
  if (profile.run) {
    insert->bind(5, profile.run->value);
  } else {
    insert->bind(5, std::nullopt);
  }
  insert->bind(6, detail::now_unix_ms());
  PLANNER_RETURN_IF_ERROR(insert.run());
  const ProfileId id{sqlite3_last_insert_rowid(impl.conn.get())};

  PLANNER_ASSIGN_OR_RETURN(
      auto sample,
      impl.prepare("INSERT INTO calibration_samples (profile_id, seq, benchmark, shape, precision, "
                   "bytes, group_size, iterations, time_ps, algbw_GBps, busbw_GBps, tflops) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"));
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const CalibrationSample& s = samples[i];
    sample->bind(1, id.value);
    sample->bind(2, static_cast<std::int64_t>(i));
    sample->bind(3, s.benchmark);
    sample->bind(4, s.shape);
    sample->bind(5, s.precision);
    sample->bind(6, s.bytes);
    sample->bind(7, s.group_size);
    sample->bind(8, s.iterations);
    sample->bind(9, s.time);
    sample->bind(10, detail::to_GBps(s.algbw));
    sample->bind(11, detail::to_GBps(s.busbw));
    if (s.flop_rate) {
      sample->bind(12, to_tflops_per_s(*s.flop_rate));
    } else {
      sample->bind(12, std::nullopt);
    }
    PLANNER_RETURN_IF_ERROR(sample.run());
  }
  PLANNER_RETURN_IF_ERROR(tx.commit());
  return id;
}

Result<HardwareProfile> get_profile(Database& db, std::string_view name) {
  {
    PLANNER_ASSIGN_OR_RETURN(auto stmt,
                             db.impl().prepare(std::string(kProfileColumns) + "WHERE name = ?1"));
    stmt->bind(1, name);
    PLANNER_ASSIGN_OR_RETURN(bool row, stmt.next());
    if (row) return read_profile(*stmt);
  }
  return profile_not_found(db, name);
}

Result<std::vector<HardwareProfile>> list_profiles(Database& db) {
  PLANNER_ASSIGN_OR_RETURN(auto stmt,
                           db.impl().prepare(std::string(kProfileColumns) + "ORDER BY name"));
  return detail::collect<HardwareProfile>(stmt, read_profile);
}

Result<std::vector<CalibrationSample>> get_calibration_samples(Database& db, ProfileId profile) {
  PLANNER_ASSIGN_OR_RETURN(
      auto stmt,
      db.impl().prepare("SELECT benchmark, shape, precision, bytes, group_size, iterations, "
                        "time_ps, algbw_GBps, busbw_GBps, tflops FROM calibration_samples "
                        "WHERE profile_id = ?1 ORDER BY seq"));
  stmt->bind(1, profile.value);
  return detail::collect<CalibrationSample>(stmt, [](detail::Statement& row) {
    CalibrationSample s;
    s.benchmark = row.text(0);
    s.shape = row.text(1);
    s.precision = row.text(2);
    s.bytes = Bytes(row.int64(3));
    s.group_size = row.int32(4);
    s.iterations = row.int64(5);
    s.time = Time(row.int64(6));
    s.algbw = detail::from_GBps(row.opt_real(7));
    s.busbw = detail::from_GBps(row.opt_real(8));
    if (auto tflops = row.opt_real(9)) s.flop_rate = tflops_per_s(*tflops);
    return s;
  });
}

Status delete_profile(Database& db, std::string_view name) {
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, db.write());
  PLANNER_ASSIGN_OR_RETURN(std::optional<ProfileId> existing, find_profile(db, name));
  if (!existing) return profile_not_found(db, name);
  PLANNER_ASSIGN_OR_RETURN(auto stmt,
                           db.impl().prepare("DELETE FROM hardware_profiles WHERE id = ?1"));
  stmt->bind(1, existing->value);
  PLANNER_RETURN_IF_ERROR(stmt.run());
  return tx.commit();
}

}  // namespace planner::store
