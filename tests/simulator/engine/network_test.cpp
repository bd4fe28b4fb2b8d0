// Max-min fair sharing by progressive filling, with exact completion times.
#include "planner/sim/network.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <random>

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

// Progressive filling over every resource of every active transfer (what the network computes
// over shared resources and alone levels only).
std::map<TransferId, double> reference_rates(
    const std::vector<double>& capacity, const std::map<TransferId, std::vector<LinkUse>>& active) {
  std::vector<double> rem = capacity;
  std::vector<double> cnt(capacity.size(), 0.0);
  for (const auto& [id, uses] : active) {
    for (const LinkUse& u : uses)
      cnt[static_cast<std::size_t>(u.resource)] += u.count;
  }
  std::map<TransferId, double> rate;
  while (rate.size() < active.size()) {
    double level = std::numeric_limits<double>::infinity();
    std::size_t bottleneck = 0;
    for (std::size_t l = 0; l < capacity.size(); ++l) {
      if (cnt[l] > 0 && rem[l] / cnt[l] < level) {
        level = rem[l] / cnt[l];
        bottleneck = l;
      }
    }
    for (const auto& [id, uses] : active) {
      if (rate.count(id)) continue;
      const bool crosses = std::any_of(uses.begin(), uses.end(), [&](const LinkUse& u) {
        return static_cast<std::size_t>(u.resource) == bottleneck;
      });
      if (!crosses) continue;
      rate[id] = level;
      for (const LinkUse& u : uses) {
        rem[static_cast<std::size_t>(u.resource)] -= level * u.count;
        cnt[static_cast<std::size_t>(u.resource)] -= u.count;
      }
    }
  }
  return rate;
}

// Transfers that cross many resources of their own (as background copies do) and a few shared
// ones, some listing a resource twice, started and finished in random order: after every change
// each active transfer has the max-min rate of progressive filling over all resources.
TEST(Network, SharedResourceSolveMatchesFillingOverAllResources) {
  std::mt19937 rng(7);
  constexpr int kShared = 6;
  constexpr int kPrivate = 400;
  std::vector<double> capacity;
  std::uniform_real_distribution<double> cap(10.0, 100.0);
  for (int i = 0; i < kShared + kPrivate; ++i)
    capacity.push_back(cap(rng));
  std::vector<std::vector<LinkUse>> routes;
  int next_private = kShared;
  for (int t = 0; t < 40; ++t) {
    std::vector<LinkUse> uses;
    const int own = std::uniform_int_distribution<int>(1, 9)(rng);
    for (int k = 0; k < own && next_private < kShared + kPrivate; ++k)
      uses.push_back({next_private++, std::uniform_int_distribution<int>(1, 3)(rng)});
    const int shared = std::uniform_int_distribution<int>(0, 2)(rng);
    for (int k = 0; k < shared; ++k)
      uses.push_back({std::uniform_int_distribution<int>(0, kShared - 1)(rng), 1});
    if (t % 7 == 3) uses.push_back(uses.front());  // a resource listed twice
    std::shuffle(uses.begin(), uses.end(), rng);
    routes.push_back(std::move(uses));
  }
  Engine engine;
  Network net(capacity, engine, kDone);
  std::map<TransferId, std::vector<LinkUse>> active;  // aggregated uses
  auto check = [&] {
    const auto expected = reference_rates(capacity, active);
    for (const auto& [id, r] : expected)
      ASSERT_NEAR(net.rate(id), r, 1e-9 * r) << "transfer " << id;
  };
  std::vector<int> order(routes.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (int r : order) {
    const TransferId id = net.start(routes[static_cast<std::size_t>(r)], 1e6, 0);
    std::vector<LinkUse> merged = routes[static_cast<std::size_t>(r)];
    aggregate_uses(merged);
    active[id] = merged;
    check();
    if (rng() % 3 == 0) {
      auto victim = active.begin();
      std::advance(victim, static_cast<long>(rng() % active.size()));
      net.finish(victim->first);
      active.erase(victim);
      check();
    }
  }
  EXPECT_GT(net.stats().largest_component, 2u);
}

}  // namespace
}  // namespace planner::sim
