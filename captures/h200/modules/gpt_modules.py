"""Module-tree captures recorded by the USER's own torch.profiler (not by tracekit capture).

--model gpt: a 4-block GPT training step (d 768, 12 heads, seq 1024, batch 8, vocab 32768): fp32 master
  weights, bf16 autocast, pre-norm blocks with module names blocks.N.attn (qkv, proj; causal SDPA) and
  blocks.N.mlp (fc, GELU tanh, fc2), learned positional embedding, untied head, no Linear biases,
  cross-entropy, backward, fused AdamW, zero_grad(set_to_none=True).
--model llama: an eager Llama-style decode step, batch 1 (the model of ../serving/serve_decode.py, its
  default config: 8 layers, d 2048, GQA 16/4 heads, SwiGLU 5632, vocab 32000, KV cache max_len 1024,
  the sequence at position 1023 reading all 1024 slots), no CUDA graphs; argmax after the model.

Both recorded the same way: torch.profiler.profile(activities=[CPU, CUDA], record_shapes=True,
with_modules=True, with_stack=<--with-stack/--no-stack>, schedule(wait=1, warmup=1, active=3),
execution_trace_observer=ExecutionTraceObserver), prof.step() after each step: 5 steps run, the last
three recorded. Writes OUT/trace.json.gz (Kineto) and OUT/et.json.gz (execution trace).
"""
import argparse
import gzip
import os
import shutil
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ExecutionTraceObserver, ProfilerActivity


class Attn(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, 4 * d, bias=False)
        self.fc2 = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attn(d, h)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, seq, d, h, layers):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def gpt_setup(a, dev):
    torch.manual_seed(0)
    model = GPT(a.vocab, a.seq, a.d, a.heads, a.layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev, generator=g)
    y = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev, generator=g)
    n = sum(p.numel() for p in model.parameters())
    print(f"gpt_modules: GPT params {n} ({n * 4} B fp32); per block "
          f"{sum(p.numel() for p in model.blocks[0].parameters())}; layers {a.layers} d {a.d} heads {a.heads} "
          f"seq {a.seq} batch {a.batch} vocab {a.vocab}", flush=True)

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def llama_setup(a, dev):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serving"))
    import serve_decode as sd
    sa = sd_args(a)
    model = sd.build_model(sa, dev)
    engine = sd.Engine(model, sa, dev)
    print(f"gpt_modules: Llama decode, bs 1, eager; " + str(sd.sizes(model, sa)["per_batch_size"]["1"]), flush=True)

    def step():
        with torch.inference_mode():
            logits = engine.forward_decode(1)
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            engine.next_tokens[:1].copy_(nxt)
            engine.input_ids[:1].copy_(nxt)
        return nxt
    return step


def sd_args(a):
    """serve_decode's config (its defaults, or tiny ones on the CPU check)."""
    ns = argparse.Namespace(layers=8, d=2048, heads=16, kv_heads=4, hidden=5632, vocab=32000, max_len=1024,
                            max_batch=8)
    if a.tiny:
        ns = argparse.Namespace(layers=2, d=256, heads=4, kv_heads=2, hidden=512, vocab=1000, max_len=64,
                                max_batch=8)
    return ns


def gzip_file(raw, path):
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    print(f"gpt_modules: wrote {path} ({os.path.getsize(path)} B)", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=("gpt", "llama"), default="gpt")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--tiny", action="store_true", help="llama: serve_decode's tiny CPU-check config")
    p.add_argument("--with-stack", dest="with_stack", action="store_true", default=True)
    p.add_argument("--no-stack", dest="with_stack", action="store_false")
    p.add_argument("--out", default="gpt_modules_out")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    dev = torch.device(a.device)
    os.makedirs(a.out, exist_ok=True)
    step = gpt_setup(a, dev) if a.model == "gpt" else llama_setup(a, dev)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    trace_raw, et_raw = os.path.join(a.out, "trace.json"), os.path.join(a.out, "et.json")
    et = ExecutionTraceObserver().register_callback(et_raw)
    print(f"gpt_modules: profiling {a.model} with_modules=True with_stack={a.with_stack}", flush=True)
    times = []
    with torch.profiler.profile(activities=acts, record_shapes=True, with_modules=True, with_stack=a.with_stack,
                                schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
                                on_trace_ready=lambda prof: prof.export_chrome_trace(trace_raw),
                                execution_trace_observer=et) as prof:
        for _ in range(5):
            t0 = time.perf_counter()
            step()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            prof.step()
    et.unregister_callback()
    print("gpt_modules: step wall ms " + " ".join(f"{t * 1e3:.1f}" for t in times), flush=True)
    gzip_file(trace_raw, trace_raw + ".gz")
    if os.path.exists(et_raw):
        gzip_file(et_raw, et_raw + ".gz")


if __name__ == "__main__":
    main()
