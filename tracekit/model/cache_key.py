"""The cache's folder and keys (``model.cache`` keeps the normalised table under them, ``model.doc_cache``
explain's JSON document): no pandas, so that a warm command can find its file before importing it."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
from pathlib import Path

import orjson

from tracekit.lean import cache_off_by_env
from tracekit.version import __version__

FORMAT = 2                   # bump when the layout of a cache file changes
_enabled: list[bool] = []    # innermost ``settings(enabled=...)`` wins


@contextlib.contextmanager
def settings(enabled: bool):
    """Turn the cache on or off for the calls inside (``--no-cache``)."""
    _enabled.append(enabled)
    try:
        yield
    finally:
        _enabled.pop()


def folder() -> Path | None:
    """The cache folder, or None when the cache is off."""
    if (_enabled and not _enabled[-1]) or cache_off_by_env():
        return None
    if os.environ.get("TRACEKIT_CACHE_DIR"):
        return Path(os.environ["TRACEKIT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tracekit"


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of every tracekit source file (the declared schema included): any code change is a new key."""
    h = hashlib.blake2b(digest_size=16)
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _file_digest(path: Path, h) -> bool:
    """Feed a regular file's bytes to ``h`` in 1 MiB blocks; False for anything else (a FIFO never blocks)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
    except OSError:
        return False
    return True


def key(trace_file: Path, step_marker: str | None, extra_files: list[Path] = (), salt=None) -> str | None:
    """The cache key of a trace file and the files its normalised table depends on; None when one of
    them is not a regular file. ``salt``: other JSON-able inputs the table depends on (the capture folder
    named, which changes what is warned)."""
    h = hashlib.blake2b(digest_size=20)
    where = path_text(Path(trace_file).resolve())
    h.update(orjson.dumps([FORMAT, __version__, code_digest(), where, step_marker, salt]))   # a non-UTF-8 name too
    for path in (trace_file, *extra_files):
        h.update(os.fsencode(Path(path).name) + b"\0")
        if not _file_digest(Path(path), h):
            return None
    return h.hexdigest()


def path_text(path) -> str:
    """A path as JSON-safe text: a name that is not UTF-8 keeps its bytes as backslash escapes."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
