"""Input limits: what tracekit agrees to read and how long a user regex may run (docs/limits.md).

Files are read only when they are regular files (a FIFO, a device such as /dev/zero, a socket or a
folder is refused before anything blocks), up to a size bound; gzip is decompressed as a stream and
refused past a size or ratio bound. User regexes (``--step-marker``, rules ``forbid``) are checked
before use (no backreferences, no quantifier or alternation under another quantifier), match at most
``MAX_MATCH_CHARS`` characters of each name, and share a time budget per pattern.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import threading
import time
import zlib
from pathlib import Path
from typing import Iterator

from tracekit.errors import TracekitError

try:                                     # Python 3.11+
    from re import _constants as sre_c
    from re import _parser as sre_parse
except ImportError:                      # Python 3.10
    import sre_constants as sre_c
    import sre_parse

MAX_INPUT_BYTES = 2 << 30           # JSON / dot text of one input file, after decompression
MAX_TRACE_BYTES = 64 << 30          # a Kineto trace: read in chunks, so memory does not grow with its bytes
MAX_GZIP_RATIO = 100                # decompressed / compressed, checked once RATIO_FLOOR bytes came out
RATIO_FLOOR = 64 << 20
MAX_SMALL_FILE = 16 << 20           # rules files and other hand-written text
MAX_PATTERN_CHARS = 1000
MAX_MATCH_CHARS = 16384             # characters of one name a user regex sees (longest real name: ~5k)
REGEX_SECONDS = 5.0                 # matching time one user regex may spend on one input
MAX_REGEX_SECONDS = 86400.0         # TRACEKIT_REGEX_SECONDS at most a day (the timer overflowed at 1e10)
_CHUNK = 1 << 20

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _env_number(name: str, default: float, integer: bool = True, maximum: float = float(1 << 62)) -> float:
    """``default``, or the environment's value: a number, for sizes with an optional K/M/G suffix, from
    above 0 to ``maximum``."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1) if integer else 1
    try:
        value = float(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise TracekitError(f"{name}={text!r}: expected a positive number" + (" (suffix K, M or G allowed)"
                                                                               if integer else ""))
    if value > maximum:
        raise TracekitError(f"{name}={text!r}: at most {maximum:g}")
    return int(value) if integer else value


def max_input_bytes() -> int:
    return int(_env_number("TRACEKIT_MAX_INPUT_BYTES", MAX_INPUT_BYTES))


def max_trace_bytes() -> int:
    """The bound on a Kineto trace's JSON (read in chunks): TRACEKIT_MAX_INPUT_BYTES when set."""
    return int(_env_number("TRACEKIT_MAX_INPUT_BYTES", MAX_TRACE_BYTES))


def max_gzip_ratio() -> float:
    return _env_number("TRACEKIT_MAX_GZIP_RATIO", MAX_GZIP_RATIO, integer=False)


def regex_seconds() -> float:
    return _env_number("TRACEKIT_REGEX_SECONDS", REGEX_SECONDS, integer=False, maximum=MAX_REGEX_SECONDS)


def size_text(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} bytes"


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | Path, what: str):
    """A binary file object for ``path`` if it is a regular file; else a one-line TracekitError.

    The type is checked before opening (so a FIFO or a device is never opened) and again on the
    open descriptor (the path may have been swapped in between); the open itself never blocks."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise TracekitError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise TracekitError(f"{path}: is {_kind(mode)}, not a regular file: tracekit reads a {what} only "
                            "from a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise TracekitError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise TracekitError(f"{path}: is {_kind(mode)}, not a regular file: tracekit reads a {what} only "
                            "from a regular file")
    return os.fdopen(fd, "rb")


def _too_big(path, what: str, limit: int) -> TracekitError:
    return TracekitError(f"{path}: {what} is larger than {size_text(limit)}: refused (the limit is "
                         "TRACEKIT_MAX_INPUT_BYTES; raise it if the file is real)")


def iter_input(path: str | Path, what: str = "trace", limit: int | None = None, gunzip: bool = True,
               block: int = _CHUNK) -> Iterator[bytes]:
    """The bytes of a regular file in blocks, gunzipped as a stream (every member) when it starts with
    the gzip magic. Refused (TracekitError) beyond ``limit`` bytes (default ``TRACEKIT_MAX_INPUT_BYTES``)
    after decompression, or when gzip expands more than ``TRACEKIT_MAX_GZIP_RATIO`` times."""
    limit = max_input_bytes() if limit is None else limit
    with open_regular(path, what) as fh:
        try:
            first = fh.read(block)
            if gunzip and first[:2] == b"\x1f\x8b":
                yield from _gunzip(fh, first, path, what, limit, block)
                return
            total = 0
            while first:
                total += len(first)
                if total > limit:
                    raise _too_big(path, what, limit)
                yield first
                first = fh.read(block)
        except OSError as exc:
            raise TracekitError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None


def read_input(path: str | Path, what: str = "trace", limit: int | None = None, gunzip: bool = True) -> bytearray:
    """The whole of ``iter_input``: a regular file's bytes, gunzipped, within the size and ratio limits."""
    out = bytearray()
    for piece in iter_input(path, what, limit, gunzip):
        out += piece
    return out


