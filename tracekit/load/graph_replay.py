"""CUDA/HIP graph replays → the ops that launched each node at capture time.

A replayed kernel's only link to the CPU is the ``cudaGraphLaunch`` that replayed it (no External
id, no op). While a graph is being captured, though, every launch the capturing thread makes
between ``cudaStreamBeginCapture`` and ``cudaStreamEndCapture`` is recorded as a runtime event
with an External id (→ the op, its shapes) but no kernel behind it. So a capture is an ordered
list of *nodes* (kernel / memcpy / memset launches, each with its op), and a replay is the ordered
list of device rows sharing one graph-launch correlation. The k-th kernel of a replay is the
k-th kernel launch of its capture (likewise memcpy and memset).

Which capture a replay belongs to: ``tracekit capture`` brackets captures and replays with
``tracekit::graph_capture#G`` / ``tracekit::graph_replay#G`` ranges, which name it. Without them, a
capture qualifies when its node counts per kind equal the replay's and, where the capture's launch
events name their kernel (ROCm does), the names agree. A replay that fits no capture, or several
captures that would give different ops, stays unmapped: no guessing.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.load.kineto import CPU_OP_CATEGORIES, GRAPH_LAUNCHES, LAUNCH_CATEGORIES, read_json, trace_events
from tracekit.load.fields import ID_KEYS, Notes, clean_op_args, number
from tracekit.model.trace import Trace

BEGIN_CAPTURE = re.compile(r"^(cuda|hip|cu)StreamBeginCapture")
END_CAPTURE = re.compile(r"^(cuda|hip|cu)StreamEndCapture")
NODE_LAUNCH = re.compile(r"Launch|Memcpy|Memset")
NOT_A_NODE = re.compile(r"GraphLaunch|HostFunc|LaunchHost|Memcpy(To|From)Symbol(?!Async)|Memcpy(2D|3D)?$"
                        r"|Memset(2D|3D)?$|MemcpyWithStream|GetCaptureInfo")
CAPTURE_MARK = re.compile(r"^tracekit::graph_capture#(\d{1,18})$")
REPLAY_MARK = re.compile(r"^tracekit::graph_replay#(\d{1,18})$")
OP_FIELDS = (("op_dims", "Input Dims"), ("op_types", "Input type"), ("op_strides", "Input Strides"),
             ("op_concrete", "Concrete Inputs"), ("kernel_file", "kernel_file"))


@dataclass
class Capture:
    """One graph capture: its nodes in launch order as (kind, kernel name or None, op event or None)."""

    source: str
    gid: int | None
    nodes: list[tuple[str, str | None, dict | None]] = field(default_factory=list)

    def by_kind(self, kind: str) -> list[tuple[str, str | None, dict | None]]:
        return [n for n in self.nodes if n[0] == kind]


def _node_kind(launch_name: str) -> str | None:
    if not NODE_LAUNCH.search(launch_name) or NOT_A_NODE.search(launch_name):
        return None
    return "memcpy" if "Memcpy" in launch_name else "memset" if "Memset" in launch_name else "kernel"


def _usable(events: list) -> list[dict]:
    """The complete events graph mapping can read: a string name, a finite ts (dur ≥ 0, else 0), args an
    object with scalar ids, a scalar tid; op shapes checked as the loader checks them. The rest is left
    out: the loader has already refused any malformed event the kernel table needs."""
    out, notes = [], Notes()
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X" or not isinstance(e.get("name"), str) \
                or not isinstance(e.get("cat", ""), str):
            continue
        ts, dur, args, tid = number(e.get("ts")), number(e.get("dur", 0)), e.get("args"), e.get("tid")
        if ts is None or (args is not None and not isinstance(args, dict)) or isinstance(tid, (list, dict)):
            continue
        if args and any(isinstance(args.get(k), (list, dict)) for k in ID_KEYS + ("kernel",)):
            continue
        e["ts"], e["dur"] = ts, dur if dur is not None and dur >= 0 else 0.0
        if args:
            clean_op_args(args, notes)
        out.append(e)
    return out


def find_captures(events: list, source: str, checked: bool = False) -> list[Capture]:
    """Every capture window in one trace's events, with its nodes and their ops (``checked``: the
    events are ``_usable``'s already)."""
    windows: list[tuple[dict, dict]] = []
    open_begin: dict = {}
    marks: list[dict] = []
    launches: list[dict] = []
    ops: dict = {}
    cpu_ops: list[dict] = []
    for e in sorted(events if checked else _usable(events), key=lambda e: e["ts"]):
        name, cat = e.get("name") or "", e.get("cat")
        if cat in LAUNCH_CATEGORIES:
            if BEGIN_CAPTURE.match(name):
                open_begin[e.get("tid")] = e
            elif END_CAPTURE.match(name) and e.get("tid") in open_begin:
                windows.append((open_begin.pop(e.get("tid")), e))
            elif _node_kind(name):
                launches.append(e)
        elif cat in CPU_OP_CATEGORIES:
            cpu_ops.append(e)
            ext = (e.get("args") or {}).get("External id")
            if ext is not None:
                ops.setdefault(ext, e)
        elif cat == "user_annotation" and CAPTURE_MARK.match(name):
            marks.append(e)
    for m in marks:       # a marked capture whose begin/end calls the trace lacks: the mark is the window
        m0, m1 = float(m["ts"]), float(m["ts"]) + float(m.get("dur", 0))
        if not any(b.get("tid") == m.get("tid") and m0 <= float(b["ts"]) <= m1 for b, _ in windows):
            windows.append((m, {"ts": m1}))
    starts = [float(e["ts"]) for e in launches]
    found_in: list[tuple[list, list]] = []
    for begin, end in windows:
        t0, t1, tid = float(begin["ts"]), float(end["ts"]), begin.get("tid")
        inside = [e for e in launches[bisect_left(starts, t0):bisect_right(starts, t1)] if e.get("tid") == tid]
        found_in.append((inside, [_enclosing(ops.get((e.get("args") or {}).get("External id")), e) for e in inside]))
    missing = [(inside, found, k) for inside, found in found_in for k, op in enumerate(found) if op is None]
    if missing:                      # one sweep over the CPU ops for every window's launches, not one each
        for (_, found, k), op in zip(missing, _innermost_ops([inside[k] for inside, _, k in missing], cpu_ops)):
            found[k] = op
    captures = []
    for (begin, _), (inside, found) in zip(windows, found_in):
        t0, tid = float(begin["ts"]), begin.get("tid")
        gid = next((int(CAPTURE_MARK.match(m["name"]).group(1)) for m in marks if m.get("tid") == tid
                    and float(m["ts"]) <= t0 <= float(m["ts"]) + float(m.get("dur", 0))), None)
        nodes = [(_node_kind(e["name"]), (e.get("args") or {}).get("kernel"), op) for e, op in zip(inside, found)]
        captures.append(Capture(source, gid, nodes))
    return captures


