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
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.load.kineto import CPU_OP_CATEGORIES, GRAPH_LAUNCHES, LAUNCH_CATEGORIES, read_json, trace_events
from tracekit.errors import TracekitError
from tracekit.load.capture_dir import CaptureFile
from tracekit.load.engine_steps import parse
from tracekit.load.fields import ID_KEYS, Notes, clean_op_args, number
from tracekit.load.graph_match import Capture, CaptureIndex, captured_size, eager_sizes
from tracekit.model.trace import Trace

BEGIN_CAPTURE = re.compile(r"^(cuda|hip|cu)StreamBeginCapture")
END_CAPTURE = re.compile(r"^(cuda|hip|cu)StreamEndCapture")
NODE_LAUNCH = re.compile(r"Launch|Memcpy|Memset")
NOT_A_NODE = re.compile(r"GraphLaunch|HostFunc|LaunchHost|Memcpy(To|From)Symbol(?!Async)|Memcpy(2D|3D)?$"
                        r"|Memset(2D|3D)?$|MemcpyWithStream|GetCaptureInfo")
CAPTURE_MARK = re.compile(r"^tracekit::graph_capture#(\d{1,18})$")
REPLAY_MARK = re.compile(r"^tracekit::graph_replay#(\d{1,18})$")
MODULE_FRAME = "nn.Module: "                                    # with_stack: a module's forward frame
ENGINE_CAPTURE = re.compile(r"^capture_(\d{1,9})_(\w{1,40})$")     # vLLM / SGLang: capture_{size}_{mode}
OP_FIELDS = (("op_dims", "Input Dims"), ("op_types", "Input type"), ("op_strides", "Input Strides"),
             ("op_concrete", "Concrete Inputs"), ("kernel_file", "kernel_file"))


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


def find_captures(events: list, source: str) -> list[Capture]:
    """Every capture window in one trace's events, with its nodes and their ops."""
    windows: list[tuple[dict, dict]] = []
    open_begin: dict = {}
    marks: list[dict] = []
    launches: list[dict] = []
    ops: dict = {}
    cpu_ops: list[dict] = []
    sized: list[dict] = []
    module_frames: list[dict] = []
    for e in sorted(_usable(events), key=lambda e: e["ts"]):
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
        elif cat == "user_annotation" and ENGINE_CAPTURE.match(name):
            sized.append(e)
        elif cat == "python_function" and name.startswith(MODULE_FRAME):
            module_frames.append(e)
    for m in marks:       # a marked capture whose begin/end calls the trace lacks: the mark is the window
        m0, m1 = float(m["ts"]), float(m["ts"]) + float(m.get("dur", 0))
        if not any(b.get("tid") == m.get("tid") and m0 <= float(b["ts"]) <= m1 for b, _ in windows):
            windows.append((m, {"ts": m1}))
    starts = [float(e["ts"]) for e in launches]
    module_of = {id(e): m["name"][len(MODULE_FRAME):] for e, m in
                 zip(launches, _innermost_ops(launches, module_frames) if module_frames else []) if m is not None}
    captures = []
    groups_seen: set = set()            # engine annotations (or the file) whose first capture was seen
    for begin, end in sorted(windows, key=lambda w: float(w[0]["ts"])):
        t0, t1, tid = float(begin["ts"]), float(end["ts"]), begin.get("tid")
        inside = [e for e in launches[bisect_left(starts, t0):bisect_right(starts, t1)] if e.get("tid") == tid]
        found = [_enclosing(ops.get((e.get("args") or {}).get("External id")), e) for e in inside]
        missing = [k for k, op in enumerate(found) if op is None]
        for k, op in zip(missing, _innermost_ops([inside[k] for k in missing], cpu_ops)):
            found[k] = op
        gid = next((int(CAPTURE_MARK.match(m["name"]).group(1)) for m in marks if m.get("tid") == tid
                    and float(m["ts"]) <= t0 <= float(m["ts"]) + float(m.get("dur", 0))), None)
        nodes = [(_node_kind(e["name"]), (e.get("args") or {}).get("kernel"), op) for e, op in zip(inside, found)]
        group = next((a for a in sized if float(a["ts"]) <= t0 <= float(a["ts"]) + float(a.get("dur", 0))), None)
        size = ENGINE_CAPTURE.match(group["name"]).groups() if group is not None else (None, None)
        first = gid is not None or id(group) not in groups_seen    # a graph's first (or only) piece
        groups_seen.add(id(group))
        modules = {id(op): module_of[id(e)] for e, op in zip(inside, found) if op is not None and id(e) in module_of}
        captures.append(Capture(source, gid, nodes, int(size[0]) if size[0] else None, size[1], first, modules))
    return captures


