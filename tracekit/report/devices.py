"""``explain --devices``: one workload's floors on several devices side by side.

The method: fix one workload (a trace) and write, per device, what bounds it: the compute floor,
the memory floor, which of them binds, the ridge point, the one-kernel floor and the floor sum of
the kernels as they ran, each roof marked datasheet or measured. Measured ÷ floor only on the
device the trace came from (its spec: matched, ``--device`` or ``--spec``): the other devices
never ran it. The trace is loaded and costed once; each device gets only its roofline and its
one-kernel floor redone (``cost.multi.on_device``, ``fusion.dataflow.step_fusion``).

Per step, on each device: ``compute_us`` = the FLOPs of the costed kernels over the device's peak
for each kernel's dtype and unit (a GeForce fp16 GEMM accumulating in fp32 gets the fp32-accumulate
rate); ``memory_us`` = the one-kernel bytes (what one kernel running the whole step must move) over
the bandwidth; ``one_kernel_floor_us`` = the larger (docs/fusion.md); ``floor_sum_us`` = the sum
of the kernels' own floors (explain's per-step floor); ``ridge`` = peak ÷ bandwidth in FLOP/byte
for the step's main dtype and unit (the one with the most FLOPs).
"""

from __future__ import annotations

import math
from statistics import median

import numpy as np
import pandas as pd

from tracekit.cost.multi import on_device, ridge, roof_kind, same_spec
from tracekit.cost.rates import rate_for
from tracekit.cost.roofline import carrier_text, roofline_terms
from tracekit.fusion.dataflow import fused_op_count, step_fusion
from tracekit.model.rows import Rows
from tracekit.report.document import step_table
from tracekit.report.fmt import _shapes


def _num(x) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _ratio(a, b) -> float | None:
    a, b = _num(a), _num(b)
    return a / b if a is not None and b else None


def device_list(trace, specs: list) -> list:
    """The trace's own spec first (when it has one), then the asked-for specs not already listed."""
    out = [trace.spec] if trace.spec is not None else []
    for s in specs:
        if not any(same_spec(s, o) for o in out):
            out.append(s)
    return out


def spec_info(spec, own: bool) -> dict:
    """A spec as the section lists it: its roofs with their values and kinds."""
    roofs = {f"peak.{k}": {"tflops": v, "kind": roof_kind(spec, f"peak.{k}")} for k, v in spec.peak_tflops.items()}
    if spec.bandwidth_gbs:
        roofs["memory.bandwidth_gbs"] = {"gbs": spec.bandwidth_gbs, "kind": roof_kind(spec, "memory.bandwidth_gbs")}
    return {"id": spec.id, "name": spec.name, "vendor": spec.vendor, "path": spec.path, "trace_device": own,
            "bandwidth_gbs": spec.bandwidth_gbs, "launch_us": spec.launch_us, "roofs": roofs}


def _main_work(sk: pd.DataFrame) -> tuple[str | None, str | None]:
    """(dtype, unit) holding the most FLOPs of a step's rows; (None, None) without FLOPs."""
    rows = sk[(sk["flops"] > 0) & sk["dtype"].notna()]
    if rows.empty:
        return None, None
    by = rows.groupby(["dtype", "compute_unit"], dropna=False)["flops"].sum()
    dtype, unit = by.idxmax()
    return dtype, (unit if isinstance(unit, str) else None)


def _roofs(spec, dtype, unit) -> dict:
    key, rate, stand_in = rate_for(spec, dtype, unit)
    return {"peak_key": key, "peak_tflops": rate, "peak_stand_in": stand_in,
            "compute_roof": roof_kind(spec, f"peak.{key}") if key else None,
            "memory_roof": roof_kind(spec, "memory.bandwidth_gbs"), "ridge": ridge(spec, dtype, unit)}


def _bound(compute, memory, floor, launch_us) -> str | None:
    if floor is None:
        return None
    if launch_us and floor < launch_us:
        return "launch"
    return "compute" if (compute or 0.0) > (memory or 0.0) else "memory"


