# The experts' GEMMs of an MoE layer as Transformer Engine's GroupedLinear runs them, timed on one GPU.
#
# Megatron-core's TEGroupedMLP calls te.pytorch.GroupedLinear, whose bf16 GEMMs go through
# general_grouped_gemm -> nvte_multi_stream_cublas_gemm: one cuBLAS GEMM per local expert, the i-th
# on compute stream i % NVTE_NUM_GEMM_STREAMS (default 4), the streams joined after the last. The
# weight gradient accumulates into the fp32 main_grad (fuse_wgrad_accumulation). This script times
# that form against one batched GEMM (torch.bmm, the simulator's model of the experts' GEMMs):
#   streams  per-expert GEMMs round-robin on S streams (S = 1, 2, 4), forward (Y_i = X_i W_i^T), input
#            gradient (dX_i = dY_i W_i) and weight gradient (dW_i += dY_i^T X_i, fp32 output where this
#            PyTorch has torch.mm(..., out_dtype)), captured in a CUDA graph and replayed: the GPU's
#            time when the host runs ahead of it.
#   bmm      the same GEMMs as one batched GEMM (the simulator's OpDesc: batch = local experts).
#   host     eager (no graph) per-expert GEMMs on 4 streams at a tiny size: the host's time per
#            expert GEMM launch, and per GroupedLinear-like call.
# Shapes: the experts of the MoE models in the reference data (hidden, expert FFN; fc1 is the gated
# up projection, 2 x FFN wide), 4-32 local experts, 128-4,096 tokens per expert.
#   wgrad_fused  the weight gradient accumulated in the GEMM's epilogue into the fp32 main_grad
#            (torch.addmm with out_dtype float32), as TE's fused wgrad accumulation.
# Usage: python3 torch_te_grouped_linear.py [OUTPUT.json [GUARD_S [SECTIONS]]]
#   (default te_grouped_linear.json, a 200 s time guard, every section; SECTIONS: comma-separated)
import sys, time
import torch
import torch.nn.functional as F

from cuda_timing import Results, graph_time, wall_per_call

dev = "cuda"
GUARD_S = float(sys.argv[2]) if len(sys.argv) > 2 else 200.0
results = Results(sys.argv[1] if len(sys.argv) > 1 else "te_grouped_linear.json")
T0, out, res, errors = results.t0, results.out, results.res, results.errors


def timeit_graph(fn, flops):
    """GPU seconds per call of back-to-back calls captured in a CUDA graph (cuda_timing.graph_time)."""
    return graph_time(fn, 10 if flops < 1e11 else (4 if flops < 1e12 else 2))[0]


STREAMS = [torch.cuda.Stream() for _ in range(4)]


def multi_stream(gemms, s):
    """Runs the callables in `gemms` round-robin on s streams forked from and joined to the current
    one, as nvte_multi_stream_cublas_gemm does."""
    main = torch.cuda.current_stream()
    if s == 1:
        for f in gemms:
            f()
        return
    for st in STREAMS[:s]:
        st.wait_stream(main)
    for i, f in enumerate(gemms):
        with torch.cuda.stream(STREAMS[i % s]):
            f()
    for st in STREAMS[:s]:
        main.wait_stream(st)


try:
    torch.mm(torch.ones(8, 8, device=dev, dtype=torch.bfloat16), torch.ones(8, 8, device=dev, dtype=torch.bfloat16),
             out_dtype=torch.float32)
    FP32_WGRAD = True
except Exception:
    FP32_WGRAD = False
out["wgrad_fp32_output"] = FP32_WGRAD

# (name, hidden, expert FFN hidden, experts): the HF configs in the reference data.
MOE = [("qwen3-30b-a3b", 2048, 768, 128), ("gpt-oss-120b", 2880, 2880, 128), ("deepseek-v3", 7168, 2048, 256),
       ("qwen3-235b-a22b", 4096, 1536, 128), ("mixtral-8x22b", 6144, 16384, 8), ("nemotron-3-nano", 2688, 1856, 128)]


def expert_shapes(section, pers, group_counts):
    """(model, gemm, local experts, tokens per expert, n, k, forward FLOPs) of every experts' GEMM
    up to 4 TFLOP, in the order of `pers`; stops at the time guard (noted under errors[section])."""
    for per in pers:
        for (name, h, fe, E) in MOE:
            for groups in sorted({min(E, g) for g in group_counts}):
                for (gemm, n, kk) in [("fc1", 2 * fe, h), ("fc2", h, fe)]:
                    fl = 2.0 * groups * per * n * kk
                    if fl <= 4e12:
                        yield name, gemm, groups, per, n, kk, fl
            if time.time() - T0 > GUARD_S:
                errors[section] = f"stopped at the time guard ({GUARD_S} s)"
                return


