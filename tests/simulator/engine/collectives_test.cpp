// Collectives as flows: closed forms on ideal topologies, link sharing, NCCL-style selection, and
// the preset profiles against the reference measurements (reference data collectives.json).
#include "planner/sim/collectives.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <tuple>

#include "planner/sim/program_runner.hpp"
#include "simulator/sim_test_support.hpp"

namespace planner::sim {
namespace {

using testing::collective;
using testing::ideal_profile;
using testing::op_id;

// One collective op per listed rank, on `stream`, in group `members`; other ranks get nothing.
struct Call {
  std::vector<int> members;
  OpKind kind = OpKind::kAllReduce;
  Stream stream = Stream::kTpComm;
  std::int64_t bytes = 0;
  OpRole role = OpRole::kTpReduceAttn;
};

StepProgram program_of(int world, const std::vector<Call>& calls) {
  StepProgram p(ProgramInfo{world, 0, 1, 1, 1, 1, Schedule::k1F1B});
  std::vector<std::int32_t> groups;
  std::vector<std::uint32_t> descs;
  for (const Call& c : calls) {
    groups.push_back(p.intern_group("g", c.members));
    descs.push_back(p.intern(collective(c.kind, c.stream, c.bytes)));
  }
  for (int r = 0; r < world; ++r) {
    RankProgram& rp = p.add_rank(r, RankKind::kWorker, 0);
    for (std::size_t k = 0; k < calls.size(); ++k) {
      const auto& m = calls[k].members;
      if (std::find(m.begin(), m.end(), r) == m.end()) continue;
      Op op;
      op.id = op_id(OpId::kNone, Phase::kForward, calls[k].role, static_cast<int>(k));
      op.desc = descs[k];
      op.group = groups[k];
      rp.add(op, {});
    }
  }
  return p;
}

ProgramRun run(const StepProgram& p, const topo::Cluster& cluster, const HardwareProfile& profile,
               std::optional<Algorithm> algorithm = std::nullopt) {
  std::vector<int> gpus(static_cast<std::size_t>(p.total_ranks()));
  for (std::size_t i = 0; i < gpus.size(); ++i)
    gpus[i] = static_cast<int>(i);
  RunContext ctx;
  ctx.cluster = &cluster;
  ctx.gpu_of_rank = gpus;
  ctx.profile = &profile;
  ctx.options.algorithm = algorithm;
  auto r = run_program(p, ctx);
  if (!r) throw std::runtime_error(r.status().message());
  return std::move(r).value();
}

std::vector<int> iota(int first, int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i)
    v.push_back(first + i);
  return v;
}

// Ring all-reduce on a uniform ring of n GPUs (links of B = 100 GB/s, latency λ = 0.5 us, step
// latency 1.5 us, so α = 2 us per step): 2(n−1)/n·S/B + 2(n−1)·α, exactly. S = n MB keeps the bytes
// per flow an integer and the time a whole number of picoseconds.
TEST(ClosedForm, RingAllReduceOnUniformRing) {
  const HardwareProfile profile = ideal_profile(1.5);
  for (int n : {2, 4, 8}) {
    auto cluster =
        testing::build(testing::parse_topology(testing::ring_topology_json(n, 100, 500)), 1);
    const std::int64_t S = n * 1'000'000LL;
    const ProgramRun r = run(program_of(n, {{iota(0, n), OpKind::kAllReduce, Stream::kTpComm, S}}),
                             *cluster, profile);
    const double bandwidth = 2.0 * (n - 1) / n * static_cast<double>(S) / 100e9;
    const Time expected = seconds(bandwidth) + microseconds(2.0) * (2 * (n - 1));
    EXPECT_EQ(r.makespan, expected) << n << " GPUs";
    ASSERT_EQ(r.collectives.size(), 1u);
    EXPECT_EQ(r.collectives[0].algorithm, Algorithm::kRing);
  }
}

// All-gather and reduce-scatter: (n−1)/n·S/B + (n−1)·α.
TEST(ClosedForm, RingAllGatherAndReduceScatter) {
  const HardwareProfile profile = ideal_profile(1.5);
  const int n = 4;
  auto cluster =
      testing::build(testing::parse_topology(testing::ring_topology_json(n, 100, 500)), 1);
  for (OpKind kind : {OpKind::kAllGather, OpKind::kReduceScatter}) {
    const std::int64_t S = 8'000'000;
    const ProgramRun r =
        run(program_of(n, {{iota(0, n), kind, Stream::kTpComm, S}}), *cluster, profile);
    EXPECT_EQ(r.makespan, microseconds(60.0) + microseconds(2.0) * 3) << to_string(kind);
  }
}

// Two all-reduces whose rings cross the same NIC (two GPUs per node behind one 100 Gb/s NIC)
// take longer than one: they share it, about twice as long for bandwidth-bound sizes.
TEST(ClosedForm, AllReducesSharingANicSlowEachOtherDown) {
  auto cluster = testing::build(testing::parse_topology(testing::shared_nic_json(2, 100)), 2);
  const HardwareProfile profile = ideal_profile(0.0);
  const std::int64_t S = 100'000'000;
  const Call a{{0, 2}, OpKind::kAllReduce, Stream::kDpComm, S, OpRole::kDpGradReduce};
  const Call b{{1, 3}, OpKind::kAllReduce, Stream::kDpComm, S, OpRole::kDpGradReduce};
  const ProgramRun one = run(program_of(4, {a}), *cluster, profile);
  const ProgramRun two = run(program_of(4, {a, b}), *cluster, profile);
  EXPECT_GT(two.makespan, one.makespan);
  EXPECT_NEAR(to_seconds(two.makespan) / to_seconds(one.makespan), 2.0, 0.01);
  // Alone: S over the 12.5 GB/s NIC (a 2-member ring moves 2·1/2·S per flow).
  EXPECT_NEAR(to_seconds(one.makespan), 100e6 / 12.5e9, 1e-6);
}

// A tensor-parallel all-reduce on NVLink is not slowed by a data-parallel all-reduce on the NICs
// that runs at the same time (GPU 0 takes part in both, on different streams).
TEST(ClosedForm, TpAllReduceOnNvlinkIgnoresDpOnNics) {
  auto cluster = testing::preset_cluster("dgx-h100-superpod", 2);
  const HardwareProfile& profile = *builtin_profile_for(*builtin_catalog().find_gpu("H100"));
  const Call tp{iota(0, 8), OpKind::kAllReduce, Stream::kTpComm, 256'000'000,
                OpRole::kTpReduceAttn};
  const Call dp{{0, 8}, OpKind::kAllReduce, Stream::kDpComm, 1'000'000'000, OpRole::kDpGradReduce};
  const ProgramRun alone = run(program_of(16, {tp}), *cluster, profile);
  const ProgramRun both = run(program_of(16, {tp, dp}), *cluster, profile);
  for (int rank : {0, 3}) {
    EXPECT_EQ(both.ranks[static_cast<std::size_t>(rank)].ops.front().end,
              alone.ranks[static_cast<std::size_t>(rank)].ops.front().end)
        << "rank " << rank;
  }
  EXPECT_GT(both.makespan, alone.makespan);  // the dp all-reduce itself takes longer
}

// The fabric's pools as a sort of every link by (class of source, class of destination, id)
// defines them: Fabric::build, which pools per source class, gives the same resources, in the same
// order, with the same capacities (summed in link order), balanced and not.
Fabric pooled_by_sorting_links(const topo::Cluster& cluster, const HardwareProfile& profile,
                               bool balanced) {
  const auto links = cluster.links();
  const auto devices = cluster.devices();
  std::vector<std::int64_t> cls(devices.size());
  for (std::size_t d = 0; d < devices.size(); ++d)
    cls[d] = static_cast<std::int64_t>(d);
  if (balanced) {
    std::vector<std::vector<int>> served(devices.size());
    for (int g = 0; g < cluster.num_gpus(); ++g) {
      for (topo::DeviceId nic : cluster.nics_of(g))
        served[static_cast<std::size_t>(nic)].push_back(g);
    }
    std::map<std::vector<int>, std::int64_t> sets;
    std::vector<topo::DeviceId> pod(devices.size(), topo::kNoDevice);
    for (const topo::Link& l : links) {
      if (devices[static_cast<std::size_t>(l.src)].kind == topo::DeviceKind::kLeaf &&
          devices[static_cast<std::size_t>(l.dst)].kind == topo::DeviceKind::kSpine) {
        auto& p = pod[static_cast<std::size_t>(l.dst)];
        p = p == topo::kNoDevice ? l.src : std::min(p, l.src);
      }
    }
    const std::int64_t base = std::int64_t{1} << 40;
    for (std::size_t d = 0; d < devices.size(); ++d) {
      if (devices[d].kind == topo::DeviceKind::kNic && !served[d].empty()) {
        std::sort(served[d].begin(), served[d].end());
        cls[d] =
            base + sets.emplace(served[d], static_cast<std::int64_t>(sets.size())).first->second;
      } else if (devices[d].kind == topo::DeviceKind::kSpine && pod[d] != topo::kNoDevice) {
        cls[d] = 2 * base + pod[d];
      } else if (devices[d].kind == topo::DeviceKind::kCore) {
        cls[d] = 3 * base;
      }
    }
  }
  std::vector<std::int32_t> order(links.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<std::int32_t>(i);
  auto key = [&](std::int32_t i) {
    const topo::Link& l = links[static_cast<std::size_t>(i)];
    return std::tuple(cls[static_cast<std::size_t>(l.src)], cls[static_cast<std::size_t>(l.dst)],
                      i);
  };
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return key(a) < key(b); });
  std::vector<std::int32_t> head(links.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    const bool same = k > 0 && std::get<0>(key(order[k])) == std::get<0>(key(order[k - 1])) &&
                      std::get<1>(key(order[k])) == std::get<1>(key(order[k - 1]));
    head[static_cast<std::size_t>(order[k])] =
        same ? head[static_cast<std::size_t>(order[k - 1])] : order[k];
  }
  Fabric f;
  f.resource_of_link.assign(links.size(), -1);
  for (std::size_t i = 0; i < links.size(); ++i) {
    const double cap = links[i].bandwidth.raw() * profile.link(to_string(links[i].kind)).efficiency;
    const auto first = static_cast<std::size_t>(head[i]);
    if (first == i) {
      f.resource_of_link[i] = static_cast<std::int32_t>(f.capacity.size());
      f.capacity.push_back(cap);
    } else {
      f.resource_of_link[i] = f.resource_of_link[first];
      f.capacity[static_cast<std::size_t>(f.resource_of_link[i])] += cap;
    }
  }
  return f;
}

TEST(Fabric, PoolsAsASortOfEveryLinkDefinesThem) {
  // (preset, nodes, whether balancing pools any links: spines, cores or several NICs per GPU)
  const std::tuple<const char*, int, bool> cases[] = {
      {"aws-p5", 40, true},      {"dgx-h100-superpod", 70, true}, {"dgx-a100-superpod", 9, true},
      {"gb200-nvl72", 40, true}, {"hgx-h200-roce", 3, true},      {"mi300x-platform", 5, true},
      {"dgx1-v100", 2, false},   {"l40s-pcie-100gbe", 4, false}};
  for (const auto& [name, nodes, pools] : cases) {
    auto cluster = testing::preset_cluster(name, nodes);
    const HardwareProfile& p =
        *builtin_profile_for(*builtin_catalog().find_gpu(std::string(cluster->spec().gpu)));
    for (const bool balanced : {true, false}) {
      const Fabric got = Fabric::build(*cluster, p, balanced);
      const Fabric want = pooled_by_sorting_links(*cluster, p, balanced);
      EXPECT_EQ(got.resource_of_link, want.resource_of_link) << name << " balanced " << balanced;
      EXPECT_EQ(got.capacity, want.capacity) << name << " balanced " << balanced;
      EXPECT_EQ(got.capacity.size() < cluster->links().size(), balanced && pools) << name;
    }
  }
}

// Collectives get a plan without phases in a group of one GPU.
TEST(Planner, SingleGpuGroupHasNoPhases) {
  auto cluster = testing::preset_cluster("dgx-h100-superpod", 1);
  const HardwareProfile profile = ideal_profile();
  const Fabric cap = Fabric::build(*cluster, profile);
  CollectivePlanner planner(*cluster, profile, cap, std::nullopt);
  const int one[] = {3};
  EXPECT_TRUE(planner.collective(OpKind::kAllReduce, Bytes(1 << 20), one).phases.empty());
}

double busbw_GBps(const CommPlan& plan, double bytes, int n) {
  return bytes / to_seconds(plan.estimate) * 2.0 * (n - 1) / n / 1e9;
}

// The preset profiles reproduce the reference measurements they were set from.
TEST(Planner, PresetProfilesMatchReferenceBusBandwidth) {
  const double S = 8.0 * (1 << 30);
  {  // 8 H200, ring (NVLS off): busbw 367.2 GB/s; NVLS (NCCL's choice): 480 GB/s.
    auto cluster = testing::preset_cluster("hgx-h200-roce", 1);
    const HardwareProfile& p = *builtin_profile_for(*builtin_catalog().find_gpu("H200"));
    const Fabric cap = Fabric::build(*cluster, p);
    const auto gpus = iota(0, 8);
    const CommPlan ring =
        CollectivePlanner(*cluster, p, cap, Algorithm::kRing)
            .collective(OpKind::kAllReduce, Bytes(static_cast<std::int64_t>(S)), gpus);
    EXPECT_NEAR(busbw_GBps(ring, S, 8), 367.2, 367.2 * 0.01);
    const CommPlan best =
        CollectivePlanner(*cluster, p, cap, std::nullopt)
            .collective(OpKind::kAllReduce, Bytes(static_cast<std::int64_t>(S)), gpus);
    EXPECT_EQ(best.algorithm, Algorithm::kNvls);
    EXPECT_NEAR(busbw_GBps(best, S, 8), 480.0, 480.0 * 0.01);
  }
  {  // 8 A100 in one node: 231.6 GB/s; 2 DGX A100 (8x HDR each): 192 GB/s.
    auto cluster = testing::preset_cluster("dgx-a100-superpod", 2);
    const HardwareProfile& p = *builtin_profile_for(*builtin_catalog().find_gpu("A100"));
    const Fabric cap = Fabric::build(*cluster, p);
    CollectivePlanner ring(*cluster, p, cap, Algorithm::kRing);
    const CommPlan node =
        ring.collective(OpKind::kAllReduce, Bytes(static_cast<std::int64_t>(S)), iota(0, 8));
    EXPECT_NEAR(busbw_GBps(node, S, 8), 231.6, 231.6 * 0.01);
    const CommPlan two =
        ring.collective(OpKind::kAllReduce, Bytes(static_cast<std::int64_t>(S)), iota(0, 16));
    EXPECT_NEAR(busbw_GBps(two, S, 16), 192.0, 192.0 * 0.01);
  }
}

// NCCL-style selection: a tiny all-reduce picks the low-latency LL protocol, a large one Simple.
TEST(Planner, ProtocolFollowsMessageSize) {
  auto cluster = testing::preset_cluster("dgx-a100-superpod", 4);
  const HardwareProfile& p = *builtin_profile_for(*builtin_catalog().find_gpu("A100"));
  const Fabric cap = Fabric::build(*cluster, p);
  CollectivePlanner planner(*cluster, p, cap, std::nullopt);
  const std::vector<int> dp{0, 8, 16, 24};
  const CommPlan small = planner.collective(OpKind::kAllReduce, Bytes(4), dp);
  const CommPlan large = planner.collective(OpKind::kAllReduce, Bytes(1LL << 30), dp);
  EXPECT_EQ(p.network.protocols[static_cast<std::size_t>(small.protocol)].name, "ll");
  EXPECT_EQ(p.network.protocols[static_cast<std::size_t>(large.protocol)].name, "simple");
  EXPECT_LT(small.estimate, microseconds(100.0));
}

// Forcing an algorithm that does not apply (tree inside one node) falls back to the choice.
TEST(Planner, ForcedAlgorithmOnlyWhereItApplies) {
  auto cluster = testing::preset_cluster("dgx-a100-superpod", 2);
  const HardwareProfile& p = *builtin_profile_for(*builtin_catalog().find_gpu("A100"));
  const Fabric cap = Fabric::build(*cluster, p);
  CollectivePlanner tree(*cluster, p, cap, Algorithm::kTree);
  EXPECT_EQ(tree.collective(OpKind::kAllReduce, Bytes(1 << 26), iota(0, 8)).algorithm,
            Algorithm::kRing);
  EXPECT_EQ(tree.collective(OpKind::kAllReduce, Bytes(1 << 26), iota(0, 16)).algorithm,
            Algorithm::kTree);
  CollectivePlanner hier(*cluster, p, cap, Algorithm::kHierarchical);
  const CommPlan h = hier.collective(OpKind::kAllReduce, Bytes(1 << 26), iota(0, 16));
  EXPECT_EQ(h.algorithm, Algorithm::kHierarchical);
  EXPECT_EQ(h.phases.size(), 3u);
}

// expected_islands() against a draw of the experts: a token picks its groups (group-limited
// routing) and then its top-k experts uniformly without replacement; count the islands hit.
double drawn_islands(const TokenRouting& r, int islands, int samples) {
  std::mt19937_64 rng(12345);
  const bool limited = r.groups > 1 && r.group_top_k < r.groups;
  const int per_group = limited ? r.experts / r.groups : r.experts;
  double total = 0;
  std::vector<int> pool, groups;
  for (int s = 0; s < samples; ++s) {
    groups.clear();
    for (int g = 0; g < (limited ? r.groups : 1); ++g)
      groups.push_back(g);
    for (int i = 0; i < (limited ? r.group_top_k : 1); ++i)
      std::swap(groups[static_cast<std::size_t>(i)],
                groups[static_cast<std::size_t>(i) + rng() % (groups.size() - i)]);
    pool.clear();
    for (int i = 0; i < (limited ? r.group_top_k : 1); ++i) {
      for (int e = 0; e < per_group; ++e)
        pool.push_back(groups[static_cast<std::size_t>(i)] * per_group + e);
    }
    std::vector<bool> hit(static_cast<std::size_t>(islands), false);
    for (int i = 0; i < r.top_k; ++i) {
      std::swap(pool[static_cast<std::size_t>(i)],
                pool[static_cast<std::size_t>(i) + rng() % (pool.size() - i)]);
      hit[static_cast<std::size_t>(pool[static_cast<std::size_t>(i)] * islands / r.experts)] = true;
    }
    total += static_cast<double>(std::count(hit.begin(), hit.end(), true));
  }
  return total / samples;
}

TEST(TokenRouting, ExpectedIslandsMatchesADrawOfTheExperts) {
  struct Case {
    TokenRouting routing;
    int islands;
  };
  const Case cases[] = {
      {{128, 8, 1, 1}, 4},   // Qwen3-235B on 4 nodes
      {{128, 8, 1, 1}, 2},   // Qwen3-30B on 2 nodes
      {{256, 8, 8, 4}, 8},   // DeepSeek-V3 on 8 nodes: a group per node, at most 4 nodes
      {{256, 8, 8, 4}, 4},   // two groups per node
      {{256, 8, 8, 4}, 16},  // half a group per node
      {{64, 6, 1, 1}, 8},    // fine-grained, few experts per node
      {{8, 2, 1, 1}, 2},     // Mixtral
  };
  for (const Case& c : cases) {
    const double u = expected_islands(c.routing, c.islands);
    EXPECT_NEAR(u, drawn_islands(c.routing, c.islands, 100'000), 0.02)
        << c.routing.experts << " experts top-" << c.routing.top_k << ", " << c.routing.groups
        << " groups top-" << c.routing.group_top_k << ", " << c.islands << " islands";
    EXPECT_LE(u, std::min<double>(c.islands, c.routing.top_k) + 1e-9);
  }
  // Node-limited routing: DeepSeek-V3 reaches at most 4 of 8 nodes; without the limit about 5.2.
  EXPECT_LT(expected_islands({256, 8, 8, 4}, 8), 4.0);
  EXPECT_GT(expected_islands({256, 8, 1, 1}, 8), 5.0);
  EXPECT_DOUBLE_EQ(expected_islands({128, 1, 1, 1}, 4), 1.0);
  EXPECT_DOUBLE_EQ(expected_islands({128, 8, 1, 1}, 1), 1.0);
}

// The hierarchical all-to-all crosses the network once per node a token reaches instead of once
// per expert copy: across nodes whose NICs bound both forms, its time is the direct all-to-all's
// times u / top-k (the NVLink forwarding runs under it). Inside one node it sends a token once per
// GPU that holds one of its experts: r / top-k of the direct one's time. Only an all-to-all that
// states its routing takes it.
TEST(Planner, HierarchicalAllToAllCrossesTheNetworkOncePerNode) {
  auto cluster = testing::preset_cluster("dgx-h100-superpod", 4);
  const HardwareProfile& p = *builtin_profile_for(*builtin_catalog().find_gpu("H100"));
  const Fabric cap = Fabric::build(*cluster, p);
  CollectivePlanner planner(*cluster, p, cap, std::nullopt);
  const TokenRouting routing{128, 8, 1, 1};
  const Bytes bytes(512 << 20);
  const CommPlan direct = planner.collective(OpKind::kAllToAll, bytes, iota(0, 32));
  const CommPlan hier = planner.collective(OpKind::kAllToAll, bytes, iota(0, 32), {}, &routing);
  EXPECT_EQ(direct.algorithm, Algorithm::kDirect);
  ASSERT_EQ(hier.algorithm, Algorithm::kHierarchicalA2a);
  ASSERT_EQ(hier.phases.size(), 1u);
  const double u = expected_islands(routing, 4);
  EXPECT_NEAR(to_seconds(hier.estimate) / to_seconds(direct.estimate), u / 8, 0.03 * u / 8);
  // The same group again without routing: NCCL's.
  EXPECT_EQ(planner.collective(OpKind::kAllToAll, bytes, iota(0, 32)).algorithm,
            Algorithm::kDirect);
  const CommPlan node_direct = planner.collective(OpKind::kAllToAll, bytes, iota(0, 8));
  const CommPlan node_hier = planner.collective(OpKind::kAllToAll, bytes, iota(0, 8), {}, &routing);
  ASSERT_EQ(node_hier.algorithm, Algorithm::kHierarchicalA2a);
  const double r = expected_islands(routing, 8);  // GPUs one token reaches: about 5.3 of 8
  EXPECT_NEAR(to_seconds(node_hier.estimate) / to_seconds(node_direct.estimate), r / 8,
              0.03 * r / 8);
  // The analytic tier's lines agree with the plan.
  const std::vector<CostLine> lines =
      planner.cost_lines(OpKind::kAllToAll, iota(0, 32), {}, &routing);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front().algorithm, Algorithm::kHierarchicalA2a);
  EXPECT_NEAR(to_seconds(CostLine::time(lines, bytes)), to_seconds(hier.estimate),
              1e-3 * to_seconds(hier.estimate));
}

// Background copies join the phase's links: a copy on other links raises the flow counts there
// without touching the representative's own links.
TEST(Planner, CopiesAddTheirLinks) {
  auto cluster = testing::preset_cluster("dgx-a100-superpod", 2);
  const HardwareProfile& p = *builtin_profile_for(*builtin_catalog().find_gpu("A100"));
  const Fabric cap = Fabric::build(*cluster, p);
  CollectivePlanner planner(*cluster, p, cap, Algorithm::kRing);
  const std::vector<int> rep{0, 8};
  const std::vector<std::vector<int>> copies{{1, 9}, {2, 10}};
  const CommPlan alone = planner.collective(OpKind::kAllReduce, Bytes(1 << 26), rep);
  const CommPlan with = planner.collective(OpKind::kAllReduce, Bytes(1 << 26), rep, copies);
  EXPECT_EQ(with.copies, 2);
  std::size_t flows_alone = 0, flows_with = 0;
  for (const LinkUse& u : alone.phases[0].uses)
    flows_alone += static_cast<std::size_t>(u.count);
  for (const LinkUse& u : with.phases[0].uses)
    flows_with += static_cast<std::size_t>(u.count);
  EXPECT_GT(flows_with, flows_alone);
  EXPECT_EQ(with.estimate, alone.estimate);  // selection ignores the background
}

}  // namespace
}  // namespace planner::sim

