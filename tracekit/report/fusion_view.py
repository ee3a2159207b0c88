"""``explain --fusion``: per step, the chain of kernels with their fused ops, the intermediates
between them and the fusion headroom (docs/fusion.md).

Both tables fit the console like the top-kernels table: the step table keeps its columns in the order of
``STEP_COLUMNS`` while they fit (the first three always), the chain gives each column a set width and
puts the tensors read from outside under the kernel's name when the console is narrower than
``CHAIN_WIDE``; ``wide`` keeps every column."""

from __future__ import annotations

import networkx as nx
from rich.table import Table

from tracekit.fusion.dataflow import fusion_summary, graph_of, step_fusion
from tracekit.report.fmt import (
    cell_width,
    clip,
    compact_name,
    fit_columns,
    fmt_bytes,
    fmt_count,
    fmt_us,
    short_name,
    step_cells,
    table_width,
)

CHAIN_ROWS = 40          # kernels shown per chain
CHAIN_STEPS = 2          # steps whose chain is shown
CHAIN_WIDE = 110         # narrower consoles: "reads from outside" goes under the kernel's name
# step table columns, most important first; the first three always stay, the others drop from the end
STEP_COLUMNS = ("step", "kernels", "op calls", "one-kernel floor", "per-kernel floors", "headroom", "fused ops",
                "intermediates", "ops/kernel", "one-kernel bytes", "per-kernel bytes")


def _tensor(t) -> str:
    return f"{'x'.join(map(str, t.shape)) or 'scalar'} {t.dtype}"


def print_fusion(console, trace, wide: bool = False, summary: dict | None = None) -> None:
    """Step table of fusion numbers, then the kernel chain of the first steps. ``summary``: the trace's
    ``fusion_summary`` when the caller has it (the explain document's summary holds it)."""
    if summary is None or "fusion_per_step" not in summary:
        summary = fusion_summary(trace)
    def name(k):
        return trace.steps.name_of(k, k)                   # the 40 rows shown: no dict of every step's name

    def fill(p: dict) -> dict:
        ratio = p["aten_ops_per_kernel"]
        return {"step": clip(name(p["step"]), 32), "kernels": str(p["kernels"]),
                "op calls": str(p["op_calls"]), "fused ops": str(p["fused_ops"]),
                "ops/kernel": "-" if ratio is None else f"{ratio:.2f}",
                "intermediates": str(p["intermediates"]), "headroom": fmt_bytes(p["headroom_bytes"]),
                "one-kernel bytes": fmt_bytes(p["fused_bytes"]), "per-kernel bytes": fmt_bytes(p["split_bytes"]),
                "one-kernel floor": fmt_us(p["fused_floor_us"]), "per-kernel floors": fmt_us(p["split_floor_us"])}
    cells, n_rows, note = step_cells(summary["fusion_per_step"], STEP_COLUMNS, fill)
    cols = list(STEP_COLUMNS) if wide else fit_columns({c: cell_width(c, v) for c, v in cells.items()},
                                                       STEP_COLUMNS, set(STEP_COLUMNS[:3]), console.width)
    left = [c for c in STEP_COLUMNS if c not in cols]
    st = Table(title="fusion per step (headroom: bytes intermediates cost because kernels are split)"
               + (f"; not shown here: {', '.join(left)} (--wide)" if left else "") + note, show_edge=False)
    for col in cols:
        st.add_column(col, justify="right", no_wrap=True)
    for i in range(n_rows):
        st.add_row(*(cells[c][i] for c in cols))
    console.print(st)
    rules = list(dict.fromkeys(summary["fusion_rule"]))
    for rule in rules:
        console.print(f"rule: {rule}", highlight=False)
    for p in summary["fusion_per_step"][:CHAIN_STEPS]:
        _print_chain(console, trace, p["step"], str(name(p["step"])), wide)


