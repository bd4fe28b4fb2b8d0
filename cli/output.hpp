// Console output for the planner CLI: aligned tables, key/value blocks, numbers and error
// reporting.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace planner::cli {

enum class Align { kLeft, kRight };

// A plain-text table: a header row, then rows, columns separated by two spaces.
class Table {
 public:
  struct Column {
    std::string title;
    Align align = Align::kLeft;
  };
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  void add_row(std::vector<std::string> cells);
  void print(std::ostream& out) const;
  std::size_t rows() const { return rows_.size(); }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// "name:  value" lines with the values aligned.
class KeyValues {
 public:
  void add(std::string key, std::string value);
  void print(std::ostream& out) const;

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// Fixed-point number with `decimals` digits ("3.35"); an empty string for NaN.
std::string fmt(double value, int decimals = 2);
// Thousands separators: 175000000000 -> "175,000,000,000".
std::string fmt_int(long long value);
// 1.75e11 -> "175.0B", 8.03e9 -> "8.03B", 1.2e6 -> "1.2M"; from 1e15 in scientific notation
// ("3.20e+17"); "-" for NaN and infinities.
std::string fmt_count(double value);

// An error for the user: "error: " before each line of `message`; nothing for an empty message
// (one that was reported already, as the ranks of `planner exec` report theirs).
void print_error(std::ostream& err, std::string_view message);

}  // namespace planner::cli
