// The host thread that issues a rank's work. A framework runs every kernel and collective from
// one CPU thread per rank (Python module code, autograd, the CUDA and NCCL launch calls); the GPU
// runs an op only once the host has issued it. The host runs ahead of the GPU without waiting
// (launches are asynchronous), so when kernels are long the host's cost hides under them, and
// when they are short (a small hidden size, a large tp, micro-batch 1) the GPU waits for the host
// and the step is host-bound.
//
// The model: each simulated rank has a host clock that walks its step program in program order;
// op i is issued at h_i = h_{i-1} + cost(op i) (h_0 = the step's fixed cost), and it starts at
// max(h_i, when its stream and dependencies allow). Costs are per op of the step program, by
// kind and pass (host_cost below). An op of the step program stands for what the framework runs
// for it (a GEMM with its bias add, an attention core with its masking, softmax, dropout and
// transposes), so the costs are per program op, not per CUDA kernel; an attention core whose
// softmax runs as separate PyTorch kernels costs one memory-bound op more per extra kernel.
//
// Parameters are per software stack (software_stack.hpp), fitted on measured runs of that stack
// and never per run; host_costs() gives the built-in ones with their sources.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "planner/core/program.hpp"
#include "planner/core/software_stack.hpp"
#include "planner/core/status.hpp"
#include "planner/core/units.hpp"

namespace planner {

struct HostCosts {
  // Host time to issue one forward (or recomputed forward) op, by kind.
  // A linear layer (GEMM, bias). A GEMM of an MoE layer's local experts that runs a kernel per
  // expert (kPerGroupKernels) costs this once per expert: Transformer Engine's GroupedLinear
  // issues a cuBLAS call (and under fp8 a quantization) expert by expert.
  Time gemm;
  Time attention;     // the attention core
  Time memory_bound;  // norms, activations, residual/dropout adds, embedding, loss
  // An MoE block's router op before the dispatch (routing, token counts, permutation) or after
  // the combine (unpermutation), which a framework's dispatcher issues as many small ops. Unset
  // (every built-in stack): a memory-bound op's cost; --host-costs router=... sets it.
  std::optional<Time> router;
  Time collective;  // launching a collective (torch.distributed, NCCL enqueue)
  // ZeRO-3 parameter all-gathers issued tensor by tensor into a list of one view per rank of the
  // data-parallel group, as DeepSpeed's ZeRO-3 of 2021 did (partition_parameters.py
  // _allgather_param: torch.cuda.synchronize(), a Python loop over the ranks building the views,
  // torch.distributed.all_gather on the list, whose NCCL process group copies the result out view
  // by view): host time per
  // parameter tensor and per member of the group, and one collective launch per tensor. Zero for
  // stacks that gather one flat buffer per layer or module (FSDP, Megatron-core, DeepSpeed since
  // its coalesced gathers): their gather costs one collective launch.
  Time gather_member;
  Time p2p;  // a pipeline send or receive
  // Backward ops cost this times their forward kind (autograd runs them from C++).
  double backward_factor = 1.0;
  Time per_micro_batch;  // per micro-batch: data loading, loss bookkeeping, pipeline engine
  Time per_step;         // per step: optimizer launch (multi-tensor apply), clipping, logging
  // The host synchronises with the GPU (torch.cuda.synchronize) at the start of every forward and
  // every backward pass of a micro-batch, so it cannot issue a pass while the GPU still runs the
  // one before: Megatron-LM's timers of 2020-2022 (megatron/timers.py _Timer.start and stop call
  // torch.cuda.synchronize(); schedules.py brackets each micro-batch's forward_step and
  // backward_step with the forward-compute and backward-compute timers), inherited by
  // Megatron-DeepSpeed. Megatron-core's timers skip it below their log level (the default).
  bool sync_per_pass = false;
  // The host waits for each pipeline receive to finish before it issues the pass that consumes
  // it, so a stage's host cannot run ahead into a micro-batch whose data has not arrived and the
  // pipeline's fill and drain cost host time as well as GPU time. Megatron-LM's
  // p2p_communication._communicate of 2020-2022 calls torch.cuda.synchronize() after every
  // batch_isend_irecv ("to protect against race condition"); vTrain's Megatron-DeepSpeed sweep
  // shows the same: host-bound pipelines take (micro-batches + pp - 1) stage times.
  bool sync_on_receive = false;
  std::string source;  // where the numbers come from

