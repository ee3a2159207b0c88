"""Join the distilled columns into the kernel table: device activity ↔ the runtime call that launched
it (``correlation``) ↔ the CPU op behind that call (``External id``, or the innermost op on the
launching thread), or on a CPU-only trace the top-level CPU ops.

Keys are joined through dicts built in one C-level call (the trace's ids keep their own types:
ints, or strings where a trace wrote them so), interval tests and sorting are numpy, and an op's
shape fields are decoded and checked once per op that a row uses.
"""

from __future__ import annotations

from array import array

import numpy as np
import pandas as pd
from msgspec import UNSET, Raw

from tracekit.load.events import shape_value
from tracekit.load.fields import SHAPES_DROPPED, Notes, op_fields
from tracekit.load.index_args import index_lists
from tracekit.load.pieces import NO_ID, OP, Piece, as_int, unpack_ids
from tracekit.model.schema import KERNEL_COLUMNS, fill_missing

GRAPH_LAUNCHES = {"cudaGraphLaunch", "cudaGraphLaunch_v10000", "hipGraphLaunch", "cuGraphLaunch"}
_SHAPE_KEYS = (("input_dims", "Input Dims"), ("input_type", "Input type"), ("input_strides", "Input Strides"),
               ("concrete", "Concrete Inputs"))


def device_table(p: Piece, notes: Notes) -> pd.DataFrame:
    """One row per device activity, with its launch, its op and the op's fields."""
    n = len(p.d_idx)
    launch_at = dict(zip(unpack_ids(p.l_corr), range(len(p.l_corr))))     # the last launch of a correlation
    op_at = dict(zip(reversed(p.c_ext), range(len(p.c_ext) - 1, -1, -1)))    # the first op of an id
    op_at.pop(NO_ID if isinstance(p.c_ext, array) else None, None)
    d_corr, l_ext = unpack_ids(p.d_corr), unpack_ids(p.l_ext)
    li = [launch_at.get(c, -1) if c is not None else -1 for c in d_corr]
    launch = [p.l_name[k] if k >= 0 else "" for k in li]
    graph = [name in GRAPH_LAUNCHES for name in launch]
    op = [-1] * n
    unresolved = []
    for r, (k, g, own) in enumerate(zip(li, graph, p.d_ext)):
        if k >= 0 and not g:
            ext = l_ext[k] if own is UNSET else own
            o = op_at.get(ext, -1) if ext is not None else -1
            if o >= 0 and p.c_tid[o] == p.l_tid[k] and p.c_ts[o] <= p.l_ts[k] <= p.c_ts[o] + p.c_dur[o]:
                op[r] = o
            else:
                unresolved.append(r)
        elif k < 0 and own is not UNSET and own is not None:     # launch not kept: trust the id
            op[r] = op_at.get(own, -1)
    # step assignment uses the launch time (the CPU side), else the op's; a kernel with neither was
    # launched before the trace began (or its launch was dropped): it belongs to no step
    when = [p.l_ts[k] if k >= 0 else (p.c_ts[o] if o >= 0 else np.nan) for k, o in zip(li, op)]
    # an MTIA device event without a launch (a job or DMA begun before profiling, or a DMA the device issued
    # itself) is placed by its own start, as HTA places them
    own = [r for r, (k, o, m) in enumerate(zip(li, op, p.d_own)) if m and k < 0 and o < 0]
    for r in own:
        when[r] = p.d_ts[r]
    if own:
        notes.add("{n} MTIA device events name no launch (no correlation: begun before profiling, or a DMA the "
                  "device issued itself): no op, placed in steps by their own start time", len(own))
    if unresolved and OP in p.c_role:
        found = innermost_ops([p.l_tid[li[r]] for r in unresolved], [p.l_ts[li[r]] for r in unresolved], p)
        for r, o in zip(unresolved, found):
            op[r] = o
    cols = {"name": p.d_name, "event_index": p.d_idx, "kind": p.d_kind, "device": p.d_device,
            "stream": p.d_stream, "start_us": p.d_ts, "dur_us": p.d_dur, "grid": p.d_grid, "block": p.d_block,
            "correlation": [c if isinstance(c, int) else -1 for c in d_corr], "launch": launch, "graph": graph,
            "event_bytes": p.d_bytes, "step": when}
    cols.update(op_columns(p, op, "external_id", notes))
    _fill_index_lists(cols, op, index_lists(p, op))
    p.release_ops()
    return finish(cols)


