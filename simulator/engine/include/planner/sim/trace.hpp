// Chrome trace-event JSON (opens in Perfetto and chrome://tracing) of a simulated step.
//
// One process per simulated rank ("rank 12 · stage 1"), one thread (track) per stream it used:
// compute, tp-comm, dp-comm, pp-send, pp-recv, ... Every op is a complete event ("ph": "X") named
// by its op id ("L3.mb2.fwd.attn_qkv"), so micro-batches can be told apart and pipeline bubbles
// show as gaps on the compute track. A communication op spans from its issue to its end; its args
// give the time it waited for its peers. Timestamps are microseconds printed from integer
// picoseconds (6 decimals), so the text is byte-identical for identical runs.
#pragma once

#include <span>
#include <string>

#include "planner/sim/program_runner.hpp"

namespace planner::sim {

// Requires the ranks' op timings (RunOptions::keep_op_times or trace).
std::string chrome_trace(std::span<const RankRun> ranks);

}  // namespace planner::sim
