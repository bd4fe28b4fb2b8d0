#include "planner/sim/engine.hpp"

#include <algorithm>
#include <cassert>

#include "planner/sim/model_registry.hpp"

namespace planner::sim {

EventId Engine::schedule(Time time, std::uint32_t kind, std::uint32_t a, std::uint64_t b) {
  assert(time >= now_);
  const EventId id = next_id_++;
  heap_.push_back(Event{time, id, kind, a, b});
  std::push_heap(heap_.begin(), heap_.end(), later);
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
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const Event e = heap_.back();
    heap_.pop_back();
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
