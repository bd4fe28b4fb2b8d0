# Whole training steps of GPT models in plain PyTorch eager mode on one GPU: nn.Module layers
# (LayerNorm, fused QKV linear, SDPA causal attention, output linear, dropout + residual,
# LayerNorm, MLP up, GeLU, MLP down, dropout + residual), learned positions, untied LM head,
# cross-entropy, AdamW (foreach) on bf16 parameters; the global batch split into micro-batches
# (gradient accumulation). Wall time per step after warm-up steps, synchronised.
# Usage: python3 torch_gpt_steps.py [OUTPUT.json]
import json, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

dev, dt = "cuda", torch.bfloat16


class Layer(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.up, self.down = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def forward(self, x):
        b, s, h = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        x = x + F.dropout(self.proj(a.transpose(1, 2).reshape(b, s, h)), 0.1, self.training)
        return x + F.dropout(self.down(F.gelu(self.up(self.ln2(x)))), 0.1, self.training)


class Gpt(nn.Module):
    def __init__(self, layers, h, heads, seq, vocab):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, h), nn.Embedding(seq, h)
        self.layers = nn.ModuleList([Layer(h, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(h)
        self.head = nn.Linear(h, vocab, bias=False)

    def forward(self, ids, labels):
        x = self.tok(ids) + self.pos.weight[: ids.shape[1]]
        for l in self.layers:
            x = l(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1))


def run(layers, h, heads, seq, vocab, gbs, mbs, steps=6, warm=2):
    torch.manual_seed(0)
    model = Gpt(layers, h, heads, seq, vocab).to(dev, dt)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    ids = torch.randint(0, vocab, (gbs, seq), device=dev)
    times = []
    for i in range(warm + steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for k in range(0, gbs, mbs):
            model(ids[k:k + mbs], ids[k:k + mbs]).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= warm:
            times.append(time.perf_counter() - t0)
    times.sort()
    r = {"layers": layers, "hidden": h, "heads": heads, "seq": seq, "vocab": vocab, "global_batch": gbs,
         "micro_batch": mbs, "step_s_median": times[len(times) // 2], "step_s_min": times[0]}
    del model, opt
    torch.cuda.empty_cache()
    return r


out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": []}
for (L, h, heads, seq) in [(12, 1024, 16, 1024), (12, 2048, 16, 2048), (8, 4096, 32, 2048)]:
    for mbs in (1, 2, 4, 8):
        try:
            out["runs"].append(run(L, h, heads, seq, 50304, 8, mbs))
        except Exception as e:
            out["runs"].append({"layers": L, "hidden": h, "micro_batch": mbs, "error": repr(e)})
        print(json.dumps(out["runs"][-1]), flush=True)
json.dump(out, open(sys.argv[1] if len(sys.argv) > 1 else "torch_gpt_steps.json", "w"), indent=1)
