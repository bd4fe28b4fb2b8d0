#include "planner/core/host_model.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace planner {
namespace {

struct Entry {
  SoftwareStack stack;
  double gemm_us, attention_us, memory_us, collective_us, p2p_us, backward, micro_batch_us, step_us;
  const char* source;
  double gather_member_us = 0;
  bool sync_per_pass = false;
  bool sync_on_receive = false;
};

// The current stacks on PyTorch 2: measured on one H200 machine's host (Intel Xeon, PyTorch
// 2.11, CUDA 13.0; bench/gpu/README.md "Host cost of issuing a layer", 2026-11-26). A GPT layer of
// nn.Modules issued in 310 us forward and 651 us backward at hidden 1024, micro-batch 1 (the GPU
// idle). Per op of the step program, the forward costs are the modules' measured costs (linear
// 17.0, SDPA 18.7, LayerNorm 13.4, GeLU 6.8, dropout + add 18.9 us) scaled by 1.96 to the layer's
// measured forward (views, permutes, autograd bookkeeping): gemm 33, attention 37, memory-bound 28
// us (the mean of the layer's five); the backward factor 1.47 makes the layer's 8 GEMM, 1
// attention and 5 memory-bound backward ops take its measured 651 us; a collective launch 11.8 us
// (dist.all_reduce). Not measured, assumed: a pipeline send or receive 50 us (a batched
// isend/irecv), 1,000 us per micro-batch (batch, loss, schedule bookkeeping) and 1,000 us per step.
constexpr double kGemm = 33, kAttention = 37, kMemory = 28, kBackward = 1.47;

// Megatron-DeepSpeed on A100 hosts (PyTorch 1.x eager, fp16, Megatron's fused kernels, DeepSpeed's
// engine): the per-op ratios and backward factor above, scaled by one factor, and the collective,
// send/receive, micro-batch and step costs, fitted on vTrain's 720 measured configurations (GPT,
// hidden 1024-2048, 1-8 A100 in one DGX A100; reference data vtrain_calibration.csv) by
// scripts/fit-host-costs.py --recv-sync (step-time MAPE plus mean top-1 regret): scale 2.5,
// collective 0 us, p2p 100, 2,000 us per micro-batch (the DeepSpeed engine's per-micro-batch
// work), 12,000 us per step (its optimizer step, loss-scale check and gradient clipping), with
// the stack's tensor-parallel all-reduces after each layer's weight gradient
// (async_tp_allreduce false). The host waits for every pipeline receive (sync_on_receive):
// vTrain's host-bound pipelines (hidden 1024, micro-batch 1) take (micro-batches + pp - 1) stage
// times, where a host that ran ahead would leave only the GPU's fill and drain; without it the fit
// (7,000 us per micro-batch, 500 per send or receive) predicted their fixed part 16-21 ms short.
constexpr double kDeepSpeedScale = 2.5;

// The measured PyTorch 2 costs, and the fitted costs of the Megatron-DeepSpeed years.
constexpr Entry pytorch2(SoftwareStack stack, const char* source, double gather_member_us = 0) {
  return {stack, kGemm, kAttention, kMemory,         11.8, 50, kBackward,
          1000,  1000,  source,     gather_member_us};
}

// DeepSpeed's ZeRO-3 gathers parameter by parameter into a list of one view per rank (see
// host_model.hpp): per member, a view built in a Python loop and a copy out of the gathered
// buffer, assumed one single-kernel PyTorch op (GeLU measured 6.8 us on the same host).
constexpr double kGatherMember = 6.8;
constexpr Entry fitted_on_vtrain(SoftwareStack stack, const char* source,
                                 bool sync_per_pass = false) {
  const double s = kDeepSpeedScale;
  return {stack,  s * kGemm, s * kAttention, s * kMemory, 0, 100, kBackward, 2000, 12000,
          source, 0,         sync_per_pass,  true};
}

// Microseconds per op of the step program (see host_model.hpp).
constexpr Entry kBuiltIn[] = {
    fitted_on_vtrain(
        SoftwareStack::kMegatronDeepSpeed,
        "fitted on vTrain's 720 measured Megatron-DeepSpeed configurations on A100 (reference "
        "data vtrain_calibration.csv, VIA-Research/vTrain ground_truth_single.csv; "
        "scripts/fit-host-costs.py --recv-sync): PyTorch's measured per-op costs x 2.5, no cost "
        "per collective launch beyond an op's, 100 us per send or receive, 2 ms per micro-batch, "
        "12 ms per step; the host waits for every pipeline receive (host-bound pipelines in the "
        "sweep fill and drain on the host)"),
    fitted_on_vtrain(
        SoftwareStack::kMegatronLm,
        "assumed equal to megatron-deepspeed's fitted costs (the same Megatron model code in "
        "PyTorch eager mode of the same years; no measured megatron-lm sweep of small models in "
        "the reference data); its timers of 2020-2022 synchronise the GPU around every forward "
        "and backward pass (megatron/timers.py _Timer.start and stop: torch.cuda.synchronize()), "
        "and its pipeline exchanges after every batch_isend_irecv "
        "(p2p_communication._communicate)",
        true),
    pytorch2(SoftwareStack::kMegatronCore,
             "measured: PyTorch 2.11 on an H200 machine's host (bench/gpu/README.md, 2026-11-26); "
             "send/receive, micro-batch and step costs assumed"),
    pytorch2(SoftwareStack::kNemo,
             "as megatron-core (NeMo runs Megatron-core): measured PyTorch 2.11 per-op costs on an "
             "H200 machine's host (bench/gpu/README.md, 2026-11-26)"),
    pytorch2(SoftwareStack::kDeepSpeed,
             "measured PyTorch 2.11 per-op costs on an H200 machine's host (bench/gpu/README.md, "
             "2026-11-26); DeepSpeed's own engine costs not measured; ZeRO-3 gathers tensor by "
             "tensor into one view per rank (partition_parameters.py _allgather_param of its 2021 "
             "releases), 6.8 us per rank per tensor assumed: one single-kernel op",
             kGatherMember),
    pytorch2(SoftwareStack::kFsdp,
             "measured PyTorch 2.11 per-op costs on an H200 machine's host (bench/gpu/README.md, "
             "2026-11-26); FSDP's per-module hooks not measured"),
};

// planner exec's cuda backend, measured on one H200 machine's host (Intel Xeon, 16 cores; planner
// at 674a720, bench/gpu/README.md 2026-11-27): gpt-tiny in bf16 (global batch 16 x 256 tokens,
// micro-batch 4) runs its 421 ops a step in 15.19 ms where the simulator gives the GPU's work as
// 1.3 ms, so the step is the issuing thread's: 36 us an op. Another machine of the kind ran the
// plan in 11.53 ms (27 us an op, 2026-11-26): hosts differ by about a quarter. Pipeline sends and
// collectives cost the same (not measured apart); no per-micro-batch or per-step cost beyond the
// ops'.
constexpr double kExecutorOp = 36;

Time us(double v) {
  return microseconds(v);
}

std::string fmt_us(Time t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", to_microseconds(t));
  return buf;
}

}  // namespace

