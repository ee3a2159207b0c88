"""Read a Kineto trace file into the distilled columns of its events (``pieces.Piece``).

A file is read through ``tracekit.limits.iter_input`` (a regular file, gunzipped as a stream, within
the size and gzip-ratio bounds). Up to ``WHOLE_BYTES`` of JSON is held as one document and its events
decoded about 256 KiB at a time in place (``load.parts``: one part's records at a time, each part compact
before the next, so the text is freed once read unless graph replays need it again); a larger one is read in
chunks of about ``chunks.CHUNK`` (4 MiB), cut between events (``load.chunks``), and each chunk is
distilled before the next is read, so memory holds one chunk's text and records plus the columns kept
so far, never the whole document (issue 26: holding the 42 MB trace's text beside its columns put the
whole process at 3.3x the file).

Each stretch is decoded fast (msgspec, typed records) and, when that fails or a record breaks a rule
its type cannot express, again leniently (orjson and the per-event checks): same columns, or the
same one-line error naming the event.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path
from typing import Callable

import msgspec
import numpy as np
import orjson

from tracekit.errors import TracekitError
from tracekit.limits import iter_input, max_trace_bytes
from tracekit.load.events import FAST_ERRORS, decode_lenient, parse_lenient
from tracekit.load.parts import decode_in_place
from tracekit.load.pieces import Piece, distil

WHOLE_BYTES = 8 << 20               # JSON text held as one document; larger files go in chunks (no slower)
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_SPACE = re.compile(rb"[ \t\r\n]*")


def read_trace(path: Path, marker) -> tuple[Piece, dict, Callable[[], list]]:
    """(the events' columns, the trace-level fields, a function giving the events as dicts for graph
    replay mapping)."""
    blocks = iter_input(path, "trace", limit=max_trace_bytes())
    buf = bytearray()
    for block in blocks:
        buf += block
        if len(buf) > WHOLE_BYTES:
            from tracekit.load.chunks import read_chunked
            return read_chunked(path, buf, blocks, marker)
    return read_whole(path, buf, marker)


def read_whole(path: Path, raw: bytearray, marker) -> tuple[Piece, dict, Callable[[], list]]:
    """One document held in memory: decoded fast, about 256 KiB of events at a time, else leniently."""
    start = _SPACE.match(raw).end()
    if start == len(raw):
        raise TracekitError(f"{path}: file is empty")
    try:
        quick = _quick_split(raw, start)
        span, meta = quick if quick is not None else _split(raw, start)
        if span is not None and valid_utf8(raw):
            piece = decode_in_place(raw, *span, marker)
            if piece is None and quick is not None:          # an odd layout fooled the quick cut?
                span, meta = _split(raw, start)
                if span is not None and span != quick[0]:
                    piece = decode_in_place(raw, *span, marker)
            if piece is not None:                  # the text kept only for graph replay mapping (kineto._load)
                return piece, meta, (lambda: orjson.loads(memoryview(raw)[span[0]:span[1]])) \
                    if _graph_launches(piece) else list
    except (*FAST_ERRORS, orjson.JSONDecodeError):
        pass
    doc = parse_lenient(raw, path)
    dicts, meta = trace_events(doc, path)
    piece = distil(decode_lenient(dicts, 0, path, marker), 0, marker, fast=False)
    return piece, meta, lambda: dicts


def _graph_launches(piece: Piece) -> bool:
    """Whether a launch is a CUDA-graph launch: only then are the events read again as dicts, and the
    text held until then (a compact piece points nowhere into it)."""
    from tracekit.load.link import GRAPH_LAUNCHES

    return not GRAPH_LAUNCHES.isdisjoint(piece.l_name)


_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')
_ARRAY_END = re.compile(rb"[}\[][ \t\r\n]*\]")         # an array that ends with an object (or is empty)
_OPEN = b'{"traceEvents":[]'


def _quick_split(raw: bytearray, start: int) -> tuple[tuple[int, int], dict] | None:
    """``_split``'s answer for an object document without scanning its event array (that scan was ~10 %
    of a fast load: 0.04 s of the 42 MB trace): the fields before the first ``"traceEvents": [`` (in
    the first MiB), and the array's end: among the "]" after an object in the last MiB, the first
    after which the rest of the document decodes as more fields (a "]" inside the events leaves an
    unbalanced rest; one inside a later field, deviceProperties written after the events, is a later
    candidate; a second events key after the first makes the document's own rest fail). None when the
    document does not look like that (the caller asks ``_split``)."""
    if raw[start] != 0x7B:
        return None
    try:
        m = _EVENTS_KEY.search(raw, start, start + (1 << 20))
        if m is None:
            return None
        head = bytes(raw[start:m.start()]).rstrip()
        fields = _TOP.decode(head + (b"" if head.endswith((b"{", b",")) else b",") + b'"traceEvents":[]}')
        if bytes(fields.pop("traceEvents")) != b"[]":
            return None                                       # the key was not the document's own
        ends = [e.end() - 1 for e in _ARRAY_END.finditer(raw, max(m.end() - 1, len(raw) - (1 << 20)))]
        found = None
        for q in reversed(ends[-256:]):
            tail = _tail_fields(raw, q + 1)
            if tail is not None:
                found = q, tail
        if found is None:
            return None
        fields.update(found[1])
        return (m.end() - 1, found[0] + 1), {k: orjson.loads(bytes(v)) for k, v in fields.items()}
    except (*FAST_ERRORS, orjson.JSONDecodeError, KeyError):
        return None


def _tail_fields(raw: bytearray, at: int) -> dict | None:
    """The fields written after an event array that ends just before ``at``: the rest of the document
    decoded behind a stand-in opening (written over the bytes before ``at``, put back after); None
    when the rest is not the end of the document's object."""
    if at < len(_OPEN):
        return None
    lo, saved = at - len(_OPEN), bytes(raw[at - len(_OPEN):at])
    raw[lo:at] = _OPEN
    try:
        tail = _TOP.decode(memoryview(raw)[lo:])
        if bytes(tail.pop("traceEvents")) != b"[]" or raw.find(b'"traceEvents"', at) >= 0:
            return None                     # a second events key: _split says which one counts
        return {k: bytes(v) for k, v in tail.items()}
    except (*FAST_ERRORS, KeyError):
        return None
    finally:
        raw[lo:at] = saved


def _split(raw, start: int) -> tuple[tuple[int, int] | None, dict]:
    """((where the traceEvents array's text begins, ends), the other top-level fields); (None, {}) when
    the document is not an object holding an array of events or a bare array (the lenient reader
    names what it is)."""
    if raw[start] == 0x5B:                                 # "[": a bare list of events
        end = len(raw)
        while raw[end - 1] in b" \t\r\n":
            end -= 1
        return (start, end), {}
    if raw[start] != 0x7B:
        return None, {}
    top = _TOP.decode(raw)
    events = top.get("traceEvents")
    if events is None or memoryview(events)[:1].tobytes() != b"[":
        return None, {}
    begin = np.frombuffer(events, dtype=np.uint8).ctypes.data - np.frombuffer(raw, dtype=np.uint8).ctypes.data
    return (begin, begin + len(events)), {k: orjson.loads(bytes(v)) for k, v in top.items() if k != "traceEvents"}


def valid_utf8(raw) -> bool:
    """Whether the text is valid UTF-8 (the fast decoder checks only the strings it keeps)."""
    if raw.isascii():
        return True
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(raw)
    try:
        for k in range(0, len(view), 1 << 20):
            decoder.decode(view[k:k + (1 << 20)])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def trace_events(doc: object, path: Path) -> tuple[list, dict]:
    """The event list and the trace-level fields of a parsed Chrome trace document."""
    if isinstance(doc, list):
        return doc, {}
    if not isinstance(doc, dict) or "traceEvents" not in doc:
        raise TracekitError(f"{path}: JSON has no traceEvents: not a torch.profiler / Chrome trace")
    events = doc["traceEvents"]
    if not isinstance(events, list):
        raise TracekitError(f"{path}: traceEvents is not a list")
    return events, {k: v for k, v in doc.items() if k != "traceEvents"}
