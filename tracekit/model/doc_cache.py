"""explain's JSON output kept whole, so that a warm ``explain -f json`` skips loading, costing and the
document, and pandas too: it hashes the input, reads one file and writes it out.

Key: everything the output can depend on. The input's bytes, path (as given, and resolved) and step
marker as the table's key
takes them (``cache_key.key``: tracekit's version and source digest too), plus every file the input
brings with it (a folder: all its files; a trace file: its bundle's meta, execution trace, graph
captures and kernel sources, a serving engine's ``capture_traces/`` folder, and a ``<stem>.kernels/``
folder next to it), the execution trace, the ``--graph-captures`` files and
spec files given, the device spec files tracekit ships, the options that change the document
(device, spec, step marker, skipped steps) and the TRACEKIT_* limits of the environment. Kept: the
output's bytes and the warning lines it printed on stderr. Same folder, same atomic write and the
same switch (``--no-cache``, ``TRACEKIT_NO_CACHE``) as the table's cache.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

import orjson

from tracekit.model.cache_key import _file_digest, folder, key, path_text

FORMAT = 1
SPECS = Path(__file__).resolve().parents[1] / "specs"


def _companions(path: Path) -> list[Path]:
    """The files an input brings with it, sorted (see the module's docstring)."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    folder_ = path.parent
    found = [folder_ / n for n in ("meta.json", "et.json.gz", "et.json") if (folder_ / n).is_file()]
    found += sorted(folder_.glob("graph_capture*.json*"))
    for serving in (folder_ / "capture_traces", folder_ / "graph_capture_profile"):   # load.capture_dir
        if serving.is_dir():
            found += sorted(p for p in serving.rglob("*") if p.is_file())
    for kernels in (folder_ / "kernels", folder_ / (path.name.split(".json")[0] + ".kernels")):
        if kernels.is_dir():
            found += sorted(p for p in kernels.rglob("*") if p.is_file())
    return found


def doc_key(path: str | Path, step_marker: str | None, device: str | None, spec: str | None, skip: int,
            et: str | None, captures: str | None = None) -> str | None:
    """The key of ``explain PATH -f json`` with these options; None when the cache is off or a file
    cannot be read as a regular file (then nothing is kept)."""
    if folder() is None:
        return None
    p = Path(path)
    trace_file = p
    if p.is_dir():                       # the table's key takes the trace file; the folder's files follow
        trace_file = next((f for f in sorted(p.rglob("*.json*")) if f.is_file()), p)
    base = key(trace_file, step_marker)
    if base is None:
        return None
    h = hashlib.blake2b(digest_size=20)
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("TRACEKIT_")
                 and k not in ("TRACEKIT_CACHE_DIR", "TRACEKIT_NO_CACHE"))
    # the path as given too: the document names the trace as it was given
    h.update(orjson.dumps([FORMAT, base, path_text(path), path_text(p.resolve()), device, spec, skip,
                           path_text(et) if et else None, path_text(captures) if captures else None, env]))
    extra = [Path(spec)] if spec and Path(spec).is_file() else []
    extra += [Path(et)] if et else []
    if captures:                        # --graph-captures: a folder's files or the one file
        c = Path(captures)
        extra += sorted(f for f in c.rglob("*") if f.is_file()) if c.is_dir() else [c]
    for f in (*_companions(p), *extra, *sorted(SPECS.glob("*.toml"))):
        h.update(os.fsencode(f.resolve()) + b"\0")
        if not _file_digest(f, h):
            return None
    return h.hexdigest()


def _path(k: str) -> Path:
    return folder() / k[:2] / f"{k}.explain.json"


def read(k: str | None) -> tuple[BinaryIO, list[str]] | None:
    """(the kept output, open at its first byte, and the warning lines), or None: the output is copied
    out in blocks (``copy_out``), never held whole (100k steps write 112 MB of JSON)."""
    if k is None:
        return None
    try:
        f = _path(k).open("rb")
    except OSError:
        return None
    try:
        warnings = orjson.loads(f.readline(1 << 24))
        body = f.tell()
        has_body = bool(f.read(1))
        f.seek(body)
    except (OSError, orjson.JSONDecodeError):
        f.close()
        return None
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings) or not has_body:
        f.close()
        return None
    return f, warnings


def copy_out(kept: BinaryIO, out: BinaryIO) -> None:
    with kept:
        shutil.copyfileobj(kept, out, 1 << 20)


class Keeper:
    """Keeps an output as it is written: ``write`` each piece, ``commit`` once the whole output is out
    (an atomic rename); left uncommitted (an error, a closed stdout), nothing is kept. Never raises
    for the cache's own folder: a folder that cannot be written keeps nothing."""

    def __init__(self, k: str | None, warnings: list[str]):
        self.file = self.tmp = None
        if k is None:
            return
        self.target = _path(k)
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            fd, self.tmp = tempfile.mkstemp(prefix=f".{k}.", suffix=".tmp", dir=self.target.parent)
            self.file = os.fdopen(fd, "wb")
            self.file.write(orjson.dumps(warnings) + b"\n")
        except OSError:
            self.discard()

    def write(self, piece: bytes) -> None:
        if self.file is not None:
            try:
                self.file.write(piece)
            except OSError:
                self.discard()

    def commit(self) -> None:
        if self.file is None:
            return
        try:
            self.file.close()
            self.file = None
            os.replace(self.tmp, self.target)
            self.tmp = None
        except OSError:
            pass
        self.discard()

    def discard(self) -> None:
        """Close and remove what is not committed (nothing after ``commit``)."""
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:                        # gone already
                pass
        self.file = self.tmp = None

    def __enter__(self) -> "Keeper":
        return self

    def __exit__(self, *exc) -> None:
        self.discard()                             # after commit: nothing left; else the partial file goes


def write(k: str | None, out, warnings: list[str]) -> None:
    """Keep ``out`` (bytes, or a list of pieces) and the warning lines under ``k``; nothing when the folder
    cannot be written."""
    with Keeper(k, warnings) as keeper:
        for piece in [out] if isinstance(out, (bytes, bytearray, memoryview)) else out:
            keeper.write(piece)
        keeper.commit()