  // False when every cost is zero: the simulation then has no host (hand-built programs, the
  // planner executor's cpu backend, whose ops run on the host that issues them).
  bool enabled() const;
  bool operator==(const HostCosts&) const = default;
};

// True when the host synchronises with the GPU (torch.cuda.synchronize) before each ZeRO-3
// parameter gather: DeepSpeed's tensor-by-tensor gather of 2021 does (gather_member above), so its
// gathers are neither prefetched nor overlapped, and their host work leaves the GPU idle.
inline bool host_syncs_before_gather(const HostCosts& c) {
  return c.gather_member != Time(0);
}

// True when `d` is a ZeRO-3 parameter gather (its parameter tensors in aux) that the stack of
// `c` issues tensor by tensor: it costs gather_member per tensor and member, and the host
// synchronises before it.
inline bool gathers_tensor_by_tensor(const HostCosts& c, const OpDesc& d) {
  return d.aux > 0 && host_syncs_before_gather(c);
}

// True when the host synchronises with the whole device somewhere in a step
// (torch.cuda.synchronize: timers around every pass, pipeline receives, tensor-by-tensor ZeRO-3
// gathers). Otherwise its only synchronisations are with the compute stream (dropless MoE's token
// counts, OpRole::kMoeTokenCounts), which wait for the compute-side work only.
inline bool syncs_device(const HostCosts& c) {
  return c.sync_per_pass || c.sync_on_receive || host_syncs_before_gather(c);
}

// True when a host synchronisation does not wait for op `d` (of `role`) to finish: sends and
// receives, except the pipeline receives of a stack that synchronises on them (sync_on_receive);
// and, where the host synchronises with the compute stream only (syncs_device false), the work of
// the other streams (data-parallel collectives, host copies) but the token counts it reads. A send
// can wait for its peer's host; a receive the host synchronises on is data the next pass needs.
// Where a stack synchronises with the device, its token-count synchronisations wait for every
// stream too (conservative: no stack of planner's has both).
inline bool sync_skips(const HostCosts& c, const OpDesc& d, OpRole role) {
  if (d.kind == OpKind::kRecv && d.stream == Stream::kPpRecv && c.sync_on_receive) return false;
  if (is_p2p(d.kind)) return true;
  if (syncs_device(c) || role == OpRole::kMoeTokenCounts) return false;
  return d.stream != Stream::kCompute && d.stream != Stream::kTpComm && d.stream != Stream::kEpComm;
}

// The built-in host costs of a software stack, with their source in `source`.
HostCosts host_costs(SoftwareStack stack);

// The host costs of planner's own executor (`planner exec`) on its cuda backend: its C++ runner
// issuing every op of the step program (kernel launches, CUDA events, caching allocator) from one
// thread per rank, one cost per op whatever its kind or pass. The cpu backend has none: its ops
// run on the host that issues them.
HostCosts executor_host_costs();

// The host time to issue `d` in `phase` (zero for host-stream work, which is the host's own);
// `members`: the size of a collective's group; `extra_kernels`: kernels the op launches beyond
// what its kind's cost covers (an attention core whose softmax runs as separate PyTorch ops,
// ComputeModel::extra_host_kernels), each issued at the memory-bound cost.
Time host_cost(const HostCosts& costs, const OpDesc& d, Phase phase, std::int64_t members = 1,
               int extra_kernels = 0);

// Overrides costs from text "gemm=30,attention=120,memory=20,collective=25,p2p=30,backward=0.5,
// micro_batch=200,step=3000,gather_member=6" (microseconds; backward a factor), any subset, or
// "none" (all zero). Errors name the key and say what was expected.
Result<HostCosts> parse_host_costs(std::string_view text, HostCosts base);

// "gemm 30 µs, attention 120 µs, ..." for reports.
std::string describe(const HostCosts& costs);

}  // namespace planner
