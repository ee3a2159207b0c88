"""A small DDP training job on CPU with the gloo backend: one process per rank, started by a
torchrun-style launcher (`tracekit capture --nproc 2`, or `torchrun --nproc-per-node 2`), which sets
RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (init_method env://, localhost only).

    tracekit capture --nproc 2 ddp_train.py -o bundle -- --steps 4
    ddp_train.py --fail-rank 1     # that rank exits 3 after its first step (tests the launcher)
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--fail-rank", type=int, default=None, help="this rank exits 3 after its first step")
    args = ap.parse_args()
    dist.init_process_group("gloo")                      # env:// from the launcher
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(Net())                                    # same init on every rank (broadcast from 0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1 + rank)         # each rank its own data
    for step in range(args.steps):
        x, y = torch.randn(args.batch, 64, generator=gen), torch.randint(0, 10, (args.batch,), generator=gen)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()                                   # DDP all-reduces the gradients (one bucket)
        opt.step()
        if args.fail_rank == rank:
            print(f"rank {rank}: failing on purpose after step {step}", flush=True)
            sys.exit(3)
    total = torch.tensor([loss.item()])
    dist.all_reduce(total)                                # one explicit all-reduce at the end
    if rank == 0:
        print(f"world {world}: mean final loss {total.item() / world:.4f}", flush=True)
    dist.barrier()                                        # no rank leaves while another still talks
    # no dist.destroy_process_group(): under the profiler, torch 2.13's gloo group deadlocks in it about
    # one run in seven (the main thread joins gloo's work thread holding the GIL; that thread needs the
    # GIL to free a finished work's thread-local state); the process exit frees the group instead
    return 0


if __name__ == "__main__":
    sys.exit(main())
