"""The normalised kernel table of a trace, kept as Parquet so that the next explain/check/diff/ranks of
the same file skips reading the JSON (the largest part of explain's time, docs/performance.md).

What is kept: the table as load, twins, classify, collectives and graph-replay mapping leave it
(``analyze.normalise``), with the ``Trace`` fields needed to rebuild it (steps, device, metadata,
warnings). Costs and floors are not kept here: they depend on --device/--spec, on kernel sources and on
an execution trace, so they are recomputed from the table (``model.doc_cache`` keeps a whole
``explain -f json`` output under a key that holds those too).

Key: blake2b of the trace file's bytes (streamed) and of each graph-capture file the bundle adds, the
file's absolute path, the step marker, tracekit's version and a digest of tracekit's own source files
(so an edited checkout never reads a table an older loader wrote). A file is written to a temporary
name and renamed into place (concurrent writers: the last rename wins, readers never see half a
file). A file that cannot be read is ignored with one warning line and written again.

Where: ``$TRACEKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/tracekit``, else ``~/.cache/tracekit``;
``TRACEKIT_NO_CACHE=1`` or ``--no-cache`` turn it off. A folder that cannot be written means no cache.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from array import array
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from tracekit.model.cache_key import FORMAT, code_digest, folder, key, settings  # noqa: F401  (the cache's API)
from tracekit.model.keys import SHARED_COLUMNS
from tracekit.model.schema import BY_NAME, KERNEL_COLUMNS
from tracekit.model.steps import StepNames, Steps
from tracekit.model.trace import Trace

def _path(root: Path, k: str) -> Path:
    return root / k[:2] / f"{k}.parquet"


# JSON keeps only str keys: dicts with other keys (runtime_per_step is keyed by step index) are tagged
def _plain(value):
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _plain(v) for k, v in value.items()}
        return {"__items__": [[k, _plain(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, array):                  # runtime_per_step's typed columns: read back as lists
        return value.tolist()
    return value


def _unplain(value):
    if isinstance(value, dict):
        if set(value) == {"__items__"}:
            return {k: _unplain(v) for k, v in value["__items__"]}
        return {k: _unplain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unplain(v) for v in value]
    return value


def _json(value) -> bytes:
    """orjson of a value that must come back equal (a tuple, NaN or an object would not: ValueError); a
    typed array comes back as the list of its values."""
    plain = _plain(value)
    data = orjson.dumps(plain)
    if _unplain(orjson.loads(data)) != plain:
        raise ValueError(f"{type(value).__name__} value does not survive JSON")
    return data


_HOST = "host_"


def _per_step(trace: Trace) -> tuple[bytes, dict, dict]:
    """The steps' columns and the typed host-figure columns (``load.runtime``) as one .npz (8 B a value,
    not a JSON list of lists: 100k steps took 140 MB to write that way), their names' JSON, and the
    metadata left for JSON."""
    steps, metadata = trace.steps, dict(trace.metadata)
    arrays = {"index": steps.index, "start_us": steps.start_us, "end_us": steps.end_us}
    names = {"texts": steps.names.texts} if steps.names.texts is not None else {"prefix": steps.names.prefix}
    if names.get("prefix") is not None or not len(steps):
        arrays["numbers"] = np.frombuffer(steps.names.numbers, dtype=np.int64) if len(steps) else np.zeros(0, np.int64)
    host = metadata.get("runtime_per_step")
    typed = {k: v for k, v in host.items() if isinstance(v, array)} if isinstance(host, dict) else {}
    if typed:
        metadata["runtime_per_step"] = {k: v for k, v in host.items() if k not in typed}
        names["host"] = {k: v.typecode for k, v in typed.items()}
        arrays.update({_HOST + k: np.frombuffer(v, dtype=np.int64 if v.typecode == "q" else np.float64)
                       for k, v in typed.items()})
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)
    return out.getvalue(), names, metadata


def _steps_back(blob: bytes, fields: dict) -> Steps:
    """``_per_step``'s steps, and its host figures put back into ``fields["metadata"]``."""
    names = fields["step_names"]
    with np.load(io.BytesIO(blob), allow_pickle=False) as got:
        if names.get("texts") is not None:
            step_names = StepNames(names["texts"])
        else:
            step_names = StepNames()
            step_names.prefix, step_names.numbers = names.get("prefix"), array("q", got["numbers"].tobytes())
        for k, code in (names.get("host") or {}).items():
            fields["metadata"].setdefault("runtime_per_step", {})[k] = array(code, got[_HOST + k].tobytes())
        return Steps(got["index"], step_names, got["start_us"], got["end_us"])


