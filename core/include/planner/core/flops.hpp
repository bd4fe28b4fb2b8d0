// FLOP accounting: model FLOPs (for MFU), hardware FLOPs (for HFU) and the conventions that
// published training runs used, so their figures can be reproduced and compared.
//
// Planner's convention (what the compute ops of a lowered step program add up to):
//   * Only matrix multiplications count: every linear layer's GEMM (2·m·n·k) and attention's two
//     batched GEMMs, QKᵀ and PV (2·s_q·s_kv·head_dim each, per head). Norms, activations, softmax,
//     residual adds, the embedding lookup, the loss and the optimizer are not counted: they are
//     memory-bound, and every published convention below leaves them out too.
//   * Backward = 2 × forward (input-gradient and weight-gradient GEMMs; for attention the gradients
//     through QKᵀ and PV).
//   * Attention is causal: a causal s×s score matrix has s²/2 useful entries (the diagonal counted
//     as half, as flash-attention reports its FLOPs), so the attention term is half of the
//     full-mask term. The published conventions below all count the full s² (non-causal).
//   * MoE layers count top_k experts per token plus the router GEMM (hidden × experts) and the
//     shared experts (and Qwen2-MoE's shared-expert gate).
//   * The LM head counts vocab × hidden per token even when it is tied to the embedding.
//   * Multi-head latent attention counts its down- and up-projections; its core is QKᵀ over
//     qk_head_dim = qk_nope + qk_rope and PV over v_head_dim per head.
//   * Local (sliding-window) attention over w < s keys counts w − w²/(2s) keys per query
//     (causal), w over the full mask.
//   * Mamba-2 layers count in_proj and out_proj as GEMMs and the SSD scan as the chunked matmuls
//     it is (Dao & Gu 2024 §6, chunk q = min(chunk, s)): per token 2·q·N·groups (C·Bᵀ) +
//     2·q·P·heads (masked scores × X) + 4·N·P·heads (chunk states and their output); the
//     depthwise convolution is memory-bound and not counted.
//   * An MTP module counts its projection (2·hidden × hidden), its block and another pass
//     through the LM head.
//   Forward FLOPs per token = 2·N_gemm + attention core + SSD scan, with N_gemm the GEMM weights a
//   token touches (QKV, output projection, MLP or active experts, router, LM head; no biases or
//   norms); for standard attention the core is 2·layers·s·q_dim with q_dim = heads × head_dim.
//   Model FLOPs per token = 3 × forward ("6·N + attention").
//   Hardware FLOPs add what recomputation runs again: selective → the attention core forward of
//   every layer; full → every layer's forward (not the LM head, which is never recomputed, nor
//   the MTP modules' projections).
//   MFU = model FLOPs / (step time × GPUs × peak); HFU the same with hardware FLOPs.
//
// Published conventions (reproduced by tests/core/flops_test.cpp against reference data
// published_runs.json):
//   * Megatron-LM model FLOPs: num_floating_point_operations() in megatron/training/training.py
//     (NVIDIA/Megatron-LM, core_r0.9): 12·B·s·L·h²·[(1 + g/a + s/h)·q/h + (f/h)·k·γ + V/(2·L·h)],
//     with g query groups, a heads, f ffn size, k experts per token, γ = 3/2 for gated MLPs. For a
//     GPT (f = 4h, MHA) this is Narayanan et al. 2021's 72·B·s·L·h²·(1 + s/6h + V/12Lh); NeMo's
//     "model TFLOP/s" uses the same count. Layers with MoE use the expert ffn size and top_k.
//   * Megatron eq.(3) (Narayanan et al., SC'21, arXiv:2104.04473, eq. 3): hardware FLOPs with full
//     recomputation, 96·B·s·L·h²·(1 + s/6h + V/16Lh) = the model count with the layer part × 4/3.
//   * Megatron-Core's later num_floating_point_operations() (core_r0.13 on, the count behind the
//     Megatron-Bridge and NeMo 2 "model TFLOP/s" tables of reference data moe_runs.json): the
//     attention core counted causal (s/2), multi-latent attention (its q and kv LoRA terms with
//     their norms), shared experts (moe_shared_expert_intermediate_size), Mamba layers (hybrid
//     models: in_proj, 7·d_inner·N for the scan, out_proj) and the MTP modules (a layer, their
//     norms and projection, 6·(3h + 2h²), and another logit pass each).
//   * MosaicML llm-foundry: 3·B·(2·N·s + 4·L·h·s²) per step with N all parameters (attention
//     non-causal, norms and activations excluded); its HFU uses 4 instead of 3 (recompute).
#pragma once

