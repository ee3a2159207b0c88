"""Where in the model each row of the kernel table ran: the phase of the step (forward, backward,
optimizer), the ``nn.Module`` path and the user annotations around its launch (issue 23).

A kernel's place is read on the CPU side, at its launch (the runtime call with its correlation id: a graph
replay's kernels at their ``cudaGraphLaunch``), or for a row without one at its op (an op of this trace): the ``python_function`` events named ``nn.Module: Class_N`` (recorded
with ``torch.profiler(with_modules=True)``) that enclose that moment on that thread give the module path,
outermost first; ``user_annotation`` ranges (``record_function``) inside the innermost module give the
annotations. A moment inside ``autograd::engine::evaluate_function: XBackward0`` is backward: the node's
``Sequence number`` names the forward op that created it, and the kernel takes that forward op's module
path and annotations (the module whose forward it differentiates). A moment inside an
``Optimizer.step#…`` or ``Optimizer.zero_grad#…`` range is the optimizer; any other is forward.

The Kineto loader keeps none of these events (they are not needed for the kernel table), so this reads the
trace file once more, only when a tree is asked for.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import orjson

from tracekit.load.events import LAUNCH_CATEGORIES, PROFILER_STEP

MODULE_PREFIX = "nn.Module: "
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
OPTIMIZER = re.compile(r"^Optimizer\.(step|zero_grad)#")
FORWARD, BACKWARD, OPTIMIZER_PHASE, UNPLACED = "forward", "backward", "optimizer", "(unplaced)"


@dataclass(frozen=True)
class Place:
    """One row's place: its phase, module path (outermost first) and annotations (outermost first)."""

    phase: str
    modules: tuple[str, ...] = ()
    annotations: tuple[str, ...] = ()


@dataclass
class Scopes:
    """Each kernel-table row's place (by position), and what the trace held to find them."""

    places: list[Place]
    module_events: int = 0
    annotation_events: int = 0
    backward_linked: int = 0          # backward rows placed through their forward op's sequence number
    backward_unlinked: int = 0        # backward rows whose node names no forward op (AccumulateGrad, ...)
    warnings: list[str] = field(default_factory=list)


class Ranges:
    """Properly nested time ranges of one thread, and the ranges that hold a moment."""

    def __init__(self, items: list[tuple[float, float, object]]):
        items.sort(key=lambda r: (r[0], -(r[1] - r[0])))
        self.start = [r[0] for r in items]
        self.end = [r[1] for r in items]
        self.payload = [r[2] for r in items]
        self.parent = []
        open_: list[int] = []
        for i, (ts, end, _) in enumerate(items):
            while open_ and self.end[open_[-1]] < ts:
                open_.pop()
            self.parent.append(open_[-1] if open_ else -1)
            open_.append(i)

    def holding(self, t: float) -> list[int]:
        """Positions of the ranges that hold ``t``, outermost first."""
        j = bisect.bisect_right(self.start, t) - 1
        while j >= 0 and self.end[j] < t:
            j = self.parent[j]
        out = []
        while j >= 0:
            out.append(j)
            j = self.parent[j]
        return out[::-1]


def _num(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x == x else None


def _events(path: Path) -> list:
    from tracekit.load.kineto import read_json
    doc = read_json(path)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    return events if isinstance(events, list) else []


class _Undecodable(Exception):
    """One event's text that orjson refuses: the whole file is read as before (``_events``)."""


class RawEvents:
    """The trace's events as one JSON text each (``msgspec.Raw``, 48 bytes a piece, pointing into the
    text), each decoded by orjson when read: the scan holds one event's dict at a time, not every event
    (issue 27: 100k ProfilerSteps, 13 MB of JSON, held 227 MB of dicts)."""

    __slots__ = ("raw",)

    def __init__(self, raw: list):
        self.raw = raw

    @classmethod
    def read(cls, path: Path) -> "RawEvents | None":
        """The events of the file at ``path``; None when it is not a JSON object or array that msgspec
        reads (``_events`` then reads it, with its one-line error)."""
        from tracekit.limits import read_input
        text = read_input(path, "trace")
        try:
            at = _SPACE.match(text).end()
            head = text[at:at + 1]
            if head == b"[":
                return cls(_LIST.decode(text))
            if head != b"{":
                return None
            got = _TOP.decode(text).get("traceEvents")
            if got is None:
                return cls([])
            try:
                return cls(_LIST.decode(got))
            except msgspec.ValidationError:                # traceEvents is no array
                return cls([])
        except msgspec.DecodeError:
            return None

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i: int):
        try:
            return orjson.loads(memoryview(self.raw[i]))
        except orjson.JSONDecodeError:
            raise _Undecodable from None

    def __iter__(self):
        return map(self.__getitem__, range(len(self.raw)))


