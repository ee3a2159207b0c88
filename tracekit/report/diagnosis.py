"""The diagnosis on top of every explain: where a step's time goes, what bounds it, what to try next.

Computed from the explain document (``document.explain_dict``) alone, so the table, Markdown, HTML and
JSON (``summary.diagnosis``) say the same words. Figures are per step, the mean over the document's steps.
Rules (docs/report.md says them with their thresholds):

- **launch-bound**: the GPU is busy less than half of the step, the step runs at least ``MANY_KERNELS``
  kernels and its idle time is spread over many gaps (no one gap holds half of it): the GPU waits for
  the host to launch each kernel. Next: CUDA graphs, unless the kernels already replay from one.
- **host-bound**: busy less than half, but few kernels or one long gap: the host is doing something else.
- **kernel-bound**: busy at least half: the kernels themselves; the groups with the most time above
  their floor are named.
- fusion is suggested only when at least ``MANY_UNFUSED`` unfused (one op, not Inductor's) memory- or
  launch-bound elementwise/norm/reduction/softmax kernels per step take at least ``UNFUSED_SHARE`` of the
  kernel time.
"""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import compress

from tracekit.model.rows import Rows
from tracekit.report.fmt import compact_name, fmt_us

BUSY_HOST = 50.0          # GPU busy % below which the host, not the kernels, sets the step's time
MANY_KERNELS = 20         # kernels per step from which launch overhead adds up
ONE_GAP = 0.5             # a single idle gap holding this share of the idle time: not launch overhead
MANY_UNFUSED = 10         # unfused memory-bound kernels per step worth fusing ...
UNFUSED_SHARE = 0.10      # ... when they take this share of the kernel time
FUSABLE = {"elementwise", "reduction", "norm", "softmax"}     # categories whose kernels fusion merges


def _num(x) -> float | None:
    if type(x) is float:                # the common case first: ~10 calls per kernel
        return None if x != x else x
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def median(xs: list):
    """``statistics.median`` of a non-empty list, written out: the JSON path imports no ``statistics``
    (with ``fractions``: ~1.5 ms of start-up)."""
    data = sorted(xs)
    i = len(data) // 2
    return data[i] if len(data) % 2 else (data[i - 1] + data[i]) / 2


def _mean(xs) -> float | None:
    vals = [v for v in (_num(x) for x in xs) if v is not None]
    return sum(vals) / len(vals) if vals else None


def _us(x: float | None) -> str:
    """µs as fmt_us writes them (a sub-0.1 µs floor to 3 significant digits, not '0.00 µs')."""
    return fmt_us(x)


def _pct(x: float | None) -> str:
    return "-" if x is None else (f"{x:.0f}%" if x >= 1 or x == 0 else f"{x:.1f}%")


def _times(x: float | None) -> str:
    return "-" if x is None else (f"{x:.1f}×" if x < 100 else f"{x:.0f}×")


def _gaps(spans: list[tuple]) -> list[float]:
    """Idle gaps between the union of the [start, end) intervals ``spans``, in time order."""
    gaps, end = [], None
    for s, e in sorted(spans):
        if end is not None and s > end:
            gaps.append(s - end)
        end = e if end is None else max(end, e)
    return gaps


def _columns(steps):
    """key -> that key of every step row: a lazy ``Rows`` gives its column without making the rows."""
    if isinstance(steps, Rows):
        return steps.values
    return lambda key: [st.get(key) for st in steps]


FACT_FIELDS = ("step", "dur_us", "start_us", "bound", "name", "category", "fused_ops", "graph", "floor_us", "gap",
               "op", "l2", "kind")
"""The kernel fields the diagnosis reads."""


