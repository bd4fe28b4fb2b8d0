#include "planner/sim/network.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "planner/sim/model_registry.hpp"

namespace planner::sim {

void aggregate_uses(std::vector<LinkUse>& uses) {
  std::sort(uses.begin(), uses.end(),
            [](const LinkUse& a, const LinkUse& b) { return a.resource < b.resource; });
  std::size_t out = 0;
  for (std::size_t i = 0; i < uses.size(); ++i) {
    if (out > 0 && uses[out - 1].resource == uses[i].resource) {
      uses[out - 1].count += uses[i].count;
    } else {
      uses[out++] = uses[i];
    }
  }
  uses.resize(out);
}

Network::Network(std::vector<double> capacity, Engine& engine, std::uint32_t done_kind)
    : engine_(&engine),
      done_kind_(done_kind),
      slot_(capacity.size()),
      crowd_(capacity.size()),
      link_stamp_(capacity.size(), 0),
      rem_(capacity.size(), 0.0),
      cnt_(capacity.size(), 0) {
  for (std::size_t r = 0; r < capacity.size(); ++r)
    slot_[r].capacity = capacity[r];
}

TransferId Network::start(const std::vector<LinkUse>& uses, double bytes, std::uint64_t owner) {
  TransferId id = 0;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<TransferId>(transfers_.size());
    transfers_.emplace_back();
    transfer_stamp_.push_back(0);
    new_rate_.push_back(0);
    fixed_.push_back(0);
  }
  Transfer& t = transfers_[id];
  t.uses = &uses;
  t.merged.clear();
  t.shared.clear();
  t.remaining = std::max(bytes, 0.0);
  t.rate = 0;
  t.updated = engine_->now();
  t.event = kNoEvent;
  t.owner = owner;
  t.active = true;
  ++active_;
  ++stats_.transfers;
  if (uses.empty() || t.remaining <= 0) {
    t.rate = std::numeric_limits<double>::infinity();
    t.event = engine_->schedule(engine_->now(), done_kind_, id);
    return id;
  }
  if (attach(id)) {
    next_stamp();
    transfer_stamp_[id] = stamp_;
    comp_.assign(1, id);
    solve_seeded();
    return id;
  }
  // No other transfer on any of its resources: the component is this transfer and its uses.
  comp_.assign(1, id);
  count_solve(0);
  new_rate_[id] = t.alone;
  apply_rates();
  return id;
}

bool Network::occupy(TransferId id, const LinkUse& u) {
  Slot& s = slot_[static_cast<std::size_t>(u.resource)];
  if (s.n == 0) {
    s.id = id;
    s.count = u.count;
    s.n = 1;
    return false;
  }
  auto& crowd = crowd_[static_cast<std::size_t>(u.resource)];
  if (s.n == 1) {
    crowd.assign(1, {s.id, s.count});
    transfers_[s.id].shared.push_back({u.resource, s.count});
  }
  crowd.push_back({id, u.count});
  ++s.n;
  transfers_[id].shared.push_back(u);
  return true;
}

bool Network::release(TransferId id, std::int32_t resource) {
  Slot& s = slot_[static_cast<std::size_t>(resource)];
  if (s.n == 0) return false;
  if (s.n == 1) {
    if (s.id != id) return false;
    s.n = 0;
    return true;
  }
  auto& crowd = crowd_[static_cast<std::size_t>(resource)];
  const auto it =
      std::find_if(crowd.begin(), crowd.end(), [id](const OnLink& o) { return o.id == id; });
  if (it == crowd.end()) return false;
  *it = crowd.back();
  crowd.pop_back();
  if (--s.n == 1) {
    // The one transfer left there no longer shares the resource.
    s.id = crowd.front().id;
    s.count = crowd.front().count;
    crowd.clear();
    auto& other = transfers_[s.id].shared;
    const auto at = std::find_if(other.begin(), other.end(),
                                 [&](const LinkUse& o) { return o.resource == resource; });
    if (at != other.end()) {
      *at = other.back();
      other.pop_back();
    }
  }
  return true;
}

bool Network::attach(TransferId id) {
  Transfer& t = transfers_[id];
  const std::vector<LinkUse>& uses = *t.uses;
  bool shared = false;
  for (std::size_t i = 0; i < uses.size(); ++i) {
    const LinkUse& u = uses[i];
    const Slot& s = slot_[static_cast<std::size_t>(u.resource)];
    const bool repeated =
        s.n == 1 ? s.id == id
                 : s.n > 1 && crowd_[static_cast<std::size_t>(u.resource)].back().id == id;
    if (repeated) {
      // A resource listed twice: take this transfer off again and use its uses aggregated.
      for (std::size_t j = 0; j < i; ++j)
        release(id, uses[j].resource);
      t.shared.clear();
      t.merged = uses;
      aggregate_uses(t.merged);
      shared = false;
      for (const LinkUse& m : t.merged)
        shared = occupy(id, m) || shared;
      break;
    }
    shared = occupy(id, u) || shared;
  }
  t.alone = std::numeric_limits<double>::infinity();
  t.alone_at = -1;
  for (const LinkUse& u : uses_of(t)) {
    if (u.count <= 0) continue;
    const double level =
        slot_[static_cast<std::size_t>(u.resource)].capacity / static_cast<double>(u.count);
    if (level < t.alone || (level == t.alone && u.resource < t.alone_at)) {
      t.alone = level;
      t.alone_at = u.resource;
    }
  }
  return shared;
}