namespace planner::sim {
namespace {

// Across nodes ring and tree agree on bandwidth for large messages (both bounded by the NICs);
// hierarchical runs its three phases one after the other, so it is slower for large messages but
// beats the ring on latency (2(k-1) network steps instead of 2(n-1)); the double binary tree has
// the lowest latency (log k network steps).
TEST(Planner, MultiNodeAlgorithmsAgreeOnBandwidthTreeWinsOnLatency) {
  auto cluster = testing::preset_cluster("dgx-a100-superpod", 8);
  const HardwareProfile& p = *builtin_profile_for(*builtin_catalog().find_gpu("A100"));
  const Fabric fabric = Fabric::build(*cluster, p);
  const auto gpus = iota(0, 64);
  auto estimate = [&](Algorithm a, std::int64_t bytes) {
    const CommPlan plan = CollectivePlanner(*cluster, p, fabric, a)
                              .collective(OpKind::kAllReduce, Bytes(bytes), gpus);
    EXPECT_EQ(plan.algorithm, a);
    return to_seconds(plan.estimate);
  };
  const std::int64_t big = 4LL << 30;
  const double ring = estimate(Algorithm::kRing, big);
  EXPECT_NEAR(estimate(Algorithm::kTree, big) / ring, 1.0, 0.2);
  EXPECT_GT(estimate(Algorithm::kHierarchical, big), ring);
  const std::int64_t small = 1 << 20;
  EXPECT_LT(estimate(Algorithm::kTree, small), estimate(Algorithm::kHierarchical, small));
  EXPECT_LT(estimate(Algorithm::kHierarchical, small), 0.5 * estimate(Algorithm::kRing, small));
}

}  // namespace
}  // namespace planner::sim
