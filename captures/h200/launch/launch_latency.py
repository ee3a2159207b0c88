"""How short a kernel can be on this GPU: profiler duration of a trivial kernel, back-to-back launch
rate from the CPU, and per-kernel time under CUDA-graph replay (run on the H200; output: JSON)."""
import json
import statistics
import time

import torch

x = torch.zeros(1, device="cuda")


def timed(fn, n):
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn(n)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / n          # µs per kernel


def eager(n):
    for _ in range(n):
        x.add_(1)


g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    eager(3)
torch.cuda.current_stream().wait_stream(s)
with torch.cuda.graph(g):
    eager(1000)


def replay(n):
    for _ in range(n // 1000):
        g.replay()


for _ in range(3):
    timed(eager, 1000), timed(replay, 10000)
eager_us = [timed(eager, 10000) for _ in range(5)]
graph_us = [timed(replay, 100000) for _ in range(5)]
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    eager(2000)
    torch.cuda.synchronize()
durs = sorted(e.device_time for e in prof.events() if e.device_time > 0)
print(json.dumps({
    "device": torch.cuda.get_device_name(), "torch": torch.__version__,
    "eager_back_to_back_us_per_kernel": [round(v, 3) for v in eager_us],
    "graph_replay_us_per_kernel": [round(v, 3) for v in graph_us],
    "profiler_kernel_duration_us": {"min": durs[0], "median": statistics.median(durs), "n": len(durs)},
    "date": time.strftime("%Y-%m-%d"),
}, indent=1))
