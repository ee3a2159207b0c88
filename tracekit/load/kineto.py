"""Read a Kineto (torch.profiler) Chrome trace into the shared kernel table.

The file's events are decoded into typed records of only the fields the table uses and distilled
per group (``load.reader``, ``load.events``, ``load.pieces``); device activities are then joined to
the runtime calls that launched them (``correlation``), the CPU ops behind those calls (``External
id``) and the step markers (``load.link``). Durations are kept exactly as written (µs with sub-µs
digits).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tracekit import bundle
from tracekit.errors import TracekitError
from tracekit.gcpause import collector_paused
from tracekit.limits import UserRegex, read_input
from tracekit.load.events import (CPU_OP_CATEGORIES, DEVICE_CATEGORIES, LAUNCH_CATEGORIES,  # noqa: F401
                                  MTIA_DEVICE, PROFILER_STEP, parse_lenient)
from tracekit.load.fields import Notes
from tracekit.load.link import GRAPH_LAUNCHES, cpu_table, device_table  # noqa: F401
from tracekit.load.pieces import OP
from tracekit.load.reader import read_trace, trace_events  # noqa: F401
from tracekit.load.engine_steps import FAMILIES, family_of
from tracekit.load.runtime import runtime_per_step
from tracekit.model.steps import StepNames
from tracekit.model.trace import Steps, Trace, trim_last_step

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
            return _looks_like_trace(found[0], p)
        if len(found) > 1:                  # several JSON files: only those that look like a trace count
            traces = [f for f in found if _trace_like_quiet(f)]
            if len(traces) == 1:
                return traces[0]
            if not traces:
                raise TracekitError(f"{p}: folder holds no trace: none of its JSON files "
                                    f"({', '.join(f.name for f in found[:4])}) has traceEvents in its first MiB")
            found = traces
        if not found:
            inner = [d for d in sorted(p.iterdir()) if d.is_dir() and (d / bundle.META).is_file()]
            hint = f"; the capture bundle inside is {inner[0]}" if len(inner) == 1 else ""
            raise TracekitError(f"{p}: folder holds no trace (expected trace.json.gz or one *.json[.gz]){hint}")
        raise TracekitError(f"{p}: folder holds several traces ({', '.join(f.name for f in found[:4])}); name one")
    return p


def is_trace_like(file: Path) -> bool:
    """A ``traceEvents`` key (or a JSON list of events) in the file's first MiB (un-gzipped)."""
    from tracekit.limits import read_head

    head = read_head(file, 1 << 20, "trace").lstrip()
    return b'"traceEvents"' in head or (head.startswith(b"[") and head[1:].lstrip().startswith((b"{", b"]")))


def _trace_like_quiet(file: Path) -> bool:
    try:
        return is_trace_like(file)
    except TracekitError:
        return False


def _looks_like_trace(file: Path, folder: Path) -> Path:
    """The one *.json[.gz] of a folder that is no bundle, when it looks like a trace: a ``traceEvents`` key
    (or a JSON list of events) in its first MiB. Any JSON file is not read as a trace (``explain /``
    read a system file)."""
    if is_trace_like(file):
        return file
    raise TracekitError(f"{folder}: folder holds no trace: its one JSON file {file.name} has no traceEvents in its "
                        "first MiB (name the file to read it anyway)")


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
    return parse_lenient(raw, path)


def load_trace(path: str | Path, step_marker: str | None = None) -> Trace:
    """Load a trace file or bundle folder into a ``Trace`` (kernel table + steps), unclassified."""
    with collector_paused():            # hundreds of thousands of acyclic records: no cycle to collect
        return _load(resolve_trace_path(path), step_marker)


