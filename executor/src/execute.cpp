#include "planner/exec/execute.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "planner/core/diagnostics.hpp"
#include "planner/core/flops.hpp"
#include "planner/core/memory.hpp"
#include "planner/exec/checkpoint.hpp"
#include "planner/exec/synthetic_data.hpp"
#include "wire.hpp"

namespace planner::exec {
namespace {

// Control messages wait this many op timeouts: a rank may be blocked in one wait of its own step
// (up to one timeout) before it notices a failure elsewhere and reports.
constexpr double kControlTimeouts = 3;

// What rank 0 needs to know about each op of a rank, once.
struct OpInfo {
  std::uint64_t id = 0;
  OpKind kind = OpKind::kGemm;
  Phase phase = Phase::kForward;
  std::int32_t group_size = 1;
  std::int64_t bytes = 0;
};

std::string encode_ops(const Runner& runner) {
  const StepProgram& p = runner.program();
  const RankProgram& rp = runner.rank_program();
  std::string out;
  put<std::int64_t>(out, static_cast<std::int64_t>(rp.size()));
  for (const Op& op : rp.ops()) {
    const OpDesc& d = p.desc(op);
    OpInfo info;
    info.id = op.id.raw();
    info.kind = d.kind;
    info.phase = op.id.phase();
    info.group_size = op.group >= 0 ? static_cast<std::int32_t>(p.group(op.group).ranks.size())
                                    : (op.peer >= 0 ? 2 : 1);
    info.bytes = is_compute(d.kind) ? (d.bytes_read + d.bytes_written).raw() : d.comm_bytes.raw();
    put(out, info);
  }
  return out;
}

std::vector<OpInfo> decode_ops(std::string_view data) {
  Reader r(data);
  const auto n = r.get<std::int64_t>();
  std::vector<OpInfo> ops;
  for (std::int64_t i = 0; i < n && r.ok(); ++i)
    ops.push_back(r.get<OpInfo>());
  return ops;
}

// One rank's report of a step.
struct Report {
  bool ok = false;
  StatusCode code = StatusCode::kOk;
  std::string error;
  double wall_s = 0;
  double loss_sum = 0;
  std::int64_t loss_tokens = 0;
  std::int64_t peak = 0;
  float loss_scale = 0;
  bool skipped = false;
  std::vector<OpSample> ops;
};

std::string encode_report(const Result<StepStats>& stats) {
  std::string out;
  put<std::int32_t>(out, stats.is_ok() ? 1 : 0);
  if (!stats.is_ok()) {
    const std::string msg = stats.status().message();
    put<std::int32_t>(out, static_cast<std::int32_t>(stats.status().code()));
    put<std::int64_t>(out, static_cast<std::int64_t>(msg.size()));
    out += msg;
    return out;
  }
  put(out, stats->wall_s);
  put(out, stats->loss_sum);
  put(out, stats->loss_tokens);
  put(out, stats->peak_memory);
  put(out, stats->loss_scale);
  put<std::int32_t>(out, stats->skipped ? 1 : 0);
  put<std::int64_t>(out, static_cast<std::int64_t>(stats->ops.size()));
  for (const OpSample& s : stats->ops)
    put(out, s);
  return out;
}

Report decode_report(std::string_view data) {
  Reader r(data);
  Report rep;
  rep.ok = r.get<std::int32_t>() == 1;
  if (!rep.ok) {
    rep.code = static_cast<StatusCode>(r.get<std::int32_t>());
    rep.error = r.text(static_cast<std::size_t>(r.get<std::int64_t>()));
    return rep;
  }
  rep.wall_s = r.get<double>();
  rep.loss_sum = r.get<double>();
  rep.loss_tokens = r.get<std::int64_t>();
  rep.peak = r.get<std::int64_t>();
  rep.loss_scale = r.get<float>();
  rep.skipped = r.get<std::int32_t>() == 1;
  const auto n = r.get<std::int64_t>();
  for (std::int64_t i = 0; i < n && r.ok(); ++i)
    rep.ops.push_back(r.get<OpSample>());
  if (!r.ok()) {
    rep.ok = false;
    rep.error = "truncated measurement report";
  }
  return rep;
}

std::string gib(Bytes b) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f GiB", to_GiB(b));
  return text;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Ranks whose report rank 0 did not get before the deadline, as text ("ranks 1, 3"), or "".
std::string missing_ranks(const std::vector<std::optional<std::string>>& got,
                          std::optional<int>& first) {
  std::string text;
  int count = 0;
  for (std::size_t r = 0; r < got.size(); ++r) {
    if (got[r]) continue;
    if (!first) first = static_cast<int>(r);
    text += (count++ > 0 ? ", " : "") + std::to_string(r);
  }
  return count == 0 ? text : (count == 1 ? "rank " : "ranks ") + text;
}

}  // namespace

double bus_bandwidth_factor(OpKind kind, int ranks) {
  const double n = std::max(1, ranks);
  switch (kind) {
    case OpKind::kAllReduce:
      return 2.0 * (n - 1) / n;
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
    case OpKind::kAllToAll:
      return (n - 1) / n;
    case OpKind::kBroadcast:
    case OpKind::kSend:
    case OpKind::kRecv:
    case OpKind::kHostToDevice:
    case OpKind::kDeviceToHost:
      return 1.0;
    default:
      return 0.0;
  }
}

Status check_executable(const Plan& plan, std::string_view backend, int ranks) {
  PLANNER_RETURN_IF_ERROR(check_backend_name(backend));
  Diagnostics diag(plan.name.empty() ? "plan" : plan.name);
  check_plan(plan, diag);
  const ParallelConfig& p = plan.parallel;
  if (ranks > 0 && p.world_size() != ranks) {
    diag.add("/parallel", "the plan runs on tp x cp x dp x pp = " + std::to_string(p.tp) + " x " +
                              std::to_string(p.cp) + " x " + std::to_string(p.dp) + " x " +
                              std::to_string(p.pp) + " = " + std::to_string(p.world_size()) +
                              " ranks, but " + std::to_string(ranks) + " were started: run it on " +
                              std::to_string(p.world_size()) + " ranks (-n " +
                              std::to_string(p.world_size()) +
                              ") or change the plan's parallel sizes");
  }
  if (backend == "cpu" && plan.training.precision != Precision::kFp32) {
    diag.add("/training/precision", "the cpu backend trains in fp32 only, got " +
                                        std::string(to_string(plan.training.precision)));
  }
  if (backend == "cuda" && plan.training.precision == Precision::kFp8) {
    diag.add("/training/precision", "the cuda backend trains in fp32, tf32, bf16 or fp16, got fp8");
  }
  if (!diag.empty()) return diag.to_status();
  PLANNER_RETURN_IF_ERROR(check_runnable(plan));
  if (plan.gpu.hbm.raw() > 0) {
    MemoryOptions mo;
    mo.fp32_grads = true;  // the runner accumulates and reduces gradients in fp32 (runner.hpp)
    if (backend == "cpu")
      mo.framework_overhead = Bytes(static_cast<std::int64_t>(kCpuRankOverheadMiB * kMiB));
    PLANNER_ASSIGN_OR_RETURN(
        MemoryReport mem, estimate_memory(plan.model, plan.training, plan.parallel, plan.gpu, mo));
    if (!mem.fits) {
      return Status::invalid_input((plan.name.empty() ? std::string("plan") : plan.name) +
                                   ": /cluster/gpu: a rank of stage " +
                                   std::to_string(mem.peak_stage) + " needs " + gib(mem.peak) +
                                   " at its peak, " + plan.gpu.name + " has " + gib(mem.capacity) +
                                   " (see `planner memory --plan`)");
    }
  }
  return Status::ok();
}

Result<ExecResult> execute(const Plan& plan, World& world, const ExecOptions& options,
                           ExecObserver* observer) {
  const bool root = world.rank() == 0;
  const double control_s = kControlTimeouts * options.runner.timeout_s;
  auto control = [&] { return Deadline::after(control_s); };
  ExecOptions opts = options;
  if (opts.backend_options.capacity == 0) opts.backend_options.capacity = plan.gpu.hbm.raw();
  opts.backend_options.timeout_s = opts.runner.timeout_s;

  bool started = false;  // rank 0: the observer knows the run
  // Rank 0's verdict after each exchange, sent to every rank: go on (with `payload`), or stop (with
  // the reason, the failing rank when known, and the status code every rank then returns).
  auto decide = [&](const std::string& reason, StatusCode code, std::optional<int> rank,
                    const std::string& payload) -> Result<std::string> {
    std::string msg;
    if (root) {
      if (!reason.empty() && started && observer != nullptr) observer->on_failure(reason, rank);
      put<std::int32_t>(msg, reason.empty() ? 1 : 0);
      put<std::int32_t>(msg, static_cast<std::int32_t>(code));
      msg += reason.empty() ? payload : reason;
    }
    auto got = world.broadcast(msg, control());
    if (!got) {
      // Rank 0 already recorded its own verdict; a rank that cannot hear it stops too.
      return root && !reason.empty() ? Status(code, reason) : got.status();
    }
    Reader rd(*got);
    const bool go = rd.get<std::int32_t>() == 1;
    const auto sent_code = static_cast<StatusCode>(rd.get<std::int32_t>());
    std::string text = got->substr(2 * sizeof(std::int32_t));
    if (!go) return Status(sent_code == StatusCode::kOk ? StatusCode::kRuntime : sent_code, text);
    return text;
  };

  // Roll call: every rank is here before the collective set-up calls, which MPI offers only as
  // blocking calls (MPI_Comm_split): a rank that never arrives is named instead of waited for.
  {
    PLANNER_ASSIGN_OR_RETURN(std::vector<std::optional<std::string>> present,
                             world.gather("", control()));
    std::optional<int> absent;
    const std::string missing = root ? missing_ranks(present, absent) : "";
    PLANNER_RETURN_IF_ERROR(decide(missing.empty()
                                       ? ""
                                       : missing + " did not start within " +
                                             std::to_string(static_cast<int>(control_s)) + " s",
                                   StatusCode::kTimeout, absent, "")
                                .status());
  }

  // Set-up. Every rank reports whether it could build its runner before anyone steps.
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Runner> runner;
  Status setup = [&]() -> Status {
    PLANNER_ASSIGN_OR_RETURN(backend, make_backend(opts.backend, world, opts.backend_options));
    PLANNER_ASSIGN_OR_RETURN(runner, Runner::create(plan, *backend, opts.runner));
    return Status::ok();
  }();
  std::string mine;
  put<std::int32_t>(mine, setup.is_ok() ? 1 : 0);
  if (setup.is_ok()) {
    const std::string ops = encode_ops(*runner);
    const std::string& host = world.host();
    const std::string device = backend->device().description();
    put<std::int64_t>(mine, static_cast<std::int64_t>(host.size()));
    mine += host;
    put<std::int64_t>(mine, static_cast<std::int64_t>(device.size()));
    mine += device;
    mine += ops;
  } else {
    put<std::int32_t>(mine, static_cast<std::int32_t>(setup.code()));
    mine += setup.message();
  }
  PLANNER_ASSIGN_OR_RETURN(std::vector<std::optional<std::string>> hello,
                           world.gather(mine, control()));
  std::vector<std::vector<OpInfo>> infos;
  ExecStart start;  // rank 0
  std::string verdict;
  std::optional<int> failed_rank;
  StatusCode failed_code = StatusCode::kRuntime;
  if (root) {
    const std::string missing = missing_ranks(hello, failed_rank);
    if (!missing.empty()) {
      verdict = missing + " did not report within " + std::to_string(static_cast<int>(control_s)) +
                " s of starting";
      failed_code = StatusCode::kTimeout;
    }
    start.ranks = world.size();
    start.backend = opts.backend;
    start.data = describe_data(plan.training, plan.parallel, plan.model.vocab);
    for (int r = 0; r < world.size() && verdict.empty(); ++r) {
      const std::string& h = *hello[static_cast<std::size_t>(r)];
      Reader rd(h);
      if (rd.get<std::int32_t>() != 1) {
        failed_code = static_cast<StatusCode>(rd.get<std::int32_t>());
        verdict = "rank " + std::to_string(r) + ": " + rd.text(h.size());
        failed_rank = r;
        break;
      }
      start.hosts.push_back(rd.text(static_cast<std::size_t>(rd.get<std::int64_t>())));
      const std::string device = rd.text(static_cast<std::size_t>(rd.get<std::int64_t>()));
      if (r == 0) start.device = device;
      const std::size_t used = sizeof(std::int32_t) + 2 * sizeof(std::int64_t) +
                               start.hosts.back().size() + device.size();
      infos.push_back(decode_ops(std::string_view(h).substr(used)));
    }
  }
  PLANNER_RETURN_IF_ERROR(decide(verdict, failed_code, failed_rank, "").status());

  // Resume before the run is recorded: a refused checkpoint leaves no trace but its error.
  const CheckpointConfig checkpoints{opts.checkpoint_dir, plan_fingerprint(plan), plan.name};
  std::int64_t first_step = 0;
  if (opts.resume) {
    PLANNER_ASSIGN_OR_RETURN(first_step, load_checkpoint(world, runner->state(), backend->device(),
                                                         checkpoints, control_s));
    if (first_step >= opts.steps) {
      return Status::invalid_input("the checkpoint in " + opts.checkpoint_dir + " is at step " +
                                   std::to_string(first_step) + " and --steps is " +
                                   std::to_string(opts.steps) +
                                   ": nothing left to run (raise --steps)");
    }
  }
  if (root && observer != nullptr) {
    start.first_step = first_step;
    const Status st = observer->on_start(start);
    if (!st.is_ok()) {
      verdict = st.message();
      failed_code = st.code();
    } else {
      started = true;
    }
  }
  PLANNER_RETURN_IF_ERROR(decide(verdict, failed_code, std::nullopt, "").status());

  // After a failed step communication may still be pending in the runner and backend: keep their
  // buffers alive (the caller ends the job) rather than free memory MPI may still write.
  auto abandon = [&](Status st) {
    runner.release();
    backend.release();
    return st;
  };
  ExecResult result;
  result.first_step = first_step;
  std::vector<double> measured_times;
  std::int64_t peak_memory = 0;
  const auto tokens = static_cast<double>(plan.training.tokens_per_step());
  for (std::int64_t step = first_step; step < opts.steps; ++step) {
    const Result<StepStats> stats = runner->run_step(step);
    auto reports = world.gather(encode_report(stats), control());
    if (!reports) return abandon(reports.status());
    std::string reason;
    std::optional<int> bad_rank;
    StatusCode code = StatusCode::kRuntime;
    std::string payload;
    if (root) {
      const std::string missing = missing_ranks(*reports, bad_rank);
      // The first rank that failed in its step; a timeout is more often a consequence (waiting
      // for a rank that failed), so another error takes precedence.
      std::string first_error;
      bool first_is_timeout = false;
      StepRecord rec;
      rec.steps = opts.steps;
      double loss_sum = 0;
      double step_time = 0;
      std::int64_t loss_tokens = 0;
      std::vector<store::OpMeasurement> ops;
      for (int r = 0; r < world.size(); ++r) {
        const auto& bytes = (*reports)[static_cast<std::size_t>(r)];
        if (!bytes) continue;
        const Report rep = decode_report(*bytes);
        if (!rep.ok) {
          const bool timeout = rep.code == StatusCode::kTimeout;
          if (first_error.empty() || (first_is_timeout && !timeout)) {
            first_error = rep.error;
            first_is_timeout = timeout;
            if (missing.empty()) bad_rank = r;
          }
          continue;
        }
        step_time = std::max(step_time, rep.wall_s);
        rec.loss_scale = rep.loss_scale;  // the same on every rank
        rec.skipped = rec.skipped || rep.skipped;
        loss_sum += rep.loss_sum;
        loss_tokens += rep.loss_tokens;
        rec.step.peak_memory =
            Bytes(std::max(rec.step.peak_memory.value_or(Bytes(0)).raw(), rep.peak));
        const std::vector<OpInfo>& info = infos[static_cast<std::size_t>(r)];
        for (const OpSample& sample : rep.ops) {
          if (sample.index >= info.size()) continue;
          const OpInfo& oi = info[sample.index];
          store::OpMeasurement m;
          m.rank = r;
          m.step = step;
          m.op_id = to_string(OpId::from_raw(oi.id));
          m.op_kind = std::string(to_string(oi.kind));
          m.phase = std::string(to_string(oi.phase));
          m.start = seconds(sample.start_s);
          m.wall = seconds(sample.wall_s);
          m.bytes = Bytes(oi.bytes);
          if (!is_compute(oi.kind) && sample.wall_s > 0) {
            const double algbw = static_cast<double>(oi.bytes) / sample.wall_s;
            m.algbw = Bandwidth(algbw);
            m.busbw = Bandwidth(algbw * bus_bandwidth_factor(oi.kind, oi.group_size));
          }
          ops.push_back(std::move(m));
        }
      }
      if (!missing.empty()) {
        // A rank that went silent is the cause; the others' errors are its consequences. Ranks on
        // this host are known dead or stopped (the gather stopped waiting for them); others ran
        // out the deadline.
        std::string known;
        for (int r = 0; r < world.size(); ++r) {
          if ((*reports)[static_cast<std::size_t>(r)]) continue;
          if (auto problem = world.peer_problem(r)) known += (known.empty() ? "" : "; ") + *problem;
        }
        reason = missing + " did not report step " + std::to_string(step) +
                 (known.empty() ? " within " + std::to_string(static_cast<int>(control_s)) +
                                      " s (stopped, hung or dead)"
                                : " (stopped, hung or dead: " + known + ")") +
                 (first_error.empty() ? "" : "; first error: " + first_error);
        code = StatusCode::kTimeout;
      } else if (!first_error.empty()) {
        reason = first_error;
      } else if (loss_tokens != plan.training.tokens_per_step()) {
        reason = "internal error: the ranks' losses cover " + std::to_string(loss_tokens) +
                 " tokens, the step has " + std::to_string(plan.training.tokens_per_step());
        code = StatusCode::kInternal;
      }
      if (reason.empty()) {
        const double loss = loss_tokens > 0 ? loss_sum / static_cast<double>(loss_tokens) : 0;
        rec.loss = loss;
        rec.step.step = step;
        rec.step.step_time = seconds(step_time);
        rec.step.tokens_per_s = step_time > 0 ? tokens / step_time : 0;
        rec.step.loss = loss;
        rec.step.warmup = step - first_step < opts.warmup;
        if (observer != nullptr) {
          const Status st = observer->on_step(rec, ops);
          if (!st.is_ok()) {
            reason = st.message();
            code = st.code();
          }
        }
        peak_memory = std::max(peak_memory, rec.step.peak_memory.value_or(Bytes(0)).raw());
        put(payload, loss);
        put(payload, step_time);
      }
    }
    auto go = decide(reason, code, bad_rank, payload);
    if (!go) return abandon(go.status());
    Reader rd(*go);
    const auto loss = rd.get<double>();
    const auto step_time = rd.get<double>();
    result.losses.push_back(loss);
    result.step_times.push_back(step_time);
    if (step - first_step >= opts.warmup) measured_times.push_back(step_time);
    if (opts.checkpoint_every > 0 && (step + 1) % opts.checkpoint_every == 0) {
      const Status saved = save_checkpoint(world, runner->state(), backend->device(), checkpoints,
                                           step + 1, control_s);
      if (!saved.is_ok()) {
        if (root && observer != nullptr) observer->on_failure(saved.message(), std::nullopt);
        return abandon(saved);
      }
    }
  }

  ExecSummary& sum = result.summary;
  sum.steps = opts.steps - first_step;
  sum.step_time_s = median(measured_times.empty() ? result.step_times : measured_times);
  sum.tokens_per_s = sum.step_time_s > 0 ? tokens / sum.step_time_s : 0;
  sum.final_loss = result.losses.empty() ? 0 : result.losses.back();
  sum.peak_memory = peak_memory;
  const double peak = plan.gpu.peak_for(plan.training.precision).raw();
  if (peak > 0 && sum.step_time_s > 0) {
    sum.mfu = model_flops_per_step(plan.model, plan.training).raw() /
              (sum.step_time_s * static_cast<double>(world.size()) * peak);
  }
  if (root && observer != nullptr) {
    const Status st = observer->on_finish(sum);
    if (!st.is_ok()) {
      observer->on_failure(st.message(), std::nullopt);
      return st;
    }
  }
  return result;
}

}  // namespace planner::exec
