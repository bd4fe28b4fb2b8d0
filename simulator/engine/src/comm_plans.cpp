#include "planner/sim/comm_plans.hpp"

#include <algorithm>
#include <string>

namespace planner::sim {

namespace {

void put_int(std::string& key, std::int64_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// A PlanMemo key: what a plan moves and over which GPUs (the caller appends the copies).
std::string plan_key(char what, OpKind kind, Bytes bytes, std::span<const int> gpus,
                     std::optional<Algorithm> forced) {
  std::string key(1, what);
  put_int(key, static_cast<std::int64_t>(kind));
  put_int(key, bytes.raw());
  put_int(key, forced ? static_cast<std::int64_t>(*forced) : -1);
  put_int(key, static_cast<std::int64_t>(gpus.size()));
  for (int g : gpus)
    put_int(key, g);
  return key;
}

}  // namespace

CommPlans::CommPlans(const StepProgram& program, const CommPlanContext& context)
    : program_(program),
      ctx_(context),
      planner_(*context.cluster, *context.profile, *context.fabric, context.algorithm) {}

CachedPlan& CommPlans::collective_plan(const Op& op) {
  const std::pair<std::uint64_t, std::uint64_t> key{static_cast<std::uint64_t>(op.group), op.desc};
  auto& slot = plans_[key];
  if (slot) return *slot;
  const OpDesc& d = program_.desc(op);
  // A group's GPUs and copies are the same for each of its collectives: found once.
  GroupGpus& group_gpus = groups_[static_cast<std::size_t>(op.group)];
  if (!group_gpus.ready) {
    const CommGroup& group = program_.group(op.group);
    for (int r : group.ranks)
      group_gpus.gpus.push_back(ctx_.gpu_of_rank[static_cast<std::size_t>(r)]);
    if (ctx_.symmetry != nullptr) {
      group_gpus.copies = ctx_.symmetry->group_copies(group);
      for (auto& c : group_gpus.copies) {
        for (int& r : c)
          r = ctx_.gpu_of_rank[static_cast<std::size_t>(r)];
      }
    }
    if (ctx_.memo != nullptr) {
      for (const auto& c : group_gpus.copies) {
        put_int(group_gpus.copies_key, -1);
        for (int g : c)
          put_int(group_gpus.copies_key, g);
      }
    }
    group_gpus.ready = true;
  }
  const std::vector<int>& gpus = group_gpus.gpus;
  const std::vector<std::vector<int>>& copies = group_gpus.copies;
  slot = std::make_unique<CachedPlan>();
  const std::optional<TokenRouting> routing = token_routing(d);
  std::string memo_key;
  if (ctx_.memo != nullptr) {
    memo_key = plan_key('c', d.kind, d.comm_bytes, gpus, ctx_.algorithm);
    if (routing) {
      put_int(memo_key, -2);
      for (int v : {routing->experts, routing->top_k, routing->groups, routing->group_top_k})
        put_int(memo_key, v);
    }
    memo_key += group_gpus.copies_key;
    if (const auto memo = ctx_.memo->find(memo_key)) {
      slot->plan = *memo;
      return *slot;
    }
  }
  slot->plan =
      planner_.collective(d.kind, d.comm_bytes, gpus, copies, routing ? &*routing : nullptr);
  if (ctx_.memo != nullptr) ctx_.memo->insert(std::move(memo_key), slot->plan);
  return *slot;
}

CachedPlan& CommPlans::p2p_plan(int src, int dst, const OpDesc& d) {
  const std::pair<std::uint64_t, std::uint64_t> key{
      (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
          static_cast<std::uint32_t>(dst) | (std::uint64_t{1} << 63),
      static_cast<std::uint64_t>(d.comm_bytes.raw())};
  auto& slot = plans_[key];
  if (slot) return *slot;
  std::vector<std::pair<int, int>> copies;
  if (ctx_.symmetry != nullptr) {
    copies = ctx_.symmetry->p2p_copies(src, dst);
    for (auto& [a, b] : copies) {
      a = ctx_.gpu_of_rank[static_cast<std::size_t>(a)];
      b = ctx_.gpu_of_rank[static_cast<std::size_t>(b)];
    }
  }
  slot = std::make_unique<CachedPlan>();
  const int pair[] = {ctx_.gpu_of_rank[static_cast<std::size_t>(src)],
                      ctx_.gpu_of_rank[static_cast<std::size_t>(dst)]};
  std::string memo_key;
  if (ctx_.memo != nullptr) {
    memo_key = plan_key('p', OpKind::kSend, d.comm_bytes, pair, ctx_.algorithm);
    for (const auto& [a, b] : copies) {
      put_int(memo_key, a);
      put_int(memo_key, b);
    }
    if (const auto memo = ctx_.memo->find(memo_key)) {
      slot->plan = *memo;
      return *slot;
    }
  }
  slot->plan = planner_.p2p(pair[0], pair[1], d.comm_bytes, copies);
  if (ctx_.memo != nullptr) ctx_.memo->insert(std::move(memo_key), slot->plan);
  return *slot;
}

void CommPlans::build() {
  last_.assign(program_.groups().size(), {0, nullptr});
  groups_.assign(program_.groups().size(), GroupGpus{});
  of_op_.resize(program_.ranks().size());
  for (std::uint32_t ri = 0; ri < program_.ranks().size(); ++ri)
    build_rank(ri);
  compress();
}

void CommPlans::build_rank(std::uint32_t ri) {
  const RankProgram& r = program_.ranks()[ri];
  std::vector<CachedPlan*>& of_op = of_op_[ri];
  of_op.assign(r.size(), nullptr);
  for (std::size_t i = 0; i < r.size(); ++i) {
    const Op& op = r.op(i);
    const OpDesc& d = program_.desc(op);
    if (is_collective(d.kind)) {
      auto& [desc, plan] = last_[static_cast<std::size_t>(op.group)];
      if (plan == nullptr || desc != op.desc) {
        desc = op.desc;
        plan = &collective_plan(op);
      }
      of_op[i] = plan;
    } else if (is_p2p(d.kind) && op.peer >= 0 &&
               static_cast<std::size_t>(op.peer) < ctx_.gpu_of_rank.size()) {
      // The message src -> dst, whichever end this op is.
      const bool send = d.kind == OpKind::kSend;
      const int src = send ? r.rank() : op.peer;
      const int dst = send ? op.peer : r.rank();
      const P2pKey key{src, dst, d.comm_bytes.raw()};
      auto hit = std::find_if(recent_.begin(), recent_.end(),
                              [&](const auto& e) { return e.second && e.first == key; });
      if (hit == recent_.end()) {
        hit = recent_.begin() + static_cast<std::ptrdiff_t>(next_recent_++ % recent_.size());
        *hit = {key, &p2p_plan(src, dst, d)};
      }
      of_op[i] = hit->second;
    }
  }
}

void CommPlans::compress() {
  std::vector<std::vector<LinkUse>*> phases;
  for (auto& [key, plan] : plans_) {
    for (CommPhase& phase : plan->plan.phases)
      phases.push_back(&phase.uses);
  }
  // Per resource, the (phase, count) pairs crossing it, in phase order (CSR).
  const std::vector<double>& capacity = ctx_.fabric->capacity;
  const std::size_t resources = capacity.size();
  std::vector<std::uint32_t> offset(resources + 1, 0);
  for (const auto* uses : phases) {
    for (const LinkUse& u : *uses)
      ++offset[static_cast<std::size_t>(u.resource) + 1];
  }
  for (std::size_t r = 0; r < resources; ++r)
    offset[r + 1] += offset[r];
  std::vector<std::pair<std::uint32_t, std::int32_t>> crossing(offset.back());
  std::vector<std::uint32_t> fill(offset.begin(), offset.end() - 1);
  for (std::uint32_t p = 0; p < phases.size(); ++p) {
    for (const LinkUse& u : *phases[p])
      crossing[fill[static_cast<std::size_t>(u.resource)]++] = {p, u.count};
  }
  auto entries = [&](std::int32_t r) {
    const auto* first = crossing.data() + offset[static_cast<std::size_t>(r)];
    return std::span<const std::pair<std::uint32_t, std::int32_t>>(
        first, crossing.data() + offset[static_cast<std::size_t>(r) + 1]);
  };
  struct Keyed {
    std::uint64_t hash;
    std::int32_t resource;
  };
  std::vector<Keyed> keyed;
  for (std::size_t r = 0; r < resources; ++r) {
    if (offset[r + 1] == offset[r]) continue;
    std::uint64_t h = 0x9e3779b97f4a7c15ull;
    for (const auto& [p, c] : entries(static_cast<std::int32_t>(r))) {
      h ^= (static_cast<std::uint64_t>(p) << 32 | static_cast<std::uint32_t>(c)) +
           0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    }
    keyed.push_back({h, static_cast<std::int32_t>(r)});
  }
  // Equal lists side by side; within a class the representative first. Sorting by (hash,
  // capacity, resource) and checking each run of one hash against its first list is linear in the
  // lists in the common case (a class of a million copies' links); a run whose lists differ (a hash
  // collision) is sorted by its lists as well.
  const auto by_capacity = [&](const Keyed& a, const Keyed& b) {
    if (a.hash != b.hash) return a.hash < b.hash;
    const double ca = capacity[static_cast<std::size_t>(a.resource)];
    const double cb = capacity[static_cast<std::size_t>(b.resource)];
    return ca != cb ? ca < cb : a.resource < b.resource;
  };
  const auto by_lists = [&](const Keyed& a, const Keyed& b) {
    const auto ea = entries(a.resource), eb = entries(b.resource);
    if (!std::equal(ea.begin(), ea.end(), eb.begin(), eb.end())) {
      return std::lexicographical_compare(ea.begin(), ea.end(), eb.begin(), eb.end());
    }
    return by_capacity(a, b);
  };
  std::sort(keyed.begin(), keyed.end(), by_capacity);
  std::vector<char> keep(resources, 0);
  bool dropped = false;
  for (std::size_t b = 0; b < keyed.size();) {
    std::size_t e = b + 1;
    bool uniform = true;
    for (; e < keyed.size() && keyed[e].hash == keyed[b].hash; ++e) {
      uniform =
          uniform && std::ranges::equal(entries(keyed[e].resource), entries(keyed[b].resource));
    }
    const auto first = keyed.begin() + static_cast<std::ptrdiff_t>(b);
    const auto last = keyed.begin() + static_cast<std::ptrdiff_t>(e);
    if (!uniform) std::sort(first, last, by_lists);
    for (std::size_t i = b; i < e; ++i) {
      const bool same_class =
          i > b && (uniform ||
                    std::ranges::equal(entries(keyed[i].resource), entries(keyed[i - 1].resource)));
      keep[static_cast<std::size_t>(keyed[i].resource)] = same_class ? 0 : 1;
      dropped = dropped || same_class;
    }
    b = e;
  }
  if (dropped) {
    for (auto* uses : phases) {
      std::erase_if(*uses,
                    [&](const LinkUse& u) { return !keep[static_cast<std::size_t>(u.resource)]; });
    }
  }
  // The kept resources numbered densely in increasing order: the network's ties (the lowest
  // resource wins) fall as before, and its per-resource state is as large as what the step
  // moves data over, not as the cluster (millions of links at 100,000 GPUs).
  std::vector<std::int32_t> local(resources, -1);
  capacity_.clear();
  for (std::size_t r = 0; r < resources; ++r) {
    if (!keep[r]) continue;
    local[r] = static_cast<std::int32_t>(capacity_.size());
    capacity_.push_back(capacity[r]);
  }
  for (auto* uses : phases) {
    for (LinkUse& u : *uses)
      u.resource = local[static_cast<std::size_t>(u.resource)];
  }
}

}  // namespace planner::sim
