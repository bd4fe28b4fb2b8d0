#include "output.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

namespace planner::cli {
namespace {

// Display width of a UTF-8 string (counts code points, which is right for the text planner prints).
std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

void pad(std::ostream& out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    out << ' ';
}

}  // namespace

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

void Table::print(std::ostream& out) const {
  std::vector<std::size_t> width(columns_.size());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    width[c] = display_width(columns_[c].title);
    for (const auto& row : rows_)
      width[c] = std::max(width[c], display_width(row[c]));
  }
  auto emit = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::size_t w = display_width(cells[c]);
      const bool last = c + 1 == cells.size();
      if (columns_[c].align == Align::kRight) {
        pad(out, width[c] - w);
        out << cells[c];
      } else {
        out << cells[c];
        if (!last) pad(out, width[c] - w);
      }
      if (!last) out << "  ";
    }
    out << '\n';
  };
  std::vector<std::string> header;
  for (const Column& col : columns_)
    header.push_back(col.title);
  emit(header);
  for (const auto& row : rows_)
    emit(row);
}

void KeyValues::add(std::string key, std::string value) {
  items_.emplace_back(std::move(key), std::move(value));
}

void KeyValues::print(std::ostream& out) const {
  std::size_t w = 0;
  for (const auto& [k, v] : items_)
    w = std::max(w, display_width(k));
  for (const auto& [k, v] : items_) {
    out << k << ':';
    pad(out, w - display_width(k) + 2);
    out << v << '\n';
  }
}

std::string fmt(double value, int decimals) {
  if (std::isnan(value)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string fmt_int(long long value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  int n = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (n > 0 && n % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return value < 0 ? "-" + out : out;
}

std::string fmt_count(double value) {
  if (!std::isfinite(value)) return "-";
  const double a = std::fabs(value);
  if (a >= 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2e", value);
    return buf;
  }
  if (a >= 1e12) return fmt(value / 1e12, 2) + "T";
  if (a >= 1e9) return fmt(value / 1e9, a >= 1e11 ? 1 : 2) + "B";
  if (a >= 1e6) return fmt(value / 1e6, 1) + "M";
  if (a >= 1e3) return fmt(value / 1e3, 1) + "K";
  return fmt(value, 0);
}

void print_error(std::ostream& err, std::string_view message) {
  if (message.empty()) return;
  while (true) {
    const auto nl = message.find('\n');
    err << "error: " << message.substr(0, nl) << '\n';
    if (nl == std::string_view::npos) break;
    message.remove_prefix(nl + 1);
  }
}

}  // namespace planner::cli
