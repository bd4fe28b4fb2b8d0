// The network plans of a step program's collectives and messages (collectives.hpp), built for
// every lowered rank before the run so that compress() sees every resource use the network will
// get.
//
// A collective's plan is keyed by its group and desc, a message's by (src, dst, bytes); plans
// carry the background copies of the unlowered ranks (symmetry.hpp) when a Symmetry is given, and
// are shared through a PlanMemo across the simulations of a sweep when one is given (a plan is a
// pure function of what it moves, over which GPUs, with which copies).
//
// compress() keeps one resource of every class of resources crossed by exactly the same phases
// with the same counts (the smallest capacity, lowest index on ties) in the phases' uses: the
// others carry the same transfers at the same counts, so their constraint is never tighter and
// the bottleneck they would tie on freezes the same transfers. The max-min rates are unchanged;
// the network walks fewer resources (a pipeline send's background copies cross every copy's GPU,
// PCIe and NIC links, which nothing else but the same phases crosses).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "planner/core/hardware_profile.hpp"
#include "planner/core/program.hpp"
#include "planner/sim/collectives.hpp"
#include "planner/sim/fabric.hpp"
#include "planner/sim/symmetry.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::sim {

// A plan and the index of its entry in the run's collective uses (kNoUse until its first use).
struct CachedPlan {
  static constexpr std::uint32_t kNoUse = ~std::uint32_t{0};
  CommPlan plan;
  std::uint32_t use = kNoUse;
};

struct CommPlanContext {
  const topo::Cluster* cluster = nullptr;
  const HardwareProfile* profile = nullptr;
  const Fabric* fabric = nullptr;
  std::span<const int> gpu_of_rank;    // every rank of the program
  std::optional<Algorithm> algorithm;  // forced where it applies
  const Symmetry* symmetry = nullptr;  // background copies; nullptr: none
  PlanMemo* memo = nullptr;            // optional
};

class CommPlans {
 public:
  CommPlans(const StepProgram& program, const CommPlanContext& context);

  // Builds the plan of every collective and message of the lowered ranks, then compresses the
  // plans' resources (see the header) and renumbers them densely (capacity()).
  void build();
  // The plan of op `op` of the rank at index `rank`: its collective's or message's, else nullptr.
  CachedPlan* plan(std::uint32_t rank, std::uint32_t op) const { return of_op_[rank][op]; }
  // Distinct plans built.
  std::size_t size() const { return plans_.size(); }
  // After build(): the capacity of every resource the plans' uses name. build() numbers the
  // resources the plans cross densely (in the fabric's order), so a network over this vector is
  // as large as the step's traffic, not as the cluster.
  const std::vector<double>& capacity() const { return capacity_; }

 private:
  struct PairHash {
    std::size_t operator()(const std::pair<std::uint64_t, std::uint64_t>& k) const {
      return std::hash<std::uint64_t>()(k.first * 0x9e3779b97f4a7c15ull ^ k.second);
    }
  };
  void build_rank(std::uint32_t rank);
  CachedPlan& collective_plan(const Op& op);
  CachedPlan& p2p_plan(int src, int dst, const OpDesc& d);
  void compress();

  const StepProgram& program_;
  CommPlanContext ctx_;
  CollectivePlanner planner_;
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>, std::unique_ptr<CachedPlan>, PairHash>
      plans_;
  std::vector<std::vector<CachedPlan*>> of_op_;  // per rank index, per op
  std::vector<double> capacity_;                 // by dense resource
  // Lookup shortcuts while building: the last plan per group (a rank's ops of one group mostly
  // repeat one desc) and the last few messages' plans (a rank talks to a few peers).
  std::vector<std::pair<std::uint32_t, CachedPlan*>> last_;
  // Per group: its GPUs, its background copies' GPUs and their part of a PlanMemo key.
  struct GroupGpus {
    bool ready = false;
    std::vector<int> gpus;
    std::vector<std::vector<int>> copies;
    std::string copies_key;
  };
  std::vector<GroupGpus> groups_;
  using P2pKey = std::tuple<int, int, std::int64_t>;
  std::array<std::pair<P2pKey, CachedPlan*>, 4> recent_{};
  std::size_t next_recent_ = 0;
};

}  // namespace planner::sim