def experts():
    for (name, gemm, groups, per, n, kk, fl) in expert_shapes("experts", [512, 2048, 128, 4096, 1024, 256],
                                                              (4, 8, 16, 32)):
        x = torch.randn(groups, per, kk, device=dev, dtype=torch.bfloat16)
        w = torch.randn(groups, n, kk, device=dev, dtype=torch.bfloat16)
        dy = torch.randn(groups, per, n, device=dev, dtype=torch.bfloat16)
        mg = torch.zeros(groups, n, kk, device=dev, dtype=torch.float32 if FP32_WGRAD else torch.bfloat16)
        row = {"bench": "experts", "model": name, "gemm": gemm, "groups": groups, "m": per, "n": n, "k": kk,
               "flops_fwd": fl}
        row["bmm_fwd_s"] = timeit_graph(lambda: torch.bmm(x, w.transpose(-2, -1)), fl)
        row["bmm_dgrad_s"] = timeit_graph(lambda: torch.bmm(dy, w), fl)
        row["bmm_wgrad_s"] = timeit_graph(lambda: torch.bmm(dy.transpose(-2, -1), x), fl)
        fwd = [(lambda i=i: F.linear(x[i], w[i])) for i in range(groups)]
        dgrad = [(lambda i=i: torch.mm(dy[i], w[i])) for i in range(groups)]
        if FP32_WGRAD:
            wgrad = [(lambda i=i: mg[i].add_(torch.mm(dy[i].t(), x[i], out_dtype=torch.float32)))
                     for i in range(groups)]
        else:
            wgrad = [(lambda i=i: mg[i].add_(torch.mm(dy[i].t(), x[i]))) for i in range(groups)]
        wgrad_plain = [(lambda i=i: torch.mm(dy[i].t(), x[i])) for i in range(groups)]
        for s in (1, 2, 4):
            row[f"s{s}_fwd_s"] = timeit_graph(lambda: multi_stream(fwd, s), fl)
            row[f"s{s}_dgrad_s"] = timeit_graph(lambda: multi_stream(dgrad, s), fl)
            row[f"s{s}_wgrad_s"] = timeit_graph(lambda: multi_stream(wgrad, s), fl)
        row["s4_wgrad_noacc_s"] = timeit_graph(lambda: multi_stream(wgrad_plain, 4), fl)
        res.append(row)
        del x, w, dy, mg


def host():
    """Host seconds per expert GEMM launch (eager, 4 streams, tiny GEMMs the GPU finishes at once)."""
    for groups in (4, 16, 32):
        x = torch.randn(groups, 64, 128, device=dev, dtype=torch.bfloat16)
        w = torch.randn(groups, 128, 128, device=dev, dtype=torch.bfloat16)
        fwd = [(lambda i=i: F.linear(x[i], w[i])) for i in range(groups)]
        for s in (1, 4):
            wall, issued = wall_per_call(lambda: multi_stream(fwd, s), 100, warm=10)
            res.append({"bench": "host", "groups": groups, "streams": s, "wall_s_per_call": wall,
                        "host_s_per_call": issued, "host_s_per_gemm": issued / groups})
        wall, issued = wall_per_call(lambda: torch.bmm(x, w.transpose(-2, -1)), 100, warm=10)
        res.append({"bench": "host", "groups": groups, "streams": 0, "what": "bmm", "wall_s_per_call": wall,
                    "host_s_per_call": issued})


def wgrad_fused():
    """The weight gradient as Transformer Engine runs it with fuse_wgrad_accumulation: each expert's
    GEMM accumulates into its fp32 main_grad in the GEMM's epilogue (cuBLAS beta = 1, fp32 C/D):
    torch.addmm(main_grad, dy^T, x, out_dtype=float32) (into a new buffer: the same reads and
    writes as accumulating in place), where this PyTorch has it."""
    mg0 = torch.zeros(8, 8, device=dev, dtype=torch.float32)
    a = torch.ones(8, 8, device=dev, dtype=torch.bfloat16)
    torch.addmm(mg0, a, a, out_dtype=torch.float32)
    for (name, gemm, groups, per, n, kk, fl) in expert_shapes("wgrad_fused", [512, 2048, 128, 1024, 4096], (8,)):
        x = torch.randn(groups, per, kk, device=dev, dtype=torch.bfloat16)
        dy = torch.randn(groups, per, n, device=dev, dtype=torch.bfloat16)
        mg = torch.zeros(groups, n, kk, device=dev, dtype=torch.float32)
        wgrad = [(lambda i=i: torch.addmm(mg[i], dy[i].t(), x[i], out_dtype=torch.float32)) for i in range(groups)]
        row = {"bench": "wgrad_fused", "model": name, "gemm": gemm, "groups": groups, "m": per, "n": n, "k": kk,
               "flops_fwd": fl}
        for s in (1, 4):
            row[f"s{s}_wgrad_fused_s"] = timeit_graph(lambda: multi_stream(wgrad, s), fl)
        res.append(row)
        del x, dy, mg


SECTIONS = [("host", host), ("experts", experts), ("wgrad_fused", wgrad_fused)]
if len(sys.argv) > 3:
    SECTIONS = [s for s in SECTIONS if s[0] in sys.argv[3].split(",")]
for name, fn in SECTIONS:
    results.section(name, fn)
