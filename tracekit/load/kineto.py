"""Read a Kineto (torch.profiler) Chrome trace into the shared kernel table.

One pass over the events collects device activities, the runtime calls that launched them
(joined on ``correlation``), the CPU ops behind those calls (joined on ``External id``) and the
step markers. Durations are kept exactly as written (µs with sub-µs digits).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from tracekit import bundle
from tracekit.errors import TracekitError
from tracekit.limits import UserRegex, read_input
from tracekit.load.fields import Notes, bad_event, check_common, check_time, clean_device_args, clean_op_args
from tracekit.load.runtime import runtime_per_step, runtime_record
from tracekit.model.schema import KERNEL_COLUMNS, fill_missing
from tracekit.model.trace import Step, Trace

DEVICE_CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
                     "Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}
MTIA_DEVICE = "mtia_ccp_events"         # MTIA device activity: counted and named in a warning, not read
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver", "mtia_runtime"}
CPU_OP_CATEGORIES = {"cpu_op", "operator"}
GRAPH_LAUNCHES = {"cudaGraphLaunch", "cudaGraphLaunch_v10000", "hipGraphLaunch", "cuGraphLaunch"}
PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
TRACE_NAMES = ("trace.json.gz", "trace.json")


def resolve_trace_path(path: str | Path) -> Path:
    """A trace file, or the trace inside a capture bundle folder."""
    p = Path(path)
    if not p.exists():
        raise TracekitError(f"{p}: no such file or folder")
    if p.is_dir():
        meta = bundle.read_meta(p)
        if meta is not None:
            return _bundle_trace(p, meta)
        for name in TRACE_NAMES:
            if (p / name).is_file():
                return p / name
        found = sorted(p.glob("*.json.gz")) + sorted(p.glob("*.json"))
        found = [f for f in found if f.name != "meta.json"]
        if len(found) == 1:
            return found[0]
        if not found:
            raise TracekitError(f"{p}: folder holds no trace (expected trace.json.gz or one *.json[.gz])")
        raise TracekitError(f"{p}: folder holds several traces ({', '.join(f.name for f in found[:4])}); name one")
    return p


def _bundle_trace(folder: Path, meta: dict) -> Path:
    """The Kineto trace of a capture bundle, or a one-line reason why it has none."""
    trace = folder / bundle.TRACE
    if trace.is_file():
        return trace
    if meta.get("state") == "running":
        raise TracekitError(f"{folder}: the capture did not finish (killed while the script ran?): "
                            "the bundle holds no trace")
    raise TracekitError(f"{folder}: the bundle holds no trace (script exit code {meta.get('exit_code')}; "
                        "no step ran after the warm-up?)")


def read_json(path: Path, what: str = "trace") -> object:
    """Bytes → JSON, un-gzipping when the file starts with the gzip magic (within tracekit.limits)."""
    raw = read_input(path, what)
    if not raw[:4096].strip() and not raw.strip():         # cheap test first: no copy of a big file
        raise TracekitError(f"{path}: file is empty")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TracekitError(f"{path}: invalid JSON ({exc}); is the file truncated?") from None


def trace_events(doc: object, path: Path) -> tuple[list, dict]:
    """The event list and the trace-level fields of a Chrome trace document."""
    if isinstance(doc, list):
        return doc, {}
    if not isinstance(doc, dict) or "traceEvents" not in doc:
        raise TracekitError(f"{path}: JSON has no traceEvents: not a torch.profiler / Chrome trace")
    events = doc["traceEvents"]
    if not isinstance(events, list):
        raise TracekitError(f"{path}: traceEvents is not a list")
    return events, {k: v for k, v in doc.items() if k != "traceEvents"}


def load_trace(path: str | Path, step_marker: str | None = None) -> Trace:
    """Load a trace file or bundle folder into a ``Trace`` (kernel table + steps), unclassified."""
    p = resolve_trace_path(path)
    events, meta = trace_events(read_json(p), p)
    marker = _compile_marker(step_marker)

    device_rows: list[tuple] = []          # (event index, kind)
    launches: dict[int, dict] = {}         # correlation -> runtime event
    ops: dict[int, dict] = {}              # External id -> cpu op
    cpu_ops: list[dict] = []
    runtime: list[tuple] = []               # (ts, dur, name, tid) of every runtime/driver call
    step_events: list[dict] = []
    notes = Notes()
    get_kind = DEVICE_CATEGORIES.get
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise bad_event(p, i, "is not a JSON object")
        cat = e.get("cat")
        if cat is not None and not isinstance(cat, str):
            raise bad_event(p, i, f"has a 'cat' that is a {type(cat).__name__}, not a string")
        kind = get_kind(cat)
        if e.get("ph") != "X":
            if kind is not None:
                notes.add(f"{{n}} device events ({cat}) whose ph is not 'X' (a complete event) were skipped: "
                          "tracekit reads device activity from complete events only")
            continue
        if kind is not None:
            check_time(e, p, i)
            clean_device_args(check_common(e, p, i), kind, notes)
            device_rows.append((i, kind))
        elif cat == MTIA_DEVICE:
            notes.add("{n} MTIA device events (mtia_ccp_events) are not read: they mix compute (pe_exe), DMA and "
                      "waits (event_wait) and name no launch, and tracekit has no model of them (HTA counts them)")
        elif cat in LAUNCH_CATEGORIES:
            corr = check_common(e, p, i).get("correlation")
            if corr is not None:
                check_time(e, p, i, dur=False)
                launches[corr] = e
            if (rec := runtime_record(e)) is not None:
                runtime.append(rec)
        elif cat in CPU_OP_CATEGORIES:
            args = check_common(e, p, i)
            check_time(e, p, i)
            ext = args.get("External id")
            if ext is not None:
                ops.setdefault(ext, e)
            name = e["name"]
            if marker is not None and marker.search(name):
                step_events.append(e)
            elif name.startswith("ProfilerStep#"):
                if marker is None:
                    step_events.append(e)
            else:
                cpu_ops.append(e)
        elif cat == "user_annotation" or (marker is not None and cat == "python_function"):
            name = e.get("name")
            if isinstance(name, str) and (marker.search(name) if marker is not None else PROFILER_STEP.match(name)):
                check_time(e, p, i)
                step_events.append(e)

    if not device_rows and not cpu_ops:
        raise TracekitError(f"{p}: nothing to explain: no device kernels and no CPU ops among its {len(events)} "
                            "events" + "".join(f"; {w}" for w in notes.warnings()))
    steps, step_rule = _steps(step_events, marker, step_marker)
    meta["runtime_per_step"] = runtime_per_step(runtime, steps)     # host/launch figures (load/runtime.py)
    props, device_name = _device_properties(meta, notes)
    if device_rows:
        table = _device_table(events, device_rows, launches, ops, cpu_ops, notes)
    else:
        table = _cpu_table(cpu_ops, notes)
        device_name = None
    warnings = notes.warnings()
    if not device_rows:
        warnings.append("no device kernels in this trace: rows are the top-level CPU ops")
    table = _assign_steps(table, steps)
    orphans = int(((table["launch"] == "") & (table["step"] < 0) & (table["kind"] != "cpu_op")).sum()) if steps else 0
    if orphans:
        warnings.append(f"{orphans} kernels have neither a launch event nor an op in the trace (launched before "
                        "profiling began?): counted outside every step")
    keep = events if len(table) and bool(table["graph"].any()) else None    # graph_replay reads them
    return Trace(path=str(p), kernels=table, steps=steps, step_rule=step_rule, device_name=device_name,
                 device_properties=props, metadata=meta, warnings=warnings, source_events=keep)


def _device_properties(meta: dict, notes: Notes) -> tuple[list[dict], str | None]:
    """deviceProperties as a list of objects, and the first one's name (None when absent or malformed)."""
    props = meta.get("deviceProperties")
    if props is None:
        return [], None
    if not isinstance(props, list):
        notes.add(f"deviceProperties is a {type(props).__name__}, not a list: unknown device")
        return [], None
    kept = [d for d in props if isinstance(d, dict)]
    name = kept[0].get("name") if kept else None
    if len(kept) < len(props) or (kept and not isinstance(name, str)):
        notes.add("{n} deviceProperties entries are malformed (not an object, or a name that is not a string)")
    return kept, name if isinstance(name, str) else None


