#include "planner/core/schedule.hpp"

#include "planner/core/parallel_config.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace planner {
namespace {

PipelineSchedule make(Schedule kind, int p, int m, int v = 1) {
  auto s = PipelineSchedule::create(kind, p, m, v);
  EXPECT_TRUE(s) << s.status().message();
  return *s;
}

// Every schedule over a grid of (p, m, v) passes the checker: complete, F < B (< W) per stage,
// and the stages' orders run to the end without waiting on each other forever.
TEST(Schedule, CheckerPassesEveryScheduleOverAGrid) {
  int checked = 0;
  for (int p : {1, 2, 3, 4, 5, 6, 8}) {
    for (int m : {1, 2, 3, 4, 7, 8, 13, 16, 21, 24, 31}) {
      for (Schedule kind : {Schedule::kGpipe, Schedule::k1F1B, Schedule::kZeroBubbleH1}) {
        const PipelineSchedule s = make(kind, p, m);
        EXPECT_TRUE(check_schedule(s).is_ok())
            << to_string(kind) << " p" << p << " m" << m << ": " << check_schedule(s).message();
        ++checked;
      }
      if (p < 2 || m < p) continue;
      for (int v : {2, 3, 4}) {
        const PipelineSchedule s = make(Schedule::kInterleaved, p, m, v);
        EXPECT_TRUE(check_schedule(s).is_ok()) << "interleaved p" << p << " m" << m << " v" << v
                                               << ": " << check_schedule(s).message();
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 150);
}

TEST(Schedule, GpipeAnd1F1BBubbleMatchesTheClosedForm) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 4, 8, 32}) {
      for (Schedule kind : {Schedule::kGpipe, Schedule::k1F1B}) {
        auto run = run_schedule(make(kind, p, m), PassTimes{1, 1, 0});
        ASSERT_TRUE(run);
        EXPECT_NEAR(run->idle_fraction, double(p - 1) / (m + p - 1), 1e-12)
            << to_string(kind) << " p" << p << " m" << m;
        EXPECT_DOUBLE_EQ(run->makespan, 2.0 * (m + p - 1));
        EXPECT_NEAR(run->idle_fraction, bubble_fraction(kind, p, m), 1e-12);
      }
    }
  }
}

TEST(Schedule, InterleavedBubbleShrinksByTheNumberOfChunks) {
  for (int p : {2, 4, 8}) {
    for (int mult : {1, 2, 4}) {
      const int m = p * mult;
      for (int v : {2, 3, 4}) {
        auto run = run_schedule(make(Schedule::kInterleaved, p, m, v), PassTimes{1, 1, 0});
        ASSERT_TRUE(run);
        EXPECT_NEAR(run->idle_fraction, double(p - 1) / (v * m + p - 1), 1e-12)
            << "p" << p << " m" << m << " v" << v;
        EXPECT_NEAR(bubble_fraction(Schedule::kInterleaved, p, m, v), run->idle_fraction, 1e-12);
      }
    }
  }
}

// p = 2, m = 5, v = 2, Megatron-core's schedule table (get_schedule_table's docstring example:
// groups of p micro-batches, the last one taking the remainder): micro-batches 0 1 0 1 2 3 4 2 3 4
// on chunks 0 0 1 1 0 0 0 1 1 1; the backward passes run the same micro-batches on the chunks in
// reverse.
TEST(Schedule, InterleavedWithARemainderFollowsMegatronCoresTable) {
  const PipelineSchedule s = make(Schedule::kInterleaved, 2, 5, 2);
  const std::vector<std::pair<int, int>> table{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 0},
                                               {3, 0}, {4, 0}, {2, 1}, {3, 1}, {4, 1}};
  for (int stage = 0; stage < 2; ++stage) {
    std::vector<std::pair<int, int>> forwards, backwards;
    for (const PassItem& it : s.stage(stage)) {
      (it.pass == Pass::kForward ? forwards : backwards).emplace_back(it.microbatch, it.chunk);
    }
    EXPECT_EQ(forwards, table) << "stage " << stage;
    ASSERT_EQ(backwards.size(), table.size());
    for (std::size_t k = 0; k < table.size(); ++k) {
      EXPECT_EQ(backwards[k], std::make_pair(table[k].first, 1 - table[k].second))
          << "stage " << stage << " backward " << k;
    }
  }
  // Stage 0 warms up with (p − 1)·2 + (v − 1)·3 = 5 forwards (the last group holds 3), then
  // alternates.
  const std::vector<PassItem>& first = s.stage(0);
  for (int k = 0; k < 6; ++k)
    EXPECT_EQ(first[static_cast<std::size_t>(k)].pass, Pass::kForward) << k;
  EXPECT_EQ(first[6].pass, Pass::kBackward);
}

