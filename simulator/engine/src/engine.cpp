#include "planner/sim/engine.hpp"

#include <algorithm>
#include <cassert>

#include "planner/sim/model_registry.hpp"

namespace planner::sim {

void Engine::push(const Event& e) {
  std::size_t i = heap_.size();
  heap_.push_back(e);
  Event* h = heap_.data();
  while (i > 0) {
    const std::size_t parent = (i - 1) / 4;
    if (!before(e, h[parent])) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = e;
}

Event Engine::pop() {
  const Event top = heap_.front();
  const Event last = heap_.back();
  heap_.pop_back();
  const std::size_t n = heap_.size();
  if (n == 0) return top;
  Event* h = heap_.data();
  std::size_t i = 0;
  for (;;) {
    const std::size_t first = 4 * i + 1;
    if (first >= n) break;
    std::size_t best = first;
    const std::size_t end = std::min(first + 4, n);
    for (std::size_t c = first + 1; c < end; ++c) {
      if (before(h[c], h[best])) best = c;
    }
    if (!before(h[best], last)) break;
    h[i] = h[best];
    i = best;
  }
  h[i] = last;
  return top;
}

EventId Engine::schedule(Time time, std::uint32_t kind, std::uint32_t a, std::uint64_t b) {
  assert(time >= now_);
  const EventId id = next_id_++;
  push(Event{time, id, kind, a, b});
  state_.push_back(0);
  ++live_;
  peak_ = std::max(peak_, heap_.size());
  return id;
}

void Engine::cancel(EventId id) {
  if (id >= next_id_ || state_[id] != 0) return;
  state_[id] = 1;
  --live_;
}

bool Engine::next(Event& out) {
  implements(SimModel::kDiscreteEvent);
  while (!heap_.empty()) {
    const Event e = pop();
    if (state_[e.id] != 0) continue;
    state_[e.id] = 2;
    --live_;
    ++processed_;
    now_ = e.time;
    out = e;
    return true;
  }
  return false;
}

}  // namespace planner::sim