def _replay_ids(events: list, checked: bool = False) -> dict[int, int]:
    """graph-launch correlation → G of the enclosing tracekit::graph_replay#G range (of several ranges of
    one thread holding the launch, the last in the trace's order)."""
    events = events if checked else _usable(events)
    marks: dict = {}
    for m in events:
        if REPLAY_MARK.match(m["name"]):
            marks.setdefault(m.get("tid"), []).append(m)
    find = {tid: _enclosing_mark(ms) for tid, ms in marks.items()}
    out = {}
    for e in events:
        if not (e["name"] in GRAPH_LAUNCHES and e.get("cat") in LAUNCH_CATEGORIES) or e.get("tid") not in find:
            continue
        m = find[e.get("tid")](float(e.get("ts", -1)))
        if m is not None:
            out[(e.get("args") or {}).get("correlation")] = int(REPLAY_MARK.match(m["name"]).group(1))
    return out


def _enclosing_mark(marks: list):
    """t → the last of ``marks`` (one thread's, trace order) whose [ts, ts + dur] holds t, or None: a
    binary search when no two of them overlap (one replay after another: at most one holds t), else a
    scan of them all."""
    spans = [(float(m["ts"]), float(m["ts"]) + float(m.get("dur", 0)), m) for m in marks]
    ordered = sorted(spans, key=lambda span: span[0])
    if all(ordered[k][0] > ordered[k - 1][1] for k in range(1, len(ordered))):
        starts = [s for s, _, _ in ordered]

        def search(t: float):
            k = bisect_right(starts, t) - 1
            return ordered[k][2] if k >= 0 and t <= ordered[k][1] else None
        return search
    return lambda t: next((m for s, e, m in reversed(spans) if s <= t <= e), None)


