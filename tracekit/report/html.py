"""``explain --html report.html``: one self-contained page (inline CSS and SVG, no script, nothing
fetched): the diagnosis, per-step table, roofline, bandwidth strip, per-step timeline, per-category,
per-op, top-gap and top-kernel tables, and the fusion chain of one step (docs/report.md)."""

from __future__ import annotations

import math
import statistics
from html import escape
from pathlib import Path

import pandas as pd

from tracekit.fusion.dataflow import step_fusion
from tracekit.model.trace import Step, Trace
from tracekit.report.charts import bandwidth_svg, category_css, legend, plotted, roofline_svg, timeline_svg
from tracekit.report.fmt import clip, compact_name, fmt_bytes, fmt_count, fmt_gap, fmt_us, short_name, step_cells
from tracekit.report.phases import graph_replay_line
from tracekit.report.phases_view import phase_cells
from tracekit.report.table import fmt_per_step, kernel_groups
from tracekit.version import __version__

TIMELINE_STEPS = 2      # steps drawn on the timeline
TOP_ROWS = 25           # rows of the op, gap and kernel tables
CHAIN_ROWS = 60         # op calls of the fusion chain

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1100px;
color:#1d1d1f;padding:0 16px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
.meta{color:#555}.note{color:#555;font-size:13px}
.diag{border-left:5px solid #888;background:#f6f6f6;padding:10px 14px;margin:14px 0}
.diag.launch-bound,.diag.host-bound{border-color:#d62728}.diag.kernel-bound{border-color:#1f77b4}
.diag p{margin:4px 0}.diag p:first-child{font-weight:600}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{padding:3px 8px;border-bottom:1px solid #e4e4e4;text-align:right;white-space:nowrap}
th{background:#fafafa;position:sticky;top:0}td.l,th.l{text-align:left}
th.k{text-align:left}td.k{text-align:left;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;white-space:normal;
min-width:220px;max-width:420px;overflow-wrap:anywhere}td.w,th.w{text-align:left;white-space:normal;min-width:90px}
.scroll{overflow-x:auto}
.chart{max-width:100%;height:auto;display:block}
.grid{stroke:#eee}.frame{fill:none;stroke:#bbb}.tick{font-size:11px;fill:#555}.axis{font-size:12px;fill:#333}
.roof{stroke:#333;stroke-width:1.5}.roof.bw{stroke:#d62728}.rooflabel{font-size:11px;fill:#333}
.mark{fill-opacity:.55;stroke:#222;stroke-width:.6}.mark:hover{fill-opacity:.95;stroke-width:1.5}
.idle{fill:#ececec}
.key{display:inline-block;margin-right:12px;font-size:12px}
.key i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px;border-radius:2px}
details{margin:6px 0}
"""


def _e(x) -> str:
    return escape(str(x), quote=True)


def _num(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _pct(x) -> str:
    return "-" if _num(x) is None else f"{x:.0f}%"


def _table(headers: list[str], rows: list[list[str]], left: tuple = (0,), kernel: tuple = (), wrap: tuple = ()) -> str:
    """An HTML table of already formatted cells (escaped here): ``kernel`` columns in monospace,
    ``wrap`` columns (shapes, tensor lists) may wrap, ``left`` ones are left-aligned."""
    def cls(i):
        return (' class="k"' if i in kernel else ' class="w"' if i in wrap else ' class="l"' if i in left else "")
    def td(i, c):
        if isinstance(c, tuple):              # (text, hover text): a shortened kernel name and its full name
            return f'<td{cls(i)} title="{_e(c[1])}">{_e(c[0])}</td>'
        return f"<td{cls(i)}>{_e(c)}</td>"
    head = "".join(f"<th{cls(i)}>{_e(h)}</th>" for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(td(i, c) for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _kernel_cell(name: str, width: int = 72):
    """A kernel name cut to ``width`` for a table cell, with its full name (up to 400 characters) on hover."""
    full = short_name(name, 400)
    return (full, full) if len(full) <= width else (compact_name(name, width), full)


def write_html(traces: list[Trace], docs: list[dict], path: str | Path, devices: list | None = None) -> int:
    """Write the report of every trace (several MLX graphs: one section each) to ``path``; its size in bytes.
    ``devices`` (explain --devices): each trace's floors on those devices, as a section of its own."""
    sections = [None] * len(traces)
    if devices is not None:
        from tracekit.report.devices import devices_section
        sections = [devices_section(t, devices) for t in traces]
    parts = [html_section(t, d, gi if len(traces) > 1 else None, sec)
             for gi, (t, d, sec) in enumerate(zip(traces, docs, sections))]
    name = Path(str(traces[0].path)).name if traces else "trace"
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>tracekit: {_e(clip(name, 80))}'
            f'</title><meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}{category_css()}</style></head>'
            f'<body>{"".join(parts)}<p class="note">tracekit {_e(__version__)}: how to read this page: docs/report.md '
            "in the tracekit repository.</p></body></html>\n")
    from tracekit.outputs import write_atomic

    return write_atomic(path, page.encode("utf-8", "backslashreplace"), "--html")


def html_section(trace: Trace, doc: dict, graph: int | None = None, devices: dict | None = None) -> str:
    dev = doc.get("device") or {}
    groups = kernel_groups(trace)
    n = max(1, len(trace.steps))
    total = float(groups["dur_us"].sum()) if len(groups) else 0.0
    title = f"tracekit: {clip(Path(str(trace.path)).name, 100)}" + (f" (graph {graph})" if graph is not None else "")
    out = [f"<section><h1>{_e(title)}</h1><p class=\"meta\">{_e(clip(trace.path, 300))}<br>device: "
           f"{_e(clip(dev.get('name') or 'none named'))} · spec: {_e(dev.get('spec') or 'none (no floors)')}"
           f"{_e(' (' + dev['spec_name'] + ')') if dev.get('spec_name') else ''} · {len(doc['steps'])} step(s), rule "
           f"{_e(clip(doc['summary'].get('step_rule')))} · measured: per-kernel device time as the profiler recorded "
           "it</p>"]
    diag = doc["summary"].get("diagnosis") or {}
    out.append(f'<div class="diag {_e(diag.get("verdict", ""))}" id="diagnosis">'
               + "".join(f"<p>{_e(line)}</p>" for line in diag.get("lines", [])) + "</div>")
    out.append("<h2>Steps</h2>" + _steps(doc))
    if line := graph_replay_line(trace):
        out.append(f'<p class="note" id="graph-replays">{_e(line)}</p>')
    if doc.get("phases"):                      # serving: the phases side by side (docs/serving.md)
        rows = [[name, *cells] for name, cells in phase_cells(doc["phases"])]
        out.append("<h2>Phases</h2><p class=\"note\">tok/s ceiling: tokens ÷ one-kernel floor; J/token: n/a, a "
                   "trace holds no energy.</p>" + _table(["", *(p["phase"] for p in doc["phases"])], rows))
    pts, flat = plotted(groups)
    missing = groups[~groups.index.isin(pts.index) & ~groups.index.isin(flat.index)] if len(groups) else groups
    miss_us = float(missing["dur_us"].fillna(0).sum()) if len(missing) else 0.0
    out.append("<h2>Roofline</h2><p class=\"note\">One circle per kernel group (kernel name, op, shapes), area by its "
               "share of kernel time; x: FLOPs per minimal byte, y: FLOPs per second of its measured time. Lines: the "
               "device's peaks per dtype (matrix and vector units) and its memory bandwidth. A circle's distance below "
               "its roof is its gap. Hover a circle for its numbers.</p>")
    out.append(roofline_svg(groups, trace.spec, total) + legend(dict.fromkeys(pts["category"]) if len(pts) else []))
    if len(flat):
        out.append("<p class=\"note\">Kernel groups that move bytes but count no FLOPs (copies, fills, indexing): "
                   "achieved bytes per second against the memory bandwidth.</p>" + bandwidth_svg(groups, trace.spec, total))
    out.append(f'<p class="note" id="plotted">{len(pts) + len(flat)} of {len(groups)} kernel groups plotted; '
               f"{len(missing)} without a cost model or without time ({fmt_us(miss_us)} per step, "
               f"{_pct(100 * miss_us / total if total else None)} of kernel time) are not.</p>")
    shown = trace.steps[:TIMELINE_STEPS]
    out.append(f"<h2>Timeline</h2><p class=\"note\">Kernels by category over each step's GPU span (first "
               f"{len(shown) or 1} of {n} steps, one time scale; grey: the GPU idle). Hover a bar for its kernels.</p>")
    out.append(timeline_svg(trace, shown or [Step(0, "whole trace", 0.0, 0.0)])
               + legend(dict.fromkeys(trace.kernels["category"].astype(str))))
    out.append("<h2>By category</h2>" + _categories(doc, n))
    out.append("<h2>By op</h2>" + _ops(trace, n))
    out.append("<h2>Largest gaps: time above the floor</h2>" + _gaps(groups))
    out.append("<h2>Top kernels by time</h2>" + _kernels(groups))
    out.append("<h2>Fusion chain</h2>" + _chain(trace, doc))
    if doc.get("modules"):                        # explain --by module (issue 23)
        from tracekit.report.tree_html import modules_section
        out.append(modules_section(doc["modules"]))
    if devices is not None:
        from tracekit.report.devices_view import to_html
        out.append("<h2>The same work on other devices</h2>" + to_html(devices, _table))
    if doc.get("warnings"):
        out.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{_e(clip(w, 500))}</li>" for w in doc["warnings"]) + "</ul>")
    return "".join(out) + "</section>"


def _steps(doc: dict) -> str:
    """Every step up to ``fmt.STEP_ROWS``, else the first and last halves around one elided row (the
    JSON and CSV list every step)."""
    cpu = bool(doc["kernels"]) and all(k.get("kind") == "cpu_op" for k in doc["kernels"])   # rows are CPU ops
    head = ["step", "CPU ops" if cpu else "kernels", "op time" if cpu else "kernel time", "costed", "floor sum",
            "gap", "CPU busy" if cpu else "GPU busy", "idle", "one-kernel floor"]
    steps, one_kernel = doc["steps"], doc["summary"].get("fused_floor_us_per_step")

    def fill(i: int) -> dict:
        s, f = steps[i], one_kernel[i] if one_kernel else None
        return dict(zip(head, [s["name"], str(s["kernels"]), fmt_us(s["kernel_us"]), _pct(s.get("costed_pct")),
                               fmt_us(s.get("floor_us")), fmt_gap(s.get("gap")), _pct(s.get("busy_pct")),
                               fmt_us(s.get("idle_us")), fmt_us(f)]))
    cells, n, note = step_cells(range(len(steps)), head, fill)
    return ((f'<p class="note">{_e(note.strip(" ()"))}</p>' if note else "")
            + _table(head, [[cells[c][i] for c in head] for i in range(n)]))


def _categories(doc: dict, n: int) -> str:
    cats = doc["summary"].get("by_category") or {}
    total = sum(c["dur_us"] for c in cats.values())
    rows = [[c, fmt_per_step(v["count_per_step"]), fmt_us(v["dur_us"] / n), _pct(100 * v["dur_us"] / total if total else None)]
            for c, v in sorted(cats.items(), key=lambda kv: -kv[1]["dur_us"])]
    return _table(["category", "kernels per step", "time per step", "share"], rows)


def _ops(trace: Trace, n: int) -> str:
    df = trace.kernels
    df = df[df["step"] >= 0] if trace.steps else df
    if df.empty:
        return '<p class="note">No kernels.</p>'
    view = df.assign(op_name=df["op"].fillna("(no op)").astype(str),
                     covered_us=df["dur_us"].where(df["covered"], 0.0))
    g = view.groupby("op_name").agg(kernels=("dur_us", "size"), us=("dur_us", "sum"), covered=("covered_us", "sum"),
                                    floor_sum=("floor_us", "sum"), floored=("floor_us", "count"),
                                    flop_sum=("flops", "sum"), byte_sum=("bytes", "sum")).sort_values("us", ascending=False)
    rows = [[op, fmt_per_step(r.kernels / n), fmt_us(r.us / n), fmt_us(r.floor_sum / n if r.floored else None),
             fmt_gap(r.covered / r.floor_sum if r.floored and r.floor_sum > 0 else None),
             fmt_count(r.flop_sum / n if r.flop_sum else None), fmt_bytes(r.byte_sum / n if r.byte_sum else None)]
            for op, r in zip(g.index[:TOP_ROWS], g.head(TOP_ROWS).itertuples(index=False))]
    more = f'<p class="note">{len(g) - TOP_ROWS} more ops.</p>' if len(g) > TOP_ROWS else ""
    return _table(["op", "kernels per step", "time per step", "floor", "gap", "FLOPs", "bytes"], rows) + more


BOUND_TITLES = {"L2 hot": "gap against the hot-L2 floor (bytes / the spec's l2_gbs): the execution trace shows a "
                          "kernel just before wrote its input",
                "L2 assumed": "ran below its DRAM floor and its bytes fit in L2, assumed to have served them (no "
                              "execution trace proves it): gap against the hot-L2 floor where the spec has l2_gbs; "
                              "the JSON cost_note says more"}


def _group_row(r) -> list:
    bound = (r.bound_s, BOUND_TITLES[r.bound_s]) if r.bound_s in BOUND_TITLES else r.bound_s
    return [_kernel_cell(r.name), r.op_name.removeprefix("aten::"), str(r.category), r.shapes or "-", r.dtype_s,
            fmt_per_step(r.count), fmt_us(r.dur_us), fmt_us(r.floor_us if r.floor_us else None), fmt_gap(r.gap), bound]


HEAD = ["kernel", "op", "category", "shapes", "dtype", "per step", "time", "floor", "gap", "bound"]


def _gaps(groups: pd.DataFrame) -> str:
    g = groups[groups["gap"].notna()] if len(groups) else groups
    if g.empty:
        return '<p class="note">No kernel group with a floor.</p>'
    g = g.assign(above=g["dur_us"] - g["floor_us"]).sort_values("above", ascending=False).head(TOP_ROWS)
    rows = [[fmt_us(r.above)] + _group_row(r) for r in g.itertuples()]
    return _table(["above floor"] + HEAD, rows, left=(2, 3, 5, 10), kernel=(1,), wrap=(4,))


def _kernels(groups: pd.DataFrame) -> str:
    if groups.empty:
        return '<p class="note">No kernels.</p>'
    rows = [_group_row(r) for r in groups.head(TOP_ROWS).itertuples()]
    more = f'<p class="note">{len(groups) - TOP_ROWS} more kernel groups.</p>' if len(groups) > TOP_ROWS else ""
    return _table(HEAD, rows, left=(1, 2, 4, 9), kernel=(0,), wrap=(3,)) + more


def _tensor(t) -> str:
    return f"{'x'.join(map(str, t.shape)) or 'scalar'} {t.dtype}"


def _chain(trace: Trace, doc: dict) -> str:
    """The op-call chain of the median step by kernel time (the fusion view of ``explain --fusion``)."""
    steps = doc["steps"]
    if not steps:
        return '<p class="note">No steps.</p>'
    med = statistics.median_low([s["kernel_us"] for s in steps])
    step = next(s for s in steps if s["kernel_us"] == med)
    f = step_fusion(trace, step["step"])
    nodes, values = f["nodes"], f["values"]
    if not nodes:
        return '<p class="note">No op calls in this step.</p>'
    outside = {nd.index: [] for nd in nodes}
    writes = {nd.index: [] for nd in nodes}
    for v in values:
        if v.producer is None:
            for r in v.readers:
                outside[r].append(_tensor(v.tensor))
        elif v.readers:
            writes[v.producer].append(f"{_tensor(v.tensor)} → {', '.join(f'#{r}' for r in v.readers)}"
                                      + (" (by size only)" if v.ambiguous else ""))
        else:
            writes[v.producer].append(f"{_tensor(v.tensor)} (final)")
    rows = []
    for nd in nodes[:CHAIN_ROWS]:
        unknown = nd.io is None or nd.io.writes is None
        more_k = f" (+{len(nd.names) - 1} kernels)" if len(nd.names) > 1 else ""
        label, work = nd.shown()
        text, full = _kernel_cell(label)
        rows.append([str(nd.index), (text + more_k, full),
                     "+".join(work) or "-", clip(", ".join(outside[nd.index]) or "-", 300),
                     "unknown" if unknown and nd.exact is None else clip(", ".join(writes[nd.index]) or "-", 300)])
    more = (f'<p class="note">… {len(nodes) - CHAIN_ROWS} more op calls (JSON: summary.fusion_per_step).</p>'
            if len(nodes) > CHAIN_ROWS else "")
    head = (f'<p class="note">{_e(step["name"])} (the median step by kernel time), {len(nodes)} op calls. One-kernel '
            f"floor: {_e(fmt_bytes(f['fused_bytes']))} (outside inputs once + final outputs once), "
            f"{_e(fmt_count(f['fused_flops']))} FLOPs → {_e(fmt_us(_num(f['fused_floor_us'])))} ({_e(f['kind'])}); "
            f"per-kernel floors sum to {_e(fmt_us(f['split_floor_us']))}; fusion headroom "
            f"{_e(fmt_bytes(_num(f['headroom_bytes'])))}. Rule: {_e(clip(f['rule'], 400))}</p>")
    return head + _table(["#", "kernel", "fused ops", "reads from outside", "writes → read by"], rows,
                         left=(2,), kernel=(1,), wrap=(3, 4)) + more
