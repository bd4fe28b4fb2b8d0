#include "planner/sim/model_registry.hpp"

#include <array>

namespace planner::sim {
namespace {

constexpr std::array<ModelInfo, kNumSimModels> kModels{{
    {SimModel::kDiscreteEvent, "engine", "discrete-event",
     "integer-picosecond clock; 4-ary heap event queue ordered by (time, insertion sequence); "
     "lazy cancel; one engine per simulation",
     "deterministic: same inputs give the same result and trace on any thread",
     "ns-3 EventKey{ts, uid}; htsim integer picoseconds"},
    {SimModel::kStreams, "engine", "streams",
     "program.hpp semantics: FIFO streams per rank, a compute stream and communication streams "
     "that overlap it; collectives finish together; sends pair with receives by (peer, tag)",
     "one compute kernel at a time per GPU; NCCL kernels on their own streams",
     "core/program.hpp; NCCL on separate CUDA streams (Megatron-LM overlap)"},
    {SimModel::kGemmTileRoofline, "compute", "gemm-tile-roofline",
     "GEMM time = max(waves x tile time at the profile's asymptotic rate, HBM bytes / bandwidth) "
     "+ kernel overhead; fastest of the profile's tile shapes",
     "wave quantisation over sm_count SMs, tile padding, a fixed k cost per tile; no split-k, "
     "no stream-K",
     "profile gemm (measured maximum achievable matmul rates, reference data "
     "hardware_specs.json); roofline (Williams et al. 2009)"},
    {SimModel::kPerExpertGemms, "compute", "per-expert-gemms",
     "an MoE layer's experts' GEMMs as Transformer Engine's GroupedLinear runs them: one cuBLAS "
     "GEMM per local expert on 4 streams; rounds of 4 experts, each timed by the tile model as one "
     "kernel over their tiles, with one kernel overhead per round",
     "NVTE_NUM_GEMM_STREAMS = 4 (the default); the experts of a round start together and end "
     "with the round; the gated up projection is two GEMMs (TE fuses them into one of twice the "
     "width: the same tiles and FLOPs, one more kernel overhead per round); every stack's experts "
     "are timed so (DeepSpeed-MoE's loop over experts on one stream and TorchTitan's single "
     "grouped kernel are not modelled apart)",
     "Transformer Engine general_grouped_gemm / nvte_multi_stream_cublas_gemm; measured on an "
     "H200 (bench/gpu/README.md, 2026-11-28): per-expert GEMMs on 4 streams against the tile "
     "model, forward bias -14.5 % as one batched kernel, -9.9 % in rounds"},
    {SimModel::kFp8Quantize, "compute", "fp8-quantize",
     "an fp8 linear layer's GEMM is preceded by Transformer Engine's quantization of its 16-bit "
     "activation-side operand (the input forward, the output gradient backward): a kernel "
     "reading it once and writing a row-wise and a column-wise fp8 copy (4 bytes of HBM traffic "
     "per element; current scaling reads it once more for its amax, MXFP8 and blockwise add "
     "their scales) at the profile's memory bandwidth, plus one kernel overhead",
     "layers fed by their own fused norm (LayerNormLinear: QKV, the MLP's first layer, Mamba's "
     "input projection, MLA's up-projections) get their forward copies from the norm; weights are "
     "quantized once per step and not counted; the experts' quantization is part of their glue; "
     "current scaling's amax pass shares the cast's kernel overhead; the amax reductions over "
     "tensor- and data-parallel groups are not modelled; every recipe's GEMMs run at the "
     "profile's fp8 rate",
     "Transformer Engine Linear / LayerNormLinear forward and backward (fp8 cast-transpose, "
     "MXFP8 row- and column-wise quantization); H200 GEMM measurements (bench/gpu/README.md, "
     "2026-11-26): the fp8 GEMMs alone match the tile model within 0.2 % bias, so the casts "
     "are not in the profiles' fp8 rates"},
    {SimModel::kFlashAttention, "compute", "flash-attention",
     "attention FLOPs / (forward or backward rate x n/(n + half_seq) x head), max with HBM time, "
     "+ overhead; head = (d/(d + half_head_dim)) / (128/(128 + half_head_dim)) for head dimension "
     "d where the profile gives half_head_dim (a score's GEMM work grows with d, its softmax "
     "does not), else 1",
     "flash-style kernels (no s x s tensor); causal blocks count half the FLOPs; the rates are "
     "for head dimension 128",
     "profile attention rates (FlashAttention-2 measurement, reference data); Dao 2023; the "
     "head-dimension dependence from FlashAttention-3's H100 benchmarks (Shah et al. 2024, "
     "arXiv:2407.08608; profile attention_source)"},
    {SimModel::kUnfusedAttention, "compute", "unfused-attention",
     "--attention fused-softmax or unfused: QK^T and PV (backward: dV, dP, dQ, dK) as batched "
     "GEMMs of the tile model over the whole block, plus the s x s scores streamed through HBM: "
     "by Megatron's fused scale-mask-softmax and the dropout kernel (4 reads and writes of a "
     "score forward, 5 backward), or unfused by separate scale, mask, softmax and dropout kernels "
     "(10 forward, 9 backward); where Megatron's fused kernel cannot take the scores (its "
     "is_kernel_available: 16-bit, 16 < sk <= 4096, sq, sk and b x heads multiples of 4 and, "
     "causal, of the kernel's batches per block), as PyTorch's fp32 softmax with its casts (20 "
     "forward, 22 backward, 6 kernels each); every kernel beyond the fused path's is one more op "
     "for the host to issue",
     "the scores are materialised in HBM and counted in the memory check; the causal mask is "
     "applied to the scores, not skipped",
     "Megatron-LM's core attention before FlashAttention (mpu/transformer.py of 2019: scale, "
     "mask and softmax as PyTorch ops; fused_kernels' scaled_masked_softmax from 2020); Dao et "
     "al. 2022 (the HBM traffic it removes)"},
    {SimModel::kMemoryBound, "compute", "memory-bound",
     "norms, activations, residual adds, embedding, loss, router and the GPU optimizer: HBM "
     "bytes / achievable bandwidth + kernel overhead",
     "the lowering's byte estimates; kernels stream at STREAM-like bandwidth",
     "profile memory_bandwidth (STREAM triad, reference data hardware_specs.json)"},
    {SimModel::kKernelOverhead, "compute", "kernel-overhead", "a fixed time per compute kernel",
     "launches are asynchronous; what remains is the inter-kernel gap and ramp-up/tail",
     "profile kernel_overhead_us (assumed from Nsight timelines; calibrate)"},
    {SimModel::kCommSmSharing, "compute", "comm-sm-sharing",
     "while a collective or message moves data on a GPU, its compute runs at (1 - comm_slowdown)",
     "NCCL kernels occupy SMs (one block per channel); copy engines (host copies) do not",
     "profile comm_slowdown (Transformer Engine's SM budget for overlapped communication)"},
    {SimModel::kCoreSharing, "compute", "core-sharing",
     "CPU ranks of one host (profile host_cores > 0): when more of them compute at once than the "
     "host has cores, each computes at cores / computing ranks (processor sharing) times the "
     "host's oversubscribed efficiency (context switches, caches refilled after each switch)",
     "waiting ranks sleep instead of spinning (the cpu backend's bounded waits); only simulated "
     "ranks count (simulate every rank, --full, for an oversubscribed host)",
     "profile host_cores (planner calibrate records the host's cores) and "
     "oversubscribed_efficiency (measured by planner calibrate with more ranks than cores)"},
    {SimModel::kMemoryBoundPerKind, "compute", "memory-bound-per-kind",
     "a calibrated profile's measured bandwidth for a memory-bound op kind (memory_bound_GBps) "
     "replaces memory_bandwidth for that kind",
     "CPU kernels such as GeLU and Adam are bound by arithmetic, not by DRAM",
     "planner calibrate's fit to the measured norm, activation, residual-add and Adam kernels"},
    {SimModel::kHost, "compute", "host",
     "offloaded optimizer and parameter-server work: bytes / host memory bandwidth; host<->device "
     "copies: bytes / PCIe copy bandwidth",
     "the CPU streams the optimizer state once; copies use the copy engines",
     "profile host_memory_bandwidth_GBps, pcie_copy_GBps (assumed)"},
    {SimModel::kHostIssue, "engine", "host-issue",
     "one host thread per rank walks its step program in order and issues op i at h_i = h_(i-1) + "
     "cost(op i) (per op kind and pass, plus per micro-batch and per step); an op starts at "
     "max(h_i, when its stream and dependencies allow), so short kernels wait for the host; the "
     "GEMM of an MoE layer's local experts costs one GEMM's host time per expert (Transformer "
     "Engine's GroupedLinear issues them one by one), so many small local experts are host-bound; "
     "a stack that gathers ZeRO-3 parameters tensor by tensor (deepspeed) synchronises with the "
     "GPU before each layer's gather and then pays, per parameter tensor, a launch and a cost per "
     "data-parallel rank, so its gathers are not overlapped and grow with dp; a stack whose "
     "timers synchronise (megatron-lm) waits for the GPU before every forward and backward pass "
     "of a micro-batch, so the GPU drains and then waits for the pass's first op; a stack that "
     "synchronises on its pipeline receives (megatron-lm, megatron-deepspeed) issues a pass only "
     "once its input has arrived, so a host-bound pipeline fills and drains on the host too; with "
     "dropless MoE routing the host copies each layer's tokens per expert and waits for them (and "
     "for the compute stream's work before them, not the data-parallel communication) before it "
     "issues the dispatch and the experts, so a host-bound MoE layer drains the GPU once per "
     "forward pass",
     "the host otherwise never waits for the GPU within a step (launches are asynchronous, no "
     "host synchronisation before the optimizer); costs are per op of the step program (what the "
     "framework runs for it), per software stack; a stack that synchronises with the whole "
     "device elsewhere waits for every stream at the token counts too; the sweep's estimate "
     "leaves the token-count synchronisation out, starts the host with each block of a forward "
     "pass and, where the stack never synchronises with the whole device, lets it run ahead of "
     "the GPU through backward passes (no host synchronisation there): a backward block costs the "
     "longer of its GPU schedule and its host's issue time",
     "core/host_model.hpp: costs per stack (planner sim-models, Software stacks), fitted on "
     "measured runs of that stack (vTrain's A100 sweep for megatron-deepspeed); the gather loop "
     "from DeepSpeed's "
     "partition_parameters.py (_allgather_param, 2021 releases); the pass synchronisation from "
     "Megatron-LM's megatron/timers.py of 2020-2022 (_Timer.start and stop call "
     "torch.cuda.synchronize(); schedules.py times every forward_step and backward_step); the "
     "receive synchronisation from Megatron-LM's p2p_communication._communicate of 2020-2022 "
     "(torch.cuda.synchronize() after batch_isend_irecv) and vTrain's sweep, whose host-bound "
     "pipelines take (micro-batches + pp - 1) stage times; the token counts from Megatron-core's "
     "MoEAlltoAllTokenDispatcher (token_dispatcher.py: preprocess copies tokens_per_expert to the "
     "host and synchronises the compute stream before the all-to-all; TE GroupedLinear takes "
     "the row counts as a host list; from memory of the 2024-2025 sources); the experts' GEMMs one "
     "by one from Transformer Engine's GroupedLinear (grouped_linear.py: general_grouped_gemm "
     "over the m_splits, one cuBLAS call per expert, and per-expert fp8 quantizers; from memory "
     "of the 2024-2025 sources): with the measured GEMM cost, 196 MoE records went from 26.1 % "
     "to 23.7 % MAPE, with nothing fitted"},
    {SimModel::kMergedPasses, "engine", "merged-passes",
     "--moe-a2a-overlap (Megatron-core's combined 1F1B) and dualpipev: a steady-state forward "
     "pass and the backward pass of another micro-batch run as one, each cut into segments after "
     "every EP all-to-all, forward and backward segments alternating; a segment starts when the "
     "one before it has finished its compute and its tensor- and context-parallel communication, "
     "so only the all-to-alls run under the other pass's compute",
     "the segments are callables run one after another on the compute stream, their tp "
     "collectives (Transformer Engine) and ring-attention exchanges part of them; the forward's "
     "segment is placed first (Megatron-core's schedule_layer_1f1b and DualPipe start with the "
     "backward's combine, which hides more all-to-all time but sends the forward's output later: "
     "not modelled)",
     "Megatron-core pipeline_parallel/combined_1f1b.py (--overlap-moe-expert-parallel-comm); "
     "DeepSeek-V3 report (arXiv:2412.19437) section 3.2.1 and figure 4; core/lowering.cpp "
     "merge_forward_backward"},
    {SimModel::kRing, "collective", "ring",
     "C rings (C = members per island) each moving 2(n-1)/n S/C (all-reduce) or (n-1)/n S/C "
     "(all-gather, reduce-scatter) per hop in 2(n-1) or n-1 steps",
     "hops between islands stay on one rail; every member's NIC carries one channel each way; "
     "pipelined, so all hops progress together",
     "Patarasuk & Yuan 2009; NCCL ring channels"},
    {SimModel::kTree, "collective", "tree",
     "all-reduce across islands: intra-island chains plus a double binary tree over islands, "
     "each tree reducing and broadcasting half the data; 2(ceil(log2 k) + g - 1) steps",
     "heap-ordered tree and its mirror (inner nodes of one are leaves of the other)",
     "Sanders, Speck & Traeff 2009; NCCL 2.4 double binary trees"},
    {SimModel::kHierarchical, "collective", "hierarchical",
     "all-reduce across equal islands: reduce-scatter inside islands, g rings across islands on "
     "S/g, all-gather inside islands (three phases)",
     "islands hold the same number of members",
     "2D/hierarchical all-reduce (Horovod, BlueConnect; NCCL CollNet-like split)"},
    {SimModel::kNvls, "collective", "nvls",
     "all-reduce inside one NVSwitch domain with NVLink SHARP: each GPU sends S up and receives "
     "S back, scaled by the profile's nvls efficiency; 2 steps",
     "the switch reduces; only where the profile gives nvls > 0",
     "reference data collectives.json (NVLS busbw 480 GB/s on H200, 838 on B200)"},
    {SimModel::kDirect, "collective", "direct",
     "all-to-all: every member sends S/n to every other member at once",
     "grouped point-to-point sends, as NCCL implements all-to-all",
     "NCCL all-to-all (ncclSend/ncclRecv in a group)"},
    {SimModel::kHierarchicalA2a, "collective", "hierarchical-a2a",
     "MoE dispatch and combine sent hierarchically: a token crosses the network once per node "
     "holding one of its experts, to the GPU on its own rail, which forwards it over NVLink once "
     "to every GPU holding one of its experts (pipelined with the network transfer); network "
     "bytes per rank S·u/top_k·(k-1)/k, u the expected nodes one token reaches from its top-k "
     "draw (group-limited routing draws its groups first); inside one node one copy per GPU",
     "only for plans whose moe_a2a is hierarchical, on nodes holding equally many of the EP "
     "group; balanced routing; experts spread over the nodes in group order",
     "DeepEP (github.com/deepseek-ai/DeepEP, normal kernels: NVLink + RDMA forwarding); "
     "DeepSeek-V3 report arXiv:2412.19437 sections 3.2.2 and 2.1.2 (node-limited routing, M = 4); "
     "Megatron-core flex dispatcher (deepep, hybridep)"},
    {SimModel::kChainBroadcast, "collective", "chain-broadcast",
     "broadcast as a pipelined chain from the first member, S per hop, n-1 steps",
     "small messages (input tokens and labels over tp)", "NCCL ring broadcast"},
    {SimModel::kP2p, "collective", "p2p",
     "send/recv pairs move the message on the route between the two GPUs after a rendezvous",
     "one step of protocol latency plus the route's link latencies",
     "NCCL point-to-point; Megatron pipeline communication"},
    {SimModel::kNcclSelection, "collective", "nccl-selection",
     "every applicable (algorithm, protocol LL/LL128/Simple) is estimated alone on an idle "
     "network and the fastest is used, unless an algorithm is forced",
     "latency = protocol base + steps x (step latency of the slowest hop's class + its link "
     "latencies); bytes on the wire / (protocol factor x algorithm efficiency)",
     "NCCL tuning model (src/graph/tuning.cc): baseLat, hwLat, LL/LL128/Simple"},
    {SimModel::kMaxMinFair, "network", "max-min-fair",
     "flow-level network: concurrent transfers share directed links max-min fairly by "
     "progressive filling, recomputed per connected component when a transfer starts or ends",
     "no packets, no congestion control dynamics; link capacity = bandwidth x the profile's "
     "per-kind efficiency",
     "Bertsekas & Gallager, Data Networks, section 6.5.2; SimGrid's flow-level model"},
    {SimModel::kBalancedEcmp, "network", "balanced-ecmp",
     "equal-cost links are pooled into one resource: a leaf's uplinks, the downlinks into a "
     "leaf, a pod's spine-core links, the NICs serving the same GPUs",
     "traffic spreads evenly over equal-cost paths (adaptive routing, many queue pairs); "
     "--hashed-ecmp follows the topology's hashed route instead",
     "InfiniBand adaptive routing; NCCL channels and queue pairs; Llama 3 paper section 3.3.1 "
     "(E-ECMP, 16 flows per GPU pair; quoted from memory)"},
    {SimModel::kSymmetricBackground, "network", "symmetric-background",
     "ranks not simulated still load the fabric: translated copies of each simulated group and "
     "message (other tp/cp/ep/dp indices) join its transfer as extra flows",
     "ranks differing only in tp/cp/ep/dp index run the same ops at the same times",
     "core/program.hpp rank subsets; symmetry of the rank grid"},
    {SimModel::kStepAccounting, "memory", "step-accounting",
     "per-stage weights, gradients, optimizer states, activations (Korthikanti et al.), buffers "
     "and framework overhead, checked against HBM before simulating; selective recompute drops "
     "the activations of Megatron-core's recompute modules (core_attn, moe_act, layernorm, "
     "mla_up_proj, mlp, moe, shared_experts) and the lowering runs their forward again before "
     "their backward",
     "a plan that does not fit is reported out of memory with the stage and the bytes",
     "core/memory.hpp: ZeRO (Rajbhandari et al. 2020), Korthikanti et al. 2022; Megatron-core "
     "TransformerConfig.recompute_modules (quoted from memory)"},
}};

// Every SimModel has its entry, at its own index.
constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < kModels.size(); ++i) {
    if (static_cast<std::size_t>(kModels[i].id) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(), "kModels must list every SimModel once, in enum order");

}  // namespace

std::span<const ModelInfo> model_registry() {
  return kModels;
}

const ModelInfo& model_info(SimModel id) {
  return kModels[static_cast<std::size_t>(id)];
}

}  // namespace planner::sim
