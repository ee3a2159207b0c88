"""What explain prints: the JSON contract, CSV rows, and the rich table for people."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pandas as pd

from tracekit.fusion.dataflow import fused_op_count, fusion_summary
from tracekit.load.runtime import HOST_FIGURES, host_columns
from tracekit.model.rows import Rows
from tracekit.model.trace import Trace
from tracekit.report.phases import graph_replay_steps, phase_rows, step_phases
from tracekit.outputs import json_bytes, shown

KERNEL_FIELDS = ["name", "category", "op", "dur_us", "flops", "bytes", "floor_us", "bound", "gap", "gap_floor_us", "covered",
                 "l2", "l2_floor_us", "fused_ops", "kind", "step", "start_us", "stream", "device", "dtype", "compute_unit",
                 "event_bytes", "launch", "graph", "op_source", "op_dims", "op_types", "grid", "block", "cost_note",
                 "module"]


def _clean(value):
    """JSON-safe scalar: NaN/None → None, numpy scalars → Python."""
    if value is None:
        return None
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


# where a step's time goes on the host (load/runtime.py): the step's wall time, launch calls and the CPU
# time in them, host time between launches, time in *Synchronize calls, all runtime/driver time
HOST_FIELDS = HOST_FIGURES


def step_table(trace: Trace, columns: list[str] | None = None) -> pd.DataFrame:
    """One row per step: kernels, kernel time, floor sum, gap, GPU busy % and idle time between kernels,
    and the host side: wall time, launches, CPU time in launches, host time between them, syncs.
    ``columns``: only these, in this order (one the rows lack is NaN)."""
    rows = step_records(trace)
    have = rows.keys()
    # by column, each list made into its Series before the next is made: no dict per step, and at most
    # one column's Python objects at a time (100k steps: the 18 lists at once took 47 MB)
    table = {k: pd.Series(rows.values(k)) if k in have else pd.Series(np.nan, index=range(len(rows)))
             for k in (have if columns is None else columns)}
    return pd.DataFrame(table)


def step_records(trace: Trace, phases: dict | None = None, replays: dict | None = None) -> Rows:
    """``step_table``'s rows as dicts of plain Python values (NaN as None): what the JSON writes. ``phases``
    (step index -> phase, tokens; ``report.phases.step_phases``) adds those two keys to every row,
    ``replays`` (step index -> keys) its keys to a step's row. A step without kernels is made from one
    template when read (``model.rows``): 100k empty steps cost no dict each."""
    df = trace.kernels
    replays = replays or {}
    steps = trace.steps.or_whole()
    indices = steps.index
    host = host_columns(trace.metadata.get("runtime_per_step") or {}, indices)   # load/runtime.py: launches, ...
    step = df["step"].to_numpy()
    order = np.argsort(step, kind="stable")                  # each step's rows together, in table order
    bounds = np.searchsorted(step[order], indices, side="left"), np.searchsorted(step[order], indices, side="right")
    # the columns gathered in step order once: a step's rows are a slice (a view), not a gather per step
    dur_all = df["dur_us"].to_numpy(dtype=float)[order]
    start_all = df["start_us"].to_numpy(dtype=float)[order]
    floor_all = df["floor_us"].to_numpy(dtype=float)[order]
    covered_all = df["covered"].to_numpy(dtype=bool)[order]
    floored_all = ~np.isnan(floor_all)
    floor_zero = np.where(floored_all, floor_all, 0.0)     # np.nansum's own array: NaN as 0, same length and order
    fused = df["fused_ops"].tolist()
    fused_all = [fused[j] for j in order.tolist()]
    kept = {}
    with_rows = np.flatnonzero((bounds[1] > bounds[0]) & (indices >= 0))   # the others: made from the template
    for i, k, lo, hi in zip(with_rows.tolist(), indices[with_rows].tolist(), bounds[0][with_rows].tolist(),
                            bounds[1][with_rows].tolist()):
        dur = dur_all[lo:hi]
        floor = float(floor_zero[lo:hi].sum()) if floored_all[lo:hi].any() else None
        costed_us = float(dur[covered_all[lo:hi]].sum())
        busy, window = _busy(start_all[lo:hi], dur)
        total = float(dur.sum())
        kept[i] = dict(step=k, name=steps.names[i], kernels=hi - lo, kernel_us=total,
                       floor_us=floor, costed_us=costed_us, gap=(costed_us / floor) if floor else None,
                       costed_pct=(100.0 * costed_us / total) if total > 0 else None,
                       busy_pct=(100.0 * busy / window) if window > 0 else None,
                       idle_us=(window - busy) if window > 0 else None, window_us=window,
                       fused_ops=fused_op_count(fused_all[lo:hi]),
                       **{f: host[f][i] for f in HOST_FIELDS})
        if phases is not None:
            kept[i].update(phase=phases.get(k, {}).get("phase"), tokens=phases.get(k, {}).get("tokens"))
        kept[i].update(replays.get(k, {}))
    template = dict(step=None, name=None, kernels=0, kernel_us=0.0, floor_us=None, costed_us=0.0, gap=None,
                    costed_pct=None, busy_pct=None, idle_us=None, window_us=0.0, fused_ops=0,
                    **{f: None for f in HOST_FIELDS})
    columns = {"step": steps.column("index"), "name": steps.names,
               **{f: host[f] for f in HOST_FIELDS}}
    if phases is not None:
        template.update(phase=None, tokens=None)
        for key in ("phase", "tokens"):
            if any(v.get(key) is not None for v in phases.values()):
                columns[key] = [phases.get(k, {}).get(key) for k in indices.tolist()]
    more = {i: replays[k] for i, k in enumerate(indices.tolist()) if i not in kept and replays.get(k)} if replays else {}
    return Rows(len(indices), template, columns, kept, more)


def _busy(start: np.ndarray, dur: np.ndarray) -> tuple[float, float]:
    """Time covered by the union of [start, start+dur) and the span from first start to last end."""
    if len(start) == 0:
        return 0.0, 0.0
    order = np.argsort(start, kind="stable")
    s, e = start[order], start[order] + dur[order]
    ends = np.maximum.accumulate(e)
    gaps = np.maximum(s[1:] - ends[:-1], 0.0).sum()             # np.clip(..., 0, None), without its wrapper
    window = float(ends[-1] - s[0])
    return window - float(gaps), window


def explain_dict(trace: Trace, columns: dict | None = None) -> dict:
    """The JSON contract: device, steps, kernels (one per execution, time order), summary. ``columns``,
    when given, is filled with field -> that field of every kernel (the lists the kernels are made of)."""
    df = trace.kernels
    # orjson writes NaN as null and tolist() gives plain Python values, so rows need no per-value cleaning
    cols = [df[c].tolist() if c in df else [None] * len(df) for c in KERNEL_FIELDS]
    if columns is not None:
        columns.update(zip(KERNEL_FIELDS, cols))
    kernels = [dict(zip(KERNEL_FIELDS, row)) for row in zip(*cols)]
    spec = trace.spec
    device = {"name": trace.device_name,
              "spec": spec.id if spec else None,
              "spec_name": spec.name if spec else None,
              "spec_path": shown(spec.path) if spec else None}
    # serving: each step's phase and tokens, its graph replays' match share
    phases = step_phases(trace)
    step_rows = step_records(trace, phases, graph_replay_steps(trace))
    in_steps = df[df["step"] >= 0] if trace.steps else df         # per-step figures: the steps' kernels only
    by_cat = in_steps.groupby("category")["dur_us"].agg(["count", "sum"]) if len(in_steps) else None
    n_steps = max(1, len(trace.steps))
    summary = {
        "steps": len(step_rows),
        "step_rule": trace.step_rule,
        "kernels": len(df),
        "kernels_outside_steps": int((df["step"] < 0).sum()) if len(df) else 0,
        "kernels_per_step": step_rows.column("kernels"),
        "kernel_us_per_step": step_rows.column("kernel_us"),
        "floor_us_per_step": step_rows.column("floor_us"),
        "gap_per_step": step_rows.column("gap"),
        "costed_pct_per_step": step_rows.column("costed_pct"),
        "busy_pct_per_step": step_rows.column("busy_pct"),
        "idle_us_per_step": step_rows.column("idle_us"),
        **{f"{f}_per_step": step_rows.column(f) for f in HOST_FIELDS},
        "kernel_us_total": float(df["dur_us"].sum()) if len(df) else 0.0,
        # time set against a floor: a kernel's own, or its op call's (a cuDNN call's memset, an optimizer's chunks)
        "costed_time_pct": _clean(100.0 * df.loc[df["covered"], "dur_us"].sum() / df["dur_us"].sum())
        if len(df) and df["dur_us"].sum() > 0 else None,
        "by_category": {c: {"count": int(r["count"]), "count_per_step": float(r["count"]) / n_steps,
                            "dur_us": float(r["sum"])} for c, r in by_cat.iterrows()} if by_cat is not None else {},
        "measured": "kernel durations as the profiler recorded them (device time per kernel, not end-to-end)",
    }
    summary.update(fusion_summary(trace))
    summary["execution_trace"] = trace.metadata.get("execution_trace")   # the ET joined, or None
    summary["graph_replays"] = trace.metadata.get("graph_replays")        # matched to captures (load.graph_replay)
    summary["device_waits"] = trace.metadata.get("device_waits")          # MTIA stream waits: no rows (load.kineto)
    return {"trace": shown(trace.path), "device": device, "steps": step_rows, "kernels": kernels,
            "summary": summary, "phases": phase_rows(trace, step_rows, summary["fusion_per_step"], phases),
            "warnings": list(trace.warnings)}


def to_json(traces: list[Trace]) -> bytes:
    if len(traces) == 1:
        doc = explain_dict(traces[0])
    else:
        doc = {"graphs": [explain_dict(t) for t in traces]}
    return json_bytes(doc, orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


CSV_FIELDS = ["step", "name", "category", "op", "dur_us", "flops", "bytes", "floor_us", "bound", "gap", "dtype",
              "stream", "start_us", "fused_ops", "cost_note"]


def to_csv(traces: list[Trace]) -> str:
    frames = []
    for g, t in enumerate(traces):
        out = t.kernels[CSV_FIELDS].copy()
        out["fused_ops"] = out["fused_ops"].map(lambda ops: "+".join(ops) if isinstance(ops, list) else "")
        if len(traces) > 1:
            out.insert(0, "graph", g)
        frames.append(out)
    return pd.concat(frames).to_csv(index=False) if frames else ""
