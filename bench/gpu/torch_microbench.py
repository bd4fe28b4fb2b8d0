# GPU microbenchmarks through PyTorch (cuBLAS, scaled_dot_product_attention): bf16/fp32/TF32/fp8
# GEMM rates by shape, causal attention forward/backward rates, device copy bandwidth. Each time is
# the best (and median) of several CUDA-event-timed runs after warm-ups.
# Usage: python3 torch_microbench.py [OUTPUT.json]   (default gpu_microbench.json)
import json, os, time, subprocess, traceback
import torch
out = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0),
       "sm_count": torch.cuda.get_device_properties(0).multi_processor_count, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
try:
    out["cublas"] = torch._C._cuda_getCompiledVersion()
except Exception: pass
out["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
dev = "cuda"
def timeit(fn, iters=20, warm=5):
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    best = float("inf"); times = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    return times[0], times[len(times) // 2]
res = []
def gemm(m, n, k, dtype=torch.bfloat16, tag=""):
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16).to(dtype) if dtype != torch.float32 else torch.randn(m, k, device=dev)
    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16).to(dtype) if dtype != torch.float32 else torch.randn(k, n, device=dev)
    f = lambda: torch.matmul(a, b)
    best, med = timeit(f, iters=30 if m * n * k < 2**36 else 10)
    fl = 2.0 * m * n * k
    res.append({"bench": "gemm", "dtype": str(dtype).split(".")[-1], "m": m, "n": n, "k": k, "tag": tag,
                "best_s": best, "median_s": med, "tflops_best": fl / best / 1e12, "tflops_median": fl / med / 1e12})
t0 = time.time()
try:
    for s in [1024, 2048, 4096, 8192, 16384]:
        gemm(s, s, s, tag="square")
    # transformer layer shapes (tokens x out x in): Llama-2-7B (h 4096, ffn 11008), Llama-3-70B (h 8192,
    # ffn 28672, qkv 10240) at 4096/8192 tokens per micro-batch, and tensor-parallel slices (tp 8)
    for T in [4096, 8192]:
        for (n, k, tag) in [(12288, 4096, "7b qkv"), (4096, 4096, "7b proj"), (22016, 4096, "7b fc1"), (4096, 11008, "7b fc2"),
                            (10240, 8192, "70b qkv"), (8192, 8192, "70b proj"), (57344, 8192, "70b fc1"), (8192, 28672, "70b fc2"),
                            (1280, 8192, "70b qkv tp8"), (8192, 1024, "70b proj tp8"), (7168, 8192, "70b fc1 tp8"), (8192, 3584, "70b fc2 tp8")]:
            gemm(T, n, k, tag=tag)
    gemm(8192, 8192, 8192, torch.float32, tag="fp32 square")
    torch.backends.cuda.matmul.allow_tf32 = True
    gemm(8192, 8192, 8192, torch.float32, tag="tf32 square")
    torch.backends.cuda.matmul.allow_tf32 = False
except Exception:
    out["gemm_error"] = traceback.format_exc()
try:
    for s in [4096, 8192]:
        a = torch.randn(s, s, device=dev).to(torch.float8_e4m3fn); b = torch.randn(s, s, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev)
        f = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        best, med = timeit(f)
        res.append({"bench": "gemm", "dtype": "fp8_e4m3", "m": s, "n": s, "k": s, "tag": "square", "best_s": best, "median_s": med,
                    "tflops_best": 2.0 * s**3 / best / 1e12, "tflops_median": 2.0 * s**3 / med / 1e12})
except Exception:
    out["fp8_error"] = traceback.format_exc()
import torch.nn.functional as F
try:
    for (b, h, s, d) in [(1, 32, 4096, 128), (2, 32, 2048, 128), (1, 64, 8192, 128), (4, 32, 4096, 128), (1, 16, 2048, 64)]:
        q = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn_like(q, requires_grad=True); v = torch.randn_like(q, requires_grad=True)
        fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
        o = fwd(); g = torch.randn_like(o)
        bestf, medf = timeit(fwd)
        def fb():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True); o.backward(g)
        bestfb, medfb = timeit(fb, iters=10)
        flf = 4.0 * b * h * s * s * d / 2  # causal: half the score matrix
        res.append({"bench": "attention_causal", "dtype": "bf16", "batch": b, "heads": h, "seq": s, "head_dim": d,
                    "fwd_best_s": bestf, "fwd_median_s": medf, "fwd_tflops": flf / bestf / 1e12,
                    "bwd_best_s": bestfb - bestf, "bwd_tflops": 2.5 * flf / (bestfb - bestf) / 1e12})
except Exception:
    out["attention_error"] = traceback.format_exc()
try:
    for n in [1 << 28, 1 << 30]:
        x = torch.empty(n, device=dev, dtype=torch.uint8); y = torch.empty_like(x)
        best, med = timeit(lambda: y.copy_(x))
        res.append({"bench": "copy", "bytes": n, "best_s": best, "GBps_read_plus_write": 2 * n / best / 1e9})
except Exception:
    out["copy_error"] = traceback.format_exc()
out["results"] = res; out["seconds"] = time.time() - t0
import sys
json.dump(out, open(sys.argv[1] if len(sys.argv) > 1 else "gpu_microbench.json", "w"), indent=1)
for r in res: print(json.dumps(r))