// With a remainder the bubble stays within one chunk-pass per stage of the closed form's
// (p − 1) / (v·m + p − 1): the larger last group delays some backward passes.
TEST(Schedule, InterleavedWithARemainderKeepsTheShrunkBubble) {
  for (int p : {2, 3, 4, 8}) {
    for (int m = p + 1; m < 3 * p; ++m) {
      if (m % p == 0) continue;
      for (int v : {2, 3, 4}) {
        auto run = run_schedule(make(Schedule::kInterleaved, p, m, v), PassTimes{1, 1, 0});
        ASSERT_TRUE(run) << run.status().message();
        const double closed = bubble_fraction(Schedule::kInterleaved, p, m, v);
        const double one_pass = 1.0 / (2.0 * (v * m + p - 1) / v);
        EXPECT_NEAR(run->idle_fraction, closed, one_pass) << "p" << p << " m" << m << " v" << v;
        EXPECT_LT(run->idle_fraction, bubble_fraction(Schedule::k1F1B, p, m))
            << "p" << p << " m" << m << " v" << v;
      }
    }
  }
}

// ZB-H1 with F = B = W = 1 against 1F1B doing the same work (F = 1, B + W = 2).
TEST(Schedule, ZeroBubbleH1IsStrictlyBelow1F1B) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {1, 2, 4, 8, 16, 33}) {
      auto zb = run_schedule(make(Schedule::kZeroBubbleH1, p, m), PassTimes{1, 1, 1});
      auto ob = run_schedule(make(Schedule::k1F1B, p, m), PassTimes{1, 2, 0});
      ASSERT_TRUE(zb && ob);
      EXPECT_LT(zb->idle_fraction, ob->idle_fraction) << "p" << p << " m" << m;
      if (m >= p) {
        EXPECT_NEAR(zb->idle_fraction, double(p - 1) / (3 * m + p - 1), 1e-12)
            << "p" << p << " m" << m;
        EXPECT_NEAR(zb->idle_fraction, bubble_fraction(Schedule::kZeroBubbleH1, p, m), 1e-12);
      }
    }
  }
}

TEST(Schedule, MicroBatchesInFlight) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 3, 8, 16}) {
      const PipelineSchedule ofob = make(Schedule::k1F1B, p, m);
      const PipelineSchedule gpipe = make(Schedule::kGpipe, p, m);
      const PipelineSchedule zb = make(Schedule::kZeroBubbleH1, p, m);
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(peak_in_flight(ofob, s), std::min(p - s, m)) << "1f1b p" << p << " m" << m;
        EXPECT_EQ(peak_in_flight(gpipe, s), m);
        // Counting a micro-batch until its W pass, ZB-H1 never exceeds 1F1B's first stage.
        EXPECT_LE(peak_in_flight(zb, s), std::min(p, m));
      }
    }
  }
  // Interleaved: stage s holds (p − s − 1)·2 + (v − 1)·p + 1 chunk-micro-batches, i.e. the first
  // stage L·(1 + (p − 1)/(p·v)) layers' worth (Korthikanti et al. 2022 §4.2.3).
  const int p = 4, m = 16, v = 3;
  const PipelineSchedule il = make(Schedule::kInterleaved, p, m, v);
  for (int s = 0; s < p; ++s) {
    EXPECT_EQ(peak_in_flight(il, s), (p - s - 1) * 2 + (v - 1) * p + 1) << "stage " << s;
  }
  const double chunk_layers_over_l = 1.0 / (p * v);  // a chunk holds L / (p·v) layers
  EXPECT_NEAR(peak_in_flight(il, 0) * chunk_layers_over_l, 1.0 + double(p - 1) / (p * v), 1e-12);
}

