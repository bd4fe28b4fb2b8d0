// Validators for numeric flags: a value must be a finite number (or a whole number) in a range,
// and the error names the flag and says what was expected in plain numbers ("--tokens: expected a
// number from 0 to 1e16, got nan"); NaN, infinities and out-of-range values never pass.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace planner::cli {

// A finite number in [lo, hi]; with `lo_open`, lo itself is refused (> lo).
CLI::Validator number_in(double lo, double hi, bool lo_open = false);
// A whole number in [lo, hi] (each item of a comma-separated list is checked).
CLI::Validator whole_in(long long lo, long long hi);

// A bound as a user reads it: 0, 1024, 1e16, 0.5.
std::string bound_text(double v);

}  // namespace planner::cli