def _fill_index_lists(cols: dict, op: list[int], found: dict) -> None:
    """Give ``aten::index`` rows the index list their op's children recorded (``load.index_args``), where
    Kineto left the list argument empty; new lists: decoded shapes are shared between ops."""
    if not found:
        return
    for r, o in enumerate(op):
        got = found.get(o)
        dims, types = cols["op_dims"][r], cols["op_types"][r]
        if got is None or not isinstance(dims, list) or not isinstance(types, list) or len(dims) < 2 \
                or len(types) < 2 or dims[1] != [] or types[1] != "":
            continue
        cols["op_dims"][r] = [dims[0], got[0], *dims[2:]]
        cols["op_types"][r] = [types[0], got[1], *types[2:]]


def innermost_ops(tids: list, times: list, p: Piece) -> list[int]:
    """For each (thread, time), the innermost CPU op on that thread whose interval holds the time: the
    last op, in (start, longest first) order, that starts at or before it and ends at or after it (-1
    when none). Step markers are not ops here."""
    ops = np.flatnonzero(np.asarray(p.c_role, dtype=np.int8) == OP)
    codes: dict = {}
    code = np.array([codes.setdefault(p.c_tid[k], len(codes)) for k in ops.tolist()], dtype=np.int64)
    ts, dur = np.asarray(p.c_ts, dtype=float)[ops], np.asarray(p.c_dur, dtype=float)[ops]
    order = np.lexsort((-dur, ts, code))
    ops, code, ts, end = ops[order], code[order], ts[order], (ts + dur)[order]
    below = _below(code, ts, end)
    q_code = np.array([codes.get(t, -1) for t in tids], dtype=np.int64)
    t = np.asarray(times, dtype=float)
    first = np.searchsorted(code, q_code, side="left")
    j = np.full(len(t), -1, dtype=np.int64)
    for c in np.unique(q_code[q_code >= 0]).tolist():
        mine = np.flatnonzero(q_code == c)
        a, b = int(first[mine[0]]), int(np.searchsorted(code, c, side="right"))
        j[mine] = a + np.searchsorted(ts[a:b], t[mine], side="right") - 1
        j[mine[j[mine] < a]] = -1
    while True:                          # step down to the enclosing op until one holds the time
        closed = (j >= 0) & (end[np.maximum(j, 0)] < t)
        if not closed.any():
            break
        j = np.where(closed, below[np.maximum(j, 0)], j)
    return [int(ops[k]) if k >= 0 else -1 for k in j.tolist()]


