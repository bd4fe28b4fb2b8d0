#include "planner/core/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

namespace planner {
namespace {

using Order = std::vector<PassItem>;

PassItem fwd(int mb, int chunk = 0) {
  return {mb, static_cast<std::int16_t>(chunk), Pass::kForward};
}
PassItem bwd(int mb, int chunk = 0) {
  return {mb, static_cast<std::int16_t>(chunk), Pass::kBackward};
}
PassItem wgt(int mb, int chunk = 0) {
  return {mb, static_cast<std::int16_t>(chunk), Pass::kWeight};
}

Order gpipe(int m) {
  Order o;
  for (int i = 0; i < m; ++i)
    o.push_back(fwd(i));
  for (int i = 0; i < m; ++i)
    o.push_back(bwd(i));
  return o;
}

// `steady_pairs`: with the extra warm-up (the EP all-to-all overlap), where each steady-state
// forward pass sits (the pass after it is the backward of another micro-batch it runs merged with).
Order one_f_one_b(int p, int m, int s, int extra, std::vector<std::size_t>& steady_pairs) {
  const int warmup = std::min(p - s - 1 + extra, m);
  Order o;
  for (int i = 0; i < warmup; ++i)
    o.push_back(fwd(i));
  for (int i = 0; i < m - warmup; ++i) {
    if (extra > 0) steady_pairs.push_back(o.size());
    o.push_back(fwd(warmup + i));
    o.push_back(bwd(i));
  }
  for (int i = m - warmup; i < m; ++i)
    o.push_back(bwd(i));
  return o;
}

// Megatron-core's schedule table (pipeline_parallel/schedules.py, get_schedule_table): the
// micro-batches in groups of p (microbatch_group_size_per_vp_stage), the last group taking the
// m mod p left over (p + m mod p of them); within a group every chunk runs over the group's
// micro-batches in turn. Entry k is the k-th forward (micro-batch, chunk) of every stage.
std::vector<std::pair<int, int>> interleaved_table(int p, int m, int v) {
  std::vector<std::pair<int, int>> table;
  table.reserve(static_cast<std::size_t>(m) * static_cast<std::size_t>(v));
  for (int first = 0; first < m; first += p) {
    const int end = m - first < 2 * p ? m : first + p;
    for (int c = 0; c < v; ++c) {
      for (int i = first; i < end; ++i)
        table.emplace_back(i, c);
    }
    if (end == m) break;
  }
  return table;
}

Order interleaved(int p, int m, int v, int s, int extra, std::vector<std::size_t>& steady_pairs) {
  const std::vector<std::pair<int, int>> table = interleaved_table(p, m, v);
  const int total = m * v;
  // Megatron-LM runs everything as warm-up when there are exactly p micro-batches. The warm-up
  // runs (v − 1) groups' worth of chunk-passes ahead; with a larger last group, as many as it
  // holds, so that every backward comes after its forward and the stages never wait on each other
  // forever (the checker over p ≤ 8, p ≤ m ≤ 31, v ≤ 4 in tests/core/schedule_test.cpp).
  const int group = m % p == 0 ? p : p + m % p;
  const int warmup = m == p ? total : std::min((p - s - 1) * 2 + (v - 1) * group + extra, total);
  auto forward = [&](int k) {
    const auto [i, c] = table[static_cast<std::size_t>(k)];
    return fwd(i, c);
  };
  auto backward = [&](int k) {
    const auto [i, c] = table[static_cast<std::size_t>(k)];
    return bwd(i, v - 1 - c);
  };
  Order o;
  for (int k = 0; k < warmup; ++k)
    o.push_back(forward(k));
  const int steady = total - warmup;
  for (int k = 0; k < steady; ++k) {
    const PassItem f = forward(warmup + k), b = backward(k);
    if (extra > 0 && f.microbatch != b.microbatch) steady_pairs.push_back(o.size());
    o.push_back(f);
    o.push_back(b);
  }
  for (int k = steady; k < total; ++k)
    o.push_back(backward(k));
  return o;
}

Order zero_bubble_h1(int p, int m, int s) {
  const int warmup = std::min(p - s, m);
  Order o;
  for (int i = 0; i < warmup; ++i)
    o.push_back(fwd(i));
  std::deque<int> deferred;
  int next_fwd = warmup;
  for (int b = 0; b < m; ++b) {
    o.push_back(bwd(b));
    deferred.push_back(b);
    while (static_cast<int>(deferred.size()) > s) {
      o.push_back(wgt(deferred.front()));
      deferred.pop_front();
    }
    if (next_fwd < m) o.push_back(fwd(next_fwd++));
  }
  for (int w : deferred)
    o.push_back(wgt(w));
  return o;
}

// DeepSeek's DualPipeV (deepseek-ai/DualPipe, dualpipev.py, DualPipeV.step), stage s of p:
// the eight phases of the header. Each chunk runs its forwards and its backwards in micro-batch
// order; a backward with zero bubble on defers its W to a first-in first-out queue, which the
// W-only steps drain; a backward without runs its W right after it.
Order dualpipe_v(int p, int m, int s, std::vector<std::size_t>& fused) {
  Order o;
  int next_f[2] = {0, 0};
  int next_b[2] = {0, 0};
  std::deque<PassItem> deferred;
  auto f = [&](int c) { o.push_back(fwd(next_f[c]++, c)); };
  auto b = [&](int c, bool zero_bubble) {
    const int mb = next_b[c]++;
    o.push_back(bwd(mb, c));
    if (zero_bubble) {
      deferred.push_back(wgt(mb, c));
    } else {
      o.push_back(wgt(mb, c));
    }
  };
  auto w = [&] {
    o.push_back(deferred.front());
    deferred.pop_front();
  };
  auto merged = [&](int forward_chunk, int backward_chunk) {
    fused.push_back(o.size());
    f(forward_chunk);
    b(backward_chunk, false);
  };
  const bool last = s == p - 1;
  for (int i = 0; i < 2 * (p - s - 1); ++i)  // 1: nF0
    f(0);
  for (int i = 0; i < s + 1; ++i) {  // 2: nF0F1
    f(0);
    f(1);
  }
  for (int i = 0; i < p - s - 1; ++i) {  // 3: nB1W1F1
    b(1, true);
    w();
    f(1);
  }
  for (int i = 0; i < m - 2 * p + s + 1; ++i) {  // 4: nF0B1F1B0
    if (i == 0 && last) {
      f(0);
      b(1, false);
    } else {
      merged(0, 1);
    }
    merged(1, 0);
  }
  for (int i = 0; i < p - s - 1; ++i) {  // 5: nB1F1B0
    b(1, false);
    merged(1, 0);
  }
  bool zero_bubble = false;  // 6: nB1B0, the second half with zero bubble
  for (int i = 0; i < s + 1; ++i) {
    if (i == (s + 1) / 2 && s % 2 == 1) zero_bubble = true;
    b(1, zero_bubble);
    if (i == (s + 1) / 2 && s % 2 == 0) zero_bubble = true;
    b(0, zero_bubble);
  }
  for (int i = 0; i < p - s - 1; ++i) {  // 7: nWB0
    w();
    b(0, true);
  }
  while (!deferred.empty())  // 8: nW
    w();
  return o;
}

std::string item_name(const PassItem& it, int stage) {
  const char* pass = it.pass == Pass::kForward ? "F" : (it.pass == Pass::kBackward ? "B" : "W");
  return std::string(pass) + "(mb " + std::to_string(it.microbatch) + ", chunk " +
         std::to_string(it.chunk) + ") on stage " + std::to_string(stage);
}

}  // namespace

// Megatron-core's combined 1F1B (the EP all-to-all overlap, extra_warmup > 0): every steady-state
// forward pass runs merged with the backward pass after it (F(k + w), B(k)); the warm-up's and
// the drain's passes run alone. The pairs are kept only when the stages never wait on each other
// forever with them merged (run with unit pass times, a pair starting once both its inputs are
// there): with fewer than about 2p micro-batches a pair's backward can need the next stage's
// pair, which needs this pair's forward. The schedule then runs unmerged.
void PipelineSchedule::keep_safe_pairs(PipelineSchedule& sched) {
  // Megatron-core merges 1F1B's passes only without a pipeline (with stages, each merged pair
  // would wait for the next stage's, stage by stage: ParallelConfig's check refuses it).
  const bool refused = sched.kind_ == Schedule::k1F1B && sched.stages() > 1;
  if (refused || !run_schedule(sched, PassTimes{})) {
    for (auto& f : sched.fused_)
      f.clear();
  }
}

Result<PipelineSchedule> PipelineSchedule::create(Schedule kind, int p, int m, int v, int extra) {
  if (p < 1 || m < 1 || v < 1) {
    return Status::invalid_input(
        "pipeline schedule: stages, micro-batches and chunks must be >= 1, got " +
        std::to_string(p) + ", " + std::to_string(m) + ", " + std::to_string(v));
  }
  if (extra < 0 || (extra > 0 && kind != Schedule::k1F1B && kind != Schedule::kInterleaved)) {
    return Status::invalid_input("pipeline schedule: " + std::to_string(extra) +
                                 " extra warm-up forward passes: only 1f1b and interleaved "
                                 "take them (>= 0)");
  }
  if (kind == Schedule::kInterleaved) {
    if (v < 2) {
      return Status::invalid_input("the interleaved schedule needs >= 2 chunks per stage, got " +
                                   std::to_string(v));
    }
    if (m < p) {
      return Status::invalid_input(
          "the interleaved schedule needs at least as many micro-batches (" + std::to_string(m) +
          ") as stages (" + std::to_string(p) + ")");
    }
  } else if (kind == Schedule::kDualPipeV) {
    if (v != 2) {
      return Status::invalid_input("the dualpipev schedule runs 2 chunks per stage, got " +
                                   std::to_string(v));
    }
    if (m < 2 * p) {
      return Status::invalid_input(
          "the dualpipev schedule needs at least twice as many "
          "micro-batches (" +
          std::to_string(m) + ") as stages (" + std::to_string(p) + ")");
    }
  } else if (v != 1) {
    return Status::invalid_input(std::string(to_string(kind)) +
                                 " runs one model chunk per stage, got " + std::to_string(v));
  }
  PipelineSchedule sched;
  sched.kind_ = kind;
  sched.microbatches_ = m;
  sched.chunks_ = v;
  sched.split_backward_ = splits_backward(kind);
  sched.fused_.resize(static_cast<std::size_t>(p));
  for (int s = 0; s < p; ++s) {
    switch (kind) {
      case Schedule::kGpipe:
        sched.orders_.push_back(gpipe(m));
        break;
      case Schedule::k1F1B:
        sched.orders_.push_back(
            one_f_one_b(p, m, s, extra, sched.fused_[static_cast<std::size_t>(s)]));
        break;
      case Schedule::kInterleaved:
        sched.orders_.push_back(
            interleaved(p, m, v, s, extra, sched.fused_[static_cast<std::size_t>(s)]));
        break;
      case Schedule::kZeroBubbleH1:
        sched.orders_.push_back(zero_bubble_h1(p, m, s));
        break;
      case Schedule::kDualPipeV:
        sched.orders_.push_back(dualpipe_v(p, m, s, sched.fused_[static_cast<std::size_t>(s)]));
        break;
    }
  }
  if (extra > 0 && (kind == Schedule::k1F1B || kind == Schedule::kInterleaved)) {
    keep_safe_pairs(sched);
  }
  return sched;
}

PipelineSchedule PipelineSchedule::from_orders(Schedule kind, int microbatches, int chunks,
                                               bool split_backward,
                                               std::vector<std::vector<PassItem>> orders) {
  PipelineSchedule sched;
  sched.kind_ = kind;
  sched.microbatches_ = microbatches;
  sched.chunks_ = chunks;
  sched.split_backward_ = split_backward;
  sched.orders_ = std::move(orders);
  sched.fused_.resize(sched.orders_.size());
  return sched;
}

bool PipelineSchedule::fused(int stage, std::size_t index) const {
  const auto& f = fused_[static_cast<std::size_t>(stage)];
  return std::binary_search(f.begin(), f.end(), index);
}

Result<ScheduleRun> run_schedule(const PipelineSchedule& sched, const PassTimes& times) {
  return run_schedule(sched,
                      std::vector<PassTimes>(static_cast<std::size_t>(sched.stages()), times));
}

Result<ScheduleRun> run_schedule(const PipelineSchedule& sched,
                                 const std::vector<PassTimes>& stage_times) {
  const int p = sched.stages();
  if (stage_times.size() != static_cast<std::size_t>(p)) {
    return Status::invalid_input("run_schedule: " + std::to_string(stage_times.size()) +
                                 " stages' pass times for " + std::to_string(p) + " stages");
  }
  const int m = sched.microbatches();
  const int vs_count = p * sched.chunks();
  constexpr double kNotDone = std::numeric_limits<double>::quiet_NaN();
  ScheduleRun run;
  run.virtual_stages = vs_count;
  run.microbatches = m;
  run.ends.assign(static_cast<std::size_t>(3 * vs_count * m), kNotDone);
  auto at = [&](Pass pass, int vs, int mb) -> double& { return run.ends[run.slot(pass, vs, mb)]; };
  auto done = [&](Pass pass, int vs, int mb, double& t) {
    const double e = at(pass, vs, mb);
    if (std::isnan(e)) return false;
    t = std::max(t, e);
    return true;
  };
  run.busy.assign(static_cast<std::size_t>(p), 0.0);
  std::vector<double> free(static_cast<std::size_t>(p), 0.0);
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::size_t remaining = 0;
  for (int s = 0; s < p; ++s)
    remaining += sched.stage(s).size();
  bool progress = true;
  while (remaining > 0 && progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      const auto& order = sched.stage(s);
      auto& i = next[static_cast<std::size_t>(s)];
      const PassTimes& times = stage_times[static_cast<std::size_t>(s)];
      // Whether pass `it` can start, moving `start` past its inputs; its duration.
      auto inputs = [&](const PassItem& it, double& start, double& duration) {
        const int vs = sched.virtual_stage(s, it.chunk);
        switch (it.pass) {
          case Pass::kForward:
            duration = times.forward;
            return vs == 0 || done(Pass::kForward, vs - 1, it.microbatch, start);
          case Pass::kBackward:
            duration = times.backward;
            return done(Pass::kForward, vs, it.microbatch, start) &&
                   (vs == vs_count - 1 || done(Pass::kBackward, vs + 1, it.microbatch, start));
          case Pass::kWeight:
            duration = times.weight;
            return done(Pass::kBackward, vs, it.microbatch, start);
        }
        return false;
      };
      while (i < order.size()) {
        // A merged pair starts once both passes' inputs are there, and both passes' outputs
        // leave when the pair ends.
        const std::size_t n = sched.fused(s, i) && i + 1 < order.size() ? 2 : 1;
        double start = free[static_cast<std::size_t>(s)];
        double duration = 0;
        bool ready = true;
        for (std::size_t k = 0; k < n && ready; ++k) {
          double d = 0;
          ready = inputs(order[i + k], start, d);
          duration += d;
        }
        if (!ready) break;
        for (std::size_t k = 0; k < n; ++k) {
          const PassItem& it = order[i + k];
          at(it.pass, sched.virtual_stage(s, it.chunk), it.microbatch) = start + duration;
        }
        free[static_cast<std::size_t>(s)] = start + duration;
        run.busy[static_cast<std::size_t>(s)] += duration;
        i += n;
        remaining -= n;
        progress = true;
      }
    }
  }
  if (remaining > 0) {
    std::string blocked;
    for (int s = 0; s < p; ++s) {
      const std::size_t i = next[static_cast<std::size_t>(s)];
      if (i < sched.stage(s).size()) blocked += "\n  " + item_name(sched.stage(s)[i], s) + " waits";
    }
    return Status::invalid_input("pipeline schedule " + std::string(to_string(sched.kind())) +
                                 " deadlocks:" + blocked);
  }
  run.makespan = *std::max_element(free.begin(), free.end());
  double busy = 0;
  for (double b : run.busy)
    busy += b;
  run.idle_fraction = run.makespan > 0 ? 1.0 - busy / (p * run.makespan) : 0.0;
  return run;
}

Status check_schedule(const PipelineSchedule& sched) {
  const int m = sched.microbatches();
  const int v = sched.chunks();
  for (int s = 0; s < sched.stages(); ++s) {
    // position of each pass, -1 when absent
    std::vector<long> pos(static_cast<std::size_t>(3 * m * v), -1);
    const auto& order = sched.stage(s);
    for (std::size_t i = 0; i < order.size(); ++i) {
      const PassItem& it = order[i];
      if (it.microbatch < 0 || it.microbatch >= m || it.chunk < 0 || it.chunk >= v ||
          (it.pass == Pass::kWeight && !sched.split_backward())) {
        return Status::invalid_input("pipeline schedule: invalid pass " + item_name(it, s));
      }
      long& p = pos[static_cast<std::size_t>((static_cast<int>(it.pass) * v + it.chunk) * m +
                                             it.microbatch)];
      if (p >= 0)
        return Status::invalid_input("pipeline schedule: " + item_name(it, s) + " runs twice");
      p = static_cast<long>(i);
    }
    for (int c = 0; c < v; ++c) {
      for (int mb = 0; mb < m; ++mb) {
        auto get = [&](Pass pass) {
          return pos[static_cast<std::size_t>((static_cast<int>(pass) * v + c) * m + mb)];
        };
        const long f = get(Pass::kForward);
        const long b = get(Pass::kBackward);
        const long w = sched.split_backward() ? get(Pass::kWeight) : b;
        if (f < 0 || b < 0 || w < 0) {
          return Status::invalid_input("pipeline schedule: stage " + std::to_string(s) +
                                       " never runs a pass of micro-batch " + std::to_string(mb) +
                                       ", chunk " + std::to_string(c));
        }
        if (!(f < b && b <= w)) {
          return Status::invalid_input("pipeline schedule: stage " + std::to_string(s) +
                                       " runs the passes of micro-batch " + std::to_string(mb) +
                                       ", chunk " + std::to_string(c) + " out of order");
        }
      }
    }
  }
  return run_schedule(sched, PassTimes{}).status();
}

