"""A library module whose method does the work (for --step-fn steplib:Worker.work)."""
import torch


class Worker:
    def __init__(self):
        self.w = torch.randn(32, 16)

    def work(self, x):
        return torch.tanh(x @ self.w)
