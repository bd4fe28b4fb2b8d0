#include "planner/sim/network.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

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
    : capacity_(std::move(capacity)),
      engine_(&engine),
      done_kind_(done_kind),
      on_link_(capacity_.size()),
      link_stamp_(capacity_.size(), 0),
      rem_(capacity_.size(), 0.0),
      cnt_(capacity_.size(), 0) {}

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
  t = Transfer{};
  t.uses = &uses;
  t.remaining = std::max(bytes, 0.0);
  t.updated = engine_->now();
  t.owner = owner;
  t.active = true;
  ++active_;
  ++stats_.transfers;
  if (uses.empty() || t.remaining <= 0) {
    t.rate = std::numeric_limits<double>::infinity();
    t.event = engine_->schedule(engine_->now(), done_kind_, id);
    return id;
  }
  bool shared = false;
  for (const LinkUse& u : uses) {
    auto& list = on_link_[static_cast<std::size_t>(u.resource)];
    // A resource listed twice in `uses` finds this transfer already at the end of its list.
    if (!list.empty()) {
      if (list.back() == id) t.distinct_uses = false;
      shared = true;
    }
    list.push_back(id);
  }
  if (shared || !t.distinct_uses) {
    solve_from(uses);
    return id;
  }
  // No other transfer on any of its resources: the component is this transfer and its uses.
  comp_.assign(1, id);
  count_solve(uses.size());
  new_rate_[id] = alone_rate(uses);
  apply_rates();
  return id;
}

std::uint64_t Network::finish(TransferId id) {
  Transfer& t = transfers_[id];
  assert(t.active);
  t.active = false;
  --active_;
  const std::uint64_t owner = t.owner;
  bool shared = false;
  for (const LinkUse& u : *t.uses) {
    auto& list = on_link_[static_cast<std::size_t>(u.resource)];
    const auto it = std::find(list.begin(), list.end(), id);
    if (it != list.end()) {
      *it = list.back();
      list.pop_back();
    }
    shared = shared || !list.empty();
  }
  // A transfer that shared no resource leaves an empty component: no rate changes.
  if (shared && std::isfinite(t.rate)) solve_from(*t.uses);
  free_.push_back(id);
  return owner;
}

namespace {

// Sorts `items`, the indices whose `stamps` equal `stamp`, ascending. A large component is
// rebuilt by one scan over the stamps (linear) instead of a comparison sort: the same order.
template <class T>
void sort_marked(std::vector<T>& items, const std::vector<std::uint32_t>& stamps,
                 std::uint32_t stamp) {
  const std::size_t n = items.size();
  std::size_t log_n = 1;
  while ((std::size_t{1} << log_n) < n)
    ++log_n;
  if (n * log_n < stamps.size()) {
    std::sort(items.begin(), items.end());
    return;
  }
  items.clear();
  for (std::size_t i = 0; i < stamps.size(); ++i) {
    if (stamps[i] == stamp) items.push_back(static_cast<T>(i));
  }
}

}  // namespace

void Network::count_solve(std::size_t links) {
  ++stats_.solves;
  stats_.solve_links += links;
  stats_.largest_component = std::max(stats_.largest_component, comp_.size());
}

// A transfer alone (each resource listed once) fills its tightest resource: the single
// progressive-filling step, whose level is the smallest capacity / count over its uses (the same
// quotient, bit for bit, as solve_component()).
double Network::alone_rate(const std::vector<LinkUse>& uses) const {
  double level = std::numeric_limits<double>::infinity();
  for (const LinkUse& u : uses) {
    if (u.count <= 0) continue;
    level = std::min(
        level, capacity_[static_cast<std::size_t>(u.resource)] / static_cast<double>(u.count));
  }
  return level;
}

// Collects the transfers connected to the seed links through shared links, then recomputes them.
void Network::solve_from(std::span<const LinkUse> seeds) {
  if (++stamp_ == 0) {
    std::fill(link_stamp_.begin(), link_stamp_.end(), 0);
    std::fill(transfer_stamp_.begin(), transfer_stamp_.end(), 0);
    stamp_ = 1;
  }
  comp_links_.clear();
  comp_.clear();
  auto visit_link = [&](std::int32_t l) {
    const auto li = static_cast<std::size_t>(l);
    if (link_stamp_[li] == stamp_) return;
    link_stamp_[li] = stamp_;
    comp_links_.push_back(l);
    for (TransferId t : on_link_[li]) {
      if (transfer_stamp_[t] != stamp_) {
        transfer_stamp_[t] = stamp_;
        comp_.push_back(t);
      }
    }
  };
  for (const LinkUse& u : seeds)
    visit_link(u.resource);
  for (std::size_t i = 0; i < comp_.size(); ++i) {
    for (const LinkUse& u : *transfers_[comp_[i]].uses)
      visit_link(u.resource);
  }
  if (comp_.empty()) return;
  count_solve(comp_links_.size());
  if (comp_.size() == 1 && transfers_[comp_.front()].distinct_uses) {
    new_rate_[comp_.front()] = alone_rate(*transfers_[comp_.front()].uses);
  } else {
    sort_marked(comp_, transfer_stamp_, stamp_);
    solve_component();
  }
  apply_rates();
}

void Network::solve_component() {
  for (std::int32_t l : comp_links_) {
    rem_[static_cast<std::size_t>(l)] = capacity_[static_cast<std::size_t>(l)];
    cnt_[static_cast<std::size_t>(l)] = 0;
  }
  for (TransferId t : comp_) {
    fixed_[t] = 0;
    for (const LinkUse& u : *transfers_[t].uses)
      cnt_[static_cast<std::size_t>(u.resource)] += u.count;
  }
  std::size_t unfixed = comp_.size();
  while (unfixed > 0) {
    double level = std::numeric_limits<double>::infinity();
    std::int32_t bottleneck = -1;
    for (std::int32_t l : comp_links_) {
      const auto li = static_cast<std::size_t>(l);
      if (cnt_[li] <= 0) continue;
      const double share = rem_[li] / static_cast<double>(cnt_[li]);
      // Ties go to the lowest resource index, whatever order the component was collected in.
      if (share < level || (share == level && l < bottleneck)) {
        level = share;
        bottleneck = l;
      }
    }
    assert(bottleneck >= 0);
    for (TransferId t : on_link_[static_cast<std::size_t>(bottleneck)]) {
      if (fixed_[t]) continue;
      fixed_[t] = 1;
      new_rate_[t] = level;
      --unfixed;
      for (const LinkUse& u : *transfers_[t].uses) {
        const auto li = static_cast<std::size_t>(u.resource);
        rem_[li] = std::max(0.0, rem_[li] - level * u.count);
        cnt_[li] -= u.count;
      }
    }
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
