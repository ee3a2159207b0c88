"""Tables for spreadsheets and notebooks: explain's groups (by kernel, op, category) as plain frames,
CSV that honours ``--by``, and an Excel workbook with one sheet per table (``--xlsx``).

Every text cell that a spreadsheet would read as a formula (it starts with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return) is written with a leading ``'`` (``escape_cells``): kernel and op names
come from the trace, which anyone may have written. Numbers stay numbers.
"""

from __future__ import annotations

import datetime
from decimal import Decimal

import pandas as pd
from pandas.api.types import is_bool, is_float, is_integer, is_scalar

from tracekit.model.trace import Trace
from tracekit.report.document import CSV_FIELDS, step_records, step_table
from tracekit.report.phases import step_phases
from tracekit.report.table import BY, top_groups

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

# the group tables' columns (per-step means over the steps' kernels), the first one named by ``by``
GROUP_COLUMNS = ["count", "dur_us", "floor_us", "gap", "flops", "bytes", "category", "op", "dtype", "bound",
                 "shapes", "fused_ops"]
GROUP_KEYS = {"kernel": "name", "op": "op", "category": "category"}


def escape_cell(value):
    """A text cell a spreadsheet would evaluate (``=1+1``, ``-2+3``, ``@SUM(..)``) with a leading ``'``."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def escape_cells(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text columns are escaped (``escape_cell``); numeric columns untouched."""
    out = df.copy()
    for c in out.columns:
        if _text(out[c]):
            out[c] = out[c].map(escape_cell, na_action="ignore")
    return out


def _text(column: pd.Series) -> bool:
    """A column that may hold text: object, or pandas' string dtypes."""
    return column.dtype == object or pd.api.types.is_string_dtype(column.dtype)


def group_table(trace: Trace, by: str = "kernel") -> pd.DataFrame:
    """explain's top-table groups, every one of them, as plain columns: ``by`` kernel (name, op,
    shapes), op or category; ``count``, ``dur_us``, ``floor_us``, ``flops``, ``bytes`` per step (means
    over the steps), ``gap`` = time over floor where every kernel in the group has one; text columns a
    group's kernels differ in read ``mixed``. Sorted by time per step, largest first."""
    if by not in BY:
        raise ValueError(f"by {by!r}: one of {', '.join(BY)}")
    g = top_groups(trace, by)
    key = GROUP_KEYS[by]
    if g.empty:
        return pd.DataFrame(columns=[key] + [c for c in GROUP_COLUMNS if c != key])
    out = pd.DataFrame({
        key: g["name"].astype(str) if by != "category" else g["category"].astype(str),
        "count": g["count"].astype(float), "dur_us": g["dur_us"].astype(float),
        "floor_us": g["floor_us"].astype(float), "gap": g["gap"].astype(float),
        "flops": g["flops"].astype(float), "bytes": g["bytes"].astype(float),
        "category": g["category"].astype(str), "op": g["op_name"].astype(str), "dtype": g["dtype_s"].astype(str),
        "bound": g["bound_s"].astype(str), "shapes": g["shapes"].astype(str), "fused_ops": g["fused"].astype(str)})
    out = out[[key] + [c for c in GROUP_COLUMNS if c != key]]
    for c in ("op", "dtype", "bound", "shapes"):          # "-" (none) as an empty cell, not a "-" text
        if c in out and c != key:
            out[c] = out[c].where(~out[c].isin(["-", "", "nan", "None"]), None)
    return out.reset_index(drop=True)


def kernel_rows(trace: Trace) -> pd.DataFrame:
    """One row per kernel execution (explain's CSV columns; fused ops joined with ``+``; ``phase``: its
    step's serving phase, prefill / decode / mixed, empty where none: docs/serving.md)."""
    out = trace.kernels[CSV_FIELDS].copy()
    out["fused_ops"] = out["fused_ops"].map(lambda ops: "+".join(ops) if isinstance(ops, list) else "")
    phase = {k: v["phase"] for k, v in step_phases(trace).items()}
    out["phase"] = out["step"].map(lambda k: phase.get(k) or "")
    return out.reset_index(drop=True)


