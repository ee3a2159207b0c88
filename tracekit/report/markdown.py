"""``explain --format markdown``: a PR comment: the diagnosis, the per-step table, the top kernel groups
and time by category, from the same explain document and kernel groups as the table and HTML report."""

from __future__ import annotations

import math
from pathlib import Path

from tracekit.model.trace import Trace
from tracekit.report.fmt import clip, compact_name, fmt_gap, fmt_us, short_name
from tracekit.report.table import fmt_per_step, kernel_groups


def md_text(text, width: int = 120) -> str:
    """Trace text for a Markdown table cell: one line, no pipe or backtick to break the table."""
    return clip(text, width).replace("\\", "\\\\").replace("|", "\\|").replace("`", "'").replace("*", "\\*")


def _code(text, width: int = 60) -> str:
    s = clip(text, width).replace("`", "'").replace("|", "¦")
    return f"`{s}`" if s else ""


def _name(name: str, width: int = 60) -> str:
    s = short_name(name, 400)
    return s if len(s) <= width else compact_name(name, width)


def _pct(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0f}%"


def markdown(traces: list[Trace], docs: list[dict], top: int = 15) -> str:
    """The Markdown report of each trace (several MLX graphs: one section each)."""
    return "\n\n".join(_one(t, d, top, gi if len(traces) > 1 else None) for gi, (t, d) in enumerate(zip(traces, docs)))


def _one(trace: Trace, doc: dict, top: int, graph: int | None) -> str:
    dev = doc.get("device") or {}
    name = Path(str(trace.path)).name if trace.path else "trace"
    head = f"### tracekit explain: {md_text(name, 80)}" + (f" (graph {graph})" if graph is not None else "")
    lines = [head, "",
             f"Device: {md_text(dev.get('name') or 'none named', 80)}; spec: "
             f"{md_text(dev.get('spec') or 'none (no floors)', 40)}; {len(doc['steps'])} step(s), "
             f"rule {md_text(doc['summary'].get('step_rule'), 60)}; kernel time as the profiler recorded it.", ""]
    diag = doc["summary"].get("diagnosis") or {}
    for i, line in enumerate(diag.get("lines", [])):
        lines += ([">"] if i else []) + ["> " + (f"**{md_text(line, 2000)}**" if i == 0 else md_text(line, 2000))]
    lines += ["", "| step | kernels | kernel time | costed | floor | gap | GPU busy | idle |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in doc["steps"]:
        lines.append(f"| {md_text(s['name'], 40)} | {s['kernels']} | {fmt_us(s['kernel_us'])} | {_pct(s.get('costed_pct'))} "
                     f"| {fmt_us(s.get('floor_us'))} | {fmt_gap(s.get('gap'))} | {_pct(s.get('busy_pct'))} "
                     f"| {fmt_us(s.get('idle_us'))} |")
    groups = kernel_groups(trace)
    steps = max(1, len(trace.steps))
    lines += ["", f"**Top kernels** (per step, mean over {steps} step(s))", "",
              "| kernel | op | category | count | time | floor | gap | bound |", "|---|---|---|---:|---:|---:|---:|---|"]
    for r in groups.head(top).itertuples():
        lines.append(f"| {_code(_name(r.name))} | {md_text(r.op_name.removeprefix('aten::'), 40)} "
                     f"| {md_text(r.category)} | {fmt_per_step(r.count)} | {fmt_us(r.dur_us)} "
                     f"| {fmt_us(r.floor_us if r.floor_us else float('nan'))} | {fmt_gap(r.gap)} | {md_text(r.bound_s)} |")
    if len(groups) > top:
        lines.append(f"\n{len(groups) - top} more kernel groups: `tracekit explain --format json`.")
    cats = doc["summary"].get("by_category") or {}
    total = sum(c["dur_us"] for c in cats.values()) or float("nan")
    if cats:
        lines += ["", "**By category** (per step)", "", "| category | kernels | time | share |", "|---|---:|---:|---:|"]
        for c, v in sorted(cats.items(), key=lambda kv: -kv[1]["dur_us"]):
            lines.append(f"| {md_text(c)} | {fmt_per_step(v['count_per_step'])} | {fmt_us(v['dur_us'] / steps)} "
                         f"| {_pct(100 * v['dur_us'] / total)} |")
    fused = doc["summary"].get("fused_floor_us_per_step") or []
    if any(f is not None for f in fused):
        kinds = sorted({k for k in doc["summary"].get("fused_floor_kind_per_step") or [] if k})
        lines += ["", f"One-kernel floor per step: {', '.join(fmt_us(f) for f in fused[:8])}"
                      f"{' …' if len(fused) > 8 else ''} ({'/'.join(kinds)}: every op of the step in one kernel, "
                      "docs/fusion.md)."]
    return "\n".join(lines) + "\n"