def facts_of(doc: dict, launch_us: float | None = None, columns: dict | None = None) -> dict:
    """The numbers the diagnosis rests on (per step: means over the document's steps). ``columns``:
    field -> that field of every kernel of the document, in order (what ``document.explain_dict``
    made its kernels from; default: read from them), for at least ``FACT_FIELDS``."""
    steps = doc.get("steps") or []
    s = doc.get("summary") or {}
    n = max(1, len(steps))
    kernels = doc.get("kernels") or []
    if columns is None:
        columns = {f: [k.get(f) for k in kernels] for f in FACT_FIELDS}
    col = _columns(steps)
    kernel_steps = set(columns["step"])
    step_ids = {k for k in col("step") if k in kernel_steps}          # the steps that hold kernels
    fields = [columns[f] for f in FACT_FIELDS[:-1]]
    if len(steps):                                                     # the steps' kernels only
        keep = [k in step_ids for k in columns["step"]]
        fields = [list(compress(c, keep)) for c in fields]
    n_in = len(fields[0])
    # one pass over the steps' kernels (~10k a step in a large trace): each sum in the kernels' order
    by_step: dict = {}                       # step -> its kernels' [start, end) spans
    durs, cats, groups = [], defaultdict(float), {}
    n_launch = n_small = n_graph = n_inductor = n_assumed = 0
    launch_sum = small_sum = 0
    for step, raw, start, bound, name, category, ops, graph, floor, gap, op, l2 in zip(*fields):
        spans = by_step.get(step)
        if spans is None:
            spans = by_step[step] = []
        d = _num(raw)
        if d is not None:
            durs.append(d)
            if _num(start) is not None:
                spans.append((start, start + raw))
        d = d or 0.0
        if bound == "launch":
            n_launch += 1
            launch_sum += d
        inductor = str("" if name is None else name).startswith("triton")
        n_inductor += inductor
        if bound in ("memory", "launch") and category in FUSABLE and not inductor \
                and not (isinstance(ops, list) and len(ops) > 1):      # an unfused memory-bound kernel
            n_small += 1
            small_sum += d
        if graph:
            n_graph += 1
        if l2 == "assumed":
            n_assumed += 1
        cats[str(category)] += d
        floor, gap = _num(floor), _num(gap)
        if floor is not None and gap is not None:                       # time above the floor, by (name, op)
            e = groups.get((name, op))
            if e is None:
                e = groups[(name, op)] = {"name": name, "op": op, "us": 0.0, "floor_us": 0.0, "count": 0,
                                          "bound": bound}
            e["us"] += gap * floor
            e["floor_us"] += floor
            e["count"] += 1
    per_step = [_gaps(spans) for spans in by_step.values()]
    gaps = [g for step_gaps in per_step for g in step_gaps]
    largest = [max(step_gaps, default=0.0) for step_gaps in per_step]
    idle = sum(gaps)
    kernel_us = _mean(col("kernel_us"))
    window = sum(_num(x) or 0.0 for x in col("window_us"))
    busy_us = window - sum(_num(x) or 0.0 for x in col("idle_us"))
    fused = _mean(s.get("fused_floor_us_per_step") or [])
    kinds = sorted({k for k in (s.get("fused_floor_kind_per_step") or []) if k})
    floor = _mean(col("floor_us"))
    costed_us = _mean(col("costed_us"))
    return {
        "steps": len(steps),
        "timed": bool(durs),
        "cpu_only": bool(kernels) and all(k == "cpu_op" for k in columns["kind"]),
        "kernels_per_step": n_in / n,
        "kernel_us_per_step": kernel_us,
        "median_kernel_us": median(durs) if durs else None,
        "window_us_per_step": window / n if window else None,
        "busy_pct": 100.0 * busy_us / window if window > 0 else None,
        "idle_us_per_step": idle / n,
        "idle_gaps_per_step": len(gaps) / n,
        "median_idle_gap_us": median(gaps) if gaps else None,
        "largest_idle_gap_share": (sum(largest) / idle) if idle > 0 else None,
        "graph_share": n_graph / n_in if n_in else 0.0,
        "shortest_kernel_us": launch_us,
        "launch_bound_kernels_per_step": n_launch / n,
        "launch_bound_us_per_step": launch_sum / n,
        "l2_assumed_kernels_per_step": n_assumed / n,
        "unfused_memory_kernels_per_step": n_small / n,
        "unfused_memory_us_per_step": small_sum / n,
        "inductor_kernels_per_step": n_inductor / n,
        "floor_us_per_step": floor,
        "gap": (costed_us / floor) if costed_us and floor else None,
        "costed_pct": _mean(s.get("costed_pct_per_step") or []),
        "fused_floor_us_per_step": fused,
        "fused_floor_kind": "/".join(kinds) or None,
        "top_categories": _top_categories(cats, n),
        "top_above_floor": _above_floor(groups, n),
    }


def _top_categories(t: dict, n: int) -> list[dict]:
    """The three categories with the most time (``t``: category -> its kernels' µs)."""
    total = sum(t.values())
    return [{"category": c, "us_per_step": v / n, "share": v / total if total else None}
            for c, v in sorted(t.items(), key=lambda kv: -kv[1])[:3]]


