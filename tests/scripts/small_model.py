"""Conv + linear + softmax on CPU, called --iters times; exits with --exit, or raises with --raise."""
import argparse
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 32)

    def forward(self, x):
        y = F.relu(self.conv(x))
        return torch.softmax(self.fc(y.flatten(1)), dim=-1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--exit", type=int, default=None)
    p.add_argument("--raise", dest="raise_", action="store_true")
    p.add_argument("--time", action="store_true", help="print the mean time per call after the first 10")
    a = p.parse_args()
    torch.manual_seed(0)
    model = Net().eval()
    x = torch.randn(a.batch, 3, 8, 8)
    with torch.no_grad():
        for i in range(a.iters):
            if i == 10:
                t0 = time.perf_counter()
            out = model(x)
    if a.time and a.iters > 10:
        print(f"time: {(time.perf_counter() - t0) / (a.iters - 10) * 1e6:.1f} us/call")
    print(f"argv={sys.argv[1:]} out={tuple(out.shape)} name={__name__}")
    if a.raise_:
        raise ValueError("deliberate failure after the model ran")
    if a.exit is not None:
        sys.exit(a.exit)


if __name__ == "__main__":
    main()
