// The discrete-event engine: integer simulated time and a heap event queue.
//
// Events are ordered by (time, insertion sequence): two events at the same picosecond run in the
// order they were scheduled, so a simulation is a pure function of its inputs (after ns-3's
// EventKey{ts, uid} and htsim's integer picoseconds). Cancelling is lazy: a cancelled event stays
// in the heap and is skipped when it reaches the top. There are no statics: one Engine per
// simulation, so a sweep runs many engines on many threads and gets the same answers.
//
// An event carries a small payload (kind, a, b) that its owner interprets; the engine never calls
// back, so the owner's loop dispatches on `kind` with a switch (no std::function per event).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/core/units.hpp"

namespace planner::sim {

using EventId = std::uint64_t;  // the insertion sequence number
inline constexpr EventId kNoEvent = ~EventId{0};

struct Event {
  Time time;
  EventId id = 0;
  std::uint32_t kind = 0;
  std::uint32_t a = 0;
  std::uint64_t b = 0;
};

class Engine {
 public:
  Time now() const { return now_; }
  // Schedules an event at `time` (>= now()); returns its id for cancel().
  EventId schedule(Time time, std::uint32_t kind, std::uint32_t a = 0, std::uint64_t b = 0);
  // Marks a pending event as cancelled; cancelling kNoEvent, a fired or a cancelled event is a
  // no-op.
  void cancel(EventId id);
  // Pops the next live event into `out` and advances now() to its time; false when none is left.
  bool next(Event& out);
  bool empty() const { return live_ == 0; }
  // Events popped so far (cancelled ones excluded) and scheduled so far.
  std::uint64_t processed() const { return processed_; }
  std::uint64_t scheduled() const { return next_id_; }
  // Largest number of entries the heap held (cancelled ones included).
  std::size_t peak_queue() const { return peak_; }

 private:
  static bool before(const Event& x, const Event& y) {
    return x.time != y.time ? x.time < y.time : x.id < y.id;
  }
  // A 4-ary min-heap on (time, id): half the levels of a binary heap, and a node's children
  // side by side in two cache lines. Ids are unique, so the order popped is the same as any
  // other priority queue's.
  void push(const Event& e);
  Event pop();
  std::vector<Event> heap_;
  std::vector<std::uint8_t> state_;  // per id: 0 pending, 1 cancelled, 2 fired
  Time now_{0};
  EventId next_id_ = 0;
  std::uint64_t processed_ = 0;
  std::uint64_t live_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace planner::sim