def _set_cells(df: pd.DataFrame, cells: dict[str, dict]) -> None:
    """``df.at[label, col] = value`` for every cell of ``cells``, one column at a time (a replayed
    serving trace maps millions of rows: ``df.at`` per cell was most of its time). A column whose dtype
    would not hold a value as it is gets the cells one by one, as before."""
    for col, values in cells.items():
        column = df[col]
        arr = column.to_numpy(copy=True)
        try:
            if not df.index.is_unique or arr.dtype != object and not all(type(v) is int for v in values.values()):
                raise TypeError(col)
            for pos, value in zip(df.index.get_indexer(list(values)).tolist(), values.values()):
                arr[pos] = value
        except (TypeError, ValueError, OverflowError):
            for label, value in values.items():
                df.at[label, col] = value
            continue
        df[col] = pd.Series(arr, index=df.index, dtype=column.dtype)


def _pair(replay: pd.DataFrame, cap: Capture) -> list[dict | None] | None:
    """The capture op for each replay row; None when the kernels disagree (count or names).

    Kernels decide whether the capture fits; memcpy/memset rows are paired only when their counts
    agree too (the profiler may not report every copy node), else they stay unmapped.
    """
    out: list[dict | None] = [None] * len(replay)
    for kind in ("kernel", "memcpy", "memset"):
        rows = [k for k, v in enumerate(replay["kind"]) if v == kind]
        nodes = cap.by_kind(kind)
        if len(rows) != len(nodes):
            if kind == "kernel":
                return None
            continue
        named = all(n[1] for n in nodes)
        free = list(range(len(nodes)))
        for k in rows:
            name = replay["name"].iat[k]
            j = next((j for j in free if nodes[j][1] == name), None) if named else free[0]
            if j is None:
                return None
            free.remove(j)
            out[k] = nodes[j][2]
    return out


def _signature(ops: list[dict | None]) -> list:
    return [None if op is None else (op.get("name"), repr((op.get("args") or {}).get("Input Dims"))) for op in ops]


def _enclosing(op: dict | None, launch: dict) -> dict | None:
    """``op`` if it really encloses the launch (same thread, launch inside its interval)."""
    if op is None or op.get("tid") != launch.get("tid"):
        return None
    t, start = float(launch.get("ts", -1)), float(op["ts"])
    return op if start <= t <= start + float(op["dur"]) else None


def _innermost_ops(launches: list[dict], cpu_ops: list[dict]) -> list[dict | None]:
    """For each launch, the innermost CPU op on its thread whose interval holds it (a stack sweep)."""
    starts = np.array([op["ts"] for op in cpu_ops], dtype=float)
    durs = np.array([op["dur"] for op in cpu_ops], dtype=float)
    by_thread: dict = {}
    for k in np.lexsort((-durs, starts)).tolist():     # by start, the enclosing op first
        op = cpu_ops[k]
        by_thread.setdefault(op.get("tid"), []).append(op)
    order = sorted(range(len(launches)), key=lambda k: (_tid_key(launches[k]), float(launches[k]["ts"])))
    found: list[dict | None] = [None] * len(launches)
    tid, stack, pos, thread_ops = object(), [], 0, []
    for k in order:
        launch = launches[k]
        if launch.get("tid") != tid:
            tid, stack, pos = launch.get("tid"), [], 0
            thread_ops = by_thread.get(tid, [])
        t = float(launch["ts"])
        while pos < len(thread_ops) and float(thread_ops[pos]["ts"]) <= t:
            op = thread_ops[pos]
            while stack and float(stack[-1]["ts"]) + float(stack[-1]["dur"]) < float(op["ts"]):
                stack.pop()
            stack.append(op)
            pos += 1
        while stack and float(stack[-1]["ts"]) + float(stack[-1]["dur"]) < t:
            stack.pop()
        found[k] = stack[-1] if stack else None
    return found


def _tid_key(e: dict) -> tuple:
    """A sort key grouping events by thread whatever the tid's type (int and str tids may mix)."""
    tid = e.get("tid")
    return (type(tid).__name__, tid if tid is not None else 0)


