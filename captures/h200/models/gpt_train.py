"""Small GPT training step (forward + cross-entropy + backward + fused AdamW + zero_grad).

fp32 master weights, bf16 autocast, F.scaled_dot_product_attention (causal), pre-norm blocks,
GELU(tanh) MLP, learned positional embedding, untied LM head, no biases in Linear layers.
One step = one call of train_step (capture with --step-fn gpt_train:train_step).
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
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d, bias=False)
        self.fc2 = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


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


def train_step(model, opt, x, y, device_type):
    with torch.autocast(device_type, dtype=torch.bfloat16):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    model = GPT(a.vocab, a.seq, a.d, a.heads, a.layers).to(dev)
    n = sum(p.numel() for p in model.parameters())
    print(f"gpt_train: params {n} ({n * 4} bytes fp32), layers {a.layers} d {a.d} heads {a.heads} "
          f"seq {a.seq} batch {a.batch} vocab {a.vocab} compile {a.compile}", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    run = torch.compile(model) if a.compile else model
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev, generator=g)
    y = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev, generator=g)
    losses = []
    t0 = time.perf_counter()
    for i in range(a.iters):
        losses.append(train_step(run, opt, x, y, dev.type))
        if i == 0:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t1 = time.perf_counter()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t2 = time.perf_counter()
    print(f"gpt_train: first step {t1 - t0:.3f} s; loop of {a.iters - 1} more steps {t2 - t1:.3f} s; "
          f"loss first {losses[0].item():.4f} last {losses[-1].item():.4f}", flush=True)


if __name__ == "__main__":
    main()