// Megatron-core's combined 1F1B (ParallelConfig::moe_a2a_overlap): one more warm-up forward on
// every stage, so that each steady-state forward and the backward right after it belong to
// different micro-batches (they run merged, one's all-to-alls under the other's compute). The
// schedules stay complete and deadlock-free, hold one more micro-batch chunk in flight, and keep
// the closed-form bubble with unit pass times.
TEST(Schedule, OneExtraWarmupForwardForTheCombined1F1B) {
  int checked = 0;
  for (int p : {1, 2, 3, 4, 8}) {
    for (int m : {2, 4, 7, 8, 16, 21}) {
      for (int v : {1, 2, 3}) {
        if (v > 1 && (p < 2 || m < p || m == p)) continue;
        const Schedule kind = v > 1 ? Schedule::kInterleaved : Schedule::k1F1B;
        auto extra = PipelineSchedule::create(kind, p, m, v, 1);
        ASSERT_TRUE(extra) << extra.status().message();
        const std::string name = std::string(to_string(kind)) + " p" + std::to_string(p) + " m" +
                                 std::to_string(m) + " v" + std::to_string(v);
        EXPECT_TRUE(check_schedule(*extra).is_ok())
            << name << ": " << check_schedule(*extra).message();
        const PipelineSchedule base = make(kind, p, m, v);
        for (int st = 0; st < p; ++st) {
          const int total = m * v;
          EXPECT_EQ(peak_in_flight(*extra, st), std::min(peak_in_flight(base, st) + 1, total))
              << name << " stage " << st;
          const std::vector<PassItem>& order = extra->stage(st);
          for (std::size_t i = 0; i + 1 < order.size(); ++i) {
            if (order[i].pass == Pass::kForward && order[i + 1].pass == Pass::kBackward) {
              EXPECT_NE(order[i].microbatch, order[i + 1].microbatch) << name << " stage " << st;
            }
          }
        }
        auto run = run_schedule(*extra, PassTimes{1, 1, 0});
        ASSERT_TRUE(run) << name;
        EXPECT_NEAR(run->idle_fraction, bubble_fraction(kind, p, m, v), 1e-12) << name;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 60);
  EXPECT_FALSE(PipelineSchedule::create(Schedule::kZeroBubbleH1, 4, 8, 1, 1));
  EXPECT_FALSE(PipelineSchedule::create(Schedule::k1F1B, 4, 8, 1, -1));
}

// The pairs the combined 1F1B runs merged (PipelineSchedule::fused): only the steady state's F(k +
// w) with B(k), as Megatron-core's loop merges them (none without the extra warm-up, none for
// 1F1B with more than one stage, none when everything is warm-up: m = p); kept wherever the stages
// can run them merged (m >= 2p), dropped together where a merged pair would wait on the next
// stage's pair forever (p <= m < 2p for most shapes). Either way the schedule runs to the end.
TEST(Schedule, TheCombined1F1BMergesTheSteadyStateWhereItCan) {
  int merged = 0, unmerged = 0;
  for (int p : {1, 2, 3, 4, 8}) {
    for (int m = std::max(2, p); m <= 3 * p + 1; ++m) {
      for (int v : {1, 2, 3}) {
        if (v > 1 && p < 2) continue;
        const Schedule kind = v > 1 ? Schedule::kInterleaved : Schedule::k1F1B;
        const std::string name = std::string(to_string(kind)) + " p" + std::to_string(p) + " m" +
                                 std::to_string(m) + " v" + std::to_string(v);
        auto plain = PipelineSchedule::create(kind, p, m, v, 0);
        auto sched = PipelineSchedule::create(kind, p, m, v, 1);
        ASSERT_TRUE(plain && sched) << name;
        ASSERT_TRUE(run_schedule(*sched, PassTimes{})) << name;
        int pairs = 0;
        for (int s = 0; s < p; ++s) {
          EXPECT_EQ(plain->fused_pairs(s), 0) << name;
          pairs += sched->fused_pairs(s);
          const std::vector<PassItem>& order = sched->stage(s);
          for (std::size_t i = 0; i < order.size(); ++i) {
            if (!sched->fused(s, i)) continue;
            ASSERT_LT(i + 1, order.size()) << name;
            EXPECT_EQ(order[i].pass, Pass::kForward) << name;
            EXPECT_EQ(order[i + 1].pass, Pass::kBackward) << name;
            EXPECT_NE(order[i].microbatch, order[i + 1].microbatch) << name;
            // The first backward pass of the stage comes no earlier than its first pair.
            for (std::size_t j = 0; j < i; ++j)
              EXPECT_NE(order[j].pass, Pass::kBackward) << name << " stage " << s << " pair " << i;
            break;
          }
        }
        if ((kind == Schedule::kInterleaved && m == p) || (kind == Schedule::k1F1B && p > 1)) {
          EXPECT_EQ(pairs, 0) << name;
        } else if (m >= 2 * p && (kind == Schedule::kInterleaved || p == 1)) {
          EXPECT_GT(pairs, 0) << name;
        }
        ++(pairs > 0 ? merged : unmerged);
      }
    }
  }
  EXPECT_GT(merged, 40);
  EXPECT_GT(unmerged, 5);
}

TEST(Schedule, OneF1BOrderIsPipeDreamFlush) {
  const PipelineSchedule s = make(Schedule::k1F1B, 4, 6);
  // Stage 1: two warm-up forwards, then alternate, then drain.
  const std::vector<PassItem> expected = {
      {0, 0, Pass::kForward},  {1, 0, Pass::kForward},  {2, 0, Pass::kForward},
      {0, 0, Pass::kBackward}, {3, 0, Pass::kForward},  {1, 0, Pass::kBackward},
      {4, 0, Pass::kForward},  {2, 0, Pass::kBackward}, {5, 0, Pass::kForward},
      {3, 0, Pass::kBackward}, {4, 0, Pass::kBackward}, {5, 0, Pass::kBackward}};
  EXPECT_EQ(s.stage(1), expected);
}

TEST(Schedule, CheckerRejectsBrokenOrders) {
  auto F = [](int mb) { return PassItem{mb, 0, Pass::kForward}; };
  auto B = [](int mb) { return PassItem{mb, 0, Pass::kBackward}; };
  // Stage 0 waits for B0 from stage 1, which waits for F1 that stage 0 runs only after B0.
  auto deadlock = PipelineSchedule::from_orders(
      Schedule::k1F1B, 2, 1, false, {{F(0), B(0), F(1), B(1)}, {F(0), F(1), B(0), B(1)}});
  Status st = check_schedule(deadlock);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("deadlocks"), std::string::npos) << st.message();
  auto missing = PipelineSchedule::from_orders(Schedule::kGpipe, 2, 1, false, {{F(0), F(1), B(0)}});
  EXPECT_NE(check_schedule(missing).message().find("never runs"), std::string::npos);
  auto backwards = PipelineSchedule::from_orders(Schedule::kGpipe, 1, 1, false, {{B(0), F(0)}});
  EXPECT_NE(check_schedule(backwards).message().find("out of order"), std::string::npos);
  auto twice = PipelineSchedule::from_orders(Schedule::kGpipe, 1, 1, false, {{F(0), F(0), B(0)}});
  EXPECT_NE(check_schedule(twice).message().find("twice"), std::string::npos);
}

// DeepSeek's DualPipeV: the checker passes over p ≤ 8 and m from 2p up; chunk 1 runs the stages
// backwards, so virtual stage 2p − 1 (the LM head) sits on stage 0.
TEST(Schedule, DualPipeVPassesTheCheckerAndRunsAV) {
  int checked = 0;
  for (int p : {1, 2, 3, 4, 5, 6, 8}) {
    for (int m : {2 * p, 2 * p + 1, 3 * p, 4 * p + 3, 8 * p}) {
      const PipelineSchedule s = make(Schedule::kDualPipeV, p, m, 2);
      EXPECT_TRUE(s.split_backward());
      EXPECT_TRUE(check_schedule(s).is_ok())
          << "dualpipev p" << p << " m" << m << ": " << check_schedule(s).message();
      ++checked;
    }
    for (int s = 0; s < p; ++s) {
      const PipelineSchedule sched = make(Schedule::kDualPipeV, p, 2 * p, 2);
      EXPECT_EQ(sched.virtual_stage(s, 0), s);
      EXPECT_EQ(sched.virtual_stage(s, 1), 2 * p - 1 - s);
      for (int c : {0, 1})
        EXPECT_EQ(stage_of_virtual(Schedule::kDualPipeV, p, sched.virtual_stage(s, c)), s);
    }
  }
  EXPECT_EQ(checked, 35);
  EXPECT_FALSE(PipelineSchedule::create(Schedule::kDualPipeV, 4, 7, 2));  // m < 2p
  EXPECT_FALSE(PipelineSchedule::create(Schedule::kDualPipeV, 4, 8, 1));  // not a V
  EXPECT_FALSE(PipelineSchedule::create(Schedule::kDualPipeV, 4, 8, 3));
}

// The merged F&B chunks: stage s merges 2(m − 2p + s + 1) + p − s − 1 pairs (the last stage one
// fewer: its first F0, B1 run apart), each the forward of one micro-batch and the backward of
// another, of the other chunk.
TEST(Schedule, DualPipeVMergesForwardAndBackwardChunks) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {2 * p, 3 * p + 1}) {
      const PipelineSchedule sched = make(Schedule::kDualPipeV, p, m, 2);
      for (int s = 0; s < p; ++s) {
        const auto& order = sched.stage(s);
        int pairs = 0;
        for (std::size_t i = 0; i < order.size(); ++i) {
          if (!sched.fused(s, i)) continue;
          ++pairs;
          ASSERT_LT(i + 1, order.size());
          EXPECT_EQ(order[i].pass, Pass::kForward);
          EXPECT_EQ(order[i + 1].pass, Pass::kBackward);
          EXPECT_NE(order[i].microbatch, order[i + 1].microbatch);
          EXPECT_NE(order[i].chunk, order[i + 1].chunk);
        }
        EXPECT_EQ(pairs, 2 * (m - 2 * p + s + 1) + p - s - 1 - (s == p - 1 ? 1 : 0))
            << "p" << p << " m" << m << " stage " << s;
      }
    }
  }
}

