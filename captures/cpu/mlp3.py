"""3-layer MLP on the CPU, fp32, no biases: three Linear(256, 256, bias=False) weights of the same shape.

Input x: (64, 16, 16) fp32, flattened by one view (x.view(64, 256)); layer 1 -> relu_ (in place) ->
layer 2 -> relu (out of place) -> layer 3 -> output (64, 256). Forward under torch.no_grad().
One step = one forward call (the default root-module step rule).
"""
import argparse

import torch
import torch.nn as nn


class MLP3(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.l1 = nn.Linear(d, d, bias=False)
        self.l2 = nn.Linear(d, d, bias=False)
        self.l3 = nn.Linear(d, d, bias=False)

    def forward(self, x):
        h = x.view(x.shape[0], -1)       # the one view
        h = self.l1(h).relu_()           # the one in-place op
        h = torch.relu(self.l2(h))
        return self.l3(h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=4)
    a = p.parse_args()
    torch.manual_seed(0)
    model = MLP3()
    x = torch.randn(64, 16, 16)
    pb = sum(t.numel() * t.element_size() for t in model.parameters())
    print(f"mlp3: params {sum(t.numel() for t in model.parameters())} ({pb} bytes fp32, 3 x 256x256); "
          f"input {x.numel() * x.element_size()} bytes (64x16x16 fp32); output {64 * 256 * 4} bytes (64x256 fp32)", flush=True)
    with torch.no_grad():
        for _ in range(a.iters):
            out = model(x)
    print(f"mlp3: out {tuple(out.shape)} sum {out.sum().item():.6f}", flush=True)


if __name__ == "__main__":
    main()
