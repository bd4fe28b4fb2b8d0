#include "planner/core/gpu_spec.hpp"

#include <algorithm>
#include <cctype>

#include "planner/core/pricing.hpp"

namespace planner {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

const PriceEntry* GpuSpec::price_for(Offering o) const {
  PriceQuery query;
  query.offering = o;
  return pick_price(prices, query);
}

bool GpuSpec::matches(std::string_view query) const {
  if (iequals(name, query)) return true;
  return std::any_of(aliases.begin(), aliases.end(),
                     [&](const std::string& a) { return iequals(a, query); });
}

}  // namespace planner
