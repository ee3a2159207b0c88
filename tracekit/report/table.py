"""The rich table view of explain: header, diagnosis, steps, then kernel groups by time.

The tables fit the console: columns are kept in a stated priority order while they fit (``STEP_COLUMNS``,
``KERNEL_COLUMNS``: the first ones always stay), the kernel name takes the width that is left and is
shortened to fit (``fmt.compact_name``), and the op, bound, category, dtype and shapes of a dropped column go on
a second line under the kernel's name. ``wide`` keeps every column; a pipe or file gets explain's ``--width``,
else $COLUMNS, else 200 columns.
"""

from __future__ import annotations

import copy
import io
from types import SimpleNamespace

import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tracekit.cost.roofline import carrier_text
from tracekit.model.trace import Trace
from tracekit.report.document import step_records
from tracekit.report.phases import graph_replay_line, step_phases
from tracekit.report.phases_view import phase_table
from tracekit.report.fmt import (
    _shapes,
    cell_width,
    clip,
    compact_name,
    fit_columns,
    fmt_count,
    fmt_gap,
    fmt_us,
    short_name,
    step_cells,
    table_width,
)
from tracekit.report.fusion_view import print_fusion

KERNEL_MIN, KERNEL_MAX = 34, 70     # the kernel name column's width range
SHAPES_MAX = 24                     # shapes fold onto more lines past this width
# kernel table columns, most important first: the first four always stay; from the end they drop
KERNEL_COLUMNS = ("time", "gap", "count", "floor", "op", "bound", "category", "dtype", "FLOPs", "bytes", "shapes")
ALWAYS = {"time", "gap", "count"}
ON_SECOND_LINE = ("op", "bound", "category", "dtype", "shapes")   # dropped text columns go under the name
# step table columns in the same order: step, kernels and kernel time always stay
STEP_COLUMNS = ("step", "kernels", "kernel time", "GPU busy", "idle", "gap", "floor", "costed")
CPU_HEADINGS = {"kernels": "CPU ops", "kernel time": "op time", "GPU busy": "CPU busy"}   # CPU-only traces


def _bound_text(df: pd.DataFrame) -> pd.Series:
    """The bound as the top table shows it: ``L2 hot`` where a memory-bound row's gap is set against its
    hot-L2 floor (cost.l2), ``L2 assumed`` where it ran below its DRAM floor and L2 is assumed to have
    served it (no execution trace proves it), so hot, assumed and cold calls of one kernel are separate rows."""
    text = carrier_text(df, "bound")
    if "l2" not in df:
        return text
    l2 = df["l2"].astype(object)
    text = text.where(~((l2 == "hot") & (text == "memory")), "L2 hot")
    return text.where(~((l2 == "assumed") & (text == "memory")), "L2 assumed")


def kernel_groups(trace: Trace) -> pd.DataFrame:
    """Kernels grouped by (name, op, shapes), per-step means over the steps' kernels (kernels outside
    every step are left out when there are steps), sorted by time. A group's gap is its time over its
    floor where every kernel in it is covered: the chunks of one op call (a fused optimizer launched
    in 11 kernels) group with the kernel that carries the call's floor."""
    df = trace.kernels
    if trace.steps:
        df = df[df["step"] >= 0]
    if df.empty:
        return df
    n_steps = max(1, len(trace.steps))
    view = df.assign(shapes=df["op_dims"].map(_shapes), op_name=df["op"].fillna("-").astype(str),
                     fused=df["fused_ops"].map(lambda o: "+".join(o) if isinstance(o, list) else ""),
                     dtype_s=carrier_text(df, "dtype"), bound_s=_bound_text(df),
                     counted=df["covered"] if "covered" in df else df["floor_us"].notna(),
                     op_time=df["gap"] * df["gap_floor_us"],  # a carrier's op call: all its kernels' time
                     gap_floor=df["gap_floor_us"])
    g = view.groupby(["name", "op_name", "shapes", "category", "dtype_s", "bound_s", "fused"], sort=False, dropna=False)
    out = g.agg(count=("dur_us", "size"), dur_us=("dur_us", "sum"), timed=("dur_us", "count"), flops=("flops", "sum"),
                bytes=("bytes", "sum"), floor_us=("floor_us", "sum"), floored=("counted", "sum"),
                op_time=("op_time", "sum"), carriers=("floor_us", "count"),
                gap_floor_us=("gap_floor", "sum")).reset_index()
    out["dur_us"] = out["dur_us"].where(out["timed"] > 0)          # graphs without timings stay unknown
    out["all_floored"] = (out["floored"] == out["count"]) & (out["carriers"] > 0)
    out["floor_us"] = out["floor_us"].where(out["carriers"] > 0)   # chunks whose op's floor another group holds
    # the gap of the op calls whose floor the group carries (their kernels' time wherever they are grouped)
    out["gap"] = out["op_time"] / out["gap_floor_us"].where(out["all_floored"])   # launch floor included
    for c in ("count", "dur_us", "flops", "bytes", "floor_us", "gap_floor_us"):
        out[c] = out[c] / n_steps
    key = "dur_us" if out["timed"].any() else "floor_us"           # untimed graphs: biggest floors first
    return out.sort_values(key, ascending=False)


