# Does a GPU sustain its burst GEMM rate? bf16 GEMMs (cuBLAS through PyTorch) timed with CUDA
# events in batches, while nvidia-smi samples the SM clock, power draw, temperature and throttle
# reasons every 100 ms (run it beside this script; see bench/gpu/README.md):
#   - burst: the first GEMMs after the GPU idled (the rate a short benchmark reports);
#   - sustained: back-to-back GEMMs for SECONDS, random data and then zeros (a tensor core's power
#     depends on the bits it multiplies);
#   - duty: GEMM bursts of about 20 ms alternating with the GPU idle (a kernel that sleeps) or with
#     a memory-bound kernel, GEMM time fraction 0.25-0.9, as a training step mixes them;
#   - shapes: a transformer layer's GEMMs (GPT hidden 2048, micro-batch 8 x 1,024 tokens; Llama-3-70B
#     at tp 8, 8,192 tokens) sustained.
# Every timed batch is kept with its wall-clock start (time.time(), the clock nvidia-smi's
# timestamps use), so a batch's rate can be set beside the clock and power of its moment.
# Usage: python3 torch_power_duty.py [OUTPUT.json] [SECONDS]   (default power_duty.json, 20)
import json
import subprocess
import sys
import time

import torch

out_path = sys.argv[1] if len(sys.argv) > 1 else "power_duty.json"
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
dev = "cuda"
props = torch.cuda.get_device_properties(0)
out = {
    "kind": "gpu_power_duty",
    "torch": torch.__version__,
    "cuda": torch.version.cuda,
    "device": torch.cuda.get_device_name(0),
    "sm_count": props.multi_processor_count,
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "nvidia_smi": subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit,power.max_limit",
         "--format=csv,noheader"], capture_output=True, text=True).stdout.strip(),
    "phases": [],
}


def operands(m, n, k, zeros=False):
    make = torch.zeros if zeros else torch.randn
    return (make(m, k, device=dev, dtype=torch.bfloat16),
            make(k, n, device=dev, dtype=torch.bfloat16))