def _steps(trace, views: list) -> Rows:
    """Per step, its work and its floors on each device. A step without kernels has the same entry as
    any other such step but its index and name: made once, and read as rows of ``model.rows.Rows``
    (100k empty steps took 243 s and 400 MB as a dict each)."""
    df = trace.kernels
    steps = trace.steps.or_whole()
    indices = steps.indices()
    inside = df[df["step"] >= 0] if len(df) else df
    by_step = dict(tuple(inside.groupby("step", sort=False))) if len(inside) else {}
    tables = [step_table(v, ["step", "kernel_us", "floor_us", "costed_us"]).set_index("step") for _, v, _ in views]
    kept, template = {}, None
    for i, k in enumerate(indices):
        sk = by_step.get(k)
        if sk is None and template is not None:
            continue
        entry = _step_entry(k, df.iloc[0:0] if sk is None else sk, views, tables)
        if sk is None:
            template = dict(entry, step=None, name=None)
        else:
            kept[i] = dict(entry, name=steps.names[i])
    columns = {"step": steps.column("index"), "name": steps.names}
    return Rows(len(indices), template or {}, columns if template else {}, kept)


def _step_entry(k: int, sk: pd.DataFrame, views: list, tables: list) -> dict:
    dtype, unit = _main_work(sk)
    base = tables[0].loc[k] if len(tables) else None
    flops = float(sk["flops"].sum()) if len(sk) else 0.0
    kernel_us = _num(base["kernel_us"]) if base is not None else None
    entry = {"step": k, "name": None, "kernels": len(sk),
             "fused_ops": fused_op_count(sk["fused_ops"]), "kernel_us": kernel_us if sk["dur_us"].notna().any()
             else None, "costed_us": None, "flops": flops, "dtype": dtype, "compute_unit": unit,
             "one_kernel_bytes": None, "intensity": None, "devices": []}
    for (spec, view, own), table in zip(views, tables):
        vk = view.kernels
        f = step_fusion(view, k, vk.loc[sk.index])
        row = table.loc[k]
        fused_bytes = _num(f["fused_bytes"])
        memory = fused_bytes / (spec.bandwidth_gbs * 1e3) if fused_bytes is not None and spec.bandwidth_gbs else None
        compute = _num(f["fused_compute_us"])
        one = _num(f["fused_floor_us"])
        if one is not None and one <= 0:
            one = None
        floor_sum = _num(row["floor_us"])
        timed = entry["kernel_us"] is not None
        d = {"spec": spec.id, "trace_device": own, "compute_us": compute, "memory_us": memory,
             "bound": _bound(compute, memory, one, spec.launch_us), **_roofs(spec, dtype, unit),
             "one_kernel_floor_us": one, "one_kernel_kind": f["kind"], "floor_sum_us": floor_sum,
             "one_kernel_partial": bool(f["uncosted_kernels"]),   # some kernels' work left out (no floor)
             "measured_over_one_kernel": _ratio(row["costed_us"], one) if own and timed else None,
             "measured_over_floor_sum": _ratio(row["costed_us"], floor_sum) if own and timed else None}
        entry["devices"].append(d)
        if own or entry["one_kernel_bytes"] is None:
            entry["one_kernel_bytes"] = fused_bytes
            entry["costed_us"] = _num(row["costed_us"]) if timed else None
    if entry["one_kernel_bytes"]:
        entry["intensity"] = flops / entry["one_kernel_bytes"]
    return entry


def _kernel_groups(trace, top: int) -> list[tuple[dict, np.ndarray]]:
    """The top kernel groups (name, op, shapes, dtype, unit) of the steps: per-step means; by time, or by
    bytes moved when the trace has no timings."""
    df = trace.kernels
    if trace.steps:
        df = df[df["step"] >= 0]
    if df.empty:
        return []
    n = max(1, len(trace.steps))
    keys = pd.DataFrame({"name": df["name"].astype(str), "op": df["op"].fillna("-").astype(str),
                         "shapes": df["op_dims"].map(_shapes), "dtype": carrier_text(df, "dtype"),
                         "unit": carrier_text(df, "compute_unit")}, index=df.index)
    groups = []
    for key, labels in keys.groupby(list(keys.columns), sort=False).groups.items():
        rows = df.loc[labels]
        timed = rows["dur_us"].notna().any()
        groups.append(({"name": key[0], "op": None if key[1] == "-" else key[1], "shapes": key[2],
                        "dtype": None if key[3] == "-" else key[3], "compute_unit": None if key[4] == "-" else key[4],
                        "category": str(rows["category"].iloc[0]), "fused_ops": rows["fused_ops"].iloc[0],
                        "count_per_step": len(rows) / n, "dur_us_per_step": float(rows["dur_us"].sum()) / n
                        if timed else None, "flops_per_step": float(rows["flops"].sum()) / n,
                        "bytes_per_step": _num(rows["bytes"].sum(min_count=1) / n)}, np.asarray(labels)))
    timed = any(g["dur_us_per_step"] is not None for g, _ in groups)
    order = sorted(groups, key=lambda g: -((g[0]["dur_us_per_step"] if timed else g[0]["bytes_per_step"]) or 0.0))
    return order[:top]


