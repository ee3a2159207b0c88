"""Calls steplib.Worker.work three times (no nn.Module)."""
import torch
from steplib import Worker

w = Worker()
for _ in range(3):
    w.work(torch.randn(4, 32))
