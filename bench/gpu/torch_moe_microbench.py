# GEMM shapes of dense layers and of mixture-of-experts layers through PyTorch, and the glue of an
# MoE layer, timed on one GPU:
#   dense    bf16 GEMMs (nn.Linear layout: tokens x out x in) over a grid of token counts and
#            layer shapes, and fp8 (torch._scaled_mm, per-tensor scales) on part of it: the data the
#            simulator's tile/wave GEMM model (gemm_tiles, gemm_k_overhead, kernel_overhead) is
#            checked against.
#   grouped  the experts' GEMMs of the MoE models in the reference data (local experts x tokens per
#            expert x expert FFN), forward and forward + backward, as one grouped GEMM
#            (torch._grouped_mm, CUTLASS), as a batched GEMM (torch.bmm) and as one GEMM per expert
#            (Megatron's SequentialMLP).
#   glue     router softmax + top-k, the permutation by expert (argsort, index_select), the
#            un-permutation (index_add_), the per-expert token counts and their copy to the host.
#   layer    a dropless MoE layer (router, permute, grouped SwiGLU experts, unpermute) forward +
#            backward, with and without the host reading the token counts (Megatron-core's
#            all-to-all dispatcher does, to size the all-to-all), at a real and at a tiny size: GPU
#            time, wall time, and the host's time per layer.
# Each time is the best and the median of CUDA-event-timed runs after warm-ups.
# Usage: python3 torch_moe_microbench.py [OUTPUT.json]   (default gpu_moe_microbench.json)
import json, sys, time, traceback
import torch
import torch.nn.functional as F

from cuda_timing import Results, graph_time, timeit, wall_per_call

dev = "cuda"
results = Results(sys.argv[1] if len(sys.argv) > 1 else "gpu_moe_microbench.json")
T0, out, res, errors, section = results.t0, results.out, results.res, results.errors, results.section


def timeit_graph(fn, flops):
    """GPU time per call of back-to-back calls (cuda_timing.graph_time), more calls for small ones."""
    return graph_time(fn, 20 if flops < 1e11 else (8 if flops < 1e12 else 3))


def iters_for(flops):
    return 30 if flops < 2e10 else (15 if flops < 5e11 else 6)


# ---- dense GEMMs ------------------------------------------------------------------------------
LAYER_SHAPES = [(1024, 1024), (2048, 2048), (4096, 4096), (8192, 8192), (12288, 4096), (4096, 11008),
                (1536, 7168), (7168, 2048), (2880, 2880), (5760, 2880), (1536, 2048), (2048, 768),
                (3072, 4096), (4096, 1536)]
TOKENS = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]


def dense():
    for (n, k) in LAYER_SHAPES:
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        for m in TOKENS:
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            fl = 2.0 * m * n * k
            lone, _ = timeit(lambda: F.linear(x, w), iters=iters_for(fl))
            best, med, how = timeit_graph(lambda: F.linear(x, w), fl)
            res.append({"bench": "gemm", "dtype": "bf16", "m": m, "n": n, "k": k, "best_s": best, "median_s": med,
                        "timing": how, "lone_call_s": lone, "tflops_best": fl / best / 1e12})
        if time.time() - T0 > 100:
            errors["dense"] = "stopped early at the time guard"
            return


def dense_fp8():
    one = torch.tensor(1.0, device=dev)
    for (n, k) in [(4096, 4096), (8192, 8192), (1536, 7168), (7168, 2048), (2880, 2880), (12288, 4096)]:
        w = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
        for m in [128, 512, 1024, 2048, 4096, 8192, 16384]:
            x = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
            fl = 2.0 * m * n * k
            best, med, how = timeit_graph(
                lambda: torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), fl)
            res.append({"bench": "gemm", "dtype": "fp8_e4m3", "m": m, "n": n, "k": k, "best_s": best, "median_s": med,
                        "timing": how, "tflops_best": fl / best / 1e12})


# ---- grouped GEMMs of MoE models ----------------------------------------------------------------
# (name, hidden, expert FFN hidden, experts, top-k): the HF configs in the reference data.
MOE = [("qwen3-30b-a3b", 2048, 768, 128, 8), ("gpt-oss-120b", 2880, 2880, 128, 4),
       ("deepseek-v3", 7168, 2048, 256, 8), ("qwen3-235b-a22b", 4096, 1536, 128, 8),
       ("mixtral-8x22b", 6144, 16384, 8, 2), ("nemotron-3-nano", 2688, 1856, 128, 6)]
grouped_mm = getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm")