def _above_floor(g: dict, n: int, top: int = 3) -> list[dict]:
    """Kernel groups (name, op) by time above their floor: a row's gap × floor is the time of its op
    call's kernels (a split-K reduce counts with its GEMM), minus the floor."""
    rows = sorted(g.values(), key=lambda e: -(e["us"] - e["floor_us"]))[:top]
    return [dict(r, us=r["us"] / n, floor_us=r["floor_us"] / n, count=r["count"] / n,
                 above_us=(r["us"] - r["floor_us"]) / n, gap=r["us"] / r["floor_us"] if r["floor_us"] else None)
            for r in rows if r["us"] > r["floor_us"]]


def diagnose(doc: dict, launch_us: float | None = None, columns: dict | None = None) -> dict:
    """``{"verdict", "lines" (one or two), "text", "next", "facts"}`` for one explain document
    (``columns``: as ``facts_of`` takes them)."""
    f = facts_of(doc, launch_us, columns)
    if f["cpu_only"]:
        return _result("cpu-only", [f"CPU-only trace: {f['kernels_per_step']:.0f} top-level CPU ops per step, no "
                                    "device kernels: nothing here bounds a GPU."], None, f)
    if not f["kernels_per_step"]:
        return _result("no kernels", ["No kernels inside the steps: nothing to diagnose."], None, f)
    if not f["timed"]:
        return _result("untimed", [f"An untimed graph: {f['kernels_per_step']:.0f} kernels, floor sum "
                                   f"{_us(f['floor_us_per_step'])}, one-kernel floor "
                                   f"{_us(f['fused_floor_us_per_step'])}; no times, so nothing says what bounds "
                                   "it."], None, f)
    verdict, first = _where(f)
    nxt = _next(verdict, f)
    second = _floors(f) + (f" Next: {nxt}" if nxt else "")
    return _result(verdict, [first, second], nxt, f)


def _result(verdict: str, lines: list[str], nxt: str | None, facts: dict) -> dict:
    return {"verdict": verdict, "lines": lines, "text": "\n".join(lines), "next": nxt, "facts": facts}


def _where(f: dict) -> tuple[str, str]:
    busy, k = f["busy_pct"], f["kernels_per_step"]
    per = f" (mean of {f['steps']} steps)" if f["steps"] > 1 else ""
    if busy is not None and busy < BUSY_HOST:
        spread = f["largest_idle_gap_share"] is not None and f["largest_idle_gap_share"] < ONE_GAP
        head = (f"GPU busy {_pct(busy)} of the step{per}, {_us(f['kernel_us_per_step'])} of kernels in a "
                f"{_us(f['window_us_per_step'])} span")
        if k >= MANY_KERNELS and spread:
            launch = ""
            if f["launch_bound_kernels_per_step"] and f["shortest_kernel_us"]:
                launch = (f"; {_n(f['launch_bound_kernels_per_step'])} have a floor below the device's shortest "
                          f"kernel ({_us(f['shortest_kernel_us'])})")
            return "launch-bound", (f"Launch-bound: {head}; {_n(k)} kernels per step (median "
                                    f"{_us(f['median_kernel_us'])}) wait on the host: "
                                    f"{_us(f['idle_us_per_step'])} idle in {_n(f['idle_gaps_per_step'])} gaps "
                                    f"(median {_us(f['median_idle_gap_us'])}){launch}.")
        one_gap = not spread and f["largest_idle_gap_share"] is not None and f["idle_gaps_per_step"] >= 3
        why = (f"one gap holds {_pct(100 * f['largest_idle_gap_share'])} of the {_us(f['idle_us_per_step'])} idle"
               if one_gap else f"{_us(f['idle_us_per_step'])} idle between only {_n(k)} kernels per step")
        return "host-bound", f"Host-bound: {head}; {why}: the GPU waits while the host does other work."
    cats = ", ".join(f"{c['category']} {_pct(100 * c['share'])}" for c in f["top_categories"] if c["share"])
    top = f["top_above_floor"]
    most = ""
    if top:
        t = top[0]
        most = (f"; most time above a floor: {compact_name(t['name'], 48)} ({_op(t['op'])}{_n(t['count'])}×/step, "
                f"{_us(t['us'])} against {_us(t['floor_us'])}, {_times(t['gap'])})")
    return "kernel-bound", (f"Kernel-bound: GPU busy {_pct(busy)} of the step{per}, "
                            f"{_us(f['kernel_us_per_step'])} of kernels ({cats}){most}.")