def _kernels(trace, views: list, top: int) -> list[dict]:
    n = max(1, len(trace.steps))
    out = []
    terms = [roofline_terms(trace.kernels, spec) for spec, _, _ in views]
    position = pd.Series(np.arange(len(trace.kernels)), index=trace.kernels.index)
    costed = trace.kernels["flops"].notna().to_numpy()
    # the time a carrier's floor is set against: all its op call's kernels (gap = op time / floor)
    op_time = (trace.kernels["gap"] * trace.kernels["gap_floor_us"]).to_numpy(dtype=float)
    for info, labels in _kernel_groups(trace, top):
        at = position.loc[labels].to_numpy()
        entry = {**info, "devices": []}
        entry["fused_ops"] = list(info["fused_ops"]) if isinstance(info["fused_ops"], list) else None
        for (spec, view, own), (compute, memory) in zip(views, terms):
            floors = view.kernels["floor_us"].to_numpy(dtype=float)[at]
            covered = view.kernels["covered"].to_numpy(dtype=bool)[at] if "covered" in view.kernels else \
                ~np.isnan(floors)             # an op call's chunks: its floor is on the carrier kernel
            carried = ~np.isnan(floors)
            floor = float(floors[carried].sum()) / n if covered.all() and carried.any() else None
            c = _num(compute[at].sum() / n) if costed[at].any() else None     # no cost model or no rate: none
            m = _num(np.nansum(memory[at]) / n) if not np.isnan(memory[at]).all() else None
            dur = info["dur_us_per_step"]
            if own and floor is not None and dur is not None:
                dur = float(np.nansum(op_time[at][carried])) / n
            each = floor / info["count_per_step"] if floor is not None else None     # one kernel's floor
            entry["devices"].append({"spec": spec.id, "trace_device": own, "compute_us": c, "memory_us": m,
                                     "floor_us": floor, "bound": _bound(c, m, each, spec.launch_us),
                                     **_roofs(spec, info["dtype"], info["compute_unit"]),
                                     "measured_over_floor": _ratio(dur, floor) if own else None})
        out.append(entry)
    return out


def devices_section(trace, specs: list, top: int = 15) -> dict:
    """The ``devices`` key of explain's JSON for one trace: the specs (own first), per step and per top
    kernel group the floors on each device, measured ÷ floor on the trace's own device only."""
    views = []
    for spec in device_list(trace, specs):
        own = same_spec(spec, trace.spec)
        views.append((spec, trace if own else on_device(trace, spec), own))
    steps = _steps(trace, views)
    return {"specs": [spec_info(s, own) for s, _, own in views],
            "trace_device": trace.spec.id if trace.spec is not None else None,
            "steps": steps, "step_groups": group_steps(steps), "kernels": _kernels(trace, views, top),
            "measured": "measured ÷ floor only on the trace's own device: costed kernel time per step "
                        "(as the profiler recorded it) over the floor"}


def _signature(step: dict) -> tuple:
    return (step["kernels"], step["fused_ops"]) + tuple(
        (d["spec"], *(None if d[k] is None else float(f"{d[k]:.4g}") for k in ("one_kernel_floor_us", "floor_sum_us",
                                                                              "compute_us", "memory_us")))
        for d in step["devices"])


def group_steps(steps) -> list[dict]:
    """Steps with the same kernels, fused ops and floors (4 significant digits) on every device, in order of
    first appearance: the step indices and the median measured figures of each group. Steps made from the
    template of a ``Rows`` share its signature and have no measured figure."""
    kept = steps.kept if isinstance(steps, Rows) else None
    made = _signature(steps.template) if kept is not None and len(kept) < len(steps) else None
    groups: dict = {}
    for i in range(len(steps)):
        row = steps[i] if kept is None else kept.get(i)
        groups.setdefault(made if row is None else _signature(row), []).append(i)
    index = steps.values("step") if kept is not None else [s["step"] for s in steps]
    out = []
    for at in groups.values():
        members = [steps[i] if kept is None else kept[i] for i in at if kept is None or i in kept]
        kernel = [s["costed_us"] for s in members if s["costed_us"] is not None]
        ratios = {}
        for key in ("measured_over_one_kernel", "measured_over_floor_sum"):
            vals = [d[key] for s in members for d in s["devices"] if d[key] is not None]
            ratios[key] = median(vals) if vals else None
        out.append({"steps": [index[i] for i in at], "costed_us_median": median(kernel) if kernel else None,
                    **{f"{k}_median": v for k, v in ratios.items()}})
    return out
