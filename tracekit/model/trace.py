"""The one data model every stage shares: a pandas kernel table plus per-step facts.

``Trace`` is what ``load`` produces and what classify, cost, fusion, report, check and diff read.
Its ``kernels`` table has the columns ``model.schema`` declares (type, meaning, the stage that fills
each), in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.errors import TracekitError
from tracekit.model.schema import KERNEL_COLUMNS  # noqa: F401  (loaders build rows in this order)
from tracekit.model.steps import Step, Steps  # noqa: F401  (Step: read from here by the loaders)


@dataclass
class Trace:
    """A normalised trace: the kernel table, its steps and where it came from."""

    path: str
    kernels: pd.DataFrame
    steps: Steps                        # a list of Step given here is made a Steps
    step_rule: str                      # "ProfilerStep", "marker:<regex>", "whole trace"
    device_name: str | None             # deviceProperties name, or None (CPU-only / unknown)
    device_properties: list[dict] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)   # trace-level fields (schemaVersion, distributedInfo...)
    warnings: list[str] = field(default_factory=list)
    spec: object = None                 # cost.devices.DeviceSpec chosen for floors, or None
    # the loader's events, kept only while graph-replayed rows still need their capture mapped
    source_events: list | None = field(default=None, repr=False)
    normalised: bool = False            # twins, classify, collectives and graph replays done (analyze.normalise)

    def __post_init__(self) -> None:
        self.steps = Steps.of(self.steps)

    @property
    def is_cpu_only(self) -> bool:
        return bool(len(self.kernels)) and bool((self.kernels["kind"] == "cpu_op").all())



def skip_steps(trace: Trace, n: int) -> Trace:
    """Leave the first ``n`` steps (warm-up, compile) out of every per-step figure: their kernels count
    as outside every step (step -1) and ``metadata["skipped_steps"]`` says how many were dropped."""
    if n <= 0 or not trace.steps:
        return trace
    dropped = set(trace.steps.index[:n].tolist())
    if len(dropped) >= len(trace.steps):
        raise TracekitError(f"--skip-steps {n}: the trace has only {len(trace.steps)} step(s)")
    trace.kernels.loc[trace.kernels["step"].isin(dropped), "step"] = -1
    trace.steps = trace.steps[n:]
    trace.metadata["skipped_steps"] = n
    return trace


def trim_last_step(df: pd.DataFrame, steps: Steps) -> str | None:
    """Code after the loop: the last ProfilerStep range of a trace often runs to the profiler's stop (a
    step that lasts until the next root-module call, a script's last ``prof.step()``), so work after the
    loop joins it. When the last step's rows begin with exactly the previous step's rows (same names in
    launch order) and go on past them, the rest go to no step (step -1), the last step ends where the
    first of them starts, and the returned warning names them; None when nothing was trimmed."""
    if len(steps) < 2 or df.empty:
        return None
    last, prev = int(steps.index[-1]), int(steps.index[-2])
    step = df["step"].to_numpy()
    order = np.argsort(df["start_us"].to_numpy(dtype=float), kind="stable")
    names = df["name"].astype(str).to_numpy()
    mine = [i for i in order if step[i] == last]
    before = [i for i in order if step[i] == prev]
    if not before or len(mine) <= len(before) or any(names[a] != names[b] for a, b in zip(mine, before)):
        return None
    tail = mine[len(before):]
    labels = df.index[tail]
    df.loc[labels, "step"] = -1
    steps.set_end(-1, min(float(steps.end_us[-1]), float(df["start_us"].iloc[tail[0]])))
    ops = df.loc[labels, "op"].where(df.loc[labels, "op"].notna(), df.loc[labels, "name"]).astype(str)
    shown = list(dict.fromkeys(o.removeprefix("aten::") for o in ops))
    what = "CPU ops" if (df["kind"] == "cpu_op").all() else "kernels"
    return (f"{len(tail)} {what} after the last step (the previous step's {len(before)} repeat, then these: "
            f"code after the loop?) counted outside every step: {', '.join(shown[:8])}"
            + (f" and {len(shown) - 8} more" if len(shown) > 8 else ""))
