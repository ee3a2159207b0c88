"""A trace larger than ``reader.WHOLE_BYTES`` of JSON, read in chunks cut between events.

The text arrives in blocks (``tracekit.limits.iter_input``: gunzipped as a stream, size and ratio
bounds). The fields before ``traceEvents`` are decoded once; then, repeatedly, about ``CHUNK`` bytes
of the event array are cut at a comma between two events (``}`` ``,`` ``{``; a comma inside a string
or a nested object is caught because the chunk does not decode, and the one before is tried), decoded
in place about 256 KiB at a time (``parts.decode_in_place``: each part distilled and compact, its op shape
text copied out, names and threads shared, ``pieces.compact``), and the chunk's text is dropped. At the
end of the stream all but its last ``TAIL`` bytes are cut the same way; that last stretch is copied
once and decoded together with the fields after the array. Memory holds one chunk's text, one part's
records and the columns kept so far (docs/performance.md gives the figures), never the whole
document.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterator

import msgspec
import numpy as np
import orjson

from tracekit.errors import TracekitError
from tracekit.limits import iter_input, max_trace_bytes, size_text
from tracekit.load.events import CPU_OP_CATEGORIES, DEVICE_CATEGORIES, FAST_ERRORS, LAUNCH_CATEGORIES, decode_lenient
from tracekit.load.pieces import Piece, compact, distil, packed_piece
from tracekit.load.parts import decode_in_place, separators

CHUNK = 4 << 20                         # bytes of event text held at a time
TAIL = 1 << 20                          # text kept past a cut: the last stretch, copied once, is at most 2x this
MAX_EVENT = 1 << 30                     # one event's text may take this much (a longer one is refused)
HEAD_LIMIT = 256 << 20                  # the traceEvents array must start within this many bytes
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_SPACE = re.compile(rb"[ \t\r\n]*")
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_PREFIX = b'{"traceEvents":'


def read_chunked(path: Path, buf: bytearray, blocks: Iterator[bytes], marker) -> tuple[Piece, dict, Callable]:
    """(the columns of every event, the trace-level fields, a function giving the events as dicts:
    a second pass over the file, cut where this one cut it, that keeps only what graph replay mapping
    and collectives read). ``buf`` holds the file's first bytes, ``blocks`` the rest."""
    start = _SPACE.match(buf).end()
    bare = buf[start:start + 1] == b"["
    meta: dict = {}
    pos = start if bare else _head(path, buf, blocks, start, meta)      # the "[" before the first event
    total, shared = packed_piece(), {}
    cuts: list[tuple[int, int]] = []        # (start, end) of each chunk's event text in the JSON stream
    dropped, span = 0, CHUNK                # bytes of the stream before buf[0]; text looked at for a cut
    while True:
        while len(buf) - pos < span + TAIL and (block := next(blocks, None)) is not None:
            buf += block
        ended = len(buf) - pos < span + TAIL
        if ended and len(buf) - pos > 2 * TAIL:     # the stream's end: cut all but its last MiB as a chunk
            found = _chunk(path, buf, pos, len(buf) - pos - TAIL, total.n_events, marker, shared)
            ended = found is None
        elif not ended:
            found = _chunk(path, buf, pos, span, total.n_events, marker, shared)
        if ended:                           # the rest, with the fields after the array: copied once, so kept short
            cuts.append((dropped + pos + 1, -1))
            total.extend(_last(path, buf, pos, bare, total.n_events, marker, shared, meta))
            return total, meta, lambda: _second_pass(path, cuts, bare)
        if found is None:                   # no event ends in the span: a longer event, or no events at all
            if span >= MAX_EVENT:
                raise TracekitError(f"{path}: an event from event #{total.n_events} on is longer than "
                                    f"{size_text(MAX_EVENT)}: refused")
            span *= 2
            continue
        sep, piece = found
        cuts.append((dropped + pos + 1, dropped + sep))
        total.extend(piece)
        del buf[:sep]                       # the comma stays: it opens the next chunk
        dropped, pos, span = dropped + sep, 0, CHUNK


def _head(path: Path, buf: bytearray, blocks: Iterator[bytes], start: int, meta: dict) -> int:
    """Where the event array's "[" is; the top-level fields written before it go into ``meta``."""
    while (m := _EVENTS_KEY.search(buf)) is None:
        block = next(blocks, None)
        if block is None or len(buf) > HEAD_LIMIT:
            raise TracekitError(f"{path}: no traceEvents list in the first {size_text(len(buf))}: not a "
                                "torch.profiler / Chrome trace (or not one tracekit can read in pieces)")
        buf += block
    head = bytes(buf[start:m.start()]).rstrip()
    try:
        fields = _TOP.decode(head + (b"" if head.endswith((b"{", b",")) else b",") + b'"traceEvents":[]}')
        meta.update({k: orjson.loads(bytes(v)) for k, v in fields.items() if k != "traceEvents"})
    except (*FAST_ERRORS, orjson.JSONDecodeError):
        raise TracekitError(f"{path}: traceEvents is not a list at the top level of a JSON object: not a "
                            "torch.profiler / Chrome trace tracekit can read in pieces") from None
    return m.end() - 1


