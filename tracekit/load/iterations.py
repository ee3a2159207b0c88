"""A serving trace with neither ProfilerStep ranges nor engine annotations: its engine iterations from its
graph replays. An iteration begins where a replay of a graph's first piece begins on the device (a FULL
graph: every replay; PIECEWISE: the replay of the first piece captured for its size) and runs to the next
one; the eager kernels between (attention between pieces, sampling after) belong to it. Kernels before
the first such replay are outside every step. Used only when every replay was matched to its capture."""

from __future__ import annotations

import numpy as np

from tracekit.model.trace import Step, Steps, Trace

RULE = "graph replays (an iteration from each replay of a graph's first piece)"


def split_by_graph_iterations(trace: Trace) -> bool:
    """Make the iterations the steps, in place, when the trace is one step and at least two were found."""
    starts = (trace.metadata.get("graph_replays") or {}).get("iteration_starts_us")
    if trace.steps or not starts or len(starts) < 2:
        return False
    df = trace.kernels
    start = df["start_us"].to_numpy(dtype=float)
    end = float(np.nanmax(start + df["dur_us"].to_numpy(dtype=float)))
    bounds = [*starts, max(end, starts[-1])]
    trace.steps = Steps.of(Step(index=k, name=f"graph iteration {k}", start_us=bounds[k], end_us=bounds[k + 1])
                           for k in range(len(starts)))
    k = np.searchsorted(np.asarray(starts), start, side="right") - 1
    df["step"] = np.where(k >= 0, k, -1).astype(int)
    trace.step_rule = RULE
    trace.metadata["runtime_per_step"] = {}          # host figures were counted for the whole trace
    for r in trace.metadata["graph_replays"]["per_step"]:      # the match figures, per iteration now
        r["step"] = -1
    _recount(trace)
    return True


def _recount(trace: Trace) -> None:
    """The graph-replay figures per step again, over the new steps (each replay's rows by their step)."""
    df = trace.kernels
    g = df[df["graph"].astype(bool)]
    per = []
    for step, rows in g.groupby("step", sort=True):
        matched = rows["op_source"] == "graph_capture"
        per.append({"step": int(step), "replays": int(rows["correlation"].nunique()), "replayed": len(rows),
                    "matched": int(matched.sum()), "replayed_us": float(rows["dur_us"].sum()),
                    "matched_us": float(rows.loc[matched, "dur_us"].sum()), "unmatched": {}})
    trace.metadata["graph_replays"]["per_step"] = per
