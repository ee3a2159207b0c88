"""No nn.Module: a plain function does the work; capture it with --step-fn step_fn:train_step."""
import torch


def train_step(x, w):
    return torch.relu(x @ w).sum()


x = torch.randn(16, 64)
w = torch.randn(64, 32)
for _ in range(4):
    train_step(x, w)
print("done")
