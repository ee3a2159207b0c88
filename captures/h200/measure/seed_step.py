"""Seed example Y = relu(F.linear(X, W, b)), bf16, as a script whose step tracekit measure can find.

python3 seed_step.py [--batch B] [--compile MODE] [--iters N] [--device cuda|cpu]
tracekit measure seed_step.py --step-fn seed_step:step -- --batch 128
X [B, 1024], W [1024, 1024], b [1024]; one step = one call of step(fn, X, W, b).
"""
import argparse

import torch
import torch.nn.functional as F


def seed_fn(X, W, b):
    return torch.relu(F.linear(X, W, b))


def step(fn, X, W, b):
    return fn(X, W, b)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--compile", default=None, help="torch.compile mode (default mode: 'default')")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    torch.manual_seed(1234 + a.batch)
    dt = torch.bfloat16
    X = torch.randn(a.batch, 1024, device=a.device, dtype=dt)
    W = torch.randn(1024, 1024, device=a.device, dtype=dt) / 32.0
    b = torch.randn(1024, device=a.device, dtype=dt)
    fn = seed_fn if a.compile is None else torch.compile(seed_fn, mode=None if a.compile == "default" else a.compile)
    for _ in range(a.iters):
        Y = step(fn, X, W, b)
    ref = torch.relu(F.linear(X.float(), W.float(), b.float()))
    rel = ((Y.float() - ref).norm() / ref.norm()).item()
    print(f"seed_step: batch {a.batch} compile {a.compile} out {tuple(Y.shape)} {Y.dtype} rel_err_vs_fp32 {rel:.3e}")


if __name__ == "__main__":
    main()