def _load(p: Path, step_marker: str | None) -> Trace:
    marker = _compile_marker(step_marker)
    piece, meta, source_events = read_trace(p, marker)
    notes = Notes()
    for _, _, what, n in sorted(piece.notes, key=lambda note: note[:2]):
        notes.add(what, n)
    if not piece.d_idx and OP not in piece.c_role:
        raise TracekitError(f"{p}: nothing to explain: no device kernels and no CPU ops among its {piece.n_events} "
                            "events" + "".join(f"; {w}" for w in notes.warnings()))
    steps, step_rule = _steps((piece.s_idx, piece.s_name, piece.s_ts, piece.s_dur), marker, step_marker)
    piece.s_idx = piece.s_name = piece.s_ts = piece.s_dur = []      # its marks are Steps now
    meta["runtime_per_step"] = runtime_per_step(piece.runtime, steps)     # host/launch figures (load/runtime.py)
    props, device_name = _device_properties(meta, notes)
    cpu_only = not piece.d_idx
    if cpu_only:
        table = cpu_table(piece, notes)
        device_name = None
    else:
        table = device_table(piece, notes)
    waits = piece.waits
    del piece
    warnings = notes.warnings()
    if waits:
        meta["device_waits"] = device_waits(waits)
        warnings.append(wait_warning(meta["device_waits"]))
    if cpu_only:
        warnings.append("no device kernels in this trace: rows are the top-level CPU ops")
    table = _assign_steps(table, steps)
    tail = trim_last_step(table, steps) if marker is None else None     # a marker's range is the user's
    if tail:
        warnings.append(tail)
    orphans = int(((table["launch"] == "") & (table["step"] < 0) & (table["kind"] != "cpu_op")).sum()) if steps else 0
    if orphans:
        warnings.append(f"{orphans} kernels have neither a launch event nor an op in the trace (launched before "
                        "profiling began?): counted outside every step")
    keep = source_events() if len(table) and bool(table["graph"].any()) else None    # graph_replay reads them
    return Trace(path=str(p), kernels=table, steps=steps, step_rule=step_rule, device_name=device_name,
                 device_properties=props, metadata=meta, warnings=warnings, source_events=keep)


def device_waits(waits: list[tuple]) -> dict:
    """MTIA stream waits and event records, (ts, dur, name) each: count and time per name."""
    out: dict = {}
    for _, dur, name in waits:
        got = out.setdefault(name, {"events": 0, "us": 0.0})
        got["events"] += 1
        got["us"] += dur
    return out


def wait_warning(found: dict) -> str:
    parts = [f"{v['events']} {name} ({v['us']:,.2f} µs)" for name, v in found.items()]
    return (f"MTIA stream event waits and records are no device work: {', '.join(parts)} left out of kernel "
            "time and busy (a waiting stream is idle)")


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


def _steps(marks: tuple, marker, marker_text: str | None) -> tuple[Steps, str]:
    """Steps from the marks' columns (event index, name, ts, dur): the first of each (name, start), by
    start."""
    idx, names, ts, dur = marks
    names = StepNames.of(names)
    ts = np.asarray(ts, dtype=float)
    order = np.lexsort((np.asarray(idx, dtype=np.int64), ts))           # by start, then event order
    codes = names.codes()[order]
    by_key = np.lexsort((codes, ts[order]))               # equal (start, name) together, the first one first
    same = (np.diff(ts[order][by_key]) == 0) & (np.diff(codes[by_key]) == 0)
    first = np.ones(len(order), dtype=bool)
    first[by_key[1:][same]] = False
    kept = order[first]
    rule = f"marker:{marker_text}" if marker is not None else "ProfilerStep"
    if marker is None and len(kept):
        shown = names.take(kept)
        profiler_steps = np.fromiter((PROFILER_STEP.match(n) is not None for n in shown), dtype=bool, count=len(kept))
        if profiler_steps.any():
            kept = kept[profiler_steps]
        else:                     # a serving trace: the engine's iterations, of its first family (engine_steps)
            families = [family_of(n) for n in shown]
            family = next((f for f, _ in FAMILIES if f in families), None)
            kept = kept[np.array([f is not None and f == family for f in families], dtype=bool)]
            rule = f"engine iterations ({family})"
    if not len(kept):
        if marker is not None:
            raise TracekitError(f"--step-marker {marker_text!r} matches no event in the trace")
        return Steps.of([]), "whole trace"
    return Steps(np.arange(len(kept)), names.take(kept), ts[kept], ts[kept] + np.asarray(dur, dtype=float)[kept]), rule


def _assign_steps(df: pd.DataFrame, steps: Steps) -> pd.DataFrame:
    """Replace the launch-time placeholder in ``step`` with the index of the step holding it."""
    when = df["step"].to_numpy(dtype=float)
    if not steps:
        df["step"] = np.zeros(len(df), dtype=int)
        return df
    starts, ends = steps.start_us, steps.end_us
    k = np.searchsorted(starts, when, side="right") - 1
    inside = (k >= 0) & (when < ends[np.clip(k, 0, None)])
    df["step"] = np.where(inside, k, -1).astype(int)
    return df