BY = ("kernel", "op", "category")            # what the top table groups by (explain --by)
SORT = {"time": "dur_us", "gap": "gap", "floor": "floor_us", "count": "count"}    # explain --sort, descending
BY_DROPS = {"kernel": (), "op": ("op", "shapes"), "category": ("op", "category", "shapes")}


def _one_or_mixed(values: pd.Series) -> str:
    u = values.unique()
    return str(u[0]) if len(u) == 1 else "mixed"


def top_groups(trace: Trace, by: str = "kernel", sort: str = "time", pattern=None) -> pd.DataFrame:
    """The rows of the top table: kernels of the steps whose name or op matches ``pattern`` (a
    ``limits.UserRegex``; None: all), grouped by kernel (name, op, shapes), op or category, per-step
    means, sorted by ``sort`` (time, gap, floor or count) descending; groups without a value last.
    For ``op`` and ``category`` the ``name`` column holds the op or category, and a text column whose
    kernels differ says ``mixed``."""
    if by not in BY or sort not in SORT:
        raise ValueError(f"by {by!r}, sort {sort!r}")
    if pattern is not None:
        df = trace.kernels
        ops = df["op"].fillna("").astype(str)
        keep = [pattern.search(str(n)) or (bool(o) and pattern.search(o)) for n, o in zip(df["name"], ops)]
        trace = copy.copy(trace)
        trace.kernels = df[pd.Series(keep, index=df.index, dtype=bool)]
    groups = kernel_groups(trace)
    if groups.empty:
        return groups
    if by != "kernel":
        key = "op_name" if by == "op" else "category"
        g = groups.groupby(key, sort=False, dropna=False)
        text = g.agg(**{c: (c, _one_or_mixed) for c in ("op_name", "shapes", "category", "dtype_s", "bound_s", "fused")
                        if c != key})
        nums = g.agg(count=("count", "sum"), dur_us=("dur_us", lambda v: v.sum(min_count=1)), timed=("timed", "sum"),
                     flops=("flops", "sum"), bytes=("bytes", "sum"), floor_us=("floor_us", "sum"),
                     floored=("floored", "sum"), all_floored=("all_floored", "all"),
                     gap_floor_us=("gap_floor_us", "sum"))
        out = text.join(nums).reset_index()
        # a group's gap only where every kernel in it has a floor (as within one kernel group)
        out["gap"] = (out["dur_us"] / out["gap_floor_us"]).where(out["all_floored"])
        out["name"] = out[key].astype(str)
        groups = out
    col = SORT[sort]
    if col == "dur_us" and not groups["timed"].any():
        col = "floor_us"                                     # untimed graphs: biggest floors first
    return groups.sort_values(col, ascending=False, na_position="last", kind="stable")


def fmt_per_step(x: float) -> str:
    """A per-step count: an integer where it is one (3, not 3.0), else one decimal."""
    return f"{x:.0f}" if abs(x - round(x)) < 1e-9 else f"{x:.1f}"


_table_width = table_width


def _fit(cells: dict[str, list[str]], order: tuple, always: set, room: int) -> list[str]:
    """The columns of ``order`` that fit in ``room`` cells, kept in priority order (``always`` stay)."""
    width = {c: cell_width(c, cells[c]) for c in order}
    if "shapes" in width:
        width["shapes"] = min(width["shapes"], SHAPES_MAX)
    return fit_columns(width, order, always, room)


class StdoutConsole(Console):
    """A rich Console whose closed pipe (``explain | head -1``) is a BrokenPipeError, which the CLI answers
    with status 0, not rich's own SystemExit(1), the status of a failed check."""

    def on_broken_pipe(self) -> None:
        from tracekit.outputs import stdout_to_devnull
        stdout_to_devnull()
        raise BrokenPipeError


