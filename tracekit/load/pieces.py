"""Records → the columns the linking reads, one group of events at a time.

``distil`` takes the records of one stretch of a trace (the whole trace, or one chunk of a large
one) and keeps, per group, only what the kernel table is built from: device activities (kernel,
memcpy, memset), the runtime calls that may have launched them, CPU ops, step markers, the
runtime/driver calls the per-step host figures count, and counts of what was skipped. Nothing is
kept of other events (Python functions, flows, metadata). For records from the fast decoder it
also checks what their types do not (ranges, missing fields) and returns None when any check
fails, so that the caller decodes the stretch leniently and the error names the event.
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass, field

import msgspec
import numpy as np
from msgspec import UNSET, Raw, UnsetType

from tracekit.load.events import (ANNOTATION, CPU_OP, DEVICE, DEVICE_CATEGORIES, GROUP, LAUNCH, MTIA, NO_ARGS, RANGE,
                                  NOT_COMPLETE, NOT_X, PYTHON, Args, dma_args, dma_name, is_step_name, mtia_kind)
from tracekit.load.fields import MAX_ABS_TS_US, MAX_DUR_US, grid_value, number
from tracekit.model.steps import StepNames

_INT64 = (-(1 << 63), 1 << 63)
OP, STEP, DROPPED = 0, 1, 2             # what a CPU op event is: an op, a step marker, a marker not used


@dataclass
class Piece:
    """Per group, columns in event order (``*_idx``: the event's position in traceEvents)."""

    n_events: int = 0
    d_idx: list = field(default_factory=list)
    d_kind: list = field(default_factory=list)
    d_name: list = field(default_factory=list)
    d_ts: list = field(default_factory=list)
    d_dur: list = field(default_factory=list)
    d_device: list = field(default_factory=list)
    d_stream: list = field(default_factory=list)
    d_corr: list = field(default_factory=list)     # correlation as a lookup key: -1 when absent
    d_ext: list = field(default_factory=list)      # the event's own External id; UNSET when absent
    d_grid: list = field(default_factory=list)
    d_block: list = field(default_factory=list)
    d_bytes: list = field(default_factory=list)
    d_own: list = field(default_factory=list)      # placed in a step by its own start when it has no launch (MTIA)
    waits: list = field(default_factory=list)      # (ts, dur, name) of MTIA stream waits: no device work, no row
    l_idx: list = field(default_factory=list)      # launches: runtime calls with a correlation
    l_name: list = field(default_factory=list)
    l_ts: list = field(default_factory=list)
    l_tid: list = field(default_factory=list)
    l_corr: list = field(default_factory=list)
    l_ext: list = field(default_factory=list)      # None when absent
    runtime: list = field(default_factory=list)    # (ts, dur, name, tid) of every runtime/driver call
    c_idx: list = field(default_factory=list)      # CPU ops (step markers among them: c_role)
    c_name: list = field(default_factory=list)
    c_ts: list = field(default_factory=list)
    c_dur: list = field(default_factory=list)
    c_tid: list = field(default_factory=list)
    c_pid: list = field(default_factory=list)
    c_ext: list = field(default_factory=list)      # None when absent
    c_role: list = field(default_factory=list)
    c_detail: list = field(default_factory=list)   # the op's Args (shapes, kernel_file, Record function id)
    c_rf: list = field(default_factory=list)       # compact pieces: Record function ids (else in c_detail)
    s_idx: list = field(default_factory=list)      # step marks (ProfilerStep#N, --step-marker matches), a
    s_name: list = field(default_factory=list)     # column each, not a tuple a mark (100k steps: 15 MB less)
    s_ts: list = field(default_factory=list)
    s_dur: list = field(default_factory=list)
    notes: list = field(default_factory=list)      # (first event index, order, text, count)

    def release_ops(self) -> None:
        """Drop the launch, runtime and CPU-op columns (once the table has taken what it needs)."""
        for name in self.__dataclass_fields__:
            if name.startswith(("l_", "c_")) or name == "runtime":
                del getattr(self, name)[:]

    def extend(self, other: "Piece") -> None:
        self.n_events += other.n_events
        for name in self.__dataclass_fields__:
            if name == "n_events":
                continue
            mine, more = getattr(self, name), getattr(other, name)
            if name in _IDS and isinstance(mine, array) != isinstance(more, array):     # ids that are not all ints
                mine = unpack_ids(mine)
                setattr(self, name, mine)
                more = unpack_ids(more)
            mine.extend(more)


_NAME = (str, type(None), UnsetType)
NO_ID = -(1 << 63)                      # an absent id in a packed id column
_IDS = ("c_ext", "l_corr", "l_ext", "d_corr")
_FLOATS = ("d_ts", "d_dur", "d_bytes", "l_ts", "c_ts", "c_dur", "s_ts", "s_dur")
_INTS = ("d_idx", "d_device", "d_stream", "l_idx", "c_idx", "c_rf", "s_idx")


def packed_piece() -> Piece:
    """An empty Piece whose numeric columns are typed arrays (8 bytes a value, not a Python object): the
    columns chunked reading keeps."""
    p = Piece()
    for name in _FLOATS:
        setattr(p, name, array("d"))
    for name in _INTS:
        setattr(p, name, array("q"))
    p.c_role = array("b")
    p.s_name = StepNames()                  # ProfilerStep#N names as a prefix and numbers, not 100k strs
    for name in _IDS:
        setattr(p, name, array("q"))
    return p


def pack_ids(values: list):
    """Ids (ints, or None for absent) as an int64 array, NO_ID for None; the list itself when one is
    not an int or is NO_ID (a string id: the lenient reader keeps what the trace wrote)."""
    if all((type(v) is int and v != NO_ID) or v is None for v in values):
        try:
            return array("q", [NO_ID if v is None else v for v in values])
        except OverflowError:
            pass
    return values


def unpack_ids(values) -> list:
    return [None if v == NO_ID else v for v in values] if isinstance(values, array) else values


def compact(piece: Piece, shared: dict, fast: bool = False) -> Piece:
    """``piece`` holding nothing of its text: each op's shape fields copied out as bytes (one object per
    distinct set of shapes, in ``shared``), Record function ids in ``c_rf``, names and threads shared, ids
    packed. ``fast``: every record is the fast decoder's (shape fields are Raw by type, ids ints, names
    interned already): one C-level encode per op gives its key, no per-field test."""
    if fast:
        details, rf = _fast_details(piece.c_detail, shared)
    else:
        details, rf = _details(piece.c_detail, shared), [_rf(a.rf_id) for a in piece.c_detail]
        for name in ("d_name", "l_name", "c_name"):
            setattr(piece, name, [sys.intern(n) for n in getattr(piece, name)])
    piece.c_rf = rf
    piece.c_detail = details
    threads: dict = {}
    for name in ("l_tid", "c_tid", "c_pid"):
        setattr(piece, name, [threads.setdefault(t, t) for t in getattr(piece, name)])
    for name in _IDS:
        setattr(piece, name, (_pack_fast if fast else pack_ids)(getattr(piece, name)))
    for name in ("d_grid", "d_block"):                    # launch dimensions repeat: one list per distinct one
        setattr(piece, name, [shared.setdefault(("dim", tuple(g)), g) if type(g) is list else g
                              for g in getattr(piece, name)])
    return piece


_ENCODE = msgspec.json.Encoder().encode
_UNSET_AS_0 = {UNSET: 0}                    # kernel_file in a key: absent (0), null, or its text
_NONE_AS_NO_ID = {None: NO_ID}


def _fast_details(records: list, shared: dict) -> tuple[list, list]:
    """(the shared Args of each fast record, its Record function id). An op's key is the JSON of its four
    Raw shape fields and its kernel_file in one array: one C call, one bytes object (its hash kept)."""
    keys = [_ENCODE((a.input_dims, a.input_type, a.input_strides, a.concrete,
                     _UNSET_AS_0.get(a.kernel_file, a.kernel_file))) for a in records]
    first = dict(zip(keys, records))
    for k in first.keys() - shared.keys():
        a = first[k]
        shared[k] = Args(input_dims=bytes(a.input_dims), input_type=bytes(a.input_type),
                         input_strides=bytes(a.input_strides), concrete=bytes(a.concrete), kernel_file=a.kernel_file)
    rf = [a.rf_id for a in records]
    try:
        rf = array("q", rf)                 # all ints within int64 (the common case)
    except (TypeError, OverflowError):
        rf = [_rf(x) for x in rf]
    return list(map(shared.__getitem__, keys)), rf


def _pack_fast(values: list):
    """``pack_ids`` of a fast piece's ids (ints or None) in C-level passes."""
    if NO_ID in values:
        return values
    try:
        return array("q", map(_NONE_AS_NO_ID.get, values, values))
    except (TypeError, OverflowError):
        return pack_ids(values)


def _rf(value) -> int:
    return as_int(None if value is UNSET else value, -1)


def _details(records: list, shared: dict) -> list:
    details = []
    for a in records:
        if not isinstance(a.input_dims, Raw) or not isinstance(a.input_type, Raw) or not isinstance(
                a.input_strides, Raw) or not isinstance(a.concrete, Raw) or not isinstance(a.kernel_file, _NAME):
            details.append(a)            # a lenient record: parsed values, kept as they are
            continue
        key = (bytes(a.input_dims), bytes(a.input_type), bytes(a.input_strides), bytes(a.concrete), a.kernel_file)
        found = shared.get(key)
        if found is None:
            found = shared[key] = Args(input_dims=key[0], input_type=key[1], input_strides=key[2], concrete=key[3],
                                       kernel_file=key[4])
        details.append(found)
    return details


def distil(recs: list, base: int, marker, fast: bool) -> Piece | None:
    """The columns of one stretch of records starting at event ``base``; None when a fast-decoded
    record fails a check (ts range, a missing name, an id beyond 64 bits...)."""
    python = PYTHON if marker is not None else -1
    codes = np.fromiter((GROUP.get(e.cat, 0) if e.ph == "X" else NOT_X.get(e.cat, 0) for e in recs), np.int8,
                        len(recs))
    piece = Piece(n_events=len(recs))
    at = {g: np.flatnonzero(codes == g) for g in (DEVICE, LAUNCH, CPU_OP, ANNOTATION, python, MTIA, NOT_COMPLETE,
                                                  RANGE)}
    _skipped(piece, recs, base, at[NOT_COMPLETE], at[RANGE])
    take = recs.__getitem__                        # (indexing by numpy ints is 3x slower)
    mtia, waits = at[MTIA], np.array([mtia_kind(recs[i].name) == "wait" for i in at[MTIA].tolist()], dtype=bool)
    device = np.sort(np.concatenate([at[DEVICE], mtia[~waits]])) if len(mtia) else at[DEVICE]
    ok = _waits(piece, list(map(take, mtia[waits].tolist())), fast)
    ok = ok and _device(piece, list(map(take, device.tolist())), device + base, fast)
    ok = ok and _launches(piece, list(map(take, at[LAUNCH].tolist())), at[LAUNCH] + base, fast)
    ok = ok and _cpu_ops(piece, list(map(take, at[CPU_OP].tolist())), at[CPU_OP] + base, marker, fast)
    marks = np.sort(np.concatenate([at[ANNOTATION], at[python]])) if marker is not None else at[ANNOTATION]
    ok = ok and _annotations(piece, list(map(take, marks.tolist())), marks + base, marker, fast)
    return piece if ok else None


def _skipped(piece: Piece, recs: list, base: int, not_complete, ranges=()) -> None:
    for i in not_complete.tolist():
        cat = recs[i].cat
        piece.notes.append((base + i, 0, f"{{n}} device events ({cat}) whose ph is not 'X' (a complete event) were "
                                        "skipped: tracekit reads device activity from complete events only", 1))
    if len(ranges):
        piece.notes.append((base + int(ranges[0]), 0, "{n} CUPTI range-profiler events (cuda_profiler_range) are not "
                            "read: this is a hardware-counter trace (each kernel replayed under counters, its "
                            "timings not its run's), not a kernel trace; profile with torch.profiler's CUDA activity "
                            "for kernel times", len(ranges)))


def _waits(piece: Piece, ev: list, fast: bool) -> bool:
    """MTIA stream waits and event records: kept as (ts, dur, name) for the loader's count, not as rows."""
    times, names = _times(ev, fast), [e.name for e in ev]
    if times is None or not _names_ok(names, fast):
        return False
    piece.waits += zip(times[0].tolist(), times[1].tolist(), names)
    return True


def _times(ev: list, fast: bool, dur: bool = True) -> tuple | None:
    """ts (and dur) as float arrays; None when a fast record lacks one or is out of range."""
    try:
        ts = np.array([e.ts for e in ev], dtype=float)
        du = np.array([e.dur for e in ev], dtype=float) if dur else None
    except (TypeError, ValueError):
        return None                      # UNSET: only fast records lack a checked time
    if fast and len(ts) and (np.abs(ts).max() > MAX_ABS_TS_US or (dur and (du.min() < 0 or du.max() > MAX_DUR_US))):
        return None
    return ts, du


def _names_ok(names: list, fast: bool) -> bool:
    return not fast or UNSET not in names


def _ids_ok(values: list, fast: bool) -> bool:
    """Fast records hold ints (or UNSET): within 64 bits, as the lenient checks require."""
    if not fast:
        return True
    ints = [v for v in values if v is not UNSET]
    return not ints or (min(ints) >= _INT64[0] and max(ints) < _INT64[1])


def _device(piece: Piece, ev: list, idx, fast: bool) -> bool:
    names = [e.name for e in ev]
    times = _times(ev, fast)
    args = [e.args or NO_ARGS for e in ev]
    corr = [a.correlation for a in args]
    ext = [a.external_id for a in args]
    if times is None or not _names_ok(names, fast) or not _ids_ok(corr, fast) or not _ids_ok(ext, fast):
        return False
    mtia = [e.cat not in DEVICE_CATEGORIES for e in ev]             # the rest are mtia_ccp_events
    kinds = [mtia_kind(e.name) if m else DEVICE_CATEGORIES[e.cat] for e, m in zip(ev, mtia)]
    if any(mtia):                       # a DMA request's bytes are its size; its name says its direction
        args = [a if not (m and k == "memcpy") else dma_args(a) for a, m, k in zip(args, mtia, kinds)]
        names = [dma_name(n, a) if m and k == "memcpy" else n for n, a, m, k in zip(names, args, mtia, kinds)]
    piece.d_idx += idx.tolist()
    piece.d_kind += kinds
    piece.d_own += mtia
    piece.d_name += map(sys.intern, names) if fast else names      # a few hundred distinct names
    piece.d_ts += times[0].tolist()
    piece.d_dur += times[1].tolist()
    piece.d_device += [as_int(e.pid if a.device is UNSET else a.device, 0) for e, a in zip(ev, args)]
    piece.d_stream += [as_int(e.tid if a.stream is UNSET else a.stream, -1) for e, a in zip(ev, args)]
    piece.d_corr += [-1 if c is UNSET else c for c in corr]
    piece.d_ext += ext
    bad_bytes, bad_grid = [], []
    for col, key in ((piece.d_grid, "grid"), (piece.d_block, "block")):
        values = [getattr(a, key) for a in args]
        kept = [g if type(g) is list and len(g) <= 3 else None for g in values] if fast else \
            [None if g is UNSET else grid_value(g) for g in values]
        bad_grid += [i for i, (g, k) in enumerate(zip(values, kept)) if k is None and g is not UNSET]
        col += kept
    for i, (kind, a) in enumerate(zip(kinds, args)):
        b = a.bytes
        if kind == "kernel" or b is UNSET:
            piece.d_bytes.append(np.nan)
        elif not (number(b) or -1) >= 0:             # the lenient loader's test, kept as it was
            piece.d_bytes.append(np.nan)
            bad_bytes.append(i)
        else:
            piece.d_bytes.append(float(b))
    if bad_bytes:
        piece.notes.append((int(idx[bad_bytes[0]]), 1, "{n} memcpy/memset events have a 'bytes' that is not a "
                            "number ≥ 0: their bytes are unknown", len(bad_bytes)))
    if bad_grid:
        piece.notes.append((int(idx[min(bad_grid)]), 2, "{n} device events have a grid or block that is not a list "
                            "of ints: dropped", len(bad_grid)))
    return True


def _launches(piece: Piece, ev: list, idx, fast: bool) -> bool:
    names = [e.name for e in ev]
    args = [e.args or NO_ARGS for e in ev]
    corr = [a.correlation for a in args]
    if not _names_ok(names, fast) or not _ids_ok(corr, fast) or not _ids_ok([a.external_id for a in args], fast):
        return False
    keep = [k for k, c in enumerate(corr) if c is not UNSET and c is not None]
    times = _times([ev[k] for k in keep], fast, dur=False)
    if times is None:
        return False
    piece.l_idx += idx[keep].tolist()
    piece.l_name += [sys.intern(names[k]) for k in keep] if fast else [names[k] for k in keep]
    piece.l_ts += times[0].tolist()
    piece.l_tid += [ev[k].tid for k in keep]
    piece.l_corr += [corr[k] for k in keep]
    piece.l_ext += [None if (x := args[k].external_id) is UNSET else x for k in keep]
    if fast:
        piece.runtime += [(e.ts, e.dur, e.name, e.tid) for e in ev
                          if e.ts is not UNSET and e.dur is not UNSET and e.dur >= 0]
    else:
        piece.runtime += [(t, d, e.name, e.tid) for e in ev
                          if (t := number(e.ts)) is not None and (d := number(e.dur)) is not None and d >= 0]
    return True


def _cpu_ops(piece: Piece, ev: list, idx, marker, fast: bool) -> bool:
    names = [e.name for e in ev]
    times = _times(ev, fast)
    args = [e.args or NO_ARGS for e in ev]
    ext = [a.external_id for a in args]
    if times is None or not _names_ok(names, fast) or not _ids_ok(ext, fast):
        return False
    roles = {n: _role(n, marker) for n in set(names)}
    role = [roles[n] for n in names]
    piece.c_idx += idx.tolist()
    piece.c_name += map(sys.intern, names) if fast else names
    piece.c_ts += times[0].tolist()
    piece.c_dur += times[1].tolist()
    piece.c_tid += [e.tid for e in ev]
    piece.c_pid += [e.pid for e in ev]
    piece.c_ext += [None if x is UNSET else x for x in ext]
    piece.c_role += role
    piece.c_detail += args
    if STEP in roles.values():
        marks = [k for k, r in enumerate(role) if r == STEP]
        piece.s_idx += idx[marks].tolist()
        piece.s_name += [names[k] for k in marks]
        piece.s_ts += times[0][marks].tolist()
        piece.s_dur += times[1][marks].tolist()
    return True


def _role(name: str, marker) -> int:
    if marker is not None and marker.search(name):
        return STEP
    if name.startswith("ProfilerStep#"):
        return STEP if marker is None else DROPPED
    return OP


def _annotations(piece: Piece, ev: list, idx, marker, fast: bool) -> bool:
    hits = [k for k, e in enumerate(ev) if isinstance(e.name, str) and is_step_name(e.name, marker)]
    times = _times([ev[k] for k in hits], fast)
    if times is None:
        return False
    piece.s_idx += idx[hits].tolist()
    piece.s_name += [ev[k].name for k in hits]
    piece.s_ts += times[0].tolist()
    piece.s_dur += times[1].tolist()
    return True


def as_int(value, default: int) -> int:
    """``value`` as an int64 (device, stream, ids), else ``default``."""
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return n if _INT64[0] <= n < _INT64[1] else default
