"""What each communication kernel of a trace is: its collective, message size, group and group size.

PyTorch (from 2.1) writes the collective's facts into the NCCL kernel's own args and into the
``record_param_comms`` op that launched it (``Collective name``, ``In msg nelems``, ``Out msg nelems``,
``dtype``, ``Group size``, ``Process Group Name``). The kernel table keeps neither, so the trace's events
are read once more, only when it has communication kernels (the cache keeps the result): each event's
name and args as raw JSON text, only the args needed decoded (``_light_args``; the whole document as
dicts only when the fast types refuse the text). Older traces
record only the launching op's shapes and the kernel name (``ncclKernel_SendRecv_...``); the group size
is then the trace's world size, and ``source`` says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import orjson
import pandas as pd

from tracekit.ops.collectives import collective_of, element, message_bytes

PARAM_COMMS = "record_param_comms"


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _from_args(args: dict, name: str, world: int | None, source: str) -> dict | None:
    """A collective from PyTorch's record (kernel or record_param_comms args); None without one."""
    coll = collective_of(args.get("Collective name")) or collective_of(name)
    if coll is None:
        return None
    kind = element(args.get("dtype"))
    group = _int(args.get("Group size"))
    size = message_bytes(coll, _int(args.get("In msg nelems")), _int(args.get("Out msg nelems")), kind[1],
                         group or world) if kind else None
    pg = args.get("Process Group Name")
    return {"name": coll, "bytes": size, "dtype": kind[0] if kind else None,
            "group": str(pg) if isinstance(pg, (str, int)) else None,
            "group_size": group or world, "source": source if group else f"{source}; group size = world size"}


def _from_shapes(name: str, op, op_dims, op_types, world: int | None) -> dict | None:
    """An older trace: the collective from the launching c10d op (``c10d::_allgather_base_``), else from the
    kernel name; S = the largest tensor among the op's inputs (an all_gather's or reduce_scatter's whole
    buffer is its largest tensor; the other collectives' tensors are all S)."""
    coll = collective_of(op) if isinstance(op, str) and op.startswith(("c10d::", "nccl:", "gloo:", "symm_mem::")) \
        else None
    coll = coll or collective_of(name)
    if coll is None:
        return None
    sizes = []
    for dims, kind in zip(op_dims if isinstance(op_dims, list) else [], op_types if isinstance(op_types, list) else []):
        kind = element(kind)
        if kind and isinstance(dims, list) and all(_int(d) is not None for d in dims):
            numel = 1
            for d in dims:
                numel *= d
            sizes.append((numel * kind[1], kind[0]))
    size, dtype = max(sizes) if sizes else (None, None)
    return {"name": coll, "bytes": None if size is None else float(size), "dtype": dtype, "group": None,
            "group_size": world, "source": "launching op's shapes; group size = world size"}


def collective_rows(df: pd.DataFrame, path: str | Path, world: int | None, events: list | None = None) -> list:
    """The ``collective`` value of every row (None for rows that are not communication kernels)."""
    out: list = [None] * len(df)
    comm = (df["category"] == "communication") & (df["kind"] == "kernel")
    if not comm.any():
        return out
    positions = [i for i, flag in enumerate(comm.to_numpy()) if flag]
    wanted = {int(df["event_index"].iat[i]) for i in positions} - {-1}
    kernel_args: dict[int, dict] = {}
    op_args: dict[object, dict] = {}
    if wanted:
        found = _light_args(Path(path), wanted) if events is None else None
        if found is not None:
            kernel_args, op_args = found
        elif events is None:
            from tracekit.errors import TracekitError
            from tracekit.load.kineto import read_json, trace_events
            try:
                events, _ = trace_events(read_json(Path(path)), Path(path))
            except TracekitError:           # too large to parse whole (a chunked read): sizes from op shapes
                events = []
        for i, e in enumerate(events or ()):
            if not isinstance(e, dict) or not isinstance(e.get("args"), dict):
                continue
            if i in wanted:
                kernel_args[i] = e["args"]
            elif e.get("name") == PARAM_COMMS and "Collective name" in e["args"]:
                op_args.setdefault(e["args"].get("External id"), e["args"])
    for i in positions:
        name = df["name"].iat[i]
        args = kernel_args.get(int(df["event_index"].iat[i]), {})
        found = _from_args(args, name, world, "kernel args") if "Collective name" in args else None
        if found is None and (launcher := op_args.get(args.get("External id"))) is not None:
            found = _from_args(launcher, name, world, PARAM_COMMS)
        if found is None:
            found = _from_shapes(name, df["op"].iat[i], df["op_dims"].iat[i], df["op_types"].iat[i], world)
        out[i] = found
    return out


def world_size(metadata: dict) -> int | None:
    """The run's world size from the trace's distributedInfo, when it gives one."""
    info = metadata.get("distributedInfo")
    size = info.get("world_size") if isinstance(info, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


class _NameArgs(msgspec.Struct):
    """An event's name and args, left as JSON text (nothing else of the event is decoded)."""

    name: msgspec.Raw = msgspec.Raw(b"null")          # absent reads as null, as .get gives None
    args: msgspec.Raw = msgspec.Raw(b"null")


class _Doc(msgspec.Struct):
    traceEvents: list[_NameArgs]


_RAW_PARAM_COMMS = b'"' + PARAM_COMMS.encode() + b'"'
_SPACE = re.compile(rb"[ \t\r\n]*")


def _light_args(path: Path, wanted: set[int]) -> tuple[dict, dict] | None:
    """The args ``collective_rows`` reads (the wanted kernels', each record_param_comms op's), decoded
    from the file's text without making every event a dict: the parsed document took ~7x its JSON (a
    14 MB trace with NCCL kernels peaked at 154 MB; now the text and a small record an event). None when
    the fast types refuse the text (the caller parses it as before) or it is too large to hold."""
    from tracekit.errors import TracekitError
    from tracekit.limits import read_input

    try:
        raw = read_input(path, "trace")
    except TracekitError:
        return None
    try:
        start = _SPACE.match(raw).end()
        bare = raw[start:start + 1] == b"["
        events = msgspec.json.decode(raw, type=list[_NameArgs] if bare else _Doc)
        events = events if bare else events.traceEvents
        kernel_args, op_args = {}, {}
        for i, e in enumerate(events):
            if i in wanted:
                args = orjson.loads(memoryview(e.args))
                if isinstance(args, dict):
                    kernel_args[i] = args
                continue
            name = bytes(e.name)
            if name == _RAW_PARAM_COMMS or (b"\\" in name and orjson.loads(name) == PARAM_COMMS):
                args = orjson.loads(memoryview(e.args))
                if isinstance(args, dict) and "Collective name" in args:
                    op_args.setdefault(args.get("External id"), args)
        return kernel_args, op_args
    except (msgspec.DecodeError, msgspec.ValidationError, orjson.JSONDecodeError):
        return None