def _chunk(path: Path, buf: bytearray, pos: int, span: int, base: int, marker,
           shared: dict) -> tuple[int, Piece] | None:
    """The events between ``pos`` (the "[" or comma before the first) and a comma about ``span`` bytes
    on: (that comma's position, their columns); None when no event ends there."""
    seps = separators(buf, pos + span)
    if not seps:
        return None
    first, buf[pos] = buf[pos], 0x5B
    try:
        for sep in seps:
            buf[sep] = 0x5D
            try:
                piece = decode_in_place(buf, pos, sep + 1, marker, base, shared)
            finally:
                buf[sep] = 0x2C
            if piece is not None:
                return sep, piece                   # compact already, part by part
    finally:
        buf[pos] = first
    for sep in seps:                        # fast decoding refused: the events the lenient reader accepts
        piece = _lenient(path, b"[" + bytes(buf[pos + 1:sep]) + b"]", base, marker, shared, sep == seps[-1])
        if piece is not None:
            return sep, piece
    raise AssertionError("unreachable: the last try raises")


def _last(path: Path, buf: bytearray, pos: int, bare: bool, base: int, marker, shared: dict,
          meta: dict) -> Piece:
    """The events from ``pos`` to the end of the array (the fields after it go into ``meta``)."""
    end = len(buf)
    while end > pos and buf[end - 1] in b" \t\r\n":
        end -= 1
    if not bare:
        head = _PREFIX + b"[" + bytes(memoryview(buf)[pos + 1:end])
        try:
            top = _TOP.decode(head)
            events = top.get("traceEvents")
            meta.update({k: orjson.loads(bytes(v)) for k, v in top.items() if k != "traceEvents"})
        except (*FAST_ERRORS, orjson.JSONDecodeError):
            return _lenient(path, head, base, marker, shared, True, whole=True)
        if events is None or memoryview(events)[:1].tobytes() != b"[":
            raise TracekitError(f"{path}: traceEvents is not a list")
        offset = np.frombuffer(events, dtype=np.uint8).ctypes.data - np.frombuffer(head, dtype=np.uint8).ctypes.data
        end = pos + offset - len(_PREFIX) + len(events)
        del head, top, events
    first, buf[pos] = buf[pos], 0x5B
    try:
        piece = decode_in_place(buf, pos, end, marker, base, shared)
    finally:
        buf[pos] = first
    if piece is not None:
        return piece
    return _lenient(path, b"[" + bytes(buf[pos + 1:end]), base, marker, shared, True)


def _lenient(path: Path, text: bytes, base: int, marker, shared: dict, last_try: bool,
             whole: bool = False) -> Piece | None:
    """Events the fast decoder refused, read as the original loader read them (orjson, per-event checks:
    a malformed event is named); None when the text is not JSON and this is not the last try."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if not last_try:
            return None
        raise TracekitError(f"{path}: invalid JSON in the events from event #{base} on ({exc}); is the file "
                            "truncated?") from None
    events = doc.get("traceEvents") if whole and isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TracekitError(f"{path}: traceEvents is not a list")
    return compact(distil(decode_lenient(events, base, path, marker), base, marker, fast=False), shared)


def _second_pass(path: Path, cuts: list[tuple[int, int]], bare: bool) -> list:
    """The file's events again, as dicts, cut where the first pass cut them: launch, CPU-op, annotation
    and device events (what graph replay mapping and collectives read); every other event is None, so
    positions still match event_index."""
    wanted = CPU_OP_CATEGORIES | LAUNCH_CATEGORIES | set(DEVICE_CATEGORIES) | {"user_annotation"}
    out: list = []
    blocks = iter_input(path, "trace", limit=max_trace_bytes())
    buf, dropped = bytearray(), 0
    for start, end in cuts:
        while (end < 0 or dropped + len(buf) < end) and (block := next(blocks, None)) is not None:
            buf += block
        text = bytes(memoryview(buf)[start - dropped:end - dropped if end >= 0 else len(buf)])
        if end >= 0:
            events = orjson.loads(b"[" + text + b"]")
        else:
            events = orjson.loads(b"[" + text) if bare else orjson.loads(_PREFIX + b"[" + text)["traceEvents"]
        out += [e if isinstance(e, dict) and e.get("cat") in wanted else None for e in events]
        if end >= 0:
            del buf[:end - dropped]
            dropped = end
    return out