bool HostCosts::enabled() const {
  const Time zero(0);
  return gemm != zero || attention != zero || memory_bound != zero ||
         router.value_or(zero) != zero || collective != zero || p2p != zero ||
         per_micro_batch != zero || per_step != zero || gather_member != zero || sync_per_pass ||
         sync_on_receive;
}

HostCosts host_costs(SoftwareStack stack) {
  const Entry* e = nullptr;
  for (const Entry& x : kBuiltIn) {
    if (x.stack == stack) e = &x;
  }
  if (e == nullptr) e = &kBuiltIn[0];
  HostCosts c;
  c.gemm = us(e->gemm_us);
  c.attention = us(e->attention_us);
  c.memory_bound = us(e->memory_us);
  c.collective = us(e->collective_us);
  c.p2p = us(e->p2p_us);
  c.backward_factor = e->backward;
  c.per_micro_batch = us(e->micro_batch_us);
  c.per_step = us(e->step_us);
  c.gather_member = us(e->gather_member_us);
  c.sync_per_pass = e->sync_per_pass;
  c.sync_on_receive = e->sync_on_receive;
  c.source = e->source;
  return c;
}

HostCosts executor_host_costs() {
  HostCosts c;
  c.gemm = c.attention = c.memory_bound = c.collective = c.p2p = us(kExecutorOp);
  c.backward_factor = 1.0;
  c.source =
      "measured: planner exec's cuda backend on an H200 machine's host, gpt-tiny's 421 ops a "
      "step in 15.19 ms, the simulated GPU work 1.3 ms (bench/gpu/README.md, 2026-11-27)";
  return c;
}