// With F = B = W = 1 per chunk every stage idles p − 1 (a merged pair starting once both its
// inputs are there): (p − 1) / (6m + p − 1), half of ZB-H1's idle time for the same work per
// stage (ZB-H1 with F = B = W = 2); per-stage pass times that are all equal give the same run.
TEST(Schedule, DualPipeVBubbleMatchesTheClosedForm) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {2 * p, 2 * p + 1, 4 * p, 5 * p + 3}) {
      const PipelineSchedule sched = make(Schedule::kDualPipeV, p, m, 2);
      auto run = run_schedule(sched, PassTimes{1, 1, 1});
      ASSERT_TRUE(run) << run.status().message();
      EXPECT_DOUBLE_EQ(run->makespan, 6.0 * m + p - 1) << "p" << p << " m" << m;
      EXPECT_NEAR(run->idle_fraction, double(p - 1) / (6 * m + p - 1), 1e-12);
      EXPECT_NEAR(bubble_fraction(Schedule::kDualPipeV, p, m, 2), run->idle_fraction, 1e-12);
      auto zb = run_schedule(make(Schedule::kZeroBubbleH1, p, m), PassTimes{2, 2, 2});
      ASSERT_TRUE(zb);
      EXPECT_NEAR(run->makespan - 6.0 * m, 0.5 * (zb->makespan - 6.0 * m), 1e-12);
      auto per_stage = run_schedule(
          sched, std::vector<PassTimes>(static_cast<std::size_t>(p), PassTimes{1, 1, 1}));
      ASSERT_TRUE(per_stage);
      EXPECT_DOUBLE_EQ(per_stage->makespan, run->makespan);
    }
  }
  EXPECT_FALSE(run_schedule(make(Schedule::kDualPipeV, 2, 4, 2), std::vector<PassTimes>(3)));
}

