"""What each communication kernel of a trace is: its collective, message size, group and group size.

PyTorch (from 2.1) writes the collective's facts into the NCCL kernel's own args and into the
``record_param_comms`` op that launched it (``Collective name``, ``In msg nelems``, ``Out msg nelems``,
``dtype``, ``Group size``, ``Process Group Name``). The kernel table keeps neither, so the trace's events
are read once more, only when it has communication kernels (the cache keeps the result). Older traces
record only the launching op's shapes and the kernel name (``ncclKernel_SendRecv_...``); the group size
is then the trace's world size, and ``source`` says so.
"""

from __future__ import annotations

from pathlib import Path

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
        if events is None:
            from tracekit.errors import TracekitError
            from tracekit.load.kineto import read_json, trace_events
            try:
                events, _ = trace_events(read_json(Path(path)), Path(path))
            except TracekitError:           # too large to parse whole (a chunked read): sizes from op shapes
                events = []
        for i, e in enumerate(events):
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