def _compile_marker(step_marker: str | None):
    return None if step_marker is None else UserRegex(step_marker, "--step-marker")


def _steps(step_events: list[dict], marker, marker_text: str | None) -> tuple[list[Step], str]:
    seen: dict[tuple, dict] = {}
    for e in step_events:
        seen.setdefault((e["name"], float(e["ts"])), e)
    ordered = sorted(seen.values(), key=lambda e: float(e["ts"]))
    if not ordered:
        if marker is not None:
            raise TracekitError(f"--step-marker {marker_text!r} matches no event in the trace")
        return [], "whole trace"
    steps = [Step(index=k, name=e["name"], start_us=float(e["ts"]), end_us=float(e["ts"]) + float(e["dur"]))
             for k, e in enumerate(ordered)]
    return steps, (f"marker:{marker_text}" if marker is not None else "ProfilerStep")


def _device_table(events: list, rows: list[tuple], launches: dict, ops: dict, cpu_ops: list,
                  notes: Notes) -> pd.DataFrame:
    cols: dict[str, list] = defaultdict(list)
    unresolved: list[tuple[int, dict]] = []      # (row, launch) whose External id names no enclosing op
    for i, kind in rows:
        e = events[i]
        args = e.get("args") or {}
        corr = args.get("correlation", -1)
        launch = launches.get(corr)
        launch_name = launch.get("name", "") if launch else ""
        graph = launch_name in GRAPH_LAUNCHES
        op = None
        if launch is not None and not graph:
            ext = args.get("External id", (launch.get("args") or {}).get("External id"))
            op = _enclosing(ops.get(ext), launch)
            if op is None:
                unresolved.append((len(cols["name"]), launch))
        elif launch is None and "External id" in args:     # launch event not kept: trust the id
            op = ops.get(args["External id"])
        cols["name"].append(e["name"])
        cols["event_index"].append(i)
        cols["kind"].append(kind)
        cols["device"].append(_as_int(args.get("device", e.get("pid")), 0))
        cols["stream"].append(_as_int(args.get("stream", e.get("tid")), -1))
        cols["start_us"].append(float(e["ts"]))
        cols["dur_us"].append(float(e["dur"]))
        cols["grid"].append(args.get("grid"))
        cols["block"].append(args.get("block"))
        cols["correlation"].append(corr if isinstance(corr, int) else -1)
        cols["launch"].append(launch_name)
        cols["graph"].append(graph)
        cols["event_bytes"].append(float(args["bytes"]) if kind != "kernel" and "bytes" in args else np.nan)
        cols["op"].append(op)
        # step assignment uses the launch time (the CPU side), else the op's; a kernel with neither was
        # launched before the trace began (or its launch was dropped): it belongs to no step
        if launch and "ts" in launch:
            cols["step"].append(float(launch["ts"]))
        else:
            cols["step"].append(float(op["ts"]) if op else np.nan)
    if unresolved and cpu_ops:
        for row, op in zip((r for r, _ in unresolved), _innermost_ops([l for _, l in unresolved], cpu_ops)):
            cols["op"][row] = op
    _op_columns(cols, "external_id", notes)
    return _finish(cols)


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


