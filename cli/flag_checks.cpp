#include "flag_checks.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace planner::cli {

std::string bound_text(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) >= 1e7 || std::fabs(v) < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
    std::string s = buf;
    // 1e+16 -> 1e16, 1e-05 -> 1e-5
    const auto e = s.find('e');
    if (e != std::string::npos) {
      std::string mant = s.substr(0, e), exp = s.substr(e + 1);
      if (!exp.empty() && exp[0] == '+') exp.erase(0, 1);
      const bool neg = !exp.empty() && exp[0] == '-';
      if (neg) exp.erase(0, 1);
      while (exp.size() > 1 && exp[0] == '0')
        exp.erase(0, 1);
      s = mant + "e" + (neg ? "-" : "") + exp;
    }
    return s;
  }
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

namespace {

std::string range_text(const std::string& lo, const std::string& hi, bool lo_open) {
  return (lo_open ? "above " + lo + (hi.empty() ? "" : " and at most " + hi)
                  : "from " + lo + (hi.empty() ? "" : " to " + hi));
}

}  // namespace

CLI::Validator number_in(double lo, double hi, bool lo_open) {
  const std::string expected =
      "a number " +
      range_text(bound_text(lo), std::isinf(hi) ? std::string() : bound_text(hi), lo_open);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool parsed = end != text.c_str() && *end == '\0' && errno != ERANGE;
        if (!parsed || !std::isfinite(v) || v < lo || (lo_open && v == lo) || v > hi) {
          return "expected " + expected + ", got \"" + text + "\"";
        }
        return {};
      },
      "NUMBER");
}

CLI::Validator whole_in(long long lo, long long hi) {
  const std::string expected =
      "a whole number " + range_text(std::to_string(lo), std::to_string(hi), false);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (end == text.c_str() || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
          return "expected " + expected + ", got \"" + text + "\"";
        }
        return {};
      },
      "INT");
}

}  // namespace planner::cli
