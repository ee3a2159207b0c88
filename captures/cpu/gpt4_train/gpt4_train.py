"""A 4-block GPT training step on the CPU, recorded by the user's own torch.profiler (not tracekit
capture): record_shapes=True, with_modules=True, with_stack=True (issue 23's module tree).

Model: vocabulary 512, width 64, 4 heads, 4 blocks (LayerNorm → Attn(qkv Linear 64→192, SDPA causal,
proj Linear 64→64) → LayerNorm → MLP(fc Linear 64→256, GELU, out Linear 256→64)), final LayerNorm, head
Linear 64→512: 17 Linear layers with biases, 53 parameter tensors. Batch 2 × 32 tokens, fp32. One step:
forward (the loss under record_function("loss_fn")), backward, AdamW step, zero_grad. Two warm-up steps
outside the profiler, one profiler warm-up step, one active step: ProfilerStep#1.

    python gpt4_train.py trace.json && gzip -9 trace.json
    python gpt4_train.py trace_block2_extra.json 2 && gzip -9 trace_block2_extra.json

The second form is the same step with one extra op in block 2's forward (x * 1.0 after the MLP residual):
a real "block that gains a kernel" regression for module rules and diff --by module.
"""
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)


class Attn(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.qkv, self.proj = h, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, D))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc, self.act, self.out = nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.out(self.act(self.fc(x)))


EXTRA_IN_BLOCK = int(sys.argv[2]) if len(sys.argv) > 2 else -1


class Block(nn.Module):
    def __init__(self, d, h, extra=False):
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = nn.LayerNorm(d), Attn(d, h), nn.LayerNorm(d), MLP(d)
        self.extra = extra

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x * 1.0 if self.extra else x


class GPT(nn.Module):
    def __init__(self, V=512, d=64, h=4, n=4):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.blocks = nn.ModuleList([Block(d, h, extra=i == EXTRA_IN_BLOCK) for i in range(n)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, V)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


model = GPT()
opt = torch.optim.AdamW(model.parameters())
idx = torch.randint(0, 512, (2, 32))


def step():
    with torch.profiler.record_function("loss_fn"):
        loss = model(idx).float().logsumexp(-1).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()


for _ in range(2):
    step()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True, with_modules=True,
                            with_stack=True, schedule=torch.profiler.schedule(wait=0, warmup=1, active=1),
                            on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as prof:
    for _ in range(2):
        step()
        prof.step()