def _console(wide: bool = False, width: int | None = None) -> Console:
    """The console tables print on: ``width`` cells when given, else the terminal's width, else (a pipe or
    a file) $COLUMNS when set, else 200; ``wide``: at least 320."""
    probe = Console()
    # trace text is never markup ("[/]" in a kernel name) and is not highlighted (rich's highlighter is
    # quadratic in a long name), here and in the fusion view
    w = width or (probe.width if probe.is_terminal else _columns() or 200)
    return StdoutConsole(width=max(w, 320) if wide else w, markup=False, highlight=False)


def _columns() -> int | None:
    """$COLUMNS as a width, when it is a positive number."""
    import os
    v = os.environ.get("COLUMNS", "")
    return int(v) if v.isdigit() and int(v) > 0 else None


def print_tables(traces: list[Trace], top: int = 15, fusion: bool = False, wide: bool = False,
                 docs: list[dict] | None = None, console: Console | None = None, by: str = "kernel",
                 sort: str = "time", pattern=None, width: int | None = None, modules=None) -> None:
    """Header, diagnosis, per-step table and top groups of each trace (``docs``: their explain
    documents with the diagnosis, when the caller has them; ``by``, ``sort``, ``pattern``: as
    ``top_groups``); ``modules`` (explain --by module): a function of (trace, console width) giving the
    table shown instead of the top table."""
    from tracekit.report.diagnosis import document

    console = console or _console(wide, width)
    for gi, trace in enumerate(traces):
        doc = docs[gi] if docs else document(trace)
        spec = trace.spec
        title = f"graph {gi}: " if len(traces) > 1 else ""
        console.print(Text(clip(f"{title}{trace.path}", 500), style="bold"))
        console.print(f"device: {clip(trace.device_name or 'none named')}   spec: "
                      f"{clip(f'{spec.id} ({spec.name})') if spec else 'none: no floors'}")
        timed = trace.kernels["dur_us"].notna().any()
        console.print(f"steps: {len(trace.steps) or 1} (rule: {clip(trace.step_rule)})   measured: "
                      + ("per-kernel device time as recorded by the profiler" if timed else
                         "nothing: a graph without timings (counts, FLOPs, bytes and floors only)"))
        diagnosis = doc["summary"].get("diagnosis") or {}
        for line in diagnosis.get("lines", []):
            console.print(Text(line, style="bold" if line is diagnosis["lines"][0] else ""))
        console.print(_step_table(trace, console.width, wide))
        if line := graph_replay_line(trace):
            console.print(Text(line))
        if doc.get("phases"):
            console.print(phase_table(doc["phases"]))
        if modules is not None:
            console.print(modules(trace, console.width))
        else:
            console.print(_kernel_table(trace, top, console.width, wide, by, sort, pattern))
        if fusion:
            print_fusion(console, trace, wide, doc["summary"])


def render_tables(traces: list[Trace], width: int, top: int = 15, wide: bool = False, fusion: bool = False,
                  **select) -> str:
    """What ``print_tables`` prints on a console ``width`` cells wide, as text (tests, Markdown-less
    reports); ``select``: ``by``, ``sort``, ``pattern``."""
    console = Console(width=width, markup=False, highlight=False, file=io.StringIO())
    print_tables(traces, top=top, wide=wide, fusion=fusion, console=console, **select)
    return console.file.getvalue()


def _step_table(trace: Trace, width: int, wide: bool) -> Table:
    def pct(x) -> str:
        return "-" if x is None or pd.isna(x) else f"{x:.0f}%"

    phases = step_phases(trace)

    def label(r) -> str:
        """A serving step leads with its phase and tokens (an engine's iteration name is long)."""
        p = phases.get(r.step) or {}
        head = f"{p['phase']} {p['tokens']} tok: " if p.get("phase") and p.get("tokens") else ""
        return clip(head + str(r.name), 32)

    def fill(r) -> dict:
        return {"step": label(r), "kernels": str(r.kernels), "kernel time": fmt_us(r.kernel_us),
                "costed": pct(r.costed_pct), "floor": fmt_us(r.floor_us), "gap": fmt_gap(r.gap),
                "GPU busy": pct(r.busy_pct), "idle": fmt_us(r.idle_us)}
    cells, n_rows, note = step_cells(_Records(step_records(trace)), STEP_COLUMNS, fill)
    cols = list(STEP_COLUMNS) if wide else _fit(cells, STEP_COLUMNS, {"step", "kernels", "kernel time"}, width)
    st = Table(title="per step" + note, show_edge=False)
    heads = CPU_HEADINGS if trace.is_cpu_only else {}          # a CPU-only trace: its rows are CPU ops
    for c in cols:
        head = "idle between kernels" if c == "idle" and wide else c
        st.add_column(heads.get(c, head), justify="right", no_wrap=True)
    for i in range(n_rows):
        st.add_row(*(cells[c][i] for c in cols))
    return st


