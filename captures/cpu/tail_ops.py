"""Six identical training steps of a small MLP on the CPU, then two tensor ops after the loop.

Model: Linear(64, 64) -> ReLU -> Linear(64, 8), fp32, SGD(lr=0.01); input (32, 64), target (32, 8), MSE loss.
One step = one forward call of the root module (tracekit capture's default rule: the step runs to the next
forward call, so backward and the optimizer step land in it). After the loop: ``w * 2`` and ``.sum()`` on
the first layer's weight (aten::mul, aten::sum), which the last step's range also covers (issue 24.3).
Captured with: tracekit capture captures/cpu/tail_ops.py -o captures/cpu/tail_ops --force
"""
import torch
import torch.nn as nn


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 8)
    for _ in range(6):
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    doubled = model[0].weight.detach() * 2          # after the loop: two tensor ops
    total = doubled.sum()
    print(f"tail_ops: loss {loss.item():.6f} total {total.item():.6f}", flush=True)


if __name__ == "__main__":
    main()
