"""``explain --fusion``: per step, the chain of kernels with their fused ops, the intermediates
between them and the fusion headroom (docs/fusion.md)."""

from __future__ import annotations

import networkx as nx
from rich.table import Table

from tracekit.fusion.dataflow import fusion_summary, graph_of, step_fusion
from tracekit.report.fmt import fmt_bytes, fmt_count, fmt_us, short_name

CHAIN_ROWS = 40          # kernels shown per chain
CHAIN_STEPS = 2          # steps whose chain is shown


def _tensor(t) -> str:
    return f"{'x'.join(map(str, t.shape)) or 'scalar'} {t.dtype}"


def print_fusion(console, trace) -> None:
    """Step table of fusion numbers, then the kernel chain of the first steps."""
    summary = fusion_summary(trace)
    names = {s.index: s.name for s in trace.steps}
    st = Table(title="fusion per step (headroom: bytes intermediates cost because kernels are split)",
               show_edge=False)
    for col in ("step", "kernels", "op calls", "fused ops", "ops/kernel", "intermediates", "headroom",
                "one-kernel bytes", "per-kernel bytes", "one-kernel floor", "per-kernel floors"):
        st.add_column(col, justify="right")
    for p in summary["fusion_per_step"]:
        ratio = p["aten_ops_per_kernel"]
        st.add_row(str(names.get(p["step"], p["step"])), str(p["kernels"]), str(p["op_calls"]), str(p["fused_ops"]),
                   "-" if ratio is None else f"{ratio:.2f}", str(p["intermediates"]), fmt_bytes(p["headroom_bytes"]),
                   fmt_bytes(p["fused_bytes"]), fmt_bytes(p["split_bytes"]), fmt_us(p["fused_floor_us"]),
                   fmt_us(p["split_floor_us"]))
    console.print(st)
    rules = list(dict.fromkeys(summary["fusion_rule"]))
    for rule in rules:
        console.print(f"rule: {rule}", highlight=False)
    for p in summary["fusion_per_step"][:CHAIN_STEPS]:
        _print_chain(console, trace, p["step"], names.get(p["step"], str(p["step"])))


def _print_chain(console, trace, step: int, name: str) -> None:
    f = step_fusion(trace, step)
    nodes, values = f["nodes"], f["values"]
    if not nodes:
        return
    ct = Table(title=f"kernel chain, {name} ({len(nodes)} op calls)", show_edge=False)
    for col in ("#", "kernel", "fused ops", "reads from outside", "writes → read by"):
        ct.add_column(col, overflow="fold", max_width=60 if col == "kernel" else 44, no_wrap=col == "kernel")
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
    for n in nodes[:CHAIN_ROWS]:
        kernel = short_name(n.names[0], 70) + (f" (+{len(n.names) - 1} kernels)" if len(n.names) > 1 else "")
        unknown = n.io is None or n.io.writes is None
        ct.add_row(str(n.index), kernel, "+".join(n.fused_ops) or "-", ", ".join(outside[n.index]) or "-",
                   "unknown" if unknown else ", ".join(writes[n.index]) or "-")
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
