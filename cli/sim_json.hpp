// JSON pieces shared by the commands that print the simulator's results.
#pragma once

#include <string>

#include "planner/core/json_reader.hpp"
#include "planner/sim/program_runner.hpp"

namespace planner::cli {

// Exposed communication per axis, {"tp_s": ..., "cp_s": ..., ..., "other_s": ...}, from
// `seconds(bucket)` (seconds of the step the axis's communication was exposed).
template <class Seconds>
Json exposed_comm_json(Seconds&& seconds) {
  Json exposed = Json::object();
  for (sim::TimeBucket b : sim::kCommBuckets)
    exposed[std::string(to_string(b)) + "_s"] = seconds(b);
  return exposed;
}

}  // namespace planner::cli
