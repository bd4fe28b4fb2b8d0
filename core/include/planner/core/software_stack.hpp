// The software a training run uses, by name: its framework (the "stack"), its attention kernel
// and which communication it overlaps with computation. Published runs state them
// (core/published_run.hpp); the simulator's models of each stack build on these names.
//
// Stacks (what distinguishes them for a step-time model):
//   megatron-lm         Megatron-LM before Megatron-core (2019-2022): local DDP that all-reduces
//                       the gradients after the whole backward pass, no distributed-optimizer
//                       overlap; fused scale-mask-softmax attention (scores materialised); the
//                       tensor-parallel all-reduce of an input gradient after the layer's weight
//                       gradient (async_tp_allreduce).
//   megatron-core       Megatron-LM on Megatron-core (2023-): --overlap-grad-reduce,
//                       --overlap-param-gather, Transformer Engine layers, flash-style attention.
//   megatron-deepspeed  Megatron-DeepSpeed: Megatron's model code on DeepSpeed's engine and
//                       PipelineEngine, which reduces the gradients after the pipeline's last
//                       backward pass (_exec_reduce_grads); tensor-parallel all-reduces as
//                       megatron-lm's.
//   deepspeed           DeepSpeed's ZeRO engine (ZeRO-1/2/3 with its own bucketing, prefetch and
//                       overlap_comm) and PipelineEngine, without Megatron's model code.
//   fsdp                PyTorch FSDP / FSDP2 and the frameworks built on it (TorchTitan, MosaicML
//                       Composer / llm-foundry): per-module parameter all-gathers prefetched
//                       during forward and backward, gradient reduce-scatters overlapped.
//   nemo                NVIDIA NeMo / Megatron-Bridge: Megatron-core with NVIDIA's performance
//                       recipes (distributed optimizer with overlap, tp-communication overlap in
//                       Transformer Engine, overlapped pipeline sends).
//
// Attention kernels:
//   unfused        QKᵀ and PV as batched GEMMs, softmax and dropout as separate kernels; the
//                  s×s scores pass through HBM.
//   fused-softmax  the same GEMMs with Megatron's fused scale-mask-softmax kernel (scores still
//                  materialised).
//   flash          FlashAttention (Dao et al. 2022, arXiv:2205.14135) or an unnamed flash-style
//                  fused kernel (no s×s tensor).
//   flash2, flash3 FlashAttention-2 (arXiv:2307.08691) and -3 (arXiv:2407.08608).
//   cudnn          cuDNN's fused attention (Transformer Engine's FusedAttention backend).
//
// Overlaps (each true, false or not stated):
//   grad_reduce    data-parallel gradient reduction during the backward pass
//   param_gather   ZeRO / distributed-optimizer parameter all-gathers during compute
//   tp_comm        tensor-parallel collectives overlapped with GEMMs (userbuffers, TE)
//   p2p            pipeline sends and receives overlapped with compute
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <utility>

#include "planner/core/enums.hpp"