def grouped():
    for (name, h, fe, E, k) in MOE:
        for groups in sorted({min(E, 4), min(E, 16)}):
            for per in [128, 512, 2048]:
                for (gemm, n, kk) in [("fc1", 2 * fe, h), ("fc2", h, fe)]:
                    fl = 2.0 * groups * per * n * kk
                    if fl > 3e12:
                        continue
                    x = torch.randn(groups * per, kk, device=dev, dtype=torch.bfloat16)
                    w = torch.randn(groups, n, kk, device=dev, dtype=torch.bfloat16)
                    offs = torch.arange(1, groups + 1, device=dev, dtype=torch.int32) * per
                    g = torch.randn(groups * per, n, device=dev, dtype=torch.bfloat16)
                    row = {"bench": "grouped", "model": name, "gemm": gemm, "groups": groups, "m": per, "n": n,
                           "k": kk, "flops_fwd": fl}
                    # forward y = x W^T per group; input gradient dx = dy W; weight gradient dW = dy^T x
                    # (a GEMM whose inner dimension is the group's tokens).
                    try:
                        row["grouped_fwd_s"], _, row["timing"] = timeit_graph(
                            lambda: grouped_mm(x, w.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16), fl)
                        row["grouped_dgrad_s"], _, _ = timeit_graph(
                            lambda: grouped_mm(g, w, offs=offs, out_dtype=torch.bfloat16), fl)
                    except Exception:
                        errors.setdefault("grouped_mm", traceback.format_exc())
                    try:
                        gt = g.t().contiguous().t()
                        row["grouped_wgrad_s"], _, _ = timeit_graph(
                            lambda: grouped_mm(gt.t(), x, offs=offs, out_dtype=torch.bfloat16), fl)
                    except Exception:
                        errors.setdefault("grouped_mm_wgrad", traceback.format_exc())
                    xb = x.view(groups, per, kk)
                    gb = g.view(groups, per, n)
                    row["bmm_fwd_s"], _, _ = timeit_graph(lambda: torch.bmm(xb, w.transpose(-2, -1)), fl)
                    row["bmm_wgrad_s"], _, _ = timeit_graph(lambda: torch.bmm(gb.transpose(-2, -1), xb), fl)
                    xs = list(x.split(per))
                    ws = [w[i] for i in range(groups)]
                    row["loop_fwd_s"], _, _ = timeit_graph(lambda: [F.linear(xs[i], ws[i]) for i in range(groups)], fl)
                    res.append(row)
            if time.time() - T0 > 190:
                errors["grouped"] = "stopped early at the time guard"
                return


def grouped_fp8():
    fn = getattr(torch, "_scaled_grouped_mm")
    for (name, h, fe, E, k) in MOE[:4]:
        groups = 16
        for per in [128, 512, 2048]:
            for (gemm, n, kk) in [("fc1", 2 * fe, h), ("fc2", h, fe)]:
                a = torch.randn(groups * per, kk, device=dev).to(torch.float8_e4m3fn)
                b = torch.randn(groups, n, kk, device=dev).to(torch.float8_e4m3fn)
                sa = torch.ones(groups * per, device=dev, dtype=torch.float32)
                sb = torch.ones(groups, n, device=dev, dtype=torch.float32)
                offs = torch.arange(1, groups + 1, device=dev, dtype=torch.int32) * per
                fl = 2.0 * groups * per * n * kk
                best, _, _ = timeit_graph(
                    lambda: fn(a, b.transpose(-2, -1), sa, sb, offs=offs, out_dtype=torch.bfloat16), fl)
                res.append({"bench": "grouped_fp8", "model": name, "gemm": gemm, "groups": groups, "m": per,
                            "n": n, "k": kk, "flops_fwd": fl, "grouped_fwd_s": best})


# ---- MoE glue ------------------------------------------------------------------------------------
def glue():
    for (T, h, E, k) in [(4096, 2048, 128, 8), (8192, 2048, 128, 8), (4096, 7168, 256, 8), (16384, 7168, 256, 8),
                         (4096, 2880, 128, 4)]:
        x = torch.randn(T, h, device=dev, dtype=torch.bfloat16)
        logits = torch.randn(T, E, device=dev, dtype=torch.float32)
        row = {"bench": "glue", "tokens": T, "hidden": h, "experts": E, "topk": k}
        row["softmax_topk_s"], _, _ = timeit_graph(lambda: torch.softmax(logits, -1).topk(k, -1), 0)
        topi = torch.softmax(logits, -1).topk(k, -1).indices
        flat = topi.flatten()
        row["argsort_s"], _, _ = timeit_graph(lambda: torch.argsort(flat, stable=True), 0)
        order = torch.argsort(flat, stable=True)
        tok = order // k
        row["bincount_s"], _ = timeit(lambda: torch.bincount(flat, minlength=E))
        row["bincount_to_host_s"], _ = timeit(lambda: torch.bincount(flat, minlength=E).tolist())
        row["permute_s"], _, _ = timeit_graph(lambda: x.index_select(0, tok), 0)
        y = x.index_select(0, tok)
        row["permute_bytes"] = 2 * T * k * h * 2
        w = torch.rand(T * k, 1, device=dev, dtype=torch.bfloat16)
        row["unpermute_s"], _, _ = timeit_graph(lambda: torch.zeros_like(x).index_add_(0, tok, y * w), 0)
        row["unpermute_bytes"] = (3 * T * k * h + 2 * T * h) * 2
        res.append(row)