def _replay_ids(events: list) -> dict[int, int]:
    """graph-launch correlation → G of the enclosing tracekit::graph_replay#G range (of several ranges of
    one thread holding the launch, the last in the trace's order)."""
    events = _usable(events)
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
                      capture_paths: list[str | Path | CaptureFile] | None = None) -> dict:
    """Fill op, op_* and op_source="graph_capture" on graph-replayed rows from their capture.

    Captures come from the trace itself, the bundle's graph_capture*.json.gz files and
    ``capture_paths`` (paths, or ``CaptureFile``s with their batch size and mode). Returns counts
    {"replayed", "mapped", "unmapped", "captures"}; ``trace.metadata["graph_replays"]`` gets the same
    per step with the reasons for what stayed unmapped, and a note on it goes to ``trace.warnings``.
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
    captures = find_captures(events, trace.path)
    files = []
    for src in [*capture_files(bundle_dir), *(capture_paths or [])]:
        cf = src if isinstance(src, CaptureFile) else CaptureFile(Path(src))
        if cf.path.resolve() == Path(trace.path).resolve():
            continue
        try:
            found = find_captures(trace_events(read_json(cf.path, "graph capture trace"), cf.path)[0], str(cf.path))
        except TracekitError as exc:
            trace.warnings.append(f"graph capture trace left out: {exc}")
            continue
        if not found:
            trace.warnings.append(f"{cf.path}: no graph capture in it (no StreamBeginCapture…EndCapture window)")
        for c in found:
            c.batch_size, c.mode = c.batch_size or cf.batch_size, c.mode or cf.mode
        captures += found
        files.append(cf.path.name)
    for c in captures:
        c.batch_size = c.batch_size or captured_size(c)
    summary["captures"] = len(captures)
    replay_gid = _replay_ids(events)
    index = CaptureIndex(captures)
    sizes = {s.index: (e.tokens or None) if (e := parse(s.name)) else None for s in trace.steps}
    replays = df.loc[graph_rows].groupby("correlation", sort=False)
    launches = defaultdict(int)
    for _, rows in replays:
        launches[int(rows["step"].iat[0])] += 1
    hints = eager_sizes(df, graph_rows)
    per_step: dict[int, dict] = {}
    firsts: list[float] = []            # device start of each replay of a graph's first piece
    reasons: dict[str, int] = {}
    new_ids: dict[tuple, int] = {}
    notes = Notes()
    updates: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))     # column → (row labels, values)

    columns = set(df.columns)
    cleaned: set[int] = set()          # op events whose args were checked (replays of one graph share them)

    def put(idx, col: str, value) -> None:
        if col in columns:
            updates[col][0].append(idx)
            updates[col][1].append(value)
    # a missing kernel_file is NaN in a column holding text (as a pandas string column has it), else None
    no_file = np.nan if "kernel_file" in df.columns and any(isinstance(v, str) for v in df["kernel_file"]) else None
    for corr, rows in replays:
        step = int(rows["step"].iat[0])
        got = per_step.setdefault(step, {"step": step, "replays": 0, "replayed": 0, "matched": 0, "replayed_us": 0.0,
                                         "matched_us": 0.0, "unmatched": {}})
        got["replays"] += 1
        got["replayed"] += len(rows)
        got["replayed_us"] += float(rows["dur_us"].sum())
        hint = hints.get(step, frozenset()) if step >= 0 and launches[step] == 1 else frozenset()
        cap, found = index.match(rows, replay_gid.get(corr), sizes.get(step), launches[step], hint)
        if cap is None:
            _count(got["unmatched"], reasons, found, len(rows))
            continue
        if cap.first:
            firsts.append(float(rows["start_us"].min()))
        in_main_trace = cap.source == trace.path    # record-function ids restart per profiler session
        for idx, op, dur in zip(rows.index, found, rows["dur_us"].tolist()):
            if op is None:
                _count(got["unmatched"], reasons, "capture node without op (or copy/memset count differs)", 1)
                continue
            args = op.get("args") if isinstance(op.get("args"), dict) else {}
            if id(op) not in cleaned:                  # the loader checks only the ops its rows use
                clean_op_args(args, notes)
                cleaned.add(id(op))
            put(idx, "op", op.get("name"))
            for col, key in OP_FIELDS:
                value = args.get(key)
                put(idx, col, no_file if value is None and col == "kernel_file" else value)
            put(idx, "op_source", "graph_capture")
            put(idx, "module", cap.modules.get(id(op)))
            if in_main_trace:                          # the execution trace knows that op call
                rf = args.get("Record function id")
                put(idx, "op_rf_id", rf if isinstance(rf, int) and not isinstance(rf, bool) else -1)
            put(idx, "op_id", new_ids.setdefault((corr, id(op)), -2 - len(new_ids)))   # replays never share
            summary["mapped"] += 1
            got["matched"] += 1
            got["matched_us"] += dur
    _assign(df, updates)
    trace.warnings.extend(notes.warnings())
    summary["unmapped"] = summary["replayed"] - summary["mapped"]
    every = all(not r["unmatched"] for r in per_step.values())
    trace.metadata["graph_replays"] = {**summary, "capture_files": files,
                                       "per_step": sorted(per_step.values(), key=lambda r: r["step"]),
                                       "iteration_starts_us": sorted(firsts) if every else None}
    if summary["unmapped"]:
        detail = "; ".join(f"{n} {why}" for why, n in reasons.items())
        where = "" if captures else (" (the trace holds no graph capture: record it with `tracekit capture`, or "
                                     "pass the engine's capture traces with --graph-captures DIR)")
        trace.warnings.append(f"graph replays: {summary['unmapped']} of {summary['replayed']} replayed rows "
                              f"left unmapped{where}: {detail}")
    return summary


def _assign(df, updates: dict[str, tuple[list, list]]) -> None:
    """Write the mapped values, one column at a time (row-by-row ``df.at`` costs ~60 µs a cell: minutes
    for hundreds of thousands of replayed kernels), keeping each column's dtype."""
    for col, (labels, values) in updates.items():
        pos = df.index.get_indexer(labels)
        column = df[col]
        if column.dtype == object or not pd.api.types.is_numeric_dtype(column.dtype):
            arr = column.to_numpy(dtype=object, copy=True)
            for p, v in zip(pos.tolist(), values):     # element by element: a value may be a list (shapes)
                arr[p] = v
            df[col] = pd.Series(arr, index=df.index, dtype=column.dtype)
        else:
            arr = column.to_numpy(copy=True)
            arr[pos] = values
            df[col] = arr


def _count(step_reasons: dict, reasons: dict, why: str, n: int) -> None:
    step_reasons[why] = step_reasons.get(why, 0) + n
    reasons[why] = reasons.get(why, 0) + n