def _op_columns(cols: dict[str, list], source: str, notes: Notes) -> None:
    """Expand the op events in ``cols['op']`` into the op_* columns. An op's shape fields are checked
    here, once per op that a row uses, not for every CPU op of the trace (most launch nothing)."""
    ops = cols["op"]
    checked: set[int] = set()
    for op in ops:
        if op is not None and id(op) not in checked:
            checked.add(id(op))
            if isinstance(op.get("args"), dict):
                clean_op_args(op["args"], notes)
    for col, key in (("op_dims", "Input Dims"), ("op_types", "Input type"),
                     ("op_strides", "Input Strides"), ("op_concrete", "Concrete Inputs"),
                     ("kernel_file", "kernel_file")):
        cols[col] = [(op.get("args") or {}).get(key) if op else None for op in ops]
    cols["op_source"] = [source if op else "" for op in ops]
    cols["op_id"] = [id(op) if op else -1 for op in ops]
    cols["op_rf_id"] = [_as_int((op.get("args") or {}).get("Record function id"), -1) if op else -1 for op in ops]
    cols["op"] = [op["name"] if op else None for op in ops]


def _as_int(value, default: int) -> int:
    """``value`` as an int64 (device, stream, ids), else ``default``."""
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return n if -(1 << 63) <= n < (1 << 63) else default


def _cpu_table(cpu_ops: list[dict], notes: Notes) -> pd.DataFrame:
    """Top-level CPU ops (not nested in another op on the same thread) as rows."""
    cols: dict[str, list] = defaultdict(list)
    by_thread: dict[tuple, list[dict]] = {}
    for e in cpu_ops:
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    top: list[dict] = []
    for thread_ops in by_thread.values():
        thread_ops.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        end = -np.inf
        for e in thread_ops:
            ts = float(e["ts"])
            if ts >= end:
                top.append(e)
                end = ts + float(e["dur"])
    top.sort(key=lambda e: float(e["ts"]))
    for e in top:
        cols["name"].append(e["name"])
        cols["kind"].append("cpu_op")
        cols["device"].append(-1)
        cols["stream"].append(-1)
        cols["start_us"].append(float(e["ts"]))
        cols["dur_us"].append(float(e["dur"]))
        cols["grid"].append(None)
        cols["block"].append(None)
        cols["correlation"].append(-1)
        cols["launch"].append("")
        cols["graph"].append(False)
        cols["event_bytes"].append(np.nan)
        cols["op"].append(e)
        cols["step"].append(float(e["ts"]))
    _op_columns(cols, "self", notes)
    return _finish(cols)


def _finish(cols: dict[str, list]) -> pd.DataFrame:
    df = pd.DataFrame(fill_missing(cols, len(cols["name"])), columns=KERNEL_COLUMNS)
    df = df.sort_values("start_us", kind="stable").reset_index(drop=True)
    return df


def _assign_steps(df: pd.DataFrame, steps: list[Step]) -> pd.DataFrame:
    """Replace the launch-time placeholder in ``step`` with the index of the step holding it."""
    when = df["step"].to_numpy(dtype=float)
    if not steps:
        df["step"] = np.zeros(len(df), dtype=int)
        return df
    starts = np.array([s.start_us for s in steps])
    ends = np.array([s.end_us for s in steps])
    k = np.searchsorted(starts, when, side="right") - 1
    inside = (k >= 0) & (when < ends[np.clip(k, 0, None)])
    df["step"] = np.where(inside, k, -1).astype(int)
    return df
