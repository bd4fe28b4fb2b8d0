#include "planner/sim/compute_units.hpp"

#include <algorithm>
#include <cmath>

#include "planner/sim/model_registry.hpp"

namespace planner::sim {

ComputeUnits::ComputeUnits(Engine& engine, std::uint32_t done_kind, const ComputeProfile& profile)
    : engine_(&engine), done_kind_(done_kind), profile_(&profile) {}

std::uint32_t ComputeUnits::add(int node) {
  const auto unit = static_cast<std::uint32_t>(units_.size());
  std::uint32_t pool = 0;
  if (profile_->host_cores > 0 && node >= 0) {
    // CPU ranks share their node's cores.
    if (static_cast<std::size_t>(node) >= pool_of_node_.size()) {
      pool_of_node_.resize(static_cast<std::size_t>(node) + 1, -1);
    }
    std::int32_t& p = pool_of_node_[static_cast<std::size_t>(node)];
    if (p < 0) {
      p = static_cast<std::int32_t>(pools_.size());
      pools_.push_back(Pool{profile_->host_cores, 0, {}});
    }
    pool = static_cast<std::uint32_t>(p);
  } else {
    // A GPU: its SMs are its own.
    pool = static_cast<std::uint32_t>(pools_.size());
    pools_.push_back(Pool{});
  }
  pools_[pool].units.push_back(unit);
  units_.push_back(Unit{});
  units_.back().pool = pool;
  return unit;
}

void ComputeUnits::reshare(const Pool& pool) {
  for (std::uint32_t unit : pool.units) {
    if (units_[unit].busy) reschedule(unit);
  }
}

void ComputeUnits::reschedule(std::uint32_t unit) {
  Unit& u = units_[unit];
  const Time now = engine_->now();
  u.work_left = std::max(0.0, u.work_left - u.rate * static_cast<double>((now - u.since).raw()));
  u.since = now;
  implements(SimModel::kCommSmSharing);
  u.rate = u.comm > 0 ? 1.0 - profile_->comm_slowdown : 1.0;
  const Pool& p = pools_[u.pool];
  if (p.cores > 0 && p.computing > p.cores) {
    implements(SimModel::kCoreSharing);
    u.rate *= static_cast<double>(p.cores) / p.computing * profile_->oversubscribed_efficiency;
  }
  engine_->cancel(u.event);
  u.event = engine_->schedule(now + Time(std::llround(u.work_left / u.rate)), done_kind_, unit);
}

}  // namespace planner::sim
