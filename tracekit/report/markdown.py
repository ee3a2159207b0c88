"""``explain --format markdown``: a PR comment: the diagnosis, the per-step table, the top kernel groups
and time by category, from the same explain document and kernel groups as the table and HTML report.

The pieces (``md_text``, ``md_code``, ``md_table``, ``md_diagnosis``, ``md_steps``) are what ``check`` and ``diff``
write their Markdown with, so a kernel name, a path or a table cell is escaped the same way everywhere."""

from __future__ import annotations

import math
from pathlib import Path

from tracekit.model.trace import Trace
from tracekit.report.fmt import clip, compact_name, fmt_gap, fmt_us, short_name, step_cells
from tracekit.report.phases import graph_replay_line
from tracekit.report.phases_view import phase_cells
from tracekit.report.table import fmt_per_step, top_groups, top_title


def md_text(text, width: int = 120) -> str:
    """Trace text for a Markdown table cell: one line, no pipe or backtick to break the table."""
    return clip(text, width).replace("\\", "\\\\").replace("|", "\\|").replace("`", "'").replace("*", "\\*")


def md_code(text, width: int = 60) -> str:
    """Trace text as inline code in Markdown (a table cell included): no backtick or pipe inside."""
    s = clip(text, width).replace("`", "'").replace("|", "¦")
    return f"`{s}`" if s else ""


_code = md_code


def md_name(name: str, width: int = 60) -> str:
    """A kernel name for Markdown: ``short_name``, or ``compact_name`` when that is still too long."""
    s = short_name(name, 400)
    return s if len(s) <= width else compact_name(name, width)


_name = md_name


