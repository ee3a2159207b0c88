"""``explain --perfetto annotated.json.gz``: the original trace with tracekit's facts on every kernel.

Each event a kernel-table row was read from (``event_index``) gets one added key in its ``args``:
``tracekit`` = {category, op, step, flops, bytes, floor_us, bound, gap, fused_ops, cost_note} (unknown
values left out; with ``--by module`` also its ``module`` path and ``phase``), which Perfetto UI and
chrome://tracing show on the slice (``args.tracekit.*``).
Per step, a counter track ``tracekit step (us)`` holds the measured kernel time, the sum of floors and
the one-kernel floor over the step's GPU span, and one global instant event carries the diagnosis.
Nothing of the original is dropped or changed: its events stay in order, the new ones come after.
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import orjson

from tracekit.errors import TracekitError
from tracekit.load.kineto import read_json, trace_events
from tracekit.model.trace import Trace
from tracekit.outputs import write_atomic

KEY = "tracekit"                       # the one key added to an annotated event's args
COUNTER = "tracekit step (us)"
FIELDS = ("category", "op", "step", "flops", "bytes", "floor_us", "bound", "gap", "fused_ops", "cost_note")


def _value(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if hasattr(v, "item"):             # numpy scalar
        v = v.item()
    return v


def annotations(row) -> dict:
    """The facts added to one row's event (known values only)."""
    out = {}
    for f in FIELDS:
        v = _value(row[f])
        if v is None or (f == "cost_note" and _value(row["floor_us"]) is not None):
            continue
        out[f] = [str(x) for x in v] if f == "fused_ops" and isinstance(v, list) else v
    return out


def write_perfetto(trace: Trace, doc: dict, path: str | Path) -> dict:
    """Write the annotated trace to ``path`` (gzip when it ends in .gz); what was added, as counts."""
    df = trace.kernels
    rows = df[df["event_index"] >= 0] if len(df) else df
    if not len(rows):
        raise TracekitError("--perfetto annotates a torch.profiler trace's device events; this input has none "
                            "(an MLX graph, or a CPU-only trace)")
    source = Path(trace.path)
    original = read_json(source)
    events, _ = trace_events(original, source)
    annotated = 0
    places = _places(df, rows, doc)
    for i, row in enumerate(rows[["event_index", "name", "start_us", *FIELDS]].to_dict("records")):
        idx = int(row["event_index"])
        e = events[idx] if 0 <= idx < len(events) else None
        if not isinstance(e, dict) or not _named(e, row["name"]) or float(e.get("ts")) != row["start_us"]:
            raise TracekitError(f"{source}: changed since it was read (event {idx} is not the kernel "
                                f"{str(row['name'])[:60]!r}); run explain again")
        args = e.get("args")
        if args is None:
            args = e["args"] = {}
        if isinstance(args, dict):
            args[KEY] = annotations(row)
            if places is not None:                 # the module path (and with --by module, the phase)
                for key, value in zip(("module", "phase"), places[i]):
                    if value is not None:
                        args[KEY][key] = value
            annotated += 1
    added = _step_counters(trace, doc, events, rows)
    data = _dumps(original, source)
    out = Path(path)
    size = write_atomic(out, gzip.compress(data, compresslevel=6) if out.name.endswith(".gz") else data, "--perfetto")
    return {"annotated": annotated, "added_events": added, "events": len(events) - added, "bytes": size}


def _dumps(doc, source: Path) -> bytes:
    """The trace as JSON; orjson stops at 255 levels of nesting, which a field tracekit does not read may
    pass (the reader takes up to 1,024): then the standard encoder, with room for that depth."""
    try:
        return orjson.dumps(doc)
    except orjson.JSONEncodeError:
        import json
        import sys

        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 8000))
        try:
            return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        except (RecursionError, ValueError, TypeError) as exc:
            raise TracekitError(f"--perfetto: {source} cannot be written back as JSON ({exc})") from None
        finally:
            sys.setrecursionlimit(limit)


def _places(df, rows, doc: dict) -> list | None:
    """(module path, phase) of each of ``rows`` when the document's kernel records carry them."""
    recs = doc.get("kernels") or []
    if len(recs) != len(df) or not recs or "module" not in recs[0]:
        return None
    at = df.index.get_indexer(rows.index)
    return [(recs[k]["module"] or None, recs[k].get("phase")) for k in at.tolist()]


def _step_counters(trace: Trace, doc: dict, events: list, rows) -> int:
    """Counter events per step (measured kernel time, floor sum, one-kernel floor over the step's GPU
    span, back to 0 after it) and one instant event with the diagnosis; appended to ``events``."""
    fused = doc["summary"].get("fused_floor_us_per_step") or []
    added = []
    for k, st in enumerate(doc["steps"]):
        sk = rows[rows["step"] == st["step"]]
        if not len(sk) or sk["dur_us"].isna().all():
            continue
        pid = events[int(sk["event_index"].iloc[0])].get("pid", 0)
        start, end = float(sk["start_us"].min()), float((sk["start_us"] + sk["dur_us"]).max())
        values = {"measured kernel time": st["kernel_us"], "floor sum": st.get("floor_us"),
                  "one-kernel floor": fused[k] if k < len(fused) else None}
        values = {n: float(v) for n, v in values.items() if v is not None}
        added.append({"name": COUNTER, "ph": "C", "ts": start, "pid": pid, "args": values})
        added.append({"name": COUNTER, "ph": "C", "ts": end, "pid": pid, "args": {n: 0.0 for n in values}})
    diag = doc["summary"].get("diagnosis") or {}
    if diag.get("text") and len(rows):
        first = int(rows["event_index"].iloc[0])
        added.append({"name": f"tracekit: {diag.get('verdict')}", "ph": "i", "s": "g",
                      "ts": float(rows["start_us"].min()), "pid": events[first].get("pid", 0),
                      "tid": events[first].get("tid", 0), "args": {"diagnosis": diag["text"]}})
    events.extend(added)
    return len(added)


def _named(e: dict, name: str) -> bool:
    """The event is the row's: its name, or an MTIA DMA request's with the direction the loader added."""
    own = e.get("name")
    return own == name or (e.get("cat") == "mtia_ccp_events" and isinstance(own, str) and name.startswith(f"{own} ("))