def device_rows(traces: list[Trace]) -> pd.DataFrame:
    """One row per trace: the device it names and the spec its floors use, with that spec's roofs."""
    rows = []
    for g, t in enumerate(traces):
        s = t.spec
        row = {"graph": g, "trace": t.path, "device": t.device_name, "spec": s.id if s else None,
               "spec_name": s.name if s else None, "vendor": s.vendor if s else None,
               "bandwidth_gbs": s.bandwidth_gbs if s else None, "l2_bytes": s.l2_bytes if s else None,
               "launch_us": s.launch_us if s else None}
        for dtype, tflops in sorted((s.peak_tflops if s else {}).items()):
            row[f"peak_{dtype}_tflops"] = tflops
        rows.append(row)
    return pd.DataFrame(rows)


def _frames(traces: list[Trace], make) -> pd.DataFrame:
    frames = []
    for g, t in enumerate(traces):
        out = make(t)
        if out is None:                                   # a trace without that table (no module tree)
            continue
        if len(traces) > 1:
            out.insert(0, "graph", g)
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def csv_text(traces: list[Trace], by: str | None = None) -> str:
    """explain ``--format csv``: one row per kernel execution (``by`` None, the default), one per group
    ``by`` kernel, op or category, or one per module-tree node (``by`` module, where the trace has one);
    formula-like text escaped."""
    if by == "module":                                    # the module tree, where the traces have one
        table = _frames(traces, module_table)
    else:
        table = _frames(traces, kernel_rows if by is None else (lambda t: group_table(t, by)))
    return escape_cells(table).to_csv(index=False) if len(table.columns) else ""


def workbook_tables(traces: list[Trace], modules: pd.DataFrame | None = None,
                    frames: bool = True) -> dict[str, pd.DataFrame]:
    """The sheets of ``--xlsx``, in order: kernels (every execution), ops, categories, steps, devices,
    and modules when the trace has a module tree. ``frames`` False: one trace's steps sheet is a
    ``StepSheet`` (made a part at a time as it is written), not a DataFrame."""
    steps = StepSheet(traces[0]) if not frames and len(traces) == 1 else _frames(traces, step_table)
    sheets = {"kernels": _frames(traces, kernel_rows), "ops": _frames(traces, lambda t: group_table(t, "op")),
              "categories": _frames(traces, lambda t: group_table(t, "category")),
              "steps": steps, "devices": device_rows(traces)}
    if modules is not None and len(modules):
        sheets["modules"] = modules
    return sheets


class StepSheet:
    """``step_table`` of one trace as parts of rows, for ``write_xlsx``: each part is the DataFrame
    ``step_table(trace).iloc[lo:hi]`` would be (each column's dtype that of the whole column, found one
    column at a time), made from ``step_records``' rows when written: 100k steps held the whole frame,
    13.6 MB, 27 MB while it was made."""

    def __init__(self, trace: Trace):
        self.rows = step_records(trace)
        self.columns = list(self.rows.keys())
        self.dtypes = {}
        for k in self.columns:                      # one column's values at a time, dropped after
            self.dtypes[k] = pd.Series(self.rows.values(k)).dtype

    def __len__(self) -> int:
        return len(self.rows)

    def part(self, lo: int, hi: int) -> pd.DataFrame:
        made = self.rows[lo:hi]
        return pd.DataFrame({k: pd.Series([r.get(k) for r in made], dtype=self.dtypes[k]) for k in self.columns})


