// The event queue: total order by (time, insertion sequence), lazy cancel.
#include "planner/sim/engine.hpp"

#include <gtest/gtest.h>

namespace planner::sim {
namespace {

TEST(Engine, OrdersByTimeThenInsertion) {
  Engine e;
  e.schedule(Time(30), 1);
  e.schedule(Time(10), 2);
  e.schedule(Time(30), 3);
  e.schedule(Time(10), 4);
  e.schedule(Time(20), 5);
  std::vector<std::uint32_t> kinds;
  std::vector<std::int64_t> times;
  Event ev;
  while (e.next(ev)) {
    kinds.push_back(ev.kind);
    times.push_back(ev.time.raw());
    EXPECT_EQ(e.now(), ev.time);
  }
  EXPECT_EQ(kinds, (std::vector<std::uint32_t>{2, 4, 5, 1, 3}));
  EXPECT_EQ(times, (std::vector<std::int64_t>{10, 10, 20, 30, 30}));
  EXPECT_EQ(e.processed(), 5u);
}

TEST(Engine, CancelledEventsAreSkipped) {
  Engine e;
  const EventId a = e.schedule(Time(5), 1);
  e.schedule(Time(6), 2);
  const EventId c = e.schedule(Time(7), 3);
  e.cancel(a);
  e.cancel(a);         // twice: no effect
  e.cancel(kNoEvent);  // no effect
  Event ev;
  ASSERT_TRUE(e.next(ev));
  EXPECT_EQ(ev.kind, 2u);
  e.cancel(c);
  EXPECT_TRUE(e.empty());
  EXPECT_FALSE(e.next(ev));
  EXPECT_EQ(e.processed(), 1u);
  EXPECT_EQ(e.now(), Time(6));
}

TEST(Engine, EventsScheduledWhileRunningKeepTheOrder) {
  Engine e;
  e.schedule(Time(10), 1);
  Event ev;
  ASSERT_TRUE(e.next(ev));
  e.schedule(Time(10), 2);  // same time as now: runs next
  e.schedule(Time(11), 3);
  ASSERT_TRUE(e.next(ev));
  EXPECT_EQ(ev.kind, 2u);
  ASSERT_TRUE(e.next(ev));
  EXPECT_EQ(ev.kind, 3u);
}

}  // namespace
}  // namespace planner::sim
