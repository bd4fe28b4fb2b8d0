# Host (CPU) cost of issuing a transformer layer's work from PyTorch eager mode: the time the
# issuing thread spends per op, measured where the GPU is not the bottleneck (tiny tensors, so each
# kernel is shorter than its launch). These are the costs the simulator's host model
# (core/host_model.hpp) charges per op of the step program.
#
#   per-op:  time to issue N calls of one op, no synchronisation inside, divided by N (host time;
#            the GPU is idle most of it). Forward ops with autograd recording on, as in training.
#   backward: host time of loss.backward() over a chain of the same op, per op.
#   layer:   a Megatron-style GPT layer (LayerNorm, fused QKV linear, SDPA causal attention, output
#            linear, dropout + residual, LayerNorm, MLP up, GELU, MLP down, dropout + residual) as
#            nn.Modules, stacked, at a size where the host bounds the step (hidden 1024, sequence
#            1024, micro-batch 1, bf16), and at a size where the GPU does (hidden 4096, sequence
#            2048): host issue time and GPU time per layer for forward, backward, and forward +
#            backward under full activation recompute (torch.utils.checkpoint).
#   collective: torch.distributed.all_reduce launch on a 1-rank NCCL group (host cost only).
#
# Usage: python3 torch_host_overhead.py [OUTPUT.json]
import json, os, sys, time, subprocess
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as ckpt

from cuda_timing import wall_per_call

out = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0),
       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
try:
    out["cpu"] = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
except Exception:
    pass
dev = "cuda"
dt = torch.bfloat16


def host_per_call(fn, n=2000, warm=200):
    wall, issued = wall_per_call(fn, n, warm=warm)
    return issued * 1e6, wall * 1e6  # host issue µs/call, wall µs/call


ops = {}
x = torch.randn(8, 64, device=dev, dtype=dt, requires_grad=True)
lin = nn.Linear(64, 64, device=dev, dtype=dt)
ln = nn.LayerNorm(64, device=dev, dtype=dt)
q = torch.randn(1, 2, 16, 32, device=dev, dtype=dt, requires_grad=True)
r = torch.randn(8, 64, device=dev, dtype=dt)
ops["linear_fwd"] = host_per_call(lambda: lin(x))
ops["layernorm_fwd"] = host_per_call(lambda: ln(x))
ops["gelu_fwd"] = host_per_call(lambda: F.gelu(x))
ops["dropout_add_fwd"] = host_per_call(lambda: F.dropout(x, 0.1, True) + r)
ops["sdpa_causal_fwd"] = host_per_call(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True))
ops["empty_kernel_add"] = host_per_call(lambda: torch.add(r, r))


def backward_per_op(make, depth=50, n=40):
    def step():
        y = x
        for _ in range(depth):
            y = make(y)
        y.float().sum().backward()
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    # forward issue alone, then forward + backward: the difference is the backward's host time
    t0 = time.perf_counter()
    for _ in range(n):
        y = x
        for _ in range(depth):
            y = make(y)
        y.float().sum()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    for _ in range(n):
        step()
    t3 = time.perf_counter()
    torch.cuda.synchronize()
    fwd = (t1 - t0) / n / depth * 1e6
    both = (t3 - t2) / n / depth * 1e6
    return {"forward_us": fwd, "backward_us": both - fwd}


ops["linear_chain"] = backward_per_op(lambda y: lin(y))
ops["layernorm_chain"] = backward_per_op(lambda y: ln(y))
ops["gelu_chain"] = backward_per_op(lambda y: F.gelu(y))
out["per_op_us"] = {k: ({"host_us": v[0], "wall_us": v[1]} if isinstance(v, tuple) else v) for k, v in ops.items()}

try:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    import torch.distributed as dist
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    buf = torch.randn(1 << 20, device=dev, dtype=dt)
    out["per_op_us"]["nccl_all_reduce_1rank"] = dict(zip(("host_us", "wall_us"), host_per_call(lambda: dist.all_reduce(buf), n=500, warm=50)))
    dist.destroy_process_group()
except Exception as e:  # the NCCL measurement is optional
    out["nccl_error"] = repr(e)


class Layer(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.up = nn.Linear(h, 4 * h)
        self.down = nn.Linear(4 * h, h)

    def forward(self, x):  # x: [b, s, h]
        b, s, h = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        a = a.transpose(1, 2).reshape(b, s, h)
        x = x + F.dropout(self.proj(a), 0.1, self.training)
        return x + F.dropout(self.down(F.gelu(self.up(self.ln2(x)))), 0.1, self.training)


def layer_bench(h, heads, s, b, layers, recompute, iters=10):
    model = nn.ModuleList([Layer(h, heads) for _ in range(layers)]).to(dev, dt)
    x0 = torch.randn(b, s, h, device=dev, dtype=dt, requires_grad=True)

    def fwd():
        y = x0
        for l in model:
            y = ckpt.checkpoint(l, y, use_reentrant=False) if recompute else l(y)
        return y

    for _ in range(3):
        fwd().float().sum().backward()
    torch.cuda.synchronize()
    res = {"hidden": h, "heads": heads, "seq": s, "micro_batch": b, "layers": layers, "recompute": recompute}
    hf = hb = 0.0
    for _ in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = fwd().float().sum()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        y.backward()
        t3 = time.perf_counter()
        torch.cuda.synchronize()
        hf += t1 - t0
        hb += t3 - t2
    n = iters * layers
    # Host issue time per layer (backward: until backward() returns, which for the autograd
    # engine includes waiting for nothing on the GPU only when the host bounds the step).
    res.update({"host_forward_us_per_layer": hf / n * 1e6, "host_backward_us_per_layer": hb / n * 1e6})
    # GPU time of the whole step per layer, with the host far ahead: time it synchronised once
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fwd().float().sum().backward()
    torch.cuda.synchronize()
    res["wall_step_us_per_layer"] = (time.perf_counter() - t0) / n * 1e6
    return res


out["layers"] = []
for cfg in [(1024, 16, 1024, 1, 12, False), (1024, 16, 1024, 1, 12, True), (2048, 16, 1024, 1, 12, True),
            (4096, 32, 2048, 1, 4, False)]:
    try:
        out["layers"].append(layer_bench(*cfg))
    except Exception as e:
        out["layers"].append({"config": list(cfg), "error": repr(e)})
    print(json.dumps(out["layers"][-1]), flush=True)
print(json.dumps(out["per_op_us"], indent=1))
json.dump(out, open(sys.argv[1] if len(sys.argv) > 1 else "torch_host_overhead.json", "w"), indent=1)
