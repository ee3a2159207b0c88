"""Where a step's host time goes, from the runtime/driver events of a Kineto trace (issue 13).

Per step (the ``ProfilerStep`` range, host time): how many kernel/graph launches its thread(s) made
(``cudaLaunchKernel``, ``cuLaunchKernelEx``, ``cudaGraphLaunch``, the HIP ones...), the CPU time spent
inside those launch calls, the host time between consecutive launches of one thread (Python, dispatch,
the op's own CPU work: whatever the host did between two launches, waits included), the time in
``*Synchronize`` calls, and all runtime/driver time. A runtime event belongs to the step whose range
holds its start. The loader calls ``runtime_per_step`` once; the figures go to
``trace.metadata["runtime_per_step"]`` ({step index: figures}) and explain's per-step table reads them.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import defaultdict

from tracekit.load.fields import number
from tracekit.model.trace import Step

LAUNCH_APIS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchKernelEx", "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice", "cudaGraphLaunch", "cuLaunchKernel", "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel", "cuGraphLaunch", "hipLaunchKernel", "hipExtLaunchKernel",
    "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipLaunchCooperativeKernel", "hipGraphLaunch",
    "runFunction - job_prep_and_submit_for_execution"})                  # MTIA: a job (its kernels) submitted
_VERSION = re.compile(r"_v\d+$")
FIELDS = ("launches", "launch_us", "host_us", "sync_us", "runtime_us")


def is_launch(name: str) -> bool:
    """A kernel or graph launch call (``cudaLaunchKernel_v7000`` counts as ``cudaLaunchKernel``)."""
    return _VERSION.sub("", name) in LAUNCH_APIS


def runtime_record(e: dict) -> tuple | None:
    """(ts, dur, name, tid) of a runtime/driver event with a finite ts and dur, else None."""
    ts, dur = number(e.get("ts")), number(e.get("dur"))
    if ts is None or dur is None or dur < 0:
        return None
    return ts, dur, e["name"], e.get("tid")


def runtime_per_step(records: list[tuple], steps: list[Step]) -> dict[str, list]:
    """Per step, by column: {"step": [index, ...], "wall_us", "launches", "launch_us", "host_us", "sync_us",
    "runtime_us": [value per step]}; without steps, one entry (index 0) over the whole trace with
    ``wall_us`` None. Columns, not a dict per step: 100k steps took 35 MB as dicts."""
    spans = [(s.index, s.start_us, s.end_us) for s in steps] or [(0, float("-inf"), float("inf"))]
    records = sorted(records, key=lambda r: r[0])
    starts = [r[0] for r in records]
    out: dict[str, list] = {k: [] for k in ("step", *HOST_FIGURES)}
    for index, start, end in spans:
        inside = records[bisect_left(starts, start):bisect_left(starts, end)]
        launches = sorted((r for r in inside if is_launch(r[2])), key=lambda r: (str(r[3]), r[0]))
        by_thread: dict = defaultdict(list)
        for r in launches:
            by_thread[r[3]].append(r)
        host = 0.0
        for calls in by_thread.values():
            for prev, nxt in zip(calls, calls[1:]):
                host += max(0.0, nxt[0] - (prev[0] + prev[1]))
        for key, value in (("step", index), ("wall_us", (end - start) if steps else None),
                           ("launches", len(launches)), ("launch_us", sum(r[1] for r in launches)),
                           ("host_us", host), ("sync_us", sum(r[1] for r in inside if "Synchronize" in r[2])),
                           ("runtime_us", sum(r[1] for r in inside))):
            out[key].append(value)
    return out


HOST_FIGURES = ("wall_us", "launches", "launch_us", "host_us", "sync_us", "runtime_us")


def host_columns(figures: dict, indices: list[int]) -> dict[str, list]:
    """``runtime_per_step``'s columns for the steps ``indices`` (None where a step has no figures)."""
    have = figures.get("step") or []
    if have == indices:
        return {k: figures[k] for k in HOST_FIGURES}
    at = {k: i for i, k in enumerate(have)}
    pos = [at.get(k) for k in indices]
    return {k: [None if i is None else figures[k][i] for i in pos] for k in HOST_FIGURES}