#include <cstdint>

#include "planner/core/enums.hpp"
#include "planner/core/model_spec.hpp"
#include "planner/core/parallel_config.hpp"
#include "planner/core/training_spec.hpp"
#include "planner/core/units.hpp"

namespace planner {

enum class AttentionMask { kCausal, kFull };

// GEMM weights (elements) that one token touches in a forward pass: per layer QKV, output
// projection, MLP (top_k experts and the router in MoE layers), plus the LM head (vocab × hidden,
// also when tied). Biases, norms and the embedding lookup are excluded.
std::int64_t gemm_params_per_token(const ModelSpec& model);

// SSD-scan forward FLOPs of one token over all Mamba-2 layers (0 without Mamba).
double mamba_core_flops_per_token(const ModelSpec& model, std::int64_t seq);

// Forward FLOPs of one token at sequence length `seq` (planner's convention above).
double forward_flops_per_token(const ModelSpec& model, std::int64_t seq, AttentionMask mask);

// Attention-core forward FLOPs (QKᵀ and PV) of one token over all layers.
double attention_core_flops_per_token(const ModelSpec& model, std::int64_t seq, AttentionMask mask);

// Model FLOPs of one training step (forward + backward, no recompute), causal attention.
Flops model_flops_per_step(const ModelSpec& model, const TrainingSpec& training);

// Hardware FLOPs of one step: model FLOPs plus the forward work that `recompute` runs again.
Flops hardware_flops_per_step(const ModelSpec& model, const TrainingSpec& training,
                              Recompute recompute);
// The same for a plan's recompute and, with selective recompute, its modules: core_attn the
// attention core, mlp the dense MLPs' GEMMs, moe the MoE blocks' (router, experts, shared
// experts), shared_experts the shared experts', mla_up_proj MLA's up-projections (moe_act and
// layernorm run no GEMM).
Flops hardware_flops_per_step(const ModelSpec& model, const TrainingSpec& training,
                              const ParallelConfig& parallel);

// Megatron-LM's num_floating_point_operations() for `batch` sequences of `seq` tokens (model
// FLOPs, non-causal attention). Equals NeMo's model-FLOPs count.
Flops megatron_model_flops(const ModelSpec& model, std::int64_t batch, std::int64_t seq);

// Megatron-Core's later count (causal attention, MLA, shared experts, Mamba, MTP; see the header).
Flops megatron_core_model_flops(const ModelSpec& model, std::int64_t batch, std::int64_t seq);

// Megatron's count with recomputation: full → layer part × 4/3 (eq. 3 of Narayanan et al. for a
// GPT); selective → plus one forward of the attention core (4·B·s²·q_dim per layer); none → the
// model count.
Flops megatron_hardware_flops(const ModelSpec& model, std::int64_t batch, std::int64_t seq,
                              Recompute recompute);

// Narayanan et al. eq.(3) as printed: 96·B·s·L·h²·(1 + s/6h + V/16Lh).
Flops megatron_eq3_flops(std::int64_t batch, std::int64_t seq, std::int64_t layers,
                         std::int64_t hidden, std::int64_t vocab);

// MosaicML llm-foundry's count: passes·B·(2·N·s + 4·L·h·s²) with passes = 3 for MFU, 4 for HFU
// with activation checkpointing.
Flops mosaicml_flops(double params, std::int64_t batch, std::int64_t seq, std::int64_t layers,
                     std::int64_t hidden, bool recompute);

// FLOPs utilisation: `flops` done in `step_seconds` on `gpus` devices of peak `peak` each.
double flops_utilization(Flops flops, double step_seconds, std::int64_t gpus, FlopRate peak);

// Step time (s) implied by a published per-GPU rate: flops / (rate × gpus).
double step_seconds_from_rate(Flops flops, FlopRate per_gpu, std::int64_t gpus);

}  // namespace planner
