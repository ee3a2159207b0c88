"""Tiny fp32 CPU model for `tracekit measure` tests: Linear(64,64) -> relu -> Linear(64,64), batch 8, one
thread. The step (`step`) advances a position tensor in place (like a decode step's KV position) and
returns model(x).sum(-1) + pos: six top-level ops per call (add_, linear, relu, linear, sum, add).
Prints pos after the loop (each call adds 1) and exits with --exit."""
import argparse
import sys

import torch
import torch.nn as nn

torch.set_num_threads(1)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 64)
        self.b = nn.Linear(64, 64)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def step(model, x, pos):
    pos.add_(1)
    return model(x).sum(-1) + pos


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--module", action="store_true", help="call the model alone (root-module step rule)")
    a = p.parse_args()
    torch.manual_seed(0)
    model = Tiny()
    x = torch.randn(8, 64)
    pos = torch.zeros(1, dtype=torch.long)
    with torch.no_grad():
        for _ in range(a.iters):
            y = model(x) if a.module else step(model, x, pos)
    print(f"pos={int(pos)} y={tuple(y.shape)}")
    sys.exit(a.exit)


if __name__ == "__main__":
    main()