def _gunzip(fh, first: bytes, path, what: str, limit: int, block: int) -> Iterator[bytes]:
    """Stream-decompress every gzip member of ``fh``, keeping the size and ratio bounds."""
    ratio = max_gzip_ratio()
    produced, consumed = 0, 0
    d = zlib.decompressobj(wbits=31)
    try:
        while first:
            consumed += len(first)
            data = first
            while True:
                piece = d.decompress(data, block)
                produced += len(piece)
                if produced > limit:
                    raise _too_big(path, f"{what} (decompressed)", limit)
                if produced > RATIO_FLOOR and produced > ratio * consumed:
                    raise TracekitError(f"{path}: gzip expands more than {ratio:g}× ({size_text(produced)} from "
                                        f"{size_text(consumed)}): refused as a likely gzip bomb (the limit is "
                                        "TRACEKIT_MAX_GZIP_RATIO; raise it if the trace is real)")
                if piece:
                    yield piece
                if d.eof:
                    rest = d.unused_data
                    if rest[:2] == b"\x1f\x8b":                 # another gzip member follows
                        d, data = zlib.decompressobj(wbits=31), rest
                        continue
                    if rest.strip(b"\x00"):
                        raise TracekitError(f"{path}: bad gzip (unexpected bytes after the compressed data)")
                    break
                data = d.unconsumed_tail
                if not data and len(piece) < block:
                    break
            first = fh.read(block)
    except zlib.error as exc:
        raise TracekitError(f"{path}: bad or truncated gzip ({exc})") from None
    if not d.eof:
        raise TracekitError(f"{path}: bad or truncated gzip (the compressed stream ends early)")


def read_head(path: str | Path, size: int = 65536, what: str = "file") -> bytes:
    """The first ``size`` bytes of a regular file, decompressed when it is gzip (b"" when that fails)."""
    with open_regular(path, what) as fh:
        raw = fh.read(size)
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return zlib.decompressobj(wbits=31).decompress(raw, size)
    except zlib.error:
        return b""                      # the full reader names the problem


# --- user regexes ---------------------------------------------------------------------------------

_REPEATS = {sre_c.MAX_REPEAT, sre_c.MIN_REPEAT} | ({sre_c.POSSESSIVE_REPEAT} if hasattr(sre_c, "POSSESSIVE_REPEAT")
                                                    else set())
_BACKREFS = {sre_c.GROUPREF, sre_c.GROUPREF_EXISTS} | {getattr(sre_c, n) for n in
                                                       ("GROUPREF_IGNORE", "GROUPREF_LOC_IGNORE", "GROUPREF_UNI_IGNORE")
                                                       if hasattr(sre_c, n)}


def _children(op, av) -> list:
    """The sub-patterns directly inside one parsed item."""
    if op in _REPEATS:
        return [av[2]]
    if op == sre_c.SUBPATTERN:
        return [av[-1]]
    if op == sre_c.BRANCH:
        return list(av[1])
    if op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
        return [av[1]]
    if getattr(sre_c, "ATOMIC_GROUP", None) == op:
        return [av]
    return []


def _unsafe(items, repeated: bool) -> str | None:
    """Why a parsed pattern could backtrack without bound, or None. ``repeated``: inside a group that
    repeats more than once, where any variable quantifier or alternation makes the split ambiguous."""
    for op, av in items:
        if op in _BACKREFS:
            return "it uses a backreference"
        inner = repeated
        if op in _REPEATS:
            if repeated and av[0] != av[1]:
                return "it puts a quantifier inside a repeated group (like (a+)+ or (a?b)*)"
            inner = repeated or av[1] > 1
        if op == sre_c.BRANCH and repeated:
            return "it repeats an alternation of more than single characters (like (ab|a)*)"
        for sub in _children(op, av):
            why = _unsafe(sub, inner)
            if why:
                return why
    return None


class UserRegex:
    """A user's regex checked for catastrophic backtracking, matched against bounded text within a
    time budget; ``search`` remembers each text's answer (names repeat)."""

    def __init__(self, pattern: str, where: str):
        self.pattern, self.where = pattern, where
        if len(pattern) > MAX_PATTERN_CHARS:
            raise TracekitError(f"{where}: regex is longer than {MAX_PATTERN_CHARS} characters")
        try:
            self.rx = re.compile(pattern)
        except (re.error, OverflowError, RecursionError) as exc:
            raise TracekitError(f"{where}: bad regex {pattern!r} ({exc})") from None
        why = _unsafe(sre_parse.parse(pattern), False)
        if why:
            raise TracekitError(f"{where}: regex {pattern!r} is refused: {why}, which can take exponential time; "
                                "see docs/limits.md")
        self.budget = regex_seconds()
        self._seen: dict[str, bool] = {}

    def search(self, text: str) -> bool:
        hit = self._seen.get(text)
        if hit is None:
            hit = self._seen[text] = self._timed(text[:MAX_MATCH_CHARS])
        return hit

    def _timed(self, text: str) -> bool:
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
            return self.rx.search(text) is not None     # no timer off the main thread: the static rules hold
        if self.budget <= 0:
            raise self._slow()
        outer, start = signal.getitimer(signal.ITIMER_REAL), time.monotonic()   # someone else's alarm, kept
        old = signal.signal(signal.SIGALRM, _on_alarm)
        old = signal.SIG_DFL if old is None else old
        try:
            signal.setitimer(signal.ITIMER_REAL, self.budget)
            try:
                return self.rx.search(text) is not None
            finally:
                self.budget = signal.setitimer(signal.ITIMER_REAL, 0)[0]
        except _Timeout:
            self.budget = 0.0
            raise self._slow() from None
        finally:
            signal.signal(signal.SIGALRM, old)
            if outer[0] > 0:
                signal.setitimer(signal.ITIMER_REAL, max(outer[0] - (time.monotonic() - start), 1e-6), outer[1])

    def _slow(self) -> TracekitError:
        return TracekitError(f"{self.where}: regex {self.pattern!r} spent more than {regex_seconds():g} s matching "
                             "this input's names (backtracking): simplify it (see docs/limits.md) or raise "
                             "TRACEKIT_REGEX_SECONDS")


class _Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Timeout()
