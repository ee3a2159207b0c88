"""Tiny fp32 CPU training step for `tracekit measure` tests: Linear(64,64) -> relu -> Linear(64,64), batch 8,
one thread; MSE loss, backward, AdamW (fused=True, or --foreach) and zero_grad. One step = one call of
`train_step`. Prints the loss of the first and last of --iters steps."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)


def train_step(model, opt, x, y):
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--foreach", action="store_true", help="foreach AdamW instead of fused")
    a = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **({"foreach": True} if a.foreach else {"fused": True}))
    x, y = torch.randn(8, 64), torch.randn(8, 64)
    losses = [float(train_step(model, opt, x, y)) for _ in range(a.iters)]
    print(f"loss first {losses[0]:.4f} last {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
