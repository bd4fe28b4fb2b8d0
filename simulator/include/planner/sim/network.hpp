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
  std::uint64_t solve_links = 0;      // resources visited by them, summed
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
    double remaining = 0;
    double rate = 0;
    Time updated;
    EventId event = kNoEvent;
    std::uint64_t owner = 0;
    bool active = false;
    bool distinct_uses = true;  // no resource appears twice in *uses
  };

  void solve_from(std::span<const LinkUse> seeds);
  // Counts a component solve over `links` resources in stats_.
  void count_solve(std::size_t links);
  // The rate of a transfer alone on its resources (each listed once in `uses`).
  double alone_rate(const std::vector<LinkUse>& uses) const;
  // Max-min rates of the (sorted) component into new_rate_.
  void solve_component();
  // Moves the component's transfers to new_rate_, rescheduling those whose rate changed.
  void apply_rates();

  std::vector<double> capacity_;
  Engine* engine_;
  std::uint32_t done_kind_;
  std::vector<Transfer> transfers_;
  std::vector<TransferId> free_;
  std::vector<std::vector<TransferId>> on_link_;
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
