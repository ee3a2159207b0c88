"""Decode an event array held in a bytearray about 256 KiB at a time, in place.

The comma after a part's last event is overwritten with "]" while that part is decoded, then with
"[" to open the next part, and put back at the end: no copy of the text is made. Each part's records
are distilled into columns and compacted (``pieces.compact``: shape fields copied out, one object per
distinct set of shapes) before the next part is decoded, so only one part's records are alive at a
time and nothing kept points into the text. A comma inside a string or a nested object makes its
part fail to decode, and the comma before it is tried.
"""

from __future__ import annotations

import re

from tracekit.load.events import FAST_ERRORS, decode_fast
from tracekit.load.pieces import Piece, compact, distil, packed_piece

PART_BYTES = 256 << 10              # event text decoded at a time: its records take ~6x its bytes (4 MiB parts
                                    # held 17 MB of records for a 2.6 MB trace of 20k steps; no slower)
_BETWEEN = re.compile(rb"\}[ \t\r\n]*(,)[ \t\r\n]*\{")


def decode_in_place(raw: bytearray, begin: int, end: int, marker, base: int = 0,
                    shared: dict | None = None) -> Piece | None:
    """The event array ``raw[begin:end]`` decoded about PART_BYTES at a time without copying it: the
    comma after a part's last event is overwritten with "]" while that part is decoded, then with
    "[" to open the next part, and put back at the end (an op's raw shape fields point into ``raw``).
    None when a part does not decode or fails a check (the caller decodes the whole leniently).
    ``base``: the index of the array's first event in the trace; ``shared``: the shape objects kept so
    far (``pieces.compact``), shared with the caller's other stretches."""
    view, total, pos, patched = memoryview(raw), packed_piece(), begin, []
    shared = {} if shared is None else shared
    try:
        size = PART_BYTES
        while True:
            if end - pos <= size:
                piece = _part(view[pos:end], base + total.n_events, marker, shared)
                if piece is not None:
                    total.extend(piece)
                return total if piece is not None else None
            cuts = [sep for sep in separators(raw, pos + size) if sep > pos]
            if not cuts:                    # an event longer than the part: a part twice as long
                size *= 2
                continue
            for sep in cuts:
                raw[sep] = 0x5D                                       # "]"
                piece = _part(view[pos:sep + 1], base + total.n_events, marker, shared)
                if piece is not None:
                    break
                raw[sep] = 0x2C
            else:
                return None
            size = PART_BYTES
            total.extend(piece)
            raw[sep] = 0x5B                                           # "[" opens the next part
            patched.append(sep)
            pos = sep
    finally:
        for sep in patched:
            raw[sep] = 0x2C                                           # ","


def separators(raw: bytearray, limit: int) -> list[int]:
    """Positions of the commas between two events (``}`` ``,`` ``{``) before ``limit``, last first; a few
    candidates (one inside a string or a nested object does not decode and the next is tried)."""
    for span in (64 << 10, 1 << 20):           # most events are short: the last 64 KiB holds several commas
        found = [m.start(1) for m in _BETWEEN.finditer(raw, max(0, limit - span), limit)]
        if len(found) >= 8 or span == 1 << 20 or limit - span <= 0:
            return found[::-1][:8]
    return []


def _part(text, base: int, marker, shared: dict) -> Piece | None:
    try:
        piece = distil(decode_fast(text), base, marker, fast=True)
    except FAST_ERRORS:
        return None
    return compact(piece, shared, fast=True) if piece is not None else None
