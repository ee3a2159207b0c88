"""The rich table view of explain: header, steps, then kernel groups by time."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tracekit.model.trace import Trace
from tracekit.report.document import step_table
from tracekit.report.fmt import _shapes, clip, fmt_count, fmt_gap, fmt_us, short_name
from tracekit.report.fusion_view import print_fusion


def kernel_groups(trace: Trace) -> pd.DataFrame:
    """Kernels grouped by (name, op, shapes), per-step means over the steps' kernels (kernels outside
    every step are left out when there are steps), sorted by time."""
    df = trace.kernels
    if trace.steps:
        df = df[df["step"] >= 0]
    if df.empty:
        return df
    n_steps = max(1, len(trace.steps))
    view = df.assign(shapes=df["op_dims"].map(_shapes), op_name=df["op"].fillna("-").astype(str),
                     fused=df["fused_ops"].map(lambda o: "+".join(o) if isinstance(o, list) else ""),
                     dtype_s=df["dtype"].fillna("-").astype(str), bound_s=df["bound"].fillna("-").astype(str))
    g = view.groupby(["name", "op_name", "shapes", "category", "dtype_s", "bound_s", "fused"], sort=False, dropna=False)
    out = g.agg(count=("dur_us", "size"), dur_us=("dur_us", "sum"), timed=("dur_us", "count"), flops=("flops", "sum"),
                bytes=("bytes", "sum"), floor_us=("floor_us", "sum"), floored=("floor_us", "count")).reset_index()
    out["dur_us"] = out["dur_us"].where(out["timed"] > 0)          # graphs without timings stay unknown
    out["gap"] = out["dur_us"] / out["floor_us"].where(out["floored"] == out["count"])
    for c in ("count", "dur_us", "flops", "bytes", "floor_us"):
        out[c] = out[c] / n_steps
    key = "dur_us" if out["timed"].any() else "floor_us"           # untimed graphs: biggest floors first
    return out.sort_values(key, ascending=False)


def print_tables(traces: list[Trace], top: int = 15, fusion: bool = False) -> None:
    probe = Console()
    # pipes and files get room for every column; trace text is never markup ("[/]" in a kernel name) and
    # is not highlighted (rich's highlighter is quadratic in a long name), here and in the fusion view
    console = Console(width=probe.width if probe.is_terminal else 200, markup=False, highlight=False)
    for gi, trace in enumerate(traces):
        spec = trace.spec
        title = f"graph {gi}: " if len(traces) > 1 else ""
        console.print(Text(clip(f"{title}{trace.path}", 500), style="bold"))
        console.print(f"device: {clip(trace.device_name or 'none named')}   spec: "
                      f"{clip(f'{spec.id} ({spec.name})') if spec else 'none: no floors'}")
        timed = trace.kernels["dur_us"].notna().any()
        console.print(f"steps: {len(trace.steps) or 1} (rule: {clip(trace.step_rule)})   measured: "
                      + ("per-kernel device time as recorded by the profiler" if timed else
                         "nothing: a graph without timings (counts, FLOPs, bytes and floors only)"))
        steps = step_table(trace)
        st = Table(title="per step", show_edge=False)
        for col in ("step", "kernels", "kernel time", "costed", "floor", "gap", "GPU busy", "idle between kernels"):
            st.add_column(col, justify="right")
        for r in steps.itertuples():
            costed = "-" if r.costed_pct is None or pd.isna(r.costed_pct) else f"{r.costed_pct:.0f}%"
            st.add_row(str(r.name), str(r.kernels), fmt_us(r.kernel_us), costed, fmt_us(r.floor_us), fmt_gap(r.gap),
                       "-" if r.busy_pct is None or pd.isna(r.busy_pct) else f"{r.busy_pct:.0f}%", fmt_us(r.idle_us))
        console.print(st)
        groups = kernel_groups(trace)
        kt = Table(title=f"top kernels (per step, mean over {max(1, len(trace.steps))} steps)", show_edge=False)
        kt.add_column("kernel", overflow="ellipsis", no_wrap=True, max_width=48)
        kt.add_column("category", no_wrap=True)
        kt.add_column("op", overflow="ellipsis", no_wrap=True, max_width=26)
        kt.add_column("shapes", overflow="fold", max_width=24)
        for col in ("dtype", "count", "time", "FLOPs", "bytes", "floor", "bound", "gap"):
            kt.add_column(col, justify="left" if col == "dtype" else "right", no_wrap=True)
        for r in groups.head(top).itertuples():
            kt.add_row(short_name(r.name, 70), str(r.category), clip(r.op_name.removeprefix("aten::")), clip(r.shapes),
                       clip(r.dtype_s), f"{r.count:g}", fmt_us(r.dur_us),
                       fmt_count(r.flops if r.flops else float("nan")), fmt_count(r.bytes if r.bytes else float("nan")),
                       fmt_us(r.floor_us if r.floor_us else float("nan")), r.bound_s, fmt_gap(r.gap))
        console.print(kt)
        if fusion:
            print_fusion(console, trace)