def batches(name, fn, flops, per_batch, duration, gap=None, gap_desc=""):
    """Runs `per_batch` calls of fn between two CUDA events, then gap() (not timed), until
    `duration` seconds pass; records each batch's rate and the phase's wall-clock span."""
    torch.cuda.synchronize()
    rows = []
    t_end = time.time() + duration
    pending = []
    while time.time() < t_end:
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(per_batch):
            fn()
        e.record()
        if gap is not None:
            gap()
        pending.append((time.time(), s, e))
        if len(pending) >= 8:  # keep the host a few batches ahead, no further
            pending[0][2].synchronize()
            rows.append(pending.pop(0))
    torch.cuda.synchronize()
    rows += pending
    rates = []
    for wall, s, e in rows:
        sec = s.elapsed_time(e) / 1e3
        rates.append({"wall": wall, "s": sec, "tflops": flops * per_batch / sec / 1e12})
    tf = sorted(r["tflops"] for r in rates)
    phase = {"phase": name, "gap": gap_desc, "per_batch": per_batch, "batches": len(rates),
             "start": rows[0][0] if rows else None, "end": time.time(),
             "tflops_first": rates[0]["tflops"] if rates else None,
             "tflops_median": tf[len(tf) // 2] if tf else None,
             "tflops_last_quarter": (sum(r["tflops"] for r in rates[3 * len(rates) // 4:]) /
                                     max(1, len(rates) - 3 * len(rates) // 4)),
             "tflops_max": tf[-1] if tf else None, "rows": rates}
    out["phases"].append(phase)
    print(f"{name:40s} {gap_desc:28s} first {phase['tflops_first']:7.1f} median "
          f"{phase['tflops_median']:7.1f} last quarter {phase['tflops_last_quarter']:7.1f} "
          f"max {phase['tflops_max']:7.1f} TFLOP/s ({len(rates)} batches)", flush=True)
    return phase


def idle(sec):
    torch.cuda.synchronize()
    time.sleep(sec)


# Cycles of torch.cuda._sleep per millisecond at the SM clock: measured, not assumed.
def sleep_cycles_per_ms():
    torch.cuda.synchronize()
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    s.record()
    torch.cuda._sleep(10_000_000)
    e.record()
    e.synchronize()
    return 10_000_000 / s.elapsed_time(e)


t0 = time.time()
a, b = operands(8192, 8192, 8192)
f8k = 2.0 * 8192**3
gemm = lambda: torch.matmul(a, b)
for _ in range(3):
    gemm()
idle(5.0)
batches("burst 8192^3 after 5 s idle", gemm, f8k, 1, 0.05)
batches("sustained 8192^3 random", gemm, f8k, 10, seconds)
idle(5.0)
za, zb = operands(8192, 8192, 8192, zeros=True)
batches("sustained 8192^3 zeros", lambda: torch.matmul(za, zb), f8k, 10, seconds / 2)
del za, zb
idle(5.0)

cyc = sleep_cycles_per_ms()
out["sleep_cycles_per_ms"] = cyc
# One 8192^3 GEMM takes about 1.4 ms on an H100/H200: 14 per batch is about 20 ms of GEMMs.
one = batches("calibration 8192^3", gemm, f8k, 14, 1.0)
burst_ms = one["rows"][-1]["s"] * 1e3
big = torch.empty(512 * 1024 * 1024 // 2, device=dev, dtype=torch.bfloat16)  # 512 MiB
for duty in (0.9, 0.75, 0.6, 0.5, 0.25):
    gap_ms = burst_ms * (1 - duty) / duty
    idle(3.0)
    batches("duty 8192^3", gemm, f8k, 14, seconds / 2,
            gap=lambda: torch.cuda._sleep(int(gap_ms * cyc)),
            gap_desc=f"GEMM {duty:.2f}, idle {gap_ms:.1f} ms")
    # The same gap filled by memory-bound work: scale-and-add passes over 512 MiB.
    idle(3.0)
    torch.cuda.synchronize()
    s = time.perf_counter()
    for _ in range(5):
        big.mul_(1.0001)
    torch.cuda.synchronize()
    t_pass = (time.perf_counter() - s) / 5 * 1e3
    passes = max(1, round(gap_ms / t_pass))
    batches("duty 8192^3", gemm, f8k, 14, seconds / 2,
            gap=lambda: [big.mul_(1.0001) for _ in range(passes)],
            gap_desc=f"GEMM {duty:.2f}, {passes} HBM passes")
del big
idle(3.0)

# A transformer layer's GEMMs (tokens x out x in), sustained: forward shapes only.
shapes = {
    "gpt h2048 mb8x1024 (qkv, proj, fc1, fc2)": [(8192, 6144, 2048), (8192, 2048, 2048),
                                                  (8192, 8192, 2048), (8192, 2048, 8192)],
    "llama3-70b tp8 8192 tokens (qkv, o, up+gate, down)": [(8192, 1280, 8192), (8192, 8192, 1024),
                                                            (8192, 7168, 8192), (8192, 8192, 3584)],
}
for name, dims in shapes.items():
    ops = [operands(m, n, k) for (m, n, k) in dims]
    flops = sum(2.0 * m * n * k for (m, n, k) in dims)

    def layer(ops=ops):
        for x, y in ops:
            torch.matmul(x, y)
    for _ in range(5):
        layer()
    idle(3.0)
    batches(f"burst {name}", layer, flops, 1, 0.05)
    batches(f"sustained {name}", layer, flops, 20, seconds / 2)
    del ops
out["seconds"] = time.time() - t0
with open(out_path, "w") as fh:
    json.dump(out, fh)
print(f"wrote {out_path} ({out['seconds']:.0f} s)")
