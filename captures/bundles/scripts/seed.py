"""Seed example: Y = relu(F.linear(X, W, b)), X [128,1024], W [1024,1024], b [1024], bf16.

python seed.py [--iters N] [--compile] [--mode max-autotune]   # each call of the Seed module is one tracekit step
Prints the steady-state time per call (after 10 untimed calls), synchronized.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Seed(nn.Module):
    def __init__(self):
        super().__init__()
        self.W = nn.Parameter(torch.randn(1024, 1024) / 32.0)
        self.b = nn.Parameter(torch.randn(1024))

    def forward(self, X):
        return torch.relu(F.linear(X, self.W, self.b))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--mode", default=None, help="torch.compile mode, e.g. max-autotune (implies --compile)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    dt = torch.bfloat16
    model = Seed().to(a.device, dt)
    X = torch.randn(128, 1024, device=a.device, dtype=dt)
    if a.compile or a.mode:
        model = torch.compile(model, mode=a.mode)
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    with torch.no_grad():
        t0 = None
        for i in range(a.iters):
            if i == min(10, a.iters - 1):
                sync()
                t0 = time.perf_counter()
            Y = model(X)
        sync()
        timed = a.iters - min(10, a.iters - 1)
        per_call = (time.perf_counter() - t0) / timed * 1e6
    print(f"seed: {a.iters} calls, steady state {per_call:.2f} us/call over {timed}, Y {tuple(Y.shape)}")


if __name__ == "__main__":
    main()
