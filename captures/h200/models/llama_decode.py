"""Llama-style decoder, batch 1, one decode step = one token (capture with --step-fn llama_decode:decode_step).

bf16 weights, RMSNorm, RoPE (rotate-half), SwiGLU MLP, untied LM head, no biases, optional GQA
(--kv-heads; default = --heads, i.e. MHA). Static KV cache of --max-len slots per layer, the first
--prefill slots filled with random values (no prefill pass is run); each decode step writes one slot
(index_copy_) and attends over ALL --max-len slots with a boolean mask (gpt-fast style), so every step
reads the whole cache. Greedy next token (argmax) outside the model.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, d, h, hkv, max_len, batch, dtype):
        super().__init__()
        self.h, self.hkv, self.hd = h, hkv, d // h
        self.wq = nn.Linear(d, h * self.hd, bias=False)
        self.wk = nn.Linear(d, hkv * self.hd, bias=False)
        self.wv = nn.Linear(d, hkv * self.hd, bias=False)
        self.wo = nn.Linear(h * self.hd, d, bias=False)
        self.register_buffer("k_cache", torch.zeros(batch, hkv, max_len, self.hd, dtype=dtype), persistent=False)
        self.register_buffer("v_cache", torch.zeros(batch, hkv, max_len, self.hd, dtype=dtype), persistent=False)

    def forward(self, x, pos, cos, sin, mask):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.wk(x).view(B, T, self.hkv, self.hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.hkv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask,
                                           enable_gqa=self.hkv != self.h)
        return self.wo(y.transpose(1, 2).reshape(B, T, self.h * self.hd))


class FeedForward(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w3 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Layer(nn.Module):
    def __init__(self, d, h, hkv, hidden, max_len, batch, dtype):
        super().__init__()
        self.attention_norm = RMSNorm(d)
        self.attention = Attention(d, h, hkv, max_len, batch, dtype)
        self.ffn_norm = RMSNorm(d)
        self.feed_forward = FeedForward(d, hidden)

    def forward(self, x, pos, cos, sin, mask):
        x = x + self.attention(self.attention_norm(x), pos, cos, sin, mask)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, vocab, d, layers, h, hkv, hidden, max_len, batch, dtype, theta=10000.0):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, h, hkv, hidden, max_len, batch, dtype) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.output = nn.Linear(d, vocab, bias=False)
        hd = d // h
        inv = 1.0 / theta ** (torch.arange(0, hd, 2).float() / hd)
        f = torch.outer(torch.arange(max_len).float(), inv)
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", emb.cos().to(dtype), persistent=False)
        self.register_buffer("sin", emb.sin().to(dtype), persistent=False)
        self.register_buffer("causal_mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)),
                             persistent=False)

    def forward(self, idx, pos):
        mask = self.causal_mask[None, None, pos]          # (1, 1, T, max_len)
        cos = self.cos[pos][None, None]                  # (1, 1, T, hd)
        sin = self.sin[pos][None, None]
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, pos, cos, sin, mask)
        return self.output(self.norm(x))


def decode_step(model, tok, pos, compiled, nvtx=False):
    if compiled:
        torch.compiler.cudagraph_mark_step_begin()
    if nvtx:
        torch.cuda.nvtx.range_push("decode_ncu")
    logits = model(tok, pos)
    nxt = logits[:, -1].argmax(-1, keepdim=True)
    if nvtx:
        torch.cuda.nvtx.range_pop()
    pos.add_(1)
    return nxt


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=None)
    p.add_argument("--hidden", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--max-len", type=int, default=512)
    p.add_argument("--prefill", type=int, default=448)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--compile", default=None, help="torch.compile mode, e.g. reduce-overhead")
    p.add_argument("--nvtx-step", type=int, default=-1, help="push NVTX range 'decode_ncu' around this step")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    hkv = a.kv_heads or a.heads
    dt = torch.bfloat16
    dev = torch.device(a.device)
    torch.manual_seed(0)
    with torch.device(dev):
        model = Llama(a.vocab, a.d, a.layers, a.heads, hkv, a.hidden, a.max_len, a.batch, dt).to(dt)
    model.eval().requires_grad_(False)
    g = torch.Generator(device=dev).manual_seed(1)
    for layer in model.layers:
        for c in (layer.attention.k_cache, layer.attention.v_cache):
            c[:, :, :a.prefill].normal_(generator=g)
    n = sum(p.numel() for p in model.parameters())
    wbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    emb = model.tok_embeddings.weight
    emb_bytes = emb.numel() * emb.element_size()
    row_bytes = emb.shape[1] * emb.element_size() * a.batch
    kv_bytes = sum(b.numel() * b.element_size() for n_, b in model.named_buffers() if n_.endswith("_cache"))
    kv_written = 2 * a.layers * a.batch * hkv * (a.d // a.heads) * 2
    print(f"llama_decode: layers {a.layers} d {a.d} heads {a.heads} kv_heads {hkv} hidden {a.hidden} vocab {a.vocab} "
          f"max_len {a.max_len} prefill {a.prefill} batch {a.batch} compile {a.compile}", flush=True)
    print(f"llama_decode: params {n}; weight bytes {wbytes} (bf16; embedding table {emb_bytes}); "
          f"weight bytes read per step {wbytes - emb_bytes + row_bytes} (all but the embedding table, plus {row_bytes} "
          f"for one embedding row); KV cache bytes read per step {kv_bytes} (all {a.max_len} slots x {a.layers} layers, K and V); "
          f"KV bytes written per step {kv_written}", flush=True)
    run = torch.compile(model, mode=a.compile) if a.compile else model
    tok = torch.randint(0, a.vocab, (a.batch, 1), device=dev, generator=g)
    pos = torch.tensor([a.prefill], device=dev, dtype=torch.long)
    toks = []
    times = []
    with torch.inference_mode():
        for i in range(a.iters):
            t0 = time.perf_counter()
            tok = decode_step(run, tok, pos, bool(a.compile), nvtx=(i == a.nvtx_step))
            if dev.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            toks.append(tok.clone())
    print("llama_decode: step wall ms " + " ".join(f"{t * 1e3:.2f}" for t in times), flush=True)
    print("llama_decode: tokens " + " ".join(str(t.flatten().tolist()) for t in toks), flush=True)


if __name__ == "__main__":
    main()