def md_table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines: ``align`` one letter per column (``l`` left, ``r`` right); cells as given
    (callers escape trace text with ``md_text`` / ``md_code``)."""
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    return ["| " + " | ".join(header) + " |", rule] + ["| " + " | ".join(r) + " |" for r in rows]


def md_diagnosis(lines: list[str]) -> list[str]:
    """The diagnosis as a quote, its first line in bold."""
    out = []
    for i, line in enumerate(lines):
        out += ([">"] if i else []) + ["> " + (f"**{md_text(line, 2000)}**" if i == 0 else md_text(line, 2000))]
    return out


def md_steps(steps: list[dict], cpu_only: bool = False) -> list[str]:
    """The per-step table of an explain document's ``steps`` (a CPU-only trace's rows are CPU ops): every
    step up to ``fmt.STEP_ROWS``, else the first and last halves around one elided row, as the table."""
    head = (["step", "CPU ops", "op time", "costed", "floor", "gap", "CPU busy", "idle"] if cpu_only else
            ["step", "kernels", "kernel time", "costed", "floor", "gap", "GPU busy", "idle"])

    def fill(s: dict) -> dict:
        return dict(zip(head, [md_text(s["name"], 40), str(s["kernels"]), fmt_us(s["kernel_us"]),
                               _pct(s.get("costed_pct")), fmt_us(s.get("floor_us")), fmt_gap(s.get("gap")),
                               _pct(s.get("busy_pct")), fmt_us(s.get("idle_us"))]))
    cells, n, note = step_cells(steps, head, fill)
    table = md_table(head, "lrrrrrrr", [[cells[c][i] for c in head] for i in range(n)])
    return ([f"_{md_text(note.strip(' ()'))}_", ""] if note else []) + table


def _pct(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0f}%"


def markdown(traces: list[Trace], docs: list[dict], top: int = 15, by: str = "kernel", sort: str = "time",
             pattern=None) -> str:
    """The Markdown report of each trace (several MLX graphs: one section each); ``by``, ``sort``,
    ``pattern``: what the top table shows (``table.top_groups``)."""
    return "\n\n".join(_one(t, d, top, gi if len(traces) > 1 else None, by, sort, pattern)
                       for gi, (t, d) in enumerate(zip(traces, docs)))


def _one(trace: Trace, doc: dict, top: int, graph: int | None, by: str = "kernel", sort: str = "time",
         pattern=None) -> str:
    dev = doc.get("device") or {}
    name = Path(str(trace.path)).name if trace.path else "trace"
    head = f"### tracekit explain: {md_text(name, 80)}" + (f" (graph {graph})" if graph is not None else "")
    lines = [head, "",
             f"Device: {md_text(dev.get('name') or 'none named', 80)}; spec: "
             f"{md_text(dev.get('spec') or 'none (no floors)', 40)}; {len(doc['steps'])} step(s), "
             f"rule {md_text(doc['summary'].get('step_rule'), 60)}; kernel time as the profiler recorded it.", ""]
    lines += md_diagnosis((doc["summary"].get("diagnosis") or {}).get("lines", []))
    cpu_only = bool(doc["kernels"]) and all(k.get("kind") == "cpu_op" for k in doc["kernels"])
    lines += [""] + md_steps(doc["steps"], cpu_only)
    if line := graph_replay_line(trace):
        lines += ["", md_text(line, 2000)]
    if doc.get("phases"):
        lines += ["", "**Per phase** (J/token: n/a, a trace holds no energy)", ""]
        lines += md_table(["", *(p["phase"] for p in doc["phases"])], "l" + "r" * len(doc["phases"]),
                          [[name, *cells] for name, cells in phase_cells(doc["phases"])])
    groups = top_groups(trace, by, sort, pattern)
    steps = max(1, len(trace.steps))
    title = top_title(trace, by, sort, pattern, min(top, len(groups)), len(groups)).removeprefix("top ")
    lines += ["", f"**Top {md_text(title)})**".replace("step(s)", "steps"), ""]
    if by == "kernel":
        head, align = ["kernel", "op", "category", "count", "time", "floor", "gap", "bound"], "lllrrrrl"
    else:
        head = [by] + (["category"] if by == "op" else []) + ["count", "time", "floor", "gap", "bound"]
        align = "l" + ("l" if by == "op" else "") + "rrrrl"
    rows = []
    for r in groups.head(top).itertuples():
        first = [md_code(md_name(r.name))] if by == "kernel" else [md_text(r.name.removeprefix("aten::"), 60)]
        mid = ([md_text(r.op_name.removeprefix("aten::"), 40), md_text(r.category)] if by == "kernel"
               else [md_text(r.category)] if by == "op" else [])
        rows.append(first + mid + [fmt_per_step(r.count), fmt_us(r.dur_us),
                                   fmt_us(r.floor_us if r.floor_us else float("nan")), fmt_gap(r.gap), md_text(r.bound_s)])
    lines += md_table(head, align, rows)
    if len(groups) > top:
        lines.append(f"\n{len(groups) - top} more {'kernel groups' if by == 'kernel' else by + ' groups'}: "
                     "`tracekit explain --format json`.")
    cats = doc["summary"].get("by_category") or {}
    total = sum(c["dur_us"] for c in cats.values()) or float("nan")
    if cats:
        over = f", mean over {steps} steps" if steps > 1 else ""
        lines += ["", f"**By category** (per step{over})", ""]
        lines += md_table(["category", "kernels", "time", "share"], "lrrr",
                          [[md_text(c), fmt_per_step(v["count_per_step"]), fmt_us(v["dur_us"] / steps),
                            _pct(100 * v["dur_us"] / total)]
                           for c, v in sorted(cats.items(), key=lambda kv: -kv[1]["dur_us"])])
    fused = doc["summary"].get("fused_floor_us_per_step") or []
    if any(f is not None for f in fused):
        kinds = sorted({k for k in doc["summary"].get("fused_floor_kind_per_step") or [] if k})
        names = [md_text(s.get("name", s.get("step")), 40) for s in doc["steps"]]
        if len(names) != len(fused):
            names = [""] * len(fused)
        named = [f"{n} {fmt_us(f)}".strip() for n, f in zip(names, fused)]
        lines += ["", f"One-kernel floor per step: {', '.join(named[:8])}"
                      f"{' …' if len(fused) > 8 else ''} ({'/'.join(kinds)}: every op of the step in one kernel, "
                      "docs/fusion.md)."]
    return "\n".join(lines) + "\n"
