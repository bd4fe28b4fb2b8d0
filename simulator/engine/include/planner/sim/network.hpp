// The flow-level network: transfers share directed links max-min fairly (progressive filling).
//
// A transfer is a set of flows that move the same number of bytes each and progress at one common
// rate: a pipelined collective (a ring's n flows, a tree's edges, an all-to-all's pairs, plus the
// symmetric copies that load the fabric alongside it) or a point-to-point message. It is given as
// uses (resource, count): `count` of its flows cross `resource`, a directed link or a pool of
// equal-cost links (fabric.hpp). Resource l constrains Σ_transfers count(t, l) · rate(t) ≤
// capacity(l); rates are max-min fair over flows: progressive filling raises every unfrozen
// transfer's per-flow rate together and freezes the transfers crossing the first resource to fill
// (Bertsekas & Gallager, Data Networks, §6.5.2).
//
// Rates change only when a transfer starts or finishes, and only for the transfers connected to it
// through shared links: the network recomputes that connected component, not the whole network,
// and reschedules the completion of the transfers whose rate changed (lazy cancel of the old
// completion event). Bytes are doubles; completion times are rounded to the nearest picosecond.
//
// A transfer that carries background copies crosses thousands of resources, nearly all of them
// its own. The network keeps, per active transfer, its *shared* resources (those another active
// transfer also crosses) and its alone level (the smallest capacity / count over its resources,
// the lowest resource on ties): a component is collected and solved over shared resources only.
// This is exact: while a transfer is unfrozen, a resource only it crosses has share capacity /
// count ≥ its alone level, and when the resource giving the alone level is shared, that resource's
// share is ≤ the alone level; so the smallest (share, resource) over shared resources and alone
// levels is the one progressive filling picks over all resources, bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "planner/core/units.hpp"
#include "planner/sim/engine.hpp"

namespace planner::sim {

// `count` flows of a transfer cross `resource` (a link or a pool of links, fabric.hpp).
struct LinkUse {
  std::int32_t resource = 0;
  std::int32_t count = 0;
  bool operator==(const LinkUse&) const = default;
};

// Sorts by resource and merges duplicates, so identical flows become one use with a count.
void aggregate_uses(std::vector<LinkUse>& uses);

using TransferId = std::uint32_t;

struct NetworkStats {
  std::uint64_t transfers = 0;
  std::uint64_t solves = 0;           // component recomputations
  std::uint64_t solve_links = 0;      // shared resources they visited, summed
  std::uint64_t reschedules = 0;      // completion events moved by a rate change
  std::size_t largest_component = 0;  // transfers
};

class Network {
 public:
  // `capacity` holds the usable bytes/s of every resource (Fabric::capacity).
  // Completion events are scheduled on `engine` with kind `done_kind` and a = transfer id.
  Network(std::vector<double> capacity, Engine& engine, std::uint32_t done_kind);

  // Starts moving `bytes` over each flow of `uses` (which must stay alive and unchanged until the
  // transfer finishes); `owner` is returned by finish(). A transfer without uses completes now.
  TransferId start(const std::vector<LinkUse>& uses, double bytes, std::uint64_t owner);
  // Ends a transfer whose completion event fired; returns its owner.
  std::uint64_t finish(TransferId id);
  // Current per-flow rate of an active transfer (bytes/s).
  double rate(TransferId id) const { return transfers_[id].rate; }
  std::size_t active() const { return active_; }
  const NetworkStats& stats() const { return stats_; }

 private:
  struct Transfer {
    const std::vector<LinkUse>* uses = nullptr;
    std::vector<LinkUse> merged;  // *uses aggregated, when it listed a resource twice
    std::vector<LinkUse> shared;  // its uses on resources another active transfer crosses
    double alone = 0;             // smallest capacity / count over its uses
    std::int32_t alone_at = -1;   // the resource giving it (lowest on ties)
    double remaining = 0;
    double rate = 0;
    Time updated;
    EventId event = kNoEvent;
    std::uint64_t owner = 0;
    bool active = false;
  };
  // An active transfer on a resource and its flows there.
  struct OnLink {
    TransferId id = 0;
    std::int32_t count = 0;
  };

  const std::vector<LinkUse>& uses_of(const Transfer& t) const {
    return t.merged.empty() ? *t.uses : t.merged;
  }
  // A resource's capacity and who is on it: `n` active transfers; the one (id, count) when
  // n == 1, else crowd_.
  struct Slot {
    double capacity = 0;
    TransferId id = 0;
    std::int32_t count = 0;
    std::int32_t n = 0;
  };

  // Calls f(id, count) for every active transfer on `resource` (in crowd order).
  template <class F>
  void for_each_on(std::int32_t resource, F&& f) const {
    const Slot& s = slot_[static_cast<std::size_t>(resource)];
    if (s.n == 1) {
      f(s.id, s.count);
    } else if (s.n > 1) {
      for (const OnLink& o : crowd_[static_cast<std::size_t>(resource)])
        f(o.id, o.count);
    }
  }
  // Puts `id` on u.resource; when the resource becomes shared, it joins the shared uses of the
  // transfers there. Returns whether another transfer is there.
  bool occupy(TransferId id, const LinkUse& u);
  // Takes `id` off `resource` (false when it was not there); the transfer left alone there drops
  // the resource from its shared uses.
  bool release(TransferId id, std::int32_t resource);
  // Puts `id` on its resources and fills its shared uses and alone level. Returns whether it
  // shares any resource.
  bool attach(TransferId id);
  // Starts a new collection: nothing carries the new stamp.
  void next_stamp();
  // Collects the component of the transfers in comp_ (the seeds, stamped by next_stamp()) through
  // shared resources into comp_ and comp_links_, solves it and reschedules what changed.
  void solve_seeded();
  // Counts a component solve over `links` shared resources in stats_.
  void count_solve(std::size_t links);
  // Max-min rates of the component (comp_ sorted) into new_rate_.
  void solve_component();
  // Moves the component's transfers to new_rate_, rescheduling those whose rate changed.
  void apply_rates();

  Engine* engine_;
  std::uint32_t done_kind_;
  std::vector<Transfer> transfers_;
  std::vector<TransferId> free_;
  std::vector<Slot> slot_;                  // by resource
  std::vector<std::vector<OnLink>> crowd_;  // by resource: its transfers when two or more
  std::size_t active_ = 0;
  NetworkStats stats_;
  // Scratch for component solves.
  std::vector<std::uint32_t> link_stamp_;
  std::vector<std::uint32_t> transfer_stamp_;
  std::uint32_t stamp_ = 0;
  std::vector<std::int32_t> comp_links_;
  std::vector<TransferId> comp_;
  std::vector<double> rem_;
  std::vector<std::int64_t> cnt_;
  std::vector<double> new_rate_;
  std::vector<std::uint8_t> fixed_;
};

}  // namespace planner::sim