def _chain_widths(width: int, n: int, wide: bool) -> dict[str, int]:
    """Column widths of the chain table on a console ``width`` cells wide (``n``: the largest index)."""
    w = {"#": max(1, len(str(n))), "fused ops": 16}
    if wide or width >= CHAIN_WIDE:
        w["reads from outside"], w["writes → read by"] = 22, 28
        w["kernel"] = 60 if wide else max(30, min(60, width - table_width(list(w.values()) + [0])))
        return {c: w[c] for c in ("#", "kernel", "fused ops", "reads from outside", "writes → read by")}
    w["fused ops"] = 12
    w["writes → read by"] = max(16, (width - w["#"] - w["fused ops"]) // 3)
    w["kernel"] = max(20, width - table_width(list(w.values()) + [0]))
    return {c: w[c] for c in ("#", "kernel", "fused ops", "writes → read by")}


def _print_chain(console, trace, step: int, name: str, wide: bool = False) -> None:
    f = step_fusion(trace, step)
    nodes, values = f["nodes"], f["values"]
    if not nodes:
        return
    widths = _chain_widths(console.width, len(nodes), wide)
    under = "reads from outside" not in widths
    ct = Table(title=f"kernel chain, {name} ({len(nodes)} op calls"
               + ("; under each kernel: the tensors it reads from outside" if under else "") + ")", show_edge=False)
    for col, w in widths.items():
        ct.add_column(col, overflow="fold", width=w, justify="right" if col == "#" else "left")
    outside = {n.index: [] for n in nodes}
    writes = {n.index: [] for n in nodes}
    for v in values:
        if v.producer is None:
            for r in v.readers:
                outside[r].append(_tensor(v.tensor))
        else:
            if v.readers:
                mark = " (by size only)" if v.ambiguous else ""
                to = ", ".join(f"#{r}" for r in v.readers)
                writes[v.producer].append(f"{_tensor(v.tensor)} → {to}{mark}")
            else:
                writes[v.producer].append(f"{_tensor(v.tensor)} (final)")
    kw = widths["kernel"]
    for n in nodes[:CHAIN_ROWS]:
        label, work = n.shown()
        more = f" (+{len(n.names) - 1} kernels)" if len(n.names) > 1 else ""
        full = short_name(label, 400)
        kernel = (full if len(full) + len(more) <= kw else compact_name(label, max(12, kw - len(more)))) + more
        unknown = n.io is None or n.io.writes is None
        reads = ", ".join(outside[n.index]) or "-"
        row = {"#": str(n.index), "kernel": kernel + (f"\n  reads {reads}" if under and outside[n.index] else ""),
               "fused ops": "+".join(work) or "-", "reads from outside": reads,
               "writes → read by": "unknown" if unknown else ", ".join(writes[n.index]) or "-"}
        ct.add_row(*(row[c] for c in widths))
    console.print(ct)
    if len(nodes) > CHAIN_ROWS:
        console.print(f"… {len(nodes) - CHAIN_ROWS} more op calls (JSON: summary.fusion_per_step)")
    inter = [v for v in values if v.intermediate]
    if inter:
        terms = " + ".join(f"{1 + len(v.readers)}·{fmt_bytes(v.tensor.nbytes)}" for v in inter[:6])
        more = f" + … ({len(inter) - 6} more)" if len(inter) > 6 else ""
        console.print(f"headroom {fmt_bytes(f['headroom_bytes'])} = {terms}{more} "
                      "(each intermediate written once and read by each later kernel)", highlight=False)
    groups = nx.number_weakly_connected_components(graph_of(nodes, values))
    console.print(f"dataflow: {groups} independent group(s) of kernels and tensors", highlight=False)
    console.print(f"one-kernel floor: {fmt_bytes(f['fused_bytes'])} (outside inputs once + final outputs once), "
                  f"{fmt_count(f['fused_flops'])} FLOPs → {fmt_us(f['fused_floor_us'])}; "
                  f"per-kernel floors sum to {fmt_us(f['split_floor_us'])}", highlight=False)
