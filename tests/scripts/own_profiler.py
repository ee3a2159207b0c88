"""A script that runs its own torch.profiler with a schedule and prof.step()."""
import torch
from torch.profiler import ProfilerActivity, profile, schedule

w = torch.randn(32, 32)
seen = []
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2),
             on_trace_ready=lambda p: seen.append(len(p.events()))) as prof:
    for _ in range(5):
        torch.mm(torch.randn(8, 32), w)
        prof.step()
print(f"own handler called {len(seen)} time(s)")