# ---- the host's time per op ------------------------------------------------------------------------
def host_ops():
    """Host time per call of an MoE layer's ops at a size where the GPU keeps up: wall time of 200
    back-to-back calls / 200 (the host issues, the GPU finishes each tiny kernel before the next)."""
    T, h, E, k, fe = 256, 256, 16, 2, 128
    x = torch.randn(T, h, device=dev, dtype=torch.bfloat16)
    wr = torch.randn(E, h, device=dev, dtype=torch.bfloat16)
    logits = torch.randn(T, E, device=dev)
    flat = torch.arange(T * k, device=dev) % E
    order = torch.argsort(flat, stable=True)
    tok = order // k
    counts = torch.bincount(flat, minlength=E)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    xs = x.index_select(0, tok)
    w1 = torch.randn(E, 2 * fe, h, device=dev, dtype=torch.bfloat16)
    y = torch.randn(T * k, h, device=dev, dtype=torch.bfloat16)
    ops = {"linear (router)": lambda: F.linear(x, wr), "softmax": lambda: torch.softmax(logits, -1),
           "topk": lambda: logits.topk(k, -1), "argsort": lambda: torch.argsort(flat, stable=True),
           "bincount (syncs)": lambda: torch.bincount(flat, minlength=E),
           "bincount + tolist": lambda: torch.bincount(flat, minlength=E).tolist(),
           "cumsum": lambda: torch.cumsum(counts, 0), "index_select": lambda: x.index_select(0, tok),
           "grouped_mm": lambda: grouped_mm(xs, w1.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16),
           "index_add_": lambda: torch.zeros_like(x).index_add_(0, tok, y), "add": lambda: x + x,
           "synchronize": torch.cuda.synchronize}
    for name, fn in ops.items():
        wall, _ = wall_per_call(fn, 200, warm=20)
        res.append({"bench": "host_op", "op": name, "host_s_per_call": wall})


# ---- a dropless MoE layer ------------------------------------------------------------------------
class MoELayer(torch.nn.Module):
    def __init__(self, h, fe, E, k):
        super().__init__()
        self.E, self.k = E, k
        bf16 = {"device": dev, "dtype": torch.bfloat16}
        self.router = torch.nn.Linear(h, E, bias=False, **bf16)
        self.w1 = torch.nn.Parameter(torch.randn(E, 2 * fe, h, **bf16) * 0.02)
        self.w2 = torch.nn.Parameter(torch.randn(E, h, fe, **bf16) * 0.02)
        self.sync = False

    def forward(self, x):
        T = x.shape[0]
        probs = torch.softmax(self.router(x).float(), -1)
        topv, _ = probs.topk(self.k, -1)
        # Balanced assignment (grouped GEMMs want aligned group sizes); the top-k above is timed.
        flat = torch.arange(T * self.k, device=x.device) % self.E
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=self.E)
        if self.sync:
            counts.tolist()
        offs = torch.cumsum(counts, 0).to(torch.int32)
        tok = order // self.k
        xs = x.index_select(0, tok)
        h1 = grouped_mm(xs, self.w1.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16)
        a, b = h1.chunk(2, -1)
        y = grouped_mm(F.silu(a) * b, self.w2.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16)
        y = y * topv.flatten()[order].unsqueeze(-1).to(y.dtype)
        return torch.zeros_like(x).index_add_(0, tok, y)


def layer():
    for (tag, T, h, fe, E, k, L) in [("qwen3-30b-a3b ep1 mb1", 4096, 2048, 768, 128, 8, 4),
                                     ("qwen3-30b-a3b 16 local experts", 4096, 2048, 768, 16, 1, 4),
                                     ("tiny", 128, 256, 128, 16, 2, 8)]:
        layers = torch.nn.ModuleList([MoELayer(h, fe, E, k) for _ in range(L)])
        x0 = torch.randn(T, h, device=dev, dtype=torch.bfloat16, requires_grad=True)

        def step():
            y = x0
            for m in layers:
                y = y + m(y)
            y.float().square().mean().backward()

        def fwd():
            with torch.no_grad():
                y = x0
                for m in layers:
                    y = y + m(y)
        for sync in [False, True]:
            for m in layers:
                m.sync = sync
            row = {"bench": "moe_layer", "tag": tag, "tokens": T, "hidden": h, "expert_ffn": fe, "experts": E,
                   "topk": k, "layers": L, "host_reads_counts": sync}
            row["gpu_fwd_bwd_s"], row["gpu_fwd_bwd_median_s"] = timeit(step, iters=10)
            row["gpu_fwd_s"], _ = timeit(fwd, iters=10)
            # Wall time of back-to-back steps and forward passes, and the host's time to issue a
            # forward pass (the loop's time before the GPU catches up).
            row["wall_fwd_bwd_s"], _ = wall_per_call(step, 10)
            row["wall_fwd_s"], row["host_issue_fwd_s"] = wall_per_call(fwd, 10)
            res.append(row)
            x0.grad = None
            for m in layers:
                m.zero_grad(set_to_none=True)


section("dense", dense)
section("dense_fp8", dense_fp8)
section("grouped", grouped)
section("grouped_fp8", grouped_fp8)
section("glue", glue)
section("host_ops", host_ops)
section("layer", layer)
print(json.dumps({k: v for k, v in out.items() if k != "results"}, indent=1))
