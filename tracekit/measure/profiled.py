"""① Kernel time with hot and cold L2, the floor, and where the step's time goes: a short capture.

The step runs ``hot`` times back to back, then ``cold`` times with the cache flushed before each call
(a buffer of twice the cache's size written on the step's device, outside the step); every call is one
``ProfilerStep`` of a ``capture.session.Session`` (the machinery ``tracekit capture`` uses), with a sync
before and after it, so steps do not overlap. The bundle is explained (``analyze_path``) like any other:
per step, the kernel time is the sum of the profiler's kernel durations (CPU ops on a CPU), the floor
the sum of the costed kernels' floors (the execution trace is recorded, so a fused or foreach optimizer's
tensor lists are costed), and the host figures come from ``report.document.step_table``.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from tracekit.measure.scopes import scope, unavailable
from tracekit.measure.step import Clock, Step

BREAKDOWN = ("wall_us", "kernel_us", "idle_us", "busy_pct", "launches", "launch_us", "host_us", "sync_us",
             "runtime_us", "kernels")


def profile(step: Step, clock: Clock, hot: int, cold: int, flush_bytes: int, keep: str | None,
            device: str | None, spec: str | None) -> dict:
    """Record ``hot`` + ``cold`` steps, explain them; kernel-time scopes, floor and breakdown."""
    from tracekit.analyze import analyze_path
    from tracekit.capture.session import Session
    from tracekit.report.document import step_table

    torch = step.torch
    folder = Path(keep).absolute() if keep else Path(tempfile.mkdtemp(prefix="tracekit-measure-"))
    folder.mkdir(parents=True, exist_ok=True)
    # the execution trace, as `tracekit capture` records it: tensor lists (a fused/foreach optimizer's) and
    # tensor identities, which the costs and the exact one-kernel floors join; floors need no modules
    session = Session(folder, quiet=True, execution_trace=True, modules=False,
                      meta={"framework": "torch", "command": ["tracekit measure"], "args": []})
    session.step_rule = "tracekit measure: one call per step"
    buf = torch.empty(flush_bytes, dtype=torch.uint8, device=step.device)
    session.start()
    try:
        for k in range(hot + cold):
            step.prep()
            if k >= hot:
                buf.fill_(k & 0xFF)                  # evict the cache: write a buffer (twice its size)
            clock.sync()
            session.begin_step()
            step.run()
            session.end_step()
            clock.sync()
    finally:
        session.finish(0)
        del buf
    trace = analyze_path(str(folder), device=device, spec=spec)[0]
    table = step_table(trace)
    if not keep:
        _remove(folder)
    rows = table.to_dict("records")
    hot_rows, cold_rows = rows[:hot], rows[hot:hot + cold]
    what = "kernel" if step.cuda else "CPU op"
    timer = (f"profiler: the {what}s' durations summed per step ("
             + ("CUPTI device time" if step.cuda else "top-level CPU ops, wall time") + ")")
    scopes = []
    for name, label, picked, note in (
            ("kernel_hot", f"① {what} time, hot cache", hot_rows, f"{hot} steps back to back"),
            ("kernel_cold", f"① {what} time, cold cache", cold_rows,
             f"{flush_bytes} bytes written before each step")):
        if len(picked) == 0:
            scopes.append(unavailable(name, label, "no step was recorded"))
            continue
        scopes.append(scope(name, label, timer, [r["kernel_us"] / 1e6 for r in picked], note=note,
                            kernels_per_step=_median(picked, "kernels")))
    floors = [r["floor_us"] for r in hot_rows if _num(r.get("floor_us"))]
    floor = {"us": statistics.median(floors) if floors else None, "source": "explain of the recorded hot steps",
             "spec": trace.spec.id if trace.spec else None,
             "costed_pct": _median(hot_rows, "costed_pct"),
             "note": None if floors else "no floor: no device spec matched (pass --device/--spec, or --floor-us)"}
    breakdown = {k: _median(hot_rows, k) for k in BREAKDOWN}
    breakdown["note"] = ("medians over the hot recorded steps, from the trace alone (explain's per-step host "
                         "figures): the profiler and its execution trace slow the host side, so launch and host "
                         "times are upper bounds")
    return {"scopes": scopes, "floor": floor, "breakdown": breakdown, "trace": str(folder) if keep else None,
            "warnings": list(trace.warnings)}


def _num(x) -> bool:
    return x is not None and x == x


def _median(rows: list[dict], key: str):
    vals = [r.get(key) for r in rows if _num(r.get(key))]
    return statistics.median(vals) if vals else None


def _remove(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
