"""``tracekit compare A B``: one workload captured twice, on two devices or in two frameworks (a CUDA
torch.profiler bundle and an MLX graph of the same model), side by side.

Per step (median over each side's steps): kernels, fused ops, kernel time, floor sum and one-kernel
floor, each side on its own device spec, and measured ÷ floor where the side has timings. Then the
work matched by op: names differ across stacks (``nvjet_…_bias`` vs ``Matmul``, a Triton pointwise
kernel vs ``CompiledBroadcastAddBroadcastMaximum``), so kernels are matched by what they do, their
work class: matmul (gemm, gemv), attention, conv, norm, softmax, reduction, elementwise, copies; an
Inductor or MLX fused kernel takes the class of the ops it fused (relu → elementwise). Per class and
side: kernels, fused ops and kernel names per step, time, floor and measured ÷ floor.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median

import pandas as pd

from tracekit.classify.categories import op_category
from tracekit.fusion.dataflow import fusion_summary, known_fused_ops
from tracekit.model.trace import Trace
from tracekit.report.document import step_table

WORK = ("matmul", "attention", "conv", "norm", "softmax", "reduction", "elementwise", "memcpy", "memset",
        "communication", "other")
_AS_WORK = {"gemm": "matmul", "gemv": "matmul"}


def work_of(category, fused_ops) -> str:
    """The work class a kernel is matched by: its category (gemm/gemv → matmul); a Triton or unclassified
    kernel takes the highest class among the ops it fused (matmul over attention over … elementwise)."""
    cat = str(category)
    if cat not in ("triton", "other"):
        return _AS_WORK.get(cat, cat if cat in WORK else "other")
    ops = [o for o in fused_ops or [] if isinstance(o, str) and o != "unknown"] if isinstance(fused_ops, list) else []
    found = {_AS_WORK.get(c, c) for c in (op_category(f"aten::{o}") for o in ops)}
    return next((w for w in WORK if w in found and w != "other"), "other")


def _num(x) -> float | None:
    return None if x is None or x != x else float(x)


def _median(values) -> float | None:
    vals = [float(v) for v in values if v is not None and v == v]
    return median(vals) if vals else None


def side_doc(trace: Trace, path: str) -> dict:
    """One side: what it is, its per-step medians and its work classes (means per step)."""
    steps = step_table(trace, ["kernels", "fused_ops", "kernel_us", "floor_us", "gap", "costed_us"])
    df = trace.kernels
    timed = bool(len(df)) and bool(df["dur_us"].notna().any())
    fused_floor = fusion_summary(trace)["fused_floor_us_per_step"]
    costed = [(_num(c) if timed else None) for c in steps["costed_us"]]
    spec = trace.spec
    per_step = {
        "kernels": _median(steps["kernels"]), "fused_ops": _median(steps["fused_ops"]),
        "kernel_us": _median(steps["kernel_us"]) if timed else None, "floor_us": _median(steps["floor_us"]),
        "one_kernel_floor_us": _median(fused_floor),
        "measured_over_floor": _median(steps["gap"]) if timed else None,
        "measured_over_one_kernel": _median([c / f for c, f in zip(costed, fused_floor) if c is not None and f])}
    return {"path": path, "framework": trace.metadata.get("framework") or "torch",
            "device": trace.device_name, "spec": spec.id if spec is not None else None,
            "spec_name": spec.name if spec is not None else None, "steps": len(trace.steps) or 1,
            "step_rule": trace.step_rule, "timed": timed, "per_step": per_step, "work": _work(trace, timed),
            "warnings": list(trace.warnings)}


def _work(trace: Trace, timed: bool) -> dict:
    df = trace.kernels
    if trace.steps:
        df = df[df["step"] >= 0]
    if df.empty:
        return {}
    n = max(1, len(trace.steps))
    cls = pd.Series([work_of(c, f) for c, f in zip(df["category"], df["fused_ops"])], index=df.index)
    out = {}
    for work in pd.unique(cls):           # launch order of first appearance
        rows = df[cls == work]
        ops: dict[str, float] = {}
        for fused in known_fused_ops(rows["fused_ops"]):
            key = "+".join(fused)
            ops[key] = ops.get(key, 0.0) + 1.0 / n
        floored = rows["floor_us"].notna().all()
        dur = float(rows["dur_us"].sum()) / n if timed else None
        floor = float(rows["floor_us"].sum()) / n if rows["floor_us"].notna().any() else None
        out[work] = {"kernels": len(rows) / n, "fused_ops": sum(len(k.split("+")) * v for k, v in ops.items()),
                     "fused_op_sets": ops, "names": list(dict.fromkeys(str(x) for x in rows["name"])),
                     "ops": list(dict.fromkeys(str(x) for x in rows["op"].dropna())),
                     "kernel_us": dur, "floor_us": floor, "floor_complete": bool(floored),
                     "measured_over_floor": dur / floor if dur is not None and floor and floored else None}
    return out


PER_STEP = (("kernels", "kernels"), ("fused_ops", "fused ops"), ("kernel_us", "kernel time"),
            ("floor_us", "floor sum"), ("one_kernel_floor_us", "one-kernel floor"),
            ("measured_over_floor", "measured ÷ floor sum"), ("measured_over_one_kernel", "measured ÷ one-kernel"))


def compare_sides(a: dict, b: dict) -> dict:
    """The ``compare --format json`` document: both sides, per-step figures side by side, work matched by op."""
    work = []
    for w in list(dict.fromkeys(list(a["work"]) + list(b["work"]))):
        wa, wb = a["work"].get(w), b["work"].get(w)
        same = sorted(set(wa["names"]) & set(wb["names"])) if wa and wb else []
        work.append({"work": w, "matched_by": "name" if same else "op class" if wa and wb else None,
                     "a": wa, "b": wb})
    return {"a": {k: v for k, v in a.items() if k not in ("per_step", "work")},
            "b": {k: v for k, v in b.items() if k not in ("per_step", "work")},
            "per_step": {k: {"a": a["per_step"][k], "b": b["per_step"][k]} for k, _ in PER_STEP},
            "work": work,
            "measured": "per step: median over each side's steps; work: mean per step; floors on each side's own "
                        "device spec; measured ÷ floor only where a side has kernel times"}


def side_label(path: str) -> str:
    p = Path(path)
    return "/".join(p.parts[-3:]) if p.suffix == ".dot" else p.name