def _below(code: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each op (sorted by thread, start), the last earlier op of its thread still open when it
    starts (-1: none), by pointer jumping: every op jumped over ends before it starts."""
    below = np.arange(len(ts)) - 1
    below[below < np.searchsorted(code, code, side="left")] = -1
    while True:
        at = np.maximum(below, 0)
        closed = (below >= 0) & (end[at] < ts)
        if not closed.any():
            return below
        below = np.where(closed, below[at], below)


def cpu_table(p: Piece, notes: Notes) -> pd.DataFrame:
    """Top-level CPU ops (not nested in another op on the same thread) as rows."""
    ops = np.flatnonzero(np.asarray(p.c_role, dtype=np.int8) == OP)
    threads: dict = {}
    code = np.array([threads.setdefault((p.c_pid[k], p.c_tid[k]), len(threads)) for k in ops.tolist()],
                    dtype=np.int64)
    ts, dur = np.asarray(p.c_ts, dtype=float)[ops], np.asarray(p.c_dur, dtype=float)[ops]
    order = np.lexsort((-dur, ts, code))
    bounds = np.searchsorted(code[order], np.arange(len(threads) + 1))
    keep = np.zeros(len(ops), dtype=bool)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        mine = order[a:b]
        keep[mine[_top_level(ts[mine], (ts + dur)[mine])]] = True
    top = order[keep[order]]
    top = _backward_leaves(top, [p.c_name[k] for k in ops.tolist()], code, ts, dur, order, bounds)
    top = top[np.argsort(ts[top], kind="stable")]
    rows = ops[top]
    n = len(rows)
    start = ts[top].tolist()
    cols = {"name": [p.c_name[k] for k in rows.tolist()], "kind": ["cpu_op"] * n, "device": [-1] * n,
            "stream": [-1] * n, "start_us": start, "dur_us": dur[top].tolist(), "grid": [None] * n,
            "block": [None] * n, "correlation": [-1] * n, "launch": [""] * n, "graph": [False] * n,
            "event_bytes": [np.nan] * n, "step": start}
    cols.update(op_columns(p, rows.tolist(), "self", notes))
    p.release_ops()
    return finish(cols)


AUTOGRAD_NODE = "autograd::engine::evaluate_function"


def _backward_leaves(top: np.ndarray, names: list, code, ts, dur, order, bounds) -> np.ndarray:
    """Backward in a CPU-only trace runs as ``autograd::engine::evaluate_function: XBackward0`` rows, which
    no op record costs: each is replaced by the outermost ``aten::`` ops inside it on its thread (the mm,
    sum, add_ of AddmmBackward0), where the trace holds them; a row with none stays."""
    nodes = [i for i in top.tolist() if names[i].startswith(AUTOGRAD_NODE)]
    if not nodes:
        return top
    out, drop = [], set()
    for i in nodes:
        mine = order[bounds[code[i]]:bounds[code[i] + 1]]           # this thread's ops by start
        t0, t1 = ts[i], ts[i] + dur[i]
        inner = [j for j in mine[(ts[mine] >= t0) & (ts[mine] + dur[mine] <= t1)].tolist()
                 if j != i and names[j].startswith("aten::")]
        if not inner:
            continue
        inner = np.array(sorted(inner, key=lambda j: (ts[j], -dur[j])))
        out.extend(inner[_top_level(ts[inner], (ts + dur)[inner])].tolist())
        drop.add(i)
    kept = [i for i in top.tolist() if i not in drop]
    return np.array(kept + out, dtype=np.int64)


def _top_level(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Positions (in this thread's start order) of ops that start at or after the end of the last op
    kept before them. Where ops nest properly that end is the running maximum of all earlier ends;
    where one overlaps its parent's end, the sweep is done one op at a time."""
    if not len(ts):
        return np.zeros(0, dtype=np.int64)
    prev_max = np.concatenate([[-np.inf], np.maximum.accumulate(end)[:-1]])
    kept = ts >= prev_max
    last_kept = np.maximum.accumulate(np.where(kept, np.arange(len(ts)), -1))
    if (end <= end[last_kept]).all():
        return np.flatnonzero(kept)
    out, stop = [], -np.inf
    for k, (t, e) in enumerate(zip(ts.tolist(), end.tolist())):
        if t >= stop:
            out.append(k)
            stop = e
    return np.array(out, dtype=np.int64)


def op_columns(p: Piece, op: list[int], source: str, notes: Notes) -> dict[str, list]:
    """The op_* columns of rows whose op is CPU event ``op[r]`` (-1: none). An op's shape fields are
    decoded and checked here, once per op that a row uses, not for every CPU op of the trace."""
    fields: dict[int, tuple] = {}
    seen: dict[tuple, list | None] = {}
    shared: dict[int, tuple] = {}          # a compact piece's ops share records: each one's fields worked out once
    rf = p.c_rf if len(p.c_rf) else None
    for o in op:
        if o >= 0 and o not in fields:
            args = p.c_detail[o]
            if rf is None:
                fields[o] = _op_fields(args, notes, seen, None)
                continue
            got = shared.get(id(args))
            if got is None:
                counts = dict(notes.counts)
                got = shared[id(args)] = (args, _op_fields(args, notes, seen, -1)[:5],
                                          [(w, n - counts.get(w, 0)) for w, n in notes.counts.items()
                                           if n != counts.get(w, 0)])
            else:
                for what, n in got[2]:          # the notes this record gives, once per op as before
                    notes.add(what, n)
            fields[o] = (*got[1], rf[o])
    none = (None, None, None, None, None, -1)
    got = [fields[o] if o >= 0 else none for o in op]
    return {"op": [p.c_name[o] if o >= 0 else None for o in op],
            "op_dims": [g[0] for g in got], "op_types": [g[1] for g in got], "op_strides": [g[2] for g in got],
            "op_concrete": [g[3] for g in got], "kernel_file": [g[4] for g in got],
            "op_source": [source if o >= 0 else "" for o in op],
            "op_id": [p.c_idx[o] if o >= 0 else -1 for o in op],
            "op_rf_id": [g[5] for g in got]}


def _op_fields(args, notes: Notes, seen: dict, rf: int | None) -> tuple:
    """(dims, types, strides, concrete, kernel_file, record function id) of one op; malformed shapes and
    a kernel_file that is no string are dropped and counted, as ``fields.clean_op_args`` does. Shapes
    decoded from the same text are decoded once (``seen``) and shared: no stage changes them in place."""
    raws = [getattr(args, f) for f, _ in _SHAPE_KEYS]
    key = None
    if all(isinstance(r, (Raw, bytes)) for r in raws):      # a lenient record holds parsed values
        key = tuple(bytes(r) for r in raws)
    shapes = seen.get(key) if key is not None else None
    if shapes is None:
        present = {k: v for (_, k), r in zip(_SHAPE_KEYS, raws) if (v := shape_value(r)) is not UNSET}
        shapes = [present.get(k) for _, k in _SHAPE_KEYS] if op_fields(present)[4] else None
        if key is not None:
            seen[key] = shapes
    if shapes is None:
        shapes = (None, None, None, None)
        notes.add(SHAPES_DROPPED)
    kf = args.kernel_file
    if kf is not UNSET and not isinstance(kf, str):
        notes.add("{n} ops have a kernel_file that is not a string: dropped")
    kernel_file = kf if isinstance(kf, str) else None
    if rf is None:
        rf = as_int(None if args.rf_id is UNSET else args.rf_id, -1)
    return (*shapes, kernel_file, rf)


TEXT_COLUMNS = ("name", "kind", "launch", "op", "op_source", "kernel_file")


def finish(cols: dict[str, list]) -> pd.DataFrame:
    """The table, in time order (a stable sort on start_us, each column permuted before the frame is
    built: no second copy of it). Its text columns are object arrays holding what a pandas string
    column would (missing: NaN; a column with no text at all stays None): later stages iterate them in
    Python, several times faster than over Arrow strings."""
    n = len(cols["name"])
    order = np.argsort(np.asarray(cols["start_us"], dtype=float), kind="stable")
    ordered = order.tolist()
    for c in list(cols):
        values = cols[c]
        if isinstance(values, array):
            cols[c] = np.asarray(values)[order]
        elif c in TEXT_COLUMNS and any(isinstance(v, str) for v in values):
            cols[c] = pd.Series([np.nan if (v := values[i]) is None else v for i in ordered], dtype=object)
        else:
            cols[c] = [values[i] for i in ordered]
    return pd.DataFrame(fill_missing(cols, n), columns=KERNEL_COLUMNS)
