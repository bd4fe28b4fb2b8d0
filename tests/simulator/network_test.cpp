// Max-min fair sharing by progressive filling, with exact completion times.
#include "planner/sim/network.hpp"

#include <gtest/gtest.h>

#include <map>

namespace planner::sim {
namespace {

constexpr std::uint32_t kDone = 7;

// Runs the engine to the end and returns each owner's completion time.
std::map<std::uint64_t, Time> run(Engine& engine, Network& net) {
  std::map<std::uint64_t, Time> done;
  Event e;
  while (engine.next(e)) {
    EXPECT_EQ(e.kind, kDone);
    done[net.finish(e.a)] = e.time;
  }
  return done;
}

TEST(Network, AggregateMergesIdenticalLinks) {
  std::vector<LinkUse> uses{{3, 1}, {1, 1}, {3, 2}, {1, 1}, {2, 1}};
  aggregate_uses(uses);
  EXPECT_EQ(uses, (std::vector<LinkUse>{{1, 2}, {2, 1}, {3, 3}}));
}

// Two transfers on one 100 B/s link share it equally; when the first finishes the second gets the
// whole link: 100 B at 50 B/s ends at 2 s; the other has 200 of 300 B left, at 100 B/s: 4 s.
TEST(Network, EqualShareThenFullLink) {
  Engine engine;
  Network net({100.0}, engine, kDone);
  const std::vector<LinkUse> uses{{0, 1}};
  net.start(uses, 100.0, 1);
  net.start(uses, 300.0, 2);
  EXPECT_DOUBLE_EQ(net.rate(0), 50.0);
  const auto done = run(engine, net);
  EXPECT_EQ(done.at(1), seconds(2.0));
  EXPECT_EQ(done.at(2), seconds(4.0));
}

// Parking lot: T1 crosses links A (10 B/s) and B (4 B/s), T2 only A, T3 only B. B is the
// bottleneck: T1 and T3 get 2 each; T2 gets what A has left, 8 (not the equal split 5).
TEST(Network, MaxMinFairnessGivesLeftoversToUnconstrainedFlows) {
  Engine engine;
  Network net({10.0, 4.0}, engine, kDone);
  const std::vector<LinkUse> t1{{0, 1}, {1, 1}}, t2{{0, 1}}, t3{{1, 1}};
  const TransferId a = net.start(t1, 1000.0, 1);
  const TransferId b = net.start(t2, 1000.0, 2);
  const TransferId c = net.start(t3, 1000.0, 3);
  EXPECT_DOUBLE_EQ(net.rate(a), 2.0);
  EXPECT_DOUBLE_EQ(net.rate(b), 8.0);
  EXPECT_DOUBLE_EQ(net.rate(c), 2.0);
}

// A transfer with two flows on a link counts twice: with a one-flow transfer on a 30 B/s link,
// every flow gets 10 B/s.
TEST(Network, CountsAreFlows) {
  Engine engine;
  Network net({30.0}, engine, kDone);
  const std::vector<LinkUse> two{{0, 2}}, one{{0, 1}};
  const TransferId a = net.start(two, 100.0, 1);
  const TransferId b = net.start(one, 100.0, 2);
  EXPECT_DOUBLE_EQ(net.rate(a), 10.0);
  EXPECT_DOUBLE_EQ(net.rate(b), 10.0);
}

// Transfers on disjoint links do not disturb each other: no completion is rescheduled.
TEST(Network, DisjointTransfersAreSolvedSeparately) {
  Engine engine;
  Network net({100.0, 100.0}, engine, kDone);
  const std::vector<LinkUse> a{{0, 1}}, b{{1, 1}};
  net.start(a, 100.0, 1);
  net.start(b, 50.0, 2);
  const auto done = run(engine, net);
  EXPECT_EQ(done.at(1), seconds(1.0));
  EXPECT_EQ(done.at(2), seconds(0.5));
  EXPECT_EQ(net.stats().reschedules, 0u);
  EXPECT_EQ(net.stats().largest_component, 1u);
}

TEST(Network, EmptyTransferCompletesNow) {
  Engine engine;
  Network net({100.0}, engine, kDone);
  const std::vector<LinkUse> none;
  net.start(none, 100.0, 9);
  const auto done = run(engine, net);
  EXPECT_EQ(done.at(9), Time(0));
}

}  // namespace
}  // namespace planner::sim