def _arrow_table(trace: Trace):
    import pyarrow as pa

    df = trace.kernels
    arrays, names, text_dtypes = [], [], {}
    for name in df.columns:
        kind = BY_NAME[name].kind
        col = df[name]
        if kind == "object":
            memo: dict[int, str | None] = {}
            values = [None if v is None else memo.get(id(v)) or memo.setdefault(id(v), _json(v).decode())
                      for v in col.tolist()]
            arrays.append(pa.array(values, type=pa.string()))
        elif kind == "str":
            arrays.append(pa.array(col, type=pa.string(), from_pandas=True))     # None and NaN: null
            text_dtypes[name] = str(col.dtype)
        else:
            arrays.append(pa.array(col.to_numpy(), type={"float": pa.float64(), "int": pa.int64(),
                                                         "bool": pa.bool_()}[kind]))
        names.append(name)
    blob, step_names, metadata = _per_step(trace)
    fields = {"step_names": step_names, "step_rule": trace.step_rule, "device_name": trace.device_name,
              "device_properties": trace.device_properties, "metadata": metadata,
              "warnings": trace.warnings, "text_dtypes": text_dtypes}
    meta = {b"tracekit": _json(fields), b"tracekit.steps": blob}
    return pa.Table.from_arrays(arrays, names=names).replace_schema_metadata(meta)


def write(k: str | None, trace: Trace) -> bool:
    """Keep a normalised trace under its key; False (nothing written) when the cache is off, the folder
    cannot be written or a value would not come back equal."""
    root = folder()
    if root is None or k is None or trace.source_events is not None:
        return False
    try:
        import pyarrow.parquet as pq
        table = _arrow_table(trace)
    except (ValueError, TypeError, OverflowError, RecursionError, orjson.JSONEncodeError, ImportError):
        return False                     # RecursionError: metadata nested deeper than Python recurses
    target = _path(root, k)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{k}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        try:
            pq.write_table(table, tmp, compression="zstd")
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        return False
    return True


def read(k: str | None, trace_path: str) -> Trace | None:
    """The trace kept under ``k``, or None (off, not there, or unreadable: then one warning line)."""
    root = folder()
    if root is None or k is None:
        return None
    target = _path(root, k)
    if not target.is_file():
        return None
    try:
        return _read(target, trace_path)
    except Exception as exc:       # any damage (truncated, not Parquet, wrong columns) means: not cached
        print(f"tracekit: warning: cache file {target} is unreadable ({type(exc).__name__}); "
              "ignored and written again", file=sys.stderr)
        return None


def _read(target: Path, trace_path: str) -> Trace:
    import pyarrow.parquet as pq

    table = pq.read_table(target)
    fields = _unplain(orjson.loads(table.schema.metadata[b"tracekit"]))
    steps = _steps_back(table.schema.metadata[b"tracekit.steps"], fields)
    if sorted(table.column_names) != sorted(KERNEL_COLUMNS):
        raise ValueError("columns differ from the schema")
    cols = {}
    for name in table.column_names:
        kind, column = BY_NAME[name].kind, table.column(name)
        if kind == "object" and name in SHARED_COLUMNS:      # each distinct text decoded once, shared
            texts = column.to_pylist()
            distinct = list(dict.fromkeys(t for t in texts if t is not None))
            decoded = dict(zip(distinct, orjson.loads("[" + ",".join(distinct) + "]")))
            cols[name] = [None if t is None else decoded[t] for t in texts]
        elif kind == "object":
            cols[name] = orjson.loads("[" + ",".join("null" if v is None else v for v in column.to_pylist()) + "]")
        elif kind == "str":       # pandas' own text dtype (NaN for missing) or object (None), as written
            cols[name] = pd.Series(column.to_pylist(), dtype=fields["text_dtypes"].get(name, "object"))
        else:
            cols[name] = column.to_numpy(zero_copy_only=False).astype(
                {"float": np.float64, "int": np.int64, "bool": np.bool_}[kind])
    df = pd.DataFrame(cols, columns=KERNEL_COLUMNS)
    return Trace(path=str(trace_path), kernels=df, steps=steps, step_rule=fields["step_rule"],
                 device_name=fields["device_name"], device_properties=fields["device_properties"],
                 metadata=fields["metadata"], warnings=list(fields["warnings"]), normalised=True)
