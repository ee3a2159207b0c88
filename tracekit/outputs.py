"""Where tracekit may write: one check for every output path, and atomic writes (docs/limits.md).

Nothing the user had is lost. Every command checks each output path before it starts work:

- an output may not be an input, nor a folder holding an input (symbolic links resolved; hard links
  caught by comparing device and inode);
- an existing output file is replaced only with ``--force``, and only when it is a regular file
  (never a folder, a device such as ``/dev/full``, a FIFO or a socket);
- an existing output folder is used only when it is empty or tracekit's own (``ranks --keep``: its
  Parquet tables; capture bundles have their own rule, ``tracekit.bundle.prepare_out``);
- the folder an output goes into must exist.

Files are written to a temporary name beside the output and renamed over it, so a failed write
(a full disk, a name longer than the file system allows) leaves what was there; any OSError becomes
one ``tracekit:`` line, exit 2.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Iterable

from tracekit.errors import TracekitError
from tracekit.model.rows import Column, Rows


def shown(path) -> str:
    """A path as text that can always be printed (undecodable bytes of a file name as escapes)."""
    text = os.fsdecode(path) if isinstance(path, bytes) else str(path)
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if _has_surrogates(text) else text


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def _stat(path: Path, follow: bool = True) -> os.stat_result | None:
    try:
        return path.stat() if follow else path.lstat()
    except (OSError, ValueError):
        return None


def _real(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return path.absolute()


def _inside(child: Path, folder: Path) -> bool:
    return child == folder or folder in child.parents


def check_not_input(out: str | os.PathLike, option: str, inputs: Iterable) -> None:
    """Refuse an output that is an input (same file by path, link or inode) or a folder holding one."""
    try:
        _check_not_input(Path(out), option, inputs)
    except OSError as exc:
        raise TracekitError(f"{option} {shown(out)}: {exc.strerror or exc}") from None


def _check_not_input(out: Path, option: str, inputs: Iterable) -> None:
    real_out, out_st = _real(out), _stat(out)
    for given in inputs:
        if given is None:
            continue
        inp = Path(given)
        real_in, in_st = _real(inp), _stat(inp)
        same = real_out == real_in or (out_st is not None and in_st is not None and os.path.samestat(out_st, in_st))
        if same:
            raise TracekitError(f"{option} {shown(out)}: is the input {shown(inp)}: refusing to overwrite it")
        if _inside(real_in, real_out):
            raise TracekitError(f"{option} {shown(out)}: holds the input {shown(inp)}: refusing to write there")
        if in_st is not None and stat.S_ISDIR(in_st.st_mode) and out_st is not None and _inside(real_out, real_in):
            raise TracekitError(f"{option} {shown(out)}: is a file inside the input folder {shown(inp)}: "
                                "refusing to overwrite it")


def check_output_file(path: str | os.PathLike, option: str, inputs: Iterable = (), force: bool = False,
                      make_parents: bool = False) -> Path:
    """``path`` as an output file, checked before any work (the module docstring's rules)."""
    try:
        return _check_file(path, option, inputs, force, make_parents)
    except OSError as exc:                         # a name too long, a folder that cannot be read
        raise TracekitError(f"{option} {shown(path)}: {exc.strerror or exc}") from None


def _check_file(path, option: str, inputs: Iterable, force: bool, make_parents: bool) -> Path:
    if path is None or str(path) == "":
        raise TracekitError(f"{option}: empty file name")
    out = Path(path)
    _check_not_input(out, option, inputs)
    st = _stat(out)
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise TracekitError(f"{option} {shown(out)}: is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise TracekitError(f"{option} {shown(out)}: exists and is not a regular file (a device, FIFO or "
                                "socket): refusing to write there")
        if not force:
            raise TracekitError(f"{option} {shown(out)}: already exists (pass --force to replace it)")
    elif out.is_symlink():
        raise TracekitError(f"{option} {shown(out)}: is a broken symbolic link: refusing to write through it")
    parent = _real(out).parent
    pst = _stat(parent)
    if pst is None and make_parents:
        _check_not_input(parent, option, inputs)
        return out
    if pst is None:
        raise TracekitError(f"{option} {shown(out)}: its folder does not exist ({shown(parent)})")
    if not stat.S_ISDIR(pst.st_mode):
        raise TracekitError(f"{option} {shown(out)}: {shown(parent)} is not a folder")
    return out


def check_output_folder(path: str | os.PathLike, option: str, inputs: Iterable = (), own=None) -> Path:
    """``path`` as an output folder: not an input nor holding one; when it exists, a folder whose every
    entry ``own(entry)`` accepts (tracekit's own files, which are replaced)."""
    try:
        return _check_folder(path, option, inputs, own)
    except OSError as exc:
        raise TracekitError(f"{option} {shown(path)}: {exc.strerror or exc}") from None


def _check_folder(path, option: str, inputs: Iterable, own) -> Path:
    if path is None or str(path) == "":
        raise TracekitError(f"{option}: empty folder name")
    out = Path(path)
    _check_not_input(out, option, inputs)
    st = _stat(out)
    if st is None:
        if out.is_symlink():
            raise TracekitError(f"{option} {shown(out)}: is a broken symbolic link")
        parent = _real(out).parent
        if _stat(parent) is not None and not parent.is_dir():
            raise TracekitError(f"{option} {shown(out)}: {shown(parent)} is not a folder")
        return out
    if not stat.S_ISDIR(st.st_mode):
        raise TracekitError(f"{option} {shown(out)}: exists and is not a folder")
    try:
        foreign = [e.name for e in os.scandir(out) if own is None or not own(e)]
    except OSError as exc:
        raise TracekitError(f"{option} {shown(out)}: cannot read the folder ({exc.strerror})") from None
    if foreign:
        raise TracekitError(f"{option} {shown(out)}: holds files tracekit did not write ({shown(sorted(foreign)[0])}"
                            f"{' and more' if len(foreign) > 1 else ''}): refusing to write there")
    return out


def write_atomic(path: str | os.PathLike, data: bytes, option: str = "output", make_parents: bool = False) -> int:
    """Write ``data`` to a temporary file beside ``path`` and rename it over ``path``; the bytes written.
    A write error is one TracekitError line and leaves ``path`` as it was."""
    out = Path(path)
    tmp = None
    try:
        if make_parents:
            out.parent.mkdir(parents=True, exist_ok=True)
        st = _stat(out, follow=False)
        if st is not None and stat.S_ISLNK(st.st_mode):     # write through a link to the file it names
            out = _real(out)
        fd, tmp = tempfile.mkstemp(prefix=".tracekit-", suffix=".tmp", dir=out.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        old = _stat(out)
        os.chmod(tmp, stat.S_IMODE(old.st_mode) if old is not None else 0o666 & ~_umask())
        os.replace(tmp, out)
        tmp = None
        return len(data)
    except OSError as exc:
        raise TracekitError(f"{option} {shown(out)}: cannot write ({exc.strerror or exc})") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def input_paths(*paths) -> list[Path]:
    """The paths a command reads, for ``check_output_*``: the given ones that are set."""
    return [Path(p) for p in paths if p]


def json_bytes(doc, option: int = 0) -> bytes:
    """``orjson.dumps(doc)``; strings that hold lone surrogates (a file name that is not UTF-8, as Python
    reads it) are written with backslash escapes instead of failing (orjson refuses them). Lazy rows
    (``model.rows.Rows``) are written as the lists they stand for."""
    import orjson

    try:
        return orjson.dumps(doc, option=option, default=_as_list)
    except TypeError as exc:
        if "surrogates" not in str(exc):
            raise
        return orjson.dumps(_escaped(doc), option=option, default=_as_list)


ROWS_PER_PIECE = 256


def json_chunks(doc, option: int = 0):
    """``json_bytes(doc)`` in pieces, the same bytes once joined: a dict holding lazy rows or a long list is
    written key by key and the rows ``ROWS_PER_PIECE`` at a time, so the whole text is never held (an
    explain document of 100k steps is 112 MB of JSON; the 9,684 kernels of a 42 MB trace 9.5 MB)."""
    if isinstance(doc, (Rows, Column)) or (type(doc) is list and len(doc) > ROWS_PER_PIECE):
        yield b"["
        for lo in range(0, len(doc), ROWS_PER_PIECE):
            piece = json_bytes(doc[lo:lo + ROWS_PER_PIECE], option)
            yield (b"," if lo else b"") + piece[1:-1]
        yield b"]"
    elif isinstance(doc, dict) and _holds_rows(doc):
        yield b"{"
        for n, (key, value) in enumerate(doc.items()):
            yield (b"," if n else b"") + json_bytes({key: None}, option)[1:-5]      # '"key":'
            yield from json_chunks(value, option)
        yield b"}"
    else:
        yield json_bytes(doc, option)


def _holds_rows(value) -> bool:
    if isinstance(value, (Rows, Column)) or (type(value) is list and len(value) > ROWS_PER_PIECE):
        return True
    if isinstance(value, dict):
        return any(_holds_rows(v) for v in value.values() if isinstance(v, (dict, Rows, list)))
    return False


def _as_list(value):
    if isinstance(value, (Rows, Column)):
        return list(value)
    raise TypeError


def _escaped(value):
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, Rows, Column)):
        return [_escaped(v) for v in value]
    return value


def stdout_to_devnull() -> None:
    """Point stdout's file descriptor at /dev/null: after a closed pipe, the interpreter's last flush of what
    could not be written stays quiet."""
    import sys
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass
