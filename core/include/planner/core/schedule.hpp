// Pipeline schedules as pure orderings: for every stage, the order in which it runs the forward
// and backward passes of (micro-batch, model chunk). Timing is not part of a schedule; the
// lowering turns each pass into ops and the simulator times them.
//
// Virtual stages: with v model chunks per stage (interleaved schedule), chunk c of stage s is
// virtual stage c·p + s; activations flow from virtual stage k to k + 1 (stage p − 1, chunk c
// feeds stage 0, chunk c + 1) and gradients back.
//
// Schedules (p stages, m micro-batches, v chunks):
//   gpipe        all forwards, then all backwards (Huang et al. 2019, GPipe).
//   1f1b         PipeDream-Flush (Narayanan et al. 2021): stage s runs min(p − s − 1, m) warm-up
//                forwards, then alternates one forward and one backward, then drains; at most
//                p − s micro-batches are in flight on stage s.
//   interleaved  Megatron-LM's interleaved 1F1B (Narayanan et al., SC'21 §2.2;
//                forward_backward_pipelining_with_interleaving): warm-up (p − s − 1)·2 + (v − 1)·p
//                chunk-passes (all of them when m = p), forward k runs chunk (k mod pv) div p of
//                micro-batch (k div pv)·p + k mod p, backward k the chunk v − 1 − that. When p
//                does not divide m (Megatron-core's get_schedule_table), the last group of
//                micro-batches also holds the m mod p left over (p + m mod p of them), each chunk
//                runs over all of them in turn and the warm-up grows to (v − 1) times that group;
//                needs m ≥ p.
//   dualpipev    DeepSeek's DualPipeV, the cut-in-half DualPipe (deepseek-ai/DualPipe,
//                dualpipev.py; DeepSeek-V3 report arXiv:2412.19437 §3.2.1): v = 2 chunks in a V,
//                chunk 0 of stage s is virtual stage s and chunk 1 is 2p − 1 − s, so stage 0 holds
//                the first and the last model chunk and the turn on stage p − 1 needs no send.
//                Backward split into B and W as in zero bubble. Stage s runs eight phases:
//                2(p − s − 1) forwards of chunk 0; s + 1 pairs F0 F1; p − s − 1 times B1 W1 F1
//                (zero bubble); m − 2p + s + 1 times the merged chunks F0&B1 then F1&B0 (the first
//                F0, B1 of stage p − 1 not merged); p − s − 1 times B1 then F1&B0; s + 1 pairs B1
//                B0, deferring W from the middle on; p − s − 1 times W then B0 (deferred W); and
//                s + 1 deferred W. A merged chunk (fused()) runs one micro-batch's forward and
//                another's backward as one unit, each one's communication under the other's
//                compute. Needs m ≥ 2p.
//   zb-h1        Zero Bubble H1 (Qi et al., ICLR 2024, arXiv:2401.10241 §3.1): backward split into
//                B (input gradient) and W (weight gradient); 1F1B's order of F and B, each W right
//                after its B except that stage s keeps up to s weight-gradient passes deferred and
//                runs them in the drain, filling the cool-down bubble. Same in-flight forwards
//                as 1F1B.
//
// Bubble (idle) fraction with unit pass times, per stage idle time over the makespan:
//   gpipe, 1f1b (F = B = 1)       (p − 1) / (m + p − 1)
//   interleaved (F = B = 1/chunk) (p − 1) / (v·m + p − 1)
//   zb-h1 (F = B = W = 1, m ≥ p)  (p − 1) / (3m + p − 1), vs 1F1B's (p − 1) / (m + p − 1) at
//                                 F = 1, B + W = 2.
//   dualpipev (F = B = W = 1 per chunk, m ≥ 2p)  (p − 1) / (6m + p − 1): every stage idles
//                                 p − 1 chunk-passes (a merged pair counted as one unit that
//                                 starts when both inputs are there and sends both outputs when
//                                 it ends), half of ZB-H1's idle time for the same work per stage.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "planner/core/enums.hpp"
#include "planner/core/status.hpp"

namespace planner {

enum class Pass : std::uint8_t {
  kForward,
  kBackward,  // input gradient; also the weight gradient unless the schedule splits backward
  kWeight,    // weight gradient (split-backward schedules only)
};

struct PassItem {
  std::int32_t microbatch = 0;
  std::int16_t chunk = 0;
  Pass pass = Pass::kForward;
  bool operator==(const PassItem&) const = default;
};

// Where the chunks sit in a pipeline of `stages` stages under `kind`: chunk c of stage s is
// virtual stage c·p + s, or under dualpipev's V s for chunk 0 and 2p − 1 − s for chunk 1; and back.
inline int virtual_stage_of(Schedule kind, int stages, int stage, int chunk) {
  if (kind == Schedule::kDualPipeV) return chunk == 0 ? stage : 2 * stages - 1 - stage;
  return chunk * stages + stage;
}
inline int stage_of_virtual(Schedule kind, int stages, int vs) {
  if (kind == Schedule::kDualPipeV) return vs < stages ? vs : 2 * stages - 1 - vs;
  return vs % stages;
}
inline int chunk_of_virtual(Schedule kind, int stages, int vs) {
  if (kind == Schedule::kDualPipeV) return vs < stages ? 0 : 1;
  return vs / stages;
}

class PipelineSchedule {
 public:
  // Fails when a size is < 1, chunks > 1 for a schedule other than interleaved, or interleaved with
  // chunks < 2 or m < p. extra_warmup: forward passes every stage runs ahead of the schedule's
  // warm-up (1f1b and interleaved only; Megatron-core adds one for its combined 1F1B, the EP
  // all-to-all overlap, ParallelConfig::moe_a2a_overlap), so that a steady-state forward pass
  // and the backward pass after it belong to different micro-batches and can run merged.
  static Result<PipelineSchedule> create(Schedule kind, int stages, int microbatches,
                                         int chunks = 1, int extra_warmup = 0);
  // A schedule from explicit per-stage orders (for tests and custom schedules); check it with
  // check_schedule().
  static PipelineSchedule from_orders(Schedule kind, int microbatches, int chunks,
                                      bool split_backward,
                                      std::vector<std::vector<PassItem>> orders);