namespace planner {

enum class SoftwareStack {
  kMegatronLm,
  kMegatronCore,
  kMegatronDeepSpeed,
  kDeepSpeed,
  kFsdp,
  kNemo,
};

enum class AttentionImpl { kUnfused, kFusedSoftmax, kFlash, kFlash2, kFlash3, kCudnn };

// True for the kernels that never materialise the s×s scores.
constexpr bool is_flash_style(AttentionImpl a) {
  return a != AttentionImpl::kUnfused && a != AttentionImpl::kFusedSoftmax;
}

// Which communication a run overlaps with computation; nullopt: not stated.
struct OverlapSpec {
  std::optional<bool> grad_reduce;
  std::optional<bool> param_gather;
  std::optional<bool> tp_comm;
  std::optional<bool> p2p;
  bool operator==(const OverlapSpec&) const = default;
};

// The attention kernel a stack runs unless told otherwise: Megatron's fused scale-mask-softmax
// for megatron-lm and megatron-deepspeed (flash attention was opt-in there), flash-style for the
// others.
constexpr AttentionImpl default_attention(SoftwareStack s) {
  return s == SoftwareStack::kMegatronLm || s == SoftwareStack::kMegatronDeepSpeed
             ? AttentionImpl::kFusedSoftmax
             : AttentionImpl::kFlash;
}

// Whether the stack overlaps the data-parallel gradient reduction (and ZeRO's parameter gathers)
// with compute: megatron-lm all-reduces the gradients after the whole backward pass (overlap came
// with Megatron-core, 2023), megatron-deepspeed after the pipeline's last backward pass (DeepSpeed
// PipelineEngine's _exec_reduce_grads).
constexpr bool overlaps_grad_reduce(SoftwareStack s) {
  return s != SoftwareStack::kMegatronLm && s != SoftwareStack::kMegatronDeepSpeed;
}

// Whether the stack all-reduces a tensor-parallel layer's input gradient beside its weight-gradient
// GEMM (ParallelConfig::async_tp_allreduce): all but megatron-lm and megatron-deepspeed.
// Megatron-LM of 2019-2021 reduced it in copy_to_tensor_model_parallel_region's backward, after the
// layer's whole backward (the asynchronous all-reduce, LinearWithGradAccumulationAndAsyncAllreduce
// with its --no-async-tensor-model-parallel-allreduce switch, came in 2022); Megatron-DeepSpeed
// runs the Megatron-LM code of 2021 it was forked from (BigScience's fork; Microsoft's until it was
// rebased on Megatron-core in 2023), and vTrain's measured sweep of it ranks better so (mean top-1
// regret 3.1 % against 4.4 %, its host costs fitted either way).
constexpr bool async_tp_allreduce(SoftwareStack s) {
  return s != SoftwareStack::kMegatronLm && s != SoftwareStack::kMegatronDeepSpeed;
}

// Whether the stack overlaps the sequence-parallel tensor-parallel all-gathers and reduce-scatters
// with their GEMMs where tp > 1 with sequence parallelism (ParallelConfig::tp_comm_overlap,
// Transformer Engine's userbuffers): nemo, whose performance recipes turn it on for their
// tensor-parallel models (MegatronCommOverlapCallback(tp_comm_overlap=True) with a userbuffers
// configuration per model, as NeMo 2.0's GPT-3 175B and Llama 70B recipes do; from memory of
// those recipes). Megatron-core's own default (--tp-comm-overlap) is off.
constexpr bool overlaps_tp_comm(SoftwareStack s) {
  return s == SoftwareStack::kNemo;
}

// The pipeline schedules a stack runs with pp stages (with one stage, no schedule matters).
// DeepSpeed's PipelineEngine (deepspeed and megatron-deepspeed) runs one, its TrainSchedule
// (1F1B: deepspeed/runtime/pipe/schedule.py); Megatron-LM before Megatron-core had 1F1B and the
// interleaved schedule (megatron/schedules.py of 2021-2022). The others run every schedule.
constexpr bool stack_runs(SoftwareStack stack, Schedule s, int pp) {
  if (pp <= 1) return true;
  if (stack == SoftwareStack::kDeepSpeed || stack == SoftwareStack::kMegatronDeepSpeed)
    return s == Schedule::k1F1B;
  if (stack == SoftwareStack::kMegatronLm)
    return s == Schedule::k1F1B || s == Schedule::kInterleaved;
  return true;
}

// The ZeRO stages a stack has with pp stages. Megatron-LM before Megatron-core had at most its
// distributed optimizer, which shards the optimizer state and keeps every gradient (ZeRO-1,
// 2022: --use-distributed-optimizer); Megatron-core adds Megatron-FSDP's sharding strategies
// optim, optim_grads and optim_grads_params (ZeRO 1-3: --data-parallel-sharding-strategy).
// FSDP's are NO_SHARD, SHARD_GRAD_OP and FULL_SHARD (ZeRO 0, 2, 3;
// torch.distributed.fsdp.ShardingStrategy; FSDP2's reshard_after_forward picks 3 or 2): no
// ZeRO-1. DeepSpeed has all four, but its PipelineEngine refuses ZeRO-2 and -3 ("ZeRO-2 and
// ZeRO-3 are incompatible with pipeline parallelism", deepspeed/runtime/pipe/engine.py).
constexpr bool stack_has_zero(SoftwareStack stack, int zero, int pp) {
  switch (stack) {
    case SoftwareStack::kMegatronLm:
      return zero <= 1;
    case SoftwareStack::kFsdp:
      return zero != 1;
    case SoftwareStack::kMegatronDeepSpeed:
    case SoftwareStack::kDeepSpeed:
      return pp <= 1 || zero <= 1;
    case SoftwareStack::kMegatronCore:
    case SoftwareStack::kNemo:
      return true;
  }
  return true;
}

// One sentence on what distinguishes a stack for a step-time model (the list above).
constexpr std::string_view stack_summary(SoftwareStack s) {
  switch (s) {
    case SoftwareStack::kMegatronLm:
      return "Megatron-LM before Megatron-core (2019-2022): gradients all-reduced after the whole "
             "backward pass; fused scale-mask-softmax attention; a layer's tensor-parallel "
             "input-gradient all-reduce after its weight gradient";
    case SoftwareStack::kMegatronCore:
      return "Megatron-LM on Megatron-core (2023-): overlapped gradient reduce and parameter "
             "gather, Transformer Engine layers, flash-style attention";
    case SoftwareStack::kMegatronDeepSpeed:
      return "Megatron's model code on DeepSpeed's engine and PipelineEngine: gradients reduced "
             "after the pipeline's last backward pass; a layer's tensor-parallel input-gradient "
             "all-reduce after its weight gradient";
    case SoftwareStack::kDeepSpeed:
      return "DeepSpeed's ZeRO engine (ZeRO-1/2/3, its own bucketing and prefetch) and "
             "PipelineEngine, without Megatron's model code";
    case SoftwareStack::kFsdp:
      return "PyTorch FSDP / FSDP2 (TorchTitan, llm-foundry): per-module parameter all-gathers "
             "prefetched, gradient reduce-scatters overlapped";
    case SoftwareStack::kNemo:
      return "NVIDIA NeMo / Megatron-Bridge: Megatron-core with NVIDIA's performance recipes "
             "(distributed optimizer with overlap, tp-communication overlap)";
  }
  return "";
}

template <>
struct EnumTraits<SoftwareStack> {
  static constexpr std::string_view kWhat = "software stack";
  static constexpr std::array<std::pair<SoftwareStack, std::string_view>, 6> kNames{{
      {SoftwareStack::kMegatronLm, "megatron-lm"},
      {SoftwareStack::kMegatronCore, "megatron-core"},
      {SoftwareStack::kMegatronDeepSpeed, "megatron-deepspeed"},
      {SoftwareStack::kDeepSpeed, "deepspeed"},
      {SoftwareStack::kFsdp, "fsdp"},
      {SoftwareStack::kNemo, "nemo"},
  }};
};

template <>
struct EnumTraits<AttentionImpl> {
  static constexpr std::string_view kWhat = "attention kernel";
  static constexpr std::array<std::pair<AttentionImpl, std::string_view>, 6> kNames{{
      {AttentionImpl::kUnfused, "unfused"},
      {AttentionImpl::kFusedSoftmax, "fused-softmax"},
      {AttentionImpl::kFlash, "flash"},
      {AttentionImpl::kFlash2, "flash2"},
      {AttentionImpl::kFlash3, "flash3"},
      {AttentionImpl::kCudnn, "cudnn"},
  }};
};

}  // namespace planner