std::uint64_t Network::finish(TransferId id) {
  Transfer& t = transfers_[id];
  assert(t.active);
  t.active = false;
  --active_;
  const std::uint64_t owner = t.owner;
  for (const LinkUse& u : uses_of(t))
    release(id, u.resource);
  // The transfers left on its shared resources seed the component to re-solve; a transfer that
  // shared no resource leaves an empty component: no rate changes.
  if (!t.shared.empty() && std::isfinite(t.rate)) {
    next_stamp();
    comp_.clear();
    for (const LinkUse& u : t.shared) {
      for_each_on(u.resource, [&](TransferId o, std::int32_t) {
        if (transfer_stamp_[o] != stamp_) {
          transfer_stamp_[o] = stamp_;
          comp_.push_back(o);
        }
      });
    }
    if (!comp_.empty()) solve_seeded();
  }
  t.shared.clear();
  free_.push_back(id);
  return owner;
}

void Network::count_solve(std::size_t links) {
  ++stats_.solves;
  stats_.solve_links += links;
  stats_.largest_component = std::max(stats_.largest_component, comp_.size());
}

void Network::next_stamp() {
  if (++stamp_ == 0) {
    std::fill(link_stamp_.begin(), link_stamp_.end(), 0);
    std::fill(transfer_stamp_.begin(), transfer_stamp_.end(), 0);
    stamp_ = 1;
  }
}

void Network::solve_seeded() {
  comp_links_.clear();
  for (std::size_t i = 0; i < comp_.size(); ++i) {
    for (const LinkUse& u : transfers_[comp_[i]].shared) {
      const auto li = static_cast<std::size_t>(u.resource);
      if (link_stamp_[li] == stamp_) continue;
      link_stamp_[li] = stamp_;
      comp_links_.push_back(u.resource);
      for_each_on(u.resource, [&](TransferId o, std::int32_t) {
        if (transfer_stamp_[o] != stamp_) {
          transfer_stamp_[o] = stamp_;
          comp_.push_back(o);
        }
      });
    }
  }
  count_solve(comp_links_.size());
  if (comp_.size() == 1) {
    new_rate_[comp_.front()] = transfers_[comp_.front()].alone;
  } else {
    std::sort(comp_.begin(), comp_.end());
    solve_component();
  }
  apply_rates();
}

void Network::solve_component() {
  implements(SimModel::kMaxMinFair);
  for (std::int32_t l : comp_links_) {
    rem_[static_cast<std::size_t>(l)] = slot_[static_cast<std::size_t>(l)].capacity;
    cnt_[static_cast<std::size_t>(l)] = 0;
  }
  for (TransferId t : comp_) {
    fixed_[t] = 0;
    for (const LinkUse& u : transfers_[t].shared)
      cnt_[static_cast<std::size_t>(u.resource)] += u.count;
  }
  std::size_t unfixed = comp_.size();
  while (unfixed > 0) {
    double level = std::numeric_limits<double>::infinity();
    std::int32_t bottleneck = -1;
    // Ties go to the lowest resource index, whatever order the component was collected in.
    auto consider = [&](double share, std::int32_t l) {
      if (share < level || (share == level && l < bottleneck)) {
        level = share;
        bottleneck = l;
      }
    };
    for (std::int32_t l : comp_links_) {
      const auto li = static_cast<std::size_t>(l);
      if (cnt_[li] > 0) consider(rem_[li] / static_cast<double>(cnt_[li]), l);
    }
    for (TransferId t : comp_) {
      if (!fixed_[t]) consider(transfers_[t].alone, transfers_[t].alone_at);
    }
    assert(bottleneck >= 0);
    for_each_on(bottleneck, [&](TransferId o, std::int32_t) {
      if (fixed_[o]) return;
      fixed_[o] = 1;
      new_rate_[o] = level;
      --unfixed;
      for (const LinkUse& u : transfers_[o].shared) {
        const auto li = static_cast<std::size_t>(u.resource);
        rem_[li] = std::max(0.0, rem_[li] - level * u.count);
        cnt_[li] -= u.count;
      }
    });
  }
}

void Network::apply_rates() {
  const Time now = engine_->now();
  for (TransferId id : comp_) {
    Transfer& t = transfers_[id];
    if (t.event != kNoEvent && new_rate_[id] == t.rate) continue;
    if (t.event != kNoEvent) {
      t.remaining = std::max(0.0, t.remaining - t.rate * to_seconds(now - t.updated));
      engine_->cancel(t.event);
      ++stats_.reschedules;
    }
    t.updated = now;
    t.rate = new_rate_[id];
    const double seconds = t.remaining / t.rate;
    t.event = engine_->schedule(now + Time(std::llround(seconds * 1e12)), done_kind_, id);
  }
}

}  // namespace planner::sim