  // True for the schedules that split the backward pass into B and W (zb-h1, dualpipev).
  static bool splits_backward(Schedule kind) {
    return kind == Schedule::kZeroBubbleH1 || kind == Schedule::kDualPipeV;
  }

  Schedule kind() const { return kind_; }
  int stages() const { return static_cast<int>(orders_.size()); }
  int microbatches() const { return microbatches_; }
  int chunks() const { return chunks_; }
  bool split_backward() const { return split_backward_; }
  const std::vector<PassItem>& stage(int s) const { return orders_[static_cast<std::size_t>(s)]; }
  int virtual_stage(int stage, int chunk) const {
    return virtual_stage_of(kind_, stages(), stage, chunk);
  }
  // True when pass `index` of stage `stage` and the pass after it run merged: one micro-batch's
  // forward with another's backward (dualpipev's F&B chunks; with extra_warmup, the steady state's
  // pairs of 1f1b and interleaved, unless merging them would make the stages wait forever).
  bool fused(int stage, std::size_t index) const;
  // How many merged pairs stage `stage` runs.
  int fused_pairs(int stage) const {
    return static_cast<int>(fused_[static_cast<std::size_t>(stage)].size());
  }

 private:
  static void keep_safe_pairs(PipelineSchedule& sched);

  Schedule kind_ = Schedule::k1F1B;
  int microbatches_ = 0;
  int chunks_ = 1;
  bool split_backward_ = false;
  std::vector<std::vector<PassItem>> orders_;
  std::vector<std::vector<std::size_t>> fused_;  // per stage, ascending
};

// Durations of one pass of one model chunk.
struct PassTimes {
  double forward = 1;
  double backward = 1;  // input gradient (+ weight gradient when not split)
  double weight = 1;    // weight gradient, split schedules only
};

struct ScheduleRun {
  double makespan = 0;
  double idle_fraction = 0;  // 1 − busy / (stages × makespan)
  std::vector<double> busy;  // per stage
  // When each pass ended: [pass][virtual stage][micro-batch].
  std::vector<double> ends;
  int virtual_stages = 0;
  int microbatches = 0;
  std::size_t slot(Pass pass, int vs, int mb) const {
    return (static_cast<std::size_t>(pass) * static_cast<std::size_t>(virtual_stages) +
            static_cast<std::size_t>(vs)) *
               static_cast<std::size_t>(microbatches) +
           static_cast<std::size_t>(mb);
  }
  double end(Pass pass, int vs, int mb) const { return ends[slot(pass, vs, mb)]; }
};

// Runs the schedule: each stage executes its order one pass at a time; F of (mb, virtual stage k)
// waits for F of (mb, k − 1), B for B of (mb, k + 1) and F of (mb, k), W for B of (mb, k). Fails
// with the blocked passes when the stages wait on each other forever.
Result<ScheduleRun> run_schedule(const PipelineSchedule& schedule, const PassTimes& times);
// The same with each stage's own pass times (one per stage).
Result<ScheduleRun> run_schedule(const PipelineSchedule& schedule,
                                 const std::vector<PassTimes>& stage_times);

// The checker every schedule must pass: each stage runs every (micro-batch, chunk) forward and
// backward (and weight pass when split) exactly once, the forward before the backward before the
// weight pass, and the stages' orders together run to the end (the sends and receives they imply
// match without deadlock).
Status check_schedule(const PipelineSchedule& schedule);

// Peak over the order of stage `stage` of Σ weight(chunk) over the (micro-batch, chunk) pairs
// whose forward has run and whose last backward pass (B, or W when split) has not: the
// activations the stage holds. weight = 1 counts micro-batch chunks in flight.
double peak_in_flight(const PipelineSchedule& schedule, int stage,
                      const std::function<double(int chunk)>& weight);
int peak_in_flight(const PipelineSchedule& schedule, int stage);

// True when `kind` on `stages` stages can run a forward pass merged with the backward pass next to
// it (ParallelConfig::moe_a2a_overlap, with one extra warm-up forward): the interleaved schedule,
// or 1f1b with one stage. Merged 1F1B passes on more stages would wait on each other stage by
// stage.
inline bool merges_forward_backward(Schedule kind, int stages) {
  return kind == Schedule::kInterleaved || (kind == Schedule::k1F1B && stages == 1);
}

// The closed-form bubble fraction of the header (zb-h1: valid for m ≥ p).
double bubble_fraction(Schedule kind, int stages, int microbatches, int chunks = 1);

}  // namespace planner