Time host_cost(const HostCosts& c, const OpDesc& d, Phase phase, std::int64_t members,
               int extra_kernels) {
  if (d.stream == Stream::kHost) return Time(0);
  if (is_p2p(d.kind)) return c.p2p;
  if (is_collective(d.kind)) {
    // A ZeRO-3 gather (aux: its parameter tensors) issued tensor by tensor, one view per member.
    if (!gathers_tensor_by_tensor(c, d)) return c.collective;
    return Time(d.aux * (c.collective.raw() + members * c.gather_member.raw()));
  }
  // Copies cost nothing here; the optimizer step is covered by per_step.
  if (!is_compute(d.kind) || d.kind == OpKind::kOptimizerStep) return Time(0);
  // A GEMM of an MoE layer's local experts run kernel by kernel (kPerGroupKernels) is issued
  // expert by expert: Transformer Engine's GroupedLinear makes one cuBLAS call per expert (and
  // under fp8 quantizes each expert's input apart), each costing the host what a linear layer's
  // GEMM does.
  const std::int64_t gemms =
      (d.flags & kPerGroupKernels) != 0 ? std::max<std::int64_t>(d.batch, 1) : 1;
  const Time t = (d.kind == OpKind::kGemm        ? Time(gemms * c.gemm.raw())
                  : d.kind == OpKind::kAttention ? c.attention
                  : d.kind == OpKind::kRouter    ? c.router.value_or(c.memory_bound)
                                                 : c.memory_bound) +
                 Time(extra_kernels * c.memory_bound.raw());
  if (phase != Phase::kBackwardInput && phase != Phase::kBackwardWeight) return t;
  return Time(std::llround(static_cast<double>(t.raw()) * c.backward_factor));
}

Result<HostCosts> parse_host_costs(std::string_view text, HostCosts base) {
  if (text == "none") {
    HostCosts none;
    none.source = "none: no host (every op issued as soon as its stream allows)";
    return none;
  }
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) {
      if (comma >= text.size()) break;
      continue;
    }
    const std::size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    if (eq == std::string_view::npos) {
      return Status::invalid_input("host costs: \"" + std::string(item) +
                                   "\" is not KEY=VALUE (keys: gemm, attention, memory, router, "
                                   "collective, p2p, backward, micro_batch, step, gather_member, "
                                   "pass_sync, recv_sync; "
                                   "or \"none\")");
    }
    const std::string_view value = item.substr(eq + 1);
    double v = 0;
    const auto r = std::from_chars(value.data(), value.data() + value.size(), v);
    if (r.ec != std::errc() || r.ptr != value.data() + value.size() || !std::isfinite(v) || v < 0 ||
        v > 1e7) {
      return Status::invalid_input("host costs: " + std::string(key) +
                                   " must be a number of microseconds in [0, 1e7] (backward: a "
                                   "factor), found \"" +
                                   std::string(value) + "\"");
    }
    if (key == "gemm") {
      base.gemm = us(v);
    } else if (key == "attention") {
      base.attention = us(v);
    } else if (key == "memory") {
      base.memory_bound = us(v);
    } else if (key == "router") {
      base.router = us(v);
    } else if (key == "collective") {
      base.collective = us(v);
    } else if (key == "p2p") {
      base.p2p = us(v);
    } else if (key == "backward") {
      base.backward_factor = v;
    } else if (key == "micro_batch") {
      base.per_micro_batch = us(v);
    } else if (key == "step") {
      base.per_step = us(v);
    } else if (key == "gather_member") {
      base.gather_member = us(v);
    } else if (key == "pass_sync") {
      if (v != 0 && v != 1) {
        return Status::invalid_input("host costs: pass_sync must be 0 or 1, found \"" +
                                     std::string(value) + "\"");
      }
      base.sync_per_pass = v == 1;
    } else if (key == "recv_sync") {
      if (v != 0 && v != 1) {
        return Status::invalid_input("host costs: recv_sync must be 0 or 1, found \"" +
                                     std::string(value) + "\"");
      }
      base.sync_on_receive = v == 1;
    } else {
      return Status::invalid_input(
          "host costs: unknown key \"" + std::string(key) +
          "\" (keys: gemm, attention, memory, router, collective, p2p, backward, "
          "micro_batch, step, gather_member, pass_sync, recv_sync)");
    }
    base.source = "set by the user";
  }
  return base;
}

std::string describe(const HostCosts& c) {
  if (!c.enabled()) return "none";
  char factor[32];
  std::snprintf(factor, sizeof factor, "%.3g", c.backward_factor);
  return "gemm " + fmt_us(c.gemm) + " us, attention " + fmt_us(c.attention) + " us, memory-bound " +
         fmt_us(c.memory_bound) + " us, " +
         (c.router ? "MoE router " + fmt_us(*c.router) + " us, " : std::string()) + "collective " +
         fmt_us(c.collective) + " us, p2p " + fmt_us(c.p2p) + " us per op; backward x" + factor +
         "; " + fmt_us(c.per_micro_batch) + " us per micro-batch, " + fmt_us(c.per_step) +
         " us per step" +
         (c.gather_member == Time(0) ? ""
                                     : "; ZeRO-3 gathers tensor by tensor, " +
                                           fmt_us(c.gather_member) + " us per rank per tensor") +
         (c.sync_per_pass ? "; the host synchronises with the GPU before every pass" : "") +
         (c.sync_on_receive ? "; the host waits for every pipeline receive" : "");
}

}  // namespace planner
