"""A Mixtral-style mixture-of-experts decoder, training step, in plain PyTorch: RMSNorm, rotary
attention (F.scaled_dot_product_attention, causal), a router (softmax, top-2 of 8 experts,
renormalised), tokens gathered per expert (index_select), SwiGLU experts, results scattered back
(index_add_). bf16 weights, fused AdamW. One step = one call of train_step
(capture with --step-fn moe_train:train_step)."""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from _common import nvtx_range  # the script's folder is on sys.path


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def rotary(x, cos, sin):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class Experts(nn.Module):
    def __init__(self, d, hidden, n, k):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, n, bias=False)
        self.w1 = nn.ModuleList(nn.Linear(d, hidden, bias=False) for _ in range(n))
        self.w3 = nn.ModuleList(nn.Linear(d, hidden, bias=False) for _ in range(n))
        self.w2 = nn.ModuleList(nn.Linear(hidden, d, bias=False) for _ in range(n))

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        probs = F.softmax(self.router(x), dim=-1, dtype=torch.float32)
        weights, chosen = torch.topk(probs, self.k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(x)
        for e in range(len(self.w1)):
            rows, slot = torch.where(chosen == e)
            xe = x.index_select(0, rows)
            ye = self.w2[e](F.silu(self.w1[e](xe)) * self.w3[e](xe)) * weights[rows, slot, None]
            out.index_add_(0, rows, ye)
        return out.view(shape)


class Block(nn.Module):
    def __init__(self, d, h, hidden, n, k):
        super().__init__()
        self.h = h
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.moe = Experts(d, hidden, n, k)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = self.qkv(self.n1(x)).view(B, T, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(B, T, C))
        return x + self.moe(self.n2(x))


class MoE(nn.Module):
    def __init__(self, vocab, d, h, hidden, layers, n, k):
        super().__init__()
        self.h = h
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, h, hidden, n, k) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        T, hd = idx.shape[1], self.emb.embedding_dim // self.h
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=idx.device, dtype=torch.float32) / hd))
        ang = torch.outer(torch.arange(T, device=idx.device, dtype=torch.float32), inv)
        cos, sin = ang.cos().to(self.head.weight.dtype), ang.sin().to(self.head.weight.dtype)
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x, cos, sin)
        return self.head(self.norm(x))


def train_step(model, opt, x, y):
    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), y.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--hidden", type=int, default=2816)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top", type=int, default=2)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--nvtx-step", type=int, default=-1, help="NVTX start/end range 'step_ncu' around this call (ncu)")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    model = MoE(a.vocab, a.d, a.heads, a.hidden, a.layers, a.experts, a.top).to(dev, dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g).to(dev)
    y = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g).to(dev)
    print(f"moe_train: params {sum(q.numel() for q in model.parameters())}, layers {a.layers} d {a.d} "
          f"experts {a.experts} top {a.top} seq {a.seq} batch {a.batch}", flush=True)
    t0 = time.perf_counter()
    for i in range(a.iters):
        with nvtx_range(a.nvtx_step == i):
            loss = train_step(model, opt, x, y)
    print(f"moe_train: {a.iters} steps {time.perf_counter() - t0:.3f} s, loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