double peak_in_flight(const PipelineSchedule& sched, int stage,
                      const std::function<double(int chunk)>& weight) {
  double current = 0;
  double peak = 0;
  const Pass last = sched.split_backward() ? Pass::kWeight : Pass::kBackward;
  for (const PassItem& it : sched.stage(stage)) {
    if (it.pass == Pass::kForward) {
      current += weight(it.chunk);
      peak = std::max(peak, current);
    } else if (it.pass == last) {
      current -= weight(it.chunk);
    }
  }
  return peak;
}

int peak_in_flight(const PipelineSchedule& sched, int stage) {
  return static_cast<int>(std::lround(peak_in_flight(sched, stage, [](int) { return 1.0; })));
}

double bubble_fraction(Schedule kind, int p, int m, int v) {
  const double pm1 = p - 1;
  switch (kind) {
    case Schedule::kGpipe:
    case Schedule::k1F1B:
      return pm1 / (m + pm1);
    case Schedule::kInterleaved:
      return pm1 / (static_cast<double>(v) * m + pm1);
    case Schedule::kZeroBubbleH1:
      return pm1 / (3.0 * m + pm1);
    case Schedule::kDualPipeV:
      return pm1 / (6.0 * m + pm1);
  }
  return 0;
}

}  // namespace planner