def capture_files(bundle_dir: str | Path | None) -> list[Path]:
    """Capture-phase traces a bundle holds besides its main trace (graph_capture*.json[.gz])."""
    if bundle_dir is None or not Path(bundle_dir).is_dir():
        return []
    return sorted(p for p in Path(bundle_dir).glob("graph_capture*.json*") if p.suffix in (".gz", ".json"))


def map_graph_kernels(trace: Trace, bundle_dir: str | Path | None = None,
                      capture_paths: list[str | Path] | None = None) -> dict:
    """Fill op, op_* and op_source="graph_capture" on graph-replayed rows from their capture.

    Captures come from the trace itself, the bundle's graph_capture*.json.gz files and
    ``capture_paths``. Returns counts {"replayed", "mapped", "unmapped", "captures"}; a note on what
    stayed unmapped goes to ``trace.warnings``.
    """
    df = trace.kernels
    graph_rows = df.index[df["graph"].astype(bool)]
    summary = {"replayed": len(graph_rows), "mapped": 0, "unmapped": 0, "captures": 0}
    if not len(graph_rows):
        return summary
    events = trace.source_events
    if events is None:                  # a Trace not built by load_trace: read its file once
        events, _ = trace_events(read_json(Path(trace.path)), Path(trace.path))
    trace.source_events = None
    events = _usable(events)                  # checked once for both readers of them
    captures = find_captures(events, trace.path, checked=True)
    for path in [*capture_files(bundle_dir), *(Path(p) for p in capture_paths or [])]:
        if path.resolve() != Path(trace.path).resolve():
            captures += find_captures(trace_events(read_json(path), path)[0], str(path))
    summary["captures"] = len(captures)
    replay_gid = _replay_ids(events, checked=True)
    reasons: dict[str, int] = {}
    new_ids: dict[tuple, int] = {}
    notes = Notes()
    # a missing kernel_file is NaN in a column holding text (as a pandas string column has it), else None
    no_file = np.nan if "kernel_file" in df.columns and any(isinstance(v, str) for v in df["kernel_file"]) else None
    cells: dict[str, dict] = {}           # column -> {row label: value}, written once per column at the end
    for corr, rows in df.loc[graph_rows].groupby("correlation", sort=False):
        gid = replay_gid.get(corr)
        pool = [c for c in captures if c.gid == gid] if gid is not None else captures
        fits = [(c, p) for c in pool if (p := _pair(rows, c)) is not None]
        if not fits or len({repr(_signature(p)) for _, p in fits}) > 1:
            why = "no capture matches" if not fits else f"{len(fits)} captures fit with different ops"
            reasons[why] = reasons.get(why, 0) + len(rows)
            continue
        in_main_trace = fits[0][0].source == trace.path    # record-function ids restart per profiler session
        for idx, op in zip(rows.index, fits[0][1]):
            if op is None:
                why = "capture node without op (or copy/memset count differs)"
                reasons[why] = reasons.get(why, 0) + 1
                continue
            args = op.get("args") if isinstance(op.get("args"), dict) else {}
            clean_op_args(args, notes)                 # the loader checks only the ops its rows use
            cells.setdefault("op", {})[idx] = op.get("name")
            for col, key in OP_FIELDS:
                if col in df.columns:
                    value = args.get(key)
                    cells.setdefault(col, {})[idx] = no_file if value is None and col == "kernel_file" else value
            cells.setdefault("op_source", {})[idx] = "graph_capture"
            if in_main_trace and "op_rf_id" in df.columns:     # the execution trace knows that op call
                rf = args.get("Record function id")
                cells.setdefault("op_rf_id", {})[idx] = rf if isinstance(rf, int) and not isinstance(rf, bool) else -1
            if "op_id" in df.columns:      # one id per (replay, op call): replays must not share
                cells.setdefault("op_id", {})[idx] = new_ids.setdefault((corr, id(op)), -2 - len(new_ids))
            summary["mapped"] += 1
    _set_cells(df, cells)
    trace.warnings.extend(notes.warnings())
    summary["unmapped"] = summary["replayed"] - summary["mapped"]
    if summary["unmapped"]:
        detail = "; ".join(f"{n} {why}" for why, n in reasons.items())
        where = "" if captures else " (the trace holds no graph capture: record it with `tracekit capture`)"
        trace.warnings.append(f"graph replays: {summary['unmapped']} of {summary['replayed']} replayed rows "
                              f"left unmapped{where}: {detail}")
    return summary
