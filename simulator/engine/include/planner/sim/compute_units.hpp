// The compute resources of the simulated ranks, as the GPU and host models see them.
//
// Every rank has one compute unit: its compute stream runs one kernel at a time. A kernel is
// given as its work, its duration alone at full speed (compute_model.hpp); it runs at a rate in
// (0, 1] that is the product of two shares:
//   SMs    while a collective or message of the rank moves data, its communication kernels occupy
//          SMs and compute runs at (1 − comm_slowdown) of its speed (the comm-sm-sharing model);
//   cores  the units of a pool share its cores: when c of them compute at once in a pool of
//          h < c cores, each runs at h / c · oversubscribed_efficiency (processor sharing; the
//          core-sharing model). CPU ranks of one node form a pool of the profile's host_cores
//          (host_cores > 0); a GPU is a pool of its own, which never oversubscribes.
// When a unit's rate changes (communication starts or stops on it, a unit of its pool starts or
// stops computing) its completion is rescheduled from the work left: completion events are
// scheduled on the engine with kind `done_kind` and a = the unit, and the old event is cancelled.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/core/hardware_profile.hpp"
#include "planner/core/units.hpp"
#include "planner/sim/engine.hpp"

namespace planner::sim {

class ComputeUnits {
 public:
  ComputeUnits(Engine& engine, std::uint32_t done_kind, const ComputeProfile& profile);

  // Adds a unit; `node` is the node of its device, whose cores it shares when the profile gives
  // host_cores. Units are numbered from 0 in the order they are added.
  std::uint32_t add(int node);

  // Starts a kernel of `work` (at full speed) on an idle unit; `tag` is returned by finish().
  void start(std::uint32_t unit, Time work, std::uint32_t tag) {
    Unit& u = units_[unit];
    u.busy = true;
    u.tag = tag;
    u.work_left = static_cast<double>(work.raw());
    u.since = engine_->now();
    u.rate = 1.0;
    u.event = kNoEvent;
    Pool& p = pools_[u.pool];
    if (p.cores == 0) {
      reschedule(unit);  // nothing shared: only this unit's rate to set
    } else {
      ++p.computing;
      reshare(p);
    }
  }
  // Ends the unit's kernel after its completion event fired; returns the kernel's tag.
  std::uint32_t finish(std::uint32_t unit) {
    Unit& u = units_[unit];
    u.busy = false;
    u.event = kNoEvent;
    Pool& p = pools_[u.pool];
    if (p.cores > 0) {
      --p.computing;
      reshare(p);
    }
    return u.tag;
  }
  bool busy(std::uint32_t unit) const { return units_[unit].busy; }

  // A collective or message of the unit's rank started or stopped moving data.
  void comm_started(std::uint32_t unit) {
    if (units_[unit].comm++ == 0 && units_[unit].busy) reschedule(unit);
  }
  void comm_stopped(std::uint32_t unit) {
    if (--units_[unit].comm == 0 && units_[unit].busy) reschedule(unit);
  }

 private:
  struct Unit {
    bool busy = false;
    std::uint32_t tag = 0;
    std::uint32_t pool = 0;
    int comm = 0;          // collectives and messages moving data on the unit's rank
    double work_left = 0;  // picoseconds at full speed
    Time since;            // when work_left was last brought up to date
    double rate = 1;
    EventId event = kNoEvent;
  };
  struct Pool {
    int cores = 0;                     // 0: not shared (a GPU)
    int computing = 0;                 // units computing (shared pools)
    std::vector<std::uint32_t> units;  // in unit order
  };

  // Brings the unit's work up to date, sets its rate and (re)schedules its completion.
  void reschedule(std::uint32_t unit);
  // Reschedules the busy units of a shared pool whose number computing changed.
  void reshare(const Pool& pool);

  Engine* engine_;
  std::uint32_t done_kind_;
  const ComputeProfile* profile_;
  std::vector<Unit> units_;
  std::vector<Pool> pools_;
  std::vector<std::int32_t> pool_of_node_;  // shared pools by node (host_cores > 0)
};

}  // namespace planner::sim
