# Causal attention forward and backward rates by head dimension through PyTorch's
# scaled_dot_product_attention, per backend (FlashAttention-2 and cuDNN): the data for how the
# attention rate depends on the head dimension. 16,384 tokens per call (batch = 16,384 / seq), 32
# heads (16 at head dimension 256). FLOPs: forward 4 b h s^2 d / 2 (causal), backward 2.5 times.
# Usage: python3 torch_attention_headdim.py [OUTPUT.json]
import json, subprocess, sys, time, traceback
import torch
import torch.nn.functional as F

from cuda_timing import timeit
from torch.nn.attention import SDPBackend, sdpa_kernel

out = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0),
       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
       "nvidia_smi": subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit",
                                     "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()}
path = sys.argv[1] if len(sys.argv) > 1 else "attention_headdim.json"
res = []
out["results"] = res
out["errors"] = {}


T0 = time.time()
for name, backend in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]:
    for d in [64, 96, 128, 192, 256]:
        for s in [1024, 2048, 4096, 8192]:
            h = 32 if d <= 192 else 16
            b = max(1, 16384 // s)
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            g = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
            fl = 4.0 * b * h * s * s * d / 2
            row = {"backend": name, "head_dim": d, "seq": s, "batch": b, "heads": h, "flops_fwd": fl}
            try:
                with sdpa_kernel([backend]):
                    row["fwd_s"], _ = timeit(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), iters=10)

                    def fb():
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        o.backward(g)
                    row["fwd_bwd_s"], _ = timeit(fb, iters=10)
                row["bwd_s"] = row["fwd_bwd_s"] - row["fwd_s"]
                row["fwd_tflops"] = fl / row["fwd_s"] / 1e12
                row["bwd_tflops"] = 2.5 * fl / row["bwd_s"] / 1e12
            except Exception as e:
                row["error"] = str(e).splitlines()[0][:200]
            res.append(row)
            print(json.dumps({k: (round(x, 1) if isinstance(x, float) and k.endswith("tflops") else x) for k, x in row.items() if k in ("backend", "head_dim", "seq", "fwd_tflops", "bwd_tflops", "error")}), flush=True)
            del q, k, v, g
        if time.time() - T0 > 150:
            out["errors"]["time"] = "stopped at the time guard"
            break
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
out["elapsed_s"] = time.time() - T0
with open(path, "w") as f:
    json.dump(out, f, indent=1)
