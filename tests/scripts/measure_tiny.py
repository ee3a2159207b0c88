"""Tiny fp32 CPU model for `tracekit measure` tests: Linear(64,64) -> relu -> Linear(64,64), batch 8, one
thread. The step (`step`) advances a position tensor in place (like a decode step's KV position) and
returns model(x).sum(-1) + pos: six top-level ops per call (add_, linear, relu, linear, sum, add).
Prints pos after the loop (each call adds 1) and exits with --exit. With --count-hooks, the model counts the
global nn.Module hooks installed at each of its calls and prints them (first call, and the set of later ones)."""
import argparse
import sys

import torch
import torch.nn as nn
from torch.nn.modules import module as nn_module

torch.set_num_threads(1)
HOOKS_SEEN: list[int] | None = None


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 64)
        self.b = nn.Linear(64, 64)

    def forward(self, x):
        if HOOKS_SEEN is not None:
            HOOKS_SEEN.append(len(nn_module._global_forward_pre_hooks) + len(nn_module._global_forward_hooks))
        return self.b(torch.relu(self.a(x)))


def step(model, x, pos):
    pos.add_(1)
    return model(x).sum(-1) + pos


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--module", action="store_true", help="call the model alone (root-module step rule)")
    p.add_argument("--count-hooks", action="store_true", help="print the global module hooks each call saw")
    a = p.parse_args()
    global HOOKS_SEEN
    HOOKS_SEEN = [] if a.count_hooks else None
    torch.manual_seed(0)
    model = Tiny()
    x = torch.randn(8, 64)
    pos = torch.zeros(1, dtype=torch.long)
    with torch.no_grad():
        for _ in range(a.iters):
            y = model(x) if a.module else step(model, x, pos)
    print(f"pos={int(pos)} y={tuple(y.shape)}")
    if HOOKS_SEEN is not None:
        print(f"global hooks: first call {HOOKS_SEEN[0]}, later calls {sorted(set(HOOKS_SEEN[1:]))}")
    sys.exit(a.exit)


if __name__ == "__main__":
    main()