def _n(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"


def _op(op) -> str:
    return f"{str(op).removeprefix('aten::')}, " if op else ""


def _floors(f: dict) -> str:
    t, floor, fused = f["kernel_us_per_step"], f["floor_us_per_step"], f["fused_floor_us_per_step"]
    if floor is None:
        return "No floors (no device spec, or no kernel costed)."
    out = (f"Kernel time {_us(t)} is {_times(f['gap'])} its floor sum {_us(floor)} "
           f"({_pct(f['costed_pct'])} of the time costed)")
    if fused:
        kind = {"exact": "exact, from the execution trace", "lower_bound": "a lower bound",
                "estimate": "an estimate: not every kernel joined an execution trace"}.get(
            f["fused_floor_kind"] or "", f["fused_floor_kind"] or "")
        if fused > floor * 1.001:          # fusion counted tensors the per-kernel floors do not: no ratio
            out += f"; one-kernel floor {_us(fused)} ({kind}) exceeds the floor sum, so it is not compared here"
        else:
            out += (f"; one-kernel floor {_us(fused)} ({kind}): the step's kernels take {_times(t / fused)} it"
                    + (f", its GPU span {_times(f['window_us_per_step'] / fused)}"
                       if f["busy_pct"] is not None and f["busy_pct"] < BUSY_HOST and f["window_us_per_step"] else ""))
    if f.get("l2_assumed_kernels_per_step"):
        out += (f". {_n(f['l2_assumed_kernels_per_step'])} kernels per step ran below their DRAM floor: their "
                "inputs are assumed in L2 (bound 'L2 assumed'; cost_note says why)")
    return out + "."


def _next(verdict: str, f: dict) -> str | None:
    """The next thing to try, only where the figures support it."""
    t = f["kernel_us_per_step"] or 0.0
    small = f["unfused_memory_kernels_per_step"]
    fuse = small >= MANY_UNFUSED and t > 0 and f["unfused_memory_us_per_step"] >= UNFUSED_SHARE * t
    how = "" if f["inductor_kernels_per_step"] else "; torch.compile"
    fusion = (f"fuse the {_n(small)} single-op memory-bound elementwise/norm kernels per step "
              f"({_us(f['unfused_memory_us_per_step'])}, {_pct(100 * f['unfused_memory_us_per_step'] / t) if t else '-'} "
              f"of kernel time{how})")
    if verdict == "launch-bound":
        if f["graph_share"] >= 0.5:
            return ("the kernels already replay from CUDA graphs: the idle is the host between replays "
                    "(Python, synchronisation, data)" + (f"; {fusion}" if fuse else "") + ".")
        return ("capture the step in a CUDA graph (torch.compile mode=\"reduce-overhead\", or torch.cuda.graphs) so "
                f"its {_n(f['kernels_per_step'])} kernels launch at once" + (f"; then {fusion}" if fuse else "") + ".")
    if verdict == "host-bound":
        return "look at the host side of the idle time (CPU ops, data loading, synchronisation) in the trace."
    if fuse:
        return fusion[0].upper() + fusion[1:] + "."
    top = f["top_above_floor"]
    if top and top[0]["above_us"] >= 0.2 * t and (top[0]["gap"] or 0) >= 2:
        return (f"{compact_name(top[0]['name'], 48)}: {_us(top[0]['above_us'])} per step above its floor, "
                f"{_pct(100 * top[0]['above_us'] / t)} of kernel time.")
    return None


def with_diagnosis(doc: dict, launch_us: float | None = None, columns: dict | None = None) -> dict:
    """The document with ``summary.diagnosis`` set (in place) and returned."""
    doc.setdefault("summary", {})["diagnosis"] = diagnose(doc, launch_us, columns)
    return doc


def document(trace) -> dict:
    """``explain_dict(trace)`` with its diagnosis: the one document every format is written from."""
    from tracekit.report.document import explain_dict

    from tracekit.cost.roofline import launch_floor

    spec = trace.spec      # the launch floor the gaps and bounds use: the spec's, or the trace's own shortest
    columns: dict = {}     # the kernels' fields as the document's kernels hold them: no dict read per kernel
    doc = explain_dict(trace, columns)
    return with_diagnosis(doc, launch_floor(trace.kernels, spec) if spec is not None else None, columns)