_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_SPACE = re.compile(rb"[ \t\r\n]*")
_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def read_scopes(trace, events: list | None = None) -> Scopes:
    """The place of every row of ``trace.kernels`` (in row order); ``events``: the trace's events when
    the caller holds them (else the file at ``trace.path`` is read again, one event decoded at a time:
    ``RawEvents``)."""
    if events is None and trace.path and Path(trace.path).is_file():
        lazy = RawEvents.read(Path(trace.path))
        if lazy is not None:
            try:
                return _read_scopes(trace, lazy)
            except _Undecodable:
                pass
        events = _events(Path(trace.path))
    return _read_scopes(trace, events if events is not None else [])


def _read_scopes(trace, events) -> Scopes:
    groups: dict[str, dict] = {"module": {}, "annotation": {}, "optimizer": {}, "backward": {}}
    launches: dict = {}
    seq_ops: list[tuple] = []
    n_modules = n_annotations = 0
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat, name = e.get("cat"), e.get("name")
        ts, dur = _num(e.get("ts")), _num(e.get("dur"))
        if not isinstance(name, str) or ts is None:
            continue
        key = (e.get("pid"), e.get("tid"))
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        end = ts + (dur or 0.0)
        if cat in LAUNCH_CATEGORIES:
            c = args.get("correlation")
            if isinstance(c, int):
                launches[c] = (key, ts)
        elif cat == "python_function":
            if name.startswith(MODULE_PREFIX):
                groups["module"].setdefault(key, []).append((ts, end, name[len(MODULE_PREFIX):]))
                n_modules += 1
        elif cat in ("user_annotation", "cpu_op"):
            if OPTIMIZER.match(name):
                groups["optimizer"].setdefault(key, []).append((ts, end, name))
            elif cat == "user_annotation":
                if not PROFILER_STEP.match(name):
                    groups["annotation"].setdefault(key, []).append((ts, end, name))
                    n_annotations += 1
            elif name.startswith(BACKWARD_PREFIX):
                seq = args.get("Sequence number")
                groups["backward"].setdefault(key, []).append((ts, end, seq if isinstance(seq, int) else None))
            elif isinstance(args.get("Sequence number"), int) and args["Sequence number"] >= 0 \
                    and not name.startswith("autograd::"):
                seq_ops.append((args["Sequence number"], key, ts))
    ranges = {g: {k: Ranges(v) for k, v in per.items()} for g, per in groups.items()}

    def inside(group: str, key, t: float) -> list:
        r = ranges[group].get(key)
        return [(r.start[j], r.payload[j]) for j in r.holding(t)] if r is not None else []

    forward_at: dict[int, tuple] = {}
    for seq, key, ts in sorted(seq_ops, key=lambda s: s[2]):
        if seq not in forward_at and not inside("backward", key, ts):
            forward_at[seq] = (key, ts)

    def context(key, t: float) -> tuple[tuple, tuple]:
        mods = inside("module", key, t)
        since = mods[-1][0] if mods else float("-inf")
        notes = tuple(n for s, n in inside("annotation", key, t) if s >= since)
        return tuple(n for _, n in mods), notes

    df = trace.kernels
    out = Scopes([], n_modules, n_annotations)
    memo: dict = {}
    index_ok = 0 < len(events)
    own_op = [s in ("external_id", "self") for s in df["op_source"].tolist()]    # op_id indexes this trace
    for corr, op_id, own in zip(df["correlation"].tolist(), df["op_id"].tolist(), own_op):
        anchor = launches.get(corr) if corr != -1 else None
        if anchor is None and own and index_ok and 0 <= op_id < len(events) and isinstance(events[op_id], dict):
            ev = events[op_id]
            ts = _num(ev.get("ts"))
            anchor = ((ev.get("pid"), ev.get("tid")), ts) if ts is not None else None
        if anchor is None:
            out.places.append(Place(UNPLACED))
            continue
        got = memo.get(anchor)
        if got is None:
            key, t = anchor
            backward = inside("backward", key, t)
            if backward:
                fwd = forward_at.get(backward[-1][1]) if backward[-1][1] is not None else None
                got = Place(BACKWARD, *context(*fwd)) if fwd is not None else Place(BACKWARD)
            else:
                got = Place(OPTIMIZER_PHASE if inside("optimizer", key, t) else FORWARD, *context(key, t))
            memo[anchor] = got
        if got.phase == BACKWARD:
            if got.modules:
                out.backward_linked += 1
            else:
                out.backward_unlinked += 1
        out.places.append(got)
    if not n_modules:
        out.warnings.append(NO_MODULES)
    return out


NO_MODULES = ("the trace has no nn.Module events (record with torch.profiler(with_modules=True) or tracekit "
              "capture): every kernel is under '(no module)'")


def may_hold_modules(path: Path) -> bool:
    """False when the file at ``path`` certainly holds no ``nn.Module`` event: its text (read a block at a
    time, nothing kept) never writes "nn.Module: " and has no ``\\u`` escape that could spell it."""
    from tracekit.limits import iter_input
    tail = b""
    for block in iter_input(path, "trace"):
        text = tail + bytes(block)
        if _MODULE_MARK in text or b"\\u" in text:
            return True
        tail = text[-(len(_MODULE_MARK) - 1):]
    return False


_MODULE_MARK = MODULE_PREFIX.encode()
