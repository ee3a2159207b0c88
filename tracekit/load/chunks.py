"""A trace larger than ``reader.WHOLE_BYTES`` of JSON, read in chunks cut between events.

The text arrives in blocks (``tracekit.limits.iter_input``: gunzipped as a stream, size and ratio
bounds). The fields before ``traceEvents`` are decoded once; then, repeatedly, about ``CHUNK`` bytes
of the event array are cut after the last event that ends in them (``}`` then ``,`` then ``{``: a cut
inside a string or a nested object is caught because that chunk does not parse, and the previous
candidate is tried), decoded and distilled (``pieces.distil``, compact: the op details copied out of
the chunk's text, names and threads shared), and the chunk is dropped. The last chunk is decoded
together with the fields after the array. Peak memory is one chunk's text and records plus the
columns kept so far (about 100 bytes per device event, launch and CPU op; docs/performance.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterator

import msgspec
import orjson

from tracekit.errors import TracekitError
from tracekit.limits import size_text
from tracekit.load.events import FAST_ERRORS, decode_fast, decode_lenient, parse_lenient
from tracekit.load.pieces import Piece, compact, distil, packed_piece

CHUNK = 64 << 20                        # bytes of event text decoded at a time
MAX_EVENT = 1 << 30                     # one event's text may take this much (a longer one is refused)
HEAD_LIMIT = 256 << 20                  # the traceEvents array must start within this many bytes
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_SPACE = re.compile(rb"[ \t\r\n]*")
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_TRIES = 8                              # cut candidates tried before the chunk is called invalid JSON


def read_chunked(path: Path, buf: bytearray, blocks: Iterator[bytes], marker) -> tuple[Piece, dict, Callable]:
    """(the columns of every event, the trace-level fields, a function giving the events as dicts:
    a second pass over the file, cut where this one cut it, that keeps only what graph replay mapping
    and collectives read)."""
    start = _SPACE.match(buf).end()
    bare = buf[start:start + 1] == b"["
    meta: dict = {}
    if bare:
        pos = start + 1
    else:
        pos, meta = _head(path, buf, blocks, start)
    total, shared = packed_piece(), {}
    cuts: list[tuple[int, int]] = []        # (start, end) of each chunk's event text in the JSON stream
    dropped, span = 0, CHUNK                # bytes of the stream before buf[0]; text looked at for a cut
    while True:
        while len(buf) - pos < span + (1 << 20) and (block := next(blocks, None)) is not None:
            buf += block
        if len(buf) - pos < span + (1 << 20):
            cuts.append((dropped + pos, -1))
            last, tail = _last(path, buf, pos, bare, total.n_events, marker, shared)
            total.extend(last)
            meta.update(tail)
            return total, meta, lambda: _second_pass(path, cuts, bare)
        found = _chunk(path, buf, pos, span, total.n_events, marker, shared)
        if found is None:                   # no event ends in the span: a longer event, or no events at all
            if span >= MAX_EVENT:
                raise TracekitError(f"{path}: an event from event #{total.n_events} on is longer than "
                                    f"{size_text(MAX_EVENT)}: refused")
            span *= 2
            continue
        end, after, piece = found
        span = CHUNK
        cuts.append((dropped + pos, dropped + end))
        total.extend(piece)
        del buf[:after]
        dropped += after
        pos = 0


def _head(path: Path, buf: bytearray, blocks: Iterator[bytes], start: int) -> tuple[int, dict]:
    """Where the event array's text begins, and the top-level fields written before it."""
    while True:
        m = _EVENTS_KEY.search(buf)
        if m is not None:
            break
        block = next(blocks, None)
        if block is None or len(buf) > HEAD_LIMIT:
            raise TracekitError(f"{path}: no traceEvents list in the first {len(buf) >> 20} MiB: not a "
                                "torch.profiler / Chrome trace (or not one tracekit can read in pieces)")
        buf += block
    head = bytes(buf[start:m.start()]).rstrip()
    try:
        fields = _TOP.decode(head + (b"" if head.endswith((b"{", b",")) else b",") + b'"traceEvents":[]}')
        return m.end(), {k: orjson.loads(bytes(v)) for k, v in fields.items() if k != "traceEvents"}
    except (*FAST_ERRORS, orjson.JSONDecodeError):
        raise TracekitError(f"{path}: traceEvents is not a list at the top level of a JSON object: not a "
                            "torch.profiler / Chrome trace tracekit can read in pieces") from None


