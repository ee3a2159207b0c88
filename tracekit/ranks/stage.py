"""The per-rank stage: one rank's trace loaded (through the cache), normalised and costed as explain does
it, reduced to a small Parquet table of its rows for the cross-rank queries.

``rank_stage`` takes and returns plain dicts so that a process pool and Dask can both ship it; the
table travels back as Parquet bytes (no shared filesystem needed between Dask workers and the client,
only the trace paths must be readable where the stage runs). An unusable rank is a result with an
``error`` and no table: the other ranks are still analysed.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from tracekit.errors import TracekitError
from tracekit.gcpause import collector_paused
from tracekit.ops.collectives import collective_of

KERNEL_FIELDS = ("name", "kind", "category", "stream", "start_us", "dur_us", "step", "flops", "bytes",
                 "floor_us", "covered")


MAX_RANK = 1 << 31            # a rank or world size past this is not one (the tables keep ranks as int64)


def _int(value) -> int | None:
    """A rank or world size as the trace gives it: an int from 0 to MAX_RANK, else None (unknown)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_RANK else None


def rank_table(trace, key: int, rank: int | None) -> pd.DataFrame:
    """The rank's rows with what the cross-rank queries read: time, stream, step, floor and, for
    communication rows, the collective (name, S bytes, group, group size; bus bytes are ``bytes``)."""
    df = trace.kernels
    out = pd.DataFrame({c: df[c].to_numpy() for c in KERNEL_FIELDS})
    out.insert(0, "key", np.int64(key))
    out.insert(1, "rank", np.int64(-1 if rank is None else rank))
    coll, size, group, group_size = [], [], [], []
    for cat, name, op, c in zip(df["category"], df["name"], df["op"], df["collective"]):
        if cat != "communication":
            coll.append(None), size.append(np.nan), group.append(None), group_size.append(-1)
        elif isinstance(c, dict):
            coll.append(c.get("name")), size.append(np.nan if c.get("bytes") is None else float(c["bytes"]))
            group.append(c.get("group")), group_size.append(_int(c.get("group_size")) or -1)
        else:                       # a CPU-only trace's c10d op, or a kernel whose collective is unknown
            coll.append(collective_of(op) or collective_of(name)), size.append(np.nan)
            group.append(None), group_size.append(-1)
    out["coll"], out["coll_bytes"], out["group"] = pd.Series(coll, dtype=object), size, pd.Series(group, dtype=object)
    out["group_size"] = np.array(group_size, dtype=np.int64)
    return out


STEP_SCHEMA = (("key", "int64"), ("rank", "int64"), ("step", "int64"), ("name", "string"),
               ("start_us", "float64"), ("end_us", "float64"))


def steps_columns(steps, key: int, rank: int | None):
    """A rank's steps as one Arrow table (key, rank, step, name, start_us, end_us): columns, not a dict
    per step (issue 27: 100k steps were 100k dicts per rank, then one Arrow row each)."""
    import pyarrow as pa

    from tracekit.model.steps import Steps

    steps = Steps.of(steps)
    n = len(steps)
    names = steps.names
    if names.texts is None and n:                 # prefix + number: the numbers' text, joined in Arrow
        import pyarrow.compute as pc
        numbers = pa.array(np.frombuffer(names.numbers, dtype=np.int64)).cast(pa.string())
        name_col = pc.binary_join_element_wise(pa.scalar(names.prefix, pa.string()), numbers, "")
    else:
        name_col = pa.array(list(names), type=pa.string())
    cols = [np.full(n, key, dtype=np.int64), np.full(n, -1 if rank is None else rank, dtype=np.int64),
            steps.index, name_col, steps.start_us, steps.end_us]
    return pa.Table.from_arrays([c if isinstance(c, (pa.Array, pa.ChunkedArray)) else pa.array(c) for c in cols],
                                schema=pa.schema([(k, getattr(pa, t)()) for k, t in STEP_SCHEMA]))


def to_parquet(df: pd.DataFrame) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), buf, compression="zstd")
    return buf.getvalue()


def rank_stage(task: dict) -> dict:
    """One rank: {key, label, path, rank_hint, step_marker, device, spec, skip, cache} → {key, label,
    rank, world_size, device, spec, warnings, steps (an Arrow table, ``steps_columns``), table
    (Parquet bytes), error}. The cycle collector
    is paused for it, in a pool's or Dask's worker as in the command's own process."""
    with collector_paused():
        return _rank_stage(task)


def _rank_stage(task: dict) -> dict:
    from tracekit.analyze import analyze_path
    from tracekit.model import cache

    base = {"key": task["key"], "label": task["label"], "rank": task.get("rank_hint"), "world_size": None,
            "device": None, "spec": None, "warnings": [], "steps": None, "table": None, "error": None}
    try:
        with cache.settings(bool(task.get("cache", True))):
            traces = analyze_path(task["path"], step_marker=task.get("step_marker"), device=task.get("device"),
                                  spec=task.get("spec"), skip=task.get("skip", 0),
                                  graph_captures=task.get("graph_captures"))
    except TracekitError as exc:
        return {**base, "error": str(exc)}
    trace = traces[0]
    info = trace.metadata.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    rank = _int(info.get("rank"))
    rank = rank if rank is not None else task.get("rank_hint")
    steps = steps_columns(trace.steps, task["key"], rank)
    return {**base, "rank": rank, "world_size": _int(info.get("world_size")), "device": trace.device_name,
            "spec": trace.spec.id if trace.spec is not None else None, "warnings": list(trace.warnings),
            "steps": steps, "table": to_parquet(rank_table(trace, task["key"], rank))}
