"""GPT-2-like training step under torch.compile(mode="max-autotune-no-cudagraphs") (Inductor GEMM
templates, slice/gather kernels): random init, bf16 autocast, fused AdamW, cross-entropy on random
tokens. One step = one call of train_step (capture with --step-fn gpt2_train:train_step).

GPT-2 small's block (d 768, 12 heads, GELU(tanh) MLP 4x, pre-norm LayerNorm, Linear biases, 1,024
learned positions, tied embedding/head) with 2 layers and a 16,384 vocabulary, trained on 16 x 256
tokens: the positional embedding reads the first 256 of its 1,024 rows (a slice), the token embedding
gathers rows of its table. max-autotune compiles it in under three minutes. --mode max-autotune also turns on CUDA graphs: its kernels are then replays with no
ops of their own, which is why the bundle uses the no-cudagraphs variant (the same kernels).
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab, positions, d, h, layers):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(positions, d)
        self.h = nn.ModuleList(Block(d, h) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight          # tied, as in GPT-2

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def train_step(model, opt, x, y):
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--positions", type=int, default=1024)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--vocab", type=int, default=16384)
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--mode", default="max-autotune-no-cudagraphs")
    p.add_argument("--nvtx-step", type=int, default=-1, help="NVTX start/end range 'step_ncu' around this call (ncu)")
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = GPT2(a.vocab, a.positions, a.d, a.heads, a.layers).to(dev)
    n = sum(q.numel() for q in model.parameters())
    print(f"gpt2_train: params {n}, layers {a.layers} d {a.d} heads {a.heads} seq {a.seq} batch {a.batch} "
          f"positions {a.positions} vocab {a.vocab} mode {a.mode}", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    run = torch.compile(model, mode=a.mode)
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g).to(dev)
    y = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g).to(dev)
    t0 = time.perf_counter()
    for i in range(a.iters):
        handle = torch.cuda.nvtx.range_start("step_ncu") if i == a.nvtx_step else None
        loss = train_step(run, opt, x, y)
        if handle is not None:
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_end(handle)
        if i == 0:
            torch.cuda.synchronize()
            print(f"gpt2_train: first call (compile) {time.perf_counter() - t0:.1f} s", flush=True)
    torch.cuda.synchronize()
    print(f"gpt2_train: {a.iters} calls {time.perf_counter() - t0:.1f} s, loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