// DeepSeek's DualPipe on P ranks (rank r holding stages r and P - 1 - r, m micro-batches, half
// from each end) runs as its cut-in-half form, dualpipev on P / 2 stages with m / 2 micro-batches a
// replica: it passes the checker, holds two stages a rank, and every rank idles the DualPipe
// README's (P / 2 - 1)(F&B + B - 3W), here 1 with F = B = W = 1 (F&B = F + B, B a full backward),
// beside the 3m of work a rank does when each micro-batch crosses it once.
TEST(Schedule, DualPipeBubbleIsItsClosedFormOnHalfTheRanks) {
  for (int ranks : {4, 6, 8, 16}) {
    for (int m : {2 * ranks, 2 * ranks + 2, 4 * ranks}) {
      ParallelConfig p;
      p.pp = ranks;
      p.dp = 2;
      ASSERT_TRUE(fold_dualpipe(p).is_ok());
      EXPECT_EQ(p.pp, ranks / 2);
      EXPECT_EQ(p.dp, 4);
      EXPECT_EQ(p.written_pp(), ranks);
      EXPECT_EQ(p.written_dp(), 2);
      const PipelineSchedule sched = make(p.schedule, p.pp, m / 2, p.virtual_stages);
      EXPECT_TRUE(check_schedule(sched).is_ok()) << check_schedule(sched).message();
      auto run = run_schedule(sched, PassTimes{1, 1, 1});
      ASSERT_TRUE(run) << run.status().message();
      EXPECT_DOUBLE_EQ(run->makespan, 3.0 * m + (ranks / 2 - 1) * 1.0) << ranks << " m" << m;
    }
  }
  for (int odd : {1, 3, 15}) {
    ParallelConfig p;
    p.pp = odd;
    const Status folded = fold_dualpipe(p);
    EXPECT_FALSE(folded.is_ok());
    EXPECT_NE(folded.message().find("needs an even pp"), std::string::npos) << folded.message();
    EXPECT_EQ(p.pp, odd);  // left as it was
  }
}

// Every stage holds 2p + 1 chunk-micro-batches at its peak (DualPipe's "PP + 1" activations for
// 2p pipeline stages of L / 2p layers: the first stage of 1F1B's L layers plus one chunk).
TEST(Schedule, DualPipeVHoldsTwoPPlusOneChunksInFlight) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {2 * p, 4 * p + 1}) {
      const PipelineSchedule sched = make(Schedule::kDualPipeV, p, m, 2);
      for (int s = 0; s < p; ++s)
        EXPECT_EQ(peak_in_flight(sched, s), 2 * p + 1) << "p" << p << " m" << m << " stage " << s;
    }
  }
}

TEST(Schedule, ImpossibleShapesAreErrors) {
  EXPECT_FALSE(PipelineSchedule::create(Schedule::kInterleaved, 4, 3, 2));  // m < p
  EXPECT_FALSE(PipelineSchedule::create(Schedule::kInterleaved, 4, 8, 1));
  EXPECT_FALSE(PipelineSchedule::create(Schedule::k1F1B, 4, 8, 2));
  EXPECT_FALSE(PipelineSchedule::create(Schedule::kGpipe, 0, 8));
}

}  // namespace
}  // namespace planner
