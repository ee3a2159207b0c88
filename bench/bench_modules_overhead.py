"""What recording nn.Module events costs (tracekit capture's default, --no-modules turns it off).

Thread CPU time per training step (one intra-op thread) of the 4-block GPT of captures/cpu/gpt4_train, in
three configurations: no profiler; tracekit capture's profiler without modules (record_shapes); with
modules (record_shapes + with_modules + with_stack: the Python tracer writes the nn.Module events only
with both). Blocks of 10 steps, configurations interleaved, 6 rounds; medians. Also the time to stop the
profiler and export the 10 steps' trace, and its size. docs/capture.md quotes the results.

    python bench/bench_modules_overhead.py
"""
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
SOURCE = Path(__file__).resolve().parent.parent / "captures" / "cpu" / "gpt4_train" / "gpt4_train.py"
model_code = SOURCE.read_text().split("\nfor _ in range(2):")[0]       # the model and step(), not its profiler
ns = {"__name__": "gpt4_train"}
exec(compile(model_code, str(SOURCE), "exec"), ns)
step = ns["step"]
for _ in range(5):
    step()
CONFIGS = {"none": None, "shapes": dict(record_shapes=True),
           "modules": dict(record_shapes=True, with_modules=True, with_stack=True)}
per_step = {k: [] for k in CONFIGS}
finish: dict = {}
size: dict = {}
out = Path(tempfile.mkdtemp())
for _ in range(6):
    for name, kw in CONFIGS.items():
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **kw) if kw else None
        if prof:
            prof.start()
        for _ in range(10):
            t = time.thread_time()
            step()
            per_step[name].append(time.thread_time() - t)
        if prof:
            t = time.perf_counter()
            prof.stop()
            prof.export_chrome_trace(str(out / f"{name}.json"))
            finish.setdefault(name, []).append(time.perf_counter() - t)
            size[name] = os.path.getsize(out / f"{name}.json")
print(f"torch {torch.__version__}, {os.cpu_count()} CPUs", file=sys.stderr)
for k, v in per_step.items():
    line = f"{k:8s} {statistics.median(v) * 1e3:6.2f} ms/step CPU (median of {len(v)}, min {min(v) * 1e3:.2f})"
    if k in finish:
        line += f"; stop+export 10 steps {statistics.median(finish[k]):.2f} s, trace {size[k] / 1e6:.1f} MB"
    print(line)