def _chunk(path: Path, buf: bytearray, pos: int, span: int, base: int, marker,
           shared: dict) -> tuple[int, int, Piece] | None:
    """Decode the events that end in ``span`` bytes from ``pos``: (where their text ends, where the
    next chunk's begins, their columns); None when no event ends there."""
    window = memoryview(buf)[pos:pos + span]
    cuts = [m.start() + 1 for m in _BOUNDARY.finditer(window, max(0, len(window) - (4 << 20)))]
    if not cuts:                         # one event longer than the last 4 MiB: look at the whole window
        cuts = [m.start() + 1 for m in _BOUNDARY.finditer(window)]
    if not cuts:
        window.release()
        return None
    for cut in reversed(cuts[-_TRIES:]):
        text = bytearray(b"[")
        text += window[:cut]
        text += b"]"
        piece = _decode(path, text, base, marker, shared, last_try=False)
        if piece is not None:
            after = _BOUNDARY.match(window, cut - 1).end() - 1        # the next event's "{"
            window.release()
            return pos + cut, pos + after, piece
    text = bytearray(b"[")
    text += window[:cuts[-1]]
    text += b"]"
    window.release()
    _decode(path, text, base, marker, shared, last_try=True)      # raises, naming the JSON error
    raise TracekitError(f"{path}: invalid JSON in the events from event #{base} on")


def _last(path: Path, buf: bytearray, pos: int, bare: bool, base: int, marker, shared: dict) -> tuple[Piece, dict]:
    """The events from ``pos`` to the end of the array, and the top-level fields after it."""
    rest = bytes(memoryview(buf)[pos:])
    if bare:
        return _decode(path, b"[" + rest, base, marker, shared, last_try=True), {}
    try:
        top = _TOP.decode(b'{"traceEvents":[' + rest)
        tail = {k: orjson.loads(bytes(v)) for k, v in top.items() if k != "traceEvents"}
        events = bytes(top["traceEvents"])
    except (*FAST_ERRORS, orjson.JSONDecodeError):
        parse_lenient(b'{"traceEvents":[' + rest, path)              # names the JSON error
        raise TracekitError(f"{path}: invalid JSON at the end of the file") from None
    return _decode(path, events, base, marker, shared, last_try=True), tail


def _decode(path: Path, text, base: int, marker, shared: dict, last_try: bool) -> Piece | None:
    """One chunk's columns: fast, else lenient (which names a malformed event). None when the text
    does not parse as a JSON array at all (a cut in the wrong place), unless it is the last try."""
    try:
        piece = distil(decode_fast(text), base, marker, fast=True)
        if piece is not None:
            return compact(piece, shared)
    except FAST_ERRORS:
        pass
    try:
        events = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if not last_try:
            return None
        raise TracekitError(f"{path}: invalid JSON in the events from event #{base} on ({exc}); is the file "
                            "truncated?") from None
    if not isinstance(events, list):
        raise TracekitError(f"{path}: traceEvents is not a list")
    return compact(distil(decode_lenient(events, base, path, marker), base, marker, fast=False), shared)


def _second_pass(path: Path, cuts: list[tuple[int, int]], bare: bool) -> list:
    """The file's events again, as dicts, cut where the first pass cut them: launch, CPU-op, annotation
    and device events (what graph replay mapping and collectives read); every other event is None, so
    positions still match event_index."""
    from tracekit.limits import iter_input, max_trace_bytes
    from tracekit.load.events import CPU_OP_CATEGORIES, DEVICE_CATEGORIES, LAUNCH_CATEGORIES
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
            events = orjson.loads(b"[" + text) if bare else orjson.loads(b'{"traceEvents":[' + text)["traceEvents"]
        out += [e if isinstance(e, dict) and e.get("cat") in wanted else None for e in events]
        if end >= 0:
            del buf[:end - dropped]
            dropped = end
    return out