def module_table(trace: Trace) -> pd.DataFrame | None:
    """The module tree of a trace (``report.tree_view``), flattened: one row per node of every step's tree,
    with its step, level, kind, path, name, signature and figures; None when the trace holds no nn.Module
    events (recorded without ``with_modules``) or is an MLX graph."""
    if trace.metadata.get("framework") == "mlx" or trace.path is None:
        return None
    from pathlib import Path

    from tracekit.load.scopes import NO_MODULES, may_hold_modules, read_scopes
    from tracekit.report.tree_view import CSV_FIELDS, build, node_rows
    if Path(trace.path).is_file() and not may_hold_modules(Path(trace.path)):
        warnings = [NO_MODULES]                           # read_scopes' own, the events not decoded again
    else:
        scopes = read_scopes(trace)
        warnings = scopes.warnings if not scopes.module_events else None
    if warnings is not None:                              # no tree built to be dropped
        for w in warnings:
            if w not in trace.warnings:
                trace.warnings.append(w)
        return None
    trees, _ = build(trace, scopes)
    return pd.DataFrame(node_rows(trace, trees), columns=CSV_FIELDS)


def write_xlsx(sheets: dict[str, "pd.DataFrame | StepSheet"], path) -> int:
    """Write each table as a sheet of an .xlsx workbook (openpyxl, the ``xlsx`` extra); its size in bytes.
    The workbook is openpyxl's write-only kind, filled ``XLSX_ROWS`` rows at a time, each part escaped
    and made plain on its own: no cell object and no copy of a whole sheet is held (pandas' ``to_excel``
    held a cell object per cell: a steps sheet of 100k rows took about 700 MB). Each cell's value is
    what ``to_excel`` writes (``excel_value``)."""
    from pathlib import Path

    try:
        from openpyxl import Workbook
    except ModuleNotFoundError:
        from tracekit.errors import TracekitError
        raise TracekitError("--xlsx needs openpyxl, which is not installed (pip install 'tracekit[xlsx]')") from None
    out = Path(path)
    book = Workbook(write_only=True)
    for name, df in sheets.items():
        sheet = book.create_sheet(title=name)
        sheet.append([excel_value(c, sheet) for c in df.columns])
        for lo in range(0, len(df), XLSX_ROWS):           # escaped a part at a time: no copy of the sheet
            part = df.iloc[lo:lo + XLSX_ROWS] if isinstance(df, pd.DataFrame) else df.part(lo, lo + XLSX_ROWS)
            part = escape_cells(_plain(part))
            for row in zip(*(list(part.iloc[:, j]) for j in range(part.shape[1]))):
                sheet.append([excel_value(v, sheet) for v in row])
    book.save(out)
    return out.stat().st_size


XLSX_ROWS = 4096


def excel_value(val, sheet):
    """A cell as pandas' ``to_excel`` writes it (pandas 3: ``ExcelFormatter._format_value`` then
    ``ExcelWriter._value_with_fmt``): missing → "", ±inf → "inf" / "-inf", NumPy numbers as Python
    numbers, dates and durations with pandas' number formats, anything else as its text."""
    if is_scalar(val) and pd.isna(val):
        return ""
    if is_float(val) and val in (float("inf"), float("-inf")):
        return "inf" if val > 0 else "-inf"
    if is_integer(val):
        return int(val)
    if is_float(val):
        return float(val)
    if is_bool(val):
        return bool(val)
    if isinstance(val, Decimal):
        return Decimal(val)
    fmt = None
    if isinstance(val, datetime.datetime):
        fmt = "YYYY-MM-DD HH:MM:SS"
    elif isinstance(val, datetime.date):
        fmt = "YYYY-MM-DD"
    elif isinstance(val, datetime.timedelta):
        val, fmt = val.total_seconds() / 86400, "0"
    else:
        return str(val)
    from openpyxl.cell import WriteOnlyCell
    cell = WriteOnlyCell(sheet, value=val)
    cell.number_format = fmt
    return cell


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """Cells Excel can hold: lists and dicts as text."""
    out = df.copy()
    for c in out.columns:
        if _text(out[c]):
            out[c] = out[c].map(lambda v: str(v) if isinstance(v, (list, tuple, dict)) else v, na_action="ignore")
    return out