class _Records:
    """Step rows read as attributes, each made when read: the table shows 40 of 100k steps (a frame of
    them all took 50 MB)."""

    def __init__(self, rows):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        return SimpleNamespace(**self.rows[i])


def top_title(trace: Trace, by: str, sort: str, pattern, shown: int, total: int) -> str:
    """What the top table shows: its groups, how they are sorted, the filter, how many there are."""
    what = {"kernel": "kernels", "op": "ops", "category": "categories"}[by]
    how = [f"by {sort}" if sort != "time" else "", f"matching {pattern.pattern!r}" if pattern is not None else "",
           f"{shown} of {total}" if shown < total else ""]
    return f"top {what}" + "".join(f", {h}" for h in how if h) + f" (per step, mean over {max(1, len(trace.steps))} steps"


def _kernel_table(trace: Trace, top: int, width: int, wide: bool, by: str = "kernel", sort: str = "time",
                  pattern=None) -> Table:
    every = top_groups(trace, by, sort, pattern)
    groups = every.head(top)
    order = tuple(c for c in KERNEL_COLUMNS if c not in BY_DROPS[by])
    if by == "kernel":
        names = [short_name(n, KERNEL_MAX) for n in groups["name"]] if len(groups) else []
    else:
        names = [clip(n.removeprefix("aten::") if by == "op" else n, KERNEL_MAX) for n in groups["name"]]
    cells = {c: [] for c in KERNEL_COLUMNS}
    for r in groups.itertuples():
        cells["category"].append(str(r.category))
        cells["op"].append(clip(r.op_name.removeprefix("aten::"), 26))
        cells["shapes"].append(clip(r.shapes))
        cells["dtype"].append(clip(r.dtype_s, 10))
        cells["count"].append(fmt_per_step(r.count))
        cells["time"].append(fmt_us(r.dur_us))
        cells["FLOPs"].append(fmt_count(r.flops if r.flops else float("nan")))
        cells["bytes"].append(fmt_count(r.bytes if r.bytes else float("nan")))
        cells["floor"].append(fmt_us(r.floor_us if r.floor_us else float("nan")))
        cells["bound"].append(r.bound_s)
        cells["gap"].append(fmt_gap(r.gap))
    if wide:
        cols, kw = list(order), min(KERNEL_MAX, max([len(n) for n in names] + [len(by)]))
    else:
        cols = _fit(cells, order, ALWAYS, width - KERNEL_MIN - 3)
        others = _table_width([max([len(c)] + [len(x) for x in cells[c]]) if c != "shapes" else
                               min(SHAPES_MAX, max([len(c)] + [len(x) for x in cells[c]])) for c in cols])
        longest = max([len(n) for n in names] + [len(by)])
        kw = max(KERNEL_MIN, min(KERNEL_MAX, longest, width - others - 3))
    below = [c for c in ON_SECOND_LINE if c not in cols and c in order]
    under = f"; under each {by}: {' · '.join(below)}" if below else ""
    kt = Table(title=top_title(trace, by, sort, pattern, len(groups), len(every)) + f"{under})", show_edge=False)
    kt.add_column(by, overflow="ellipsis", no_wrap=True, width=kw)
    for c in cols:
        kt.add_column(c, justify="left" if c in ("dtype", "category", "op", "shapes") else "right",
                      no_wrap=c != "shapes", overflow="fold" if c == "shapes" else "ellipsis",
                      max_width=SHAPES_MAX if c == "shapes" else None)
    for i, (full, name) in enumerate(zip(groups["name"], names)):
        label = name if len(name) <= kw else compact_name(full, kw) if by == "kernel" else clip(name, kw)
        extra = " · ".join(x for x in (cells[c][i] for c in below) if x and x != "-")
        kt.add_row(label + (f"\n  {clip(extra, kw - 2)}" if extra else ""), *(cells[c][i] for c in cols))
    return kt
