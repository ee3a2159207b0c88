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
from array import array
from collections import defaultdict

import numpy as np

from tracekit.load.fields import number
from tracekit.model.steps import Steps

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


def runtime_per_step(records: list[tuple], steps: Steps) -> dict:
    """Per step, by column: {"step": [index, ...], "wall_us", "launches", "launch_us", "host_us", "sync_us",
    "runtime_us": [value per step]}; without steps, one entry (index 0) over the whole trace with
    ``wall_us`` None. Typed arrays (8 B a value), not a dict or a list of objects per step: 100k steps
    took 35 MB as dicts, 11 MB as lists; a step without runtime calls is zeros, not visited."""
    wall = array("d", (steps.end_us - steps.start_us).tobytes()) if len(steps) else [None]
    spans = steps.or_whole()
    index, begin, end = spans.index, spans.start_us, spans.end_us
    n = len(index)
    records = sorted(records, key=lambda r: r[0])
    starts = np.array([r[0] for r in records], dtype=float)
    lo, hi = np.searchsorted(starts, begin, side="left"), np.searchsorted(starts, end, side="left")
    out = {"step": array("q", index.tobytes()), "wall_us": wall, "launches": array("q", bytes(8 * n)),
           **{k: array("d", bytes(8 * n)) for k in ("launch_us", "host_us", "sync_us", "runtime_us")}}
    busy = np.flatnonzero(hi > lo)
    for k, a, b in zip(busy.tolist(), lo[busy].tolist(), hi[busy].tolist()):
        inside = records[a:b]
        launches = sorted((r for r in inside if is_launch(r[2])), key=lambda r: (str(r[3]), r[0]))
        by_thread: dict = defaultdict(list)
        for r in launches:
            by_thread[r[3]].append(r)
        host = 0.0
        for calls in by_thread.values():
            for prev, nxt in zip(calls, calls[1:]):
                host += max(0.0, nxt[0] - (prev[0] + prev[1]))
        out["launches"][k] = len(launches)
        out["launch_us"][k] = sum(r[1] for r in launches)
        out["host_us"][k] = host
        out["sync_us"][k] = sum(r[1] for r in inside if "Synchronize" in r[2])
        out["runtime_us"][k] = sum(r[1] for r in inside)
    return out


HOST_FIGURES = ("wall_us", "launches", "launch_us", "host_us", "sync_us", "runtime_us")


def host_columns(figures: dict, indices: np.ndarray) -> dict[str, list]:
    """``runtime_per_step``'s columns for the steps ``indices`` (None where a step has no figures)."""
    have = figures.get("step") or []
    if len(have) == len(indices) and all(a == b for a, b in zip(have, indices.tolist())):
        return {k: figures[k] for k in HOST_FIGURES}
    at = {k: i for i, k in enumerate(have)}
    pos = [at.get(k) for k in indices.tolist()]
    return {k: [None if i is None else figures[k][i] for i in pos] for k in HOST_FIGURES}
