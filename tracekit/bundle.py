"""The on-disk layout of a capture bundle, and the rules for replacing one.

A bundle folder holds what tracekit wrote and nothing else:

    meta.json                 written when the capture starts (``"state": "running"``) and again at the
                              end (``"state": "done"``, exit code, versions, device, the file list)
    trace.json.gz             the Kineto trace of the recorded steps
    et.json.gz                the PyTorch execution trace of the same run (tensor ids, op outputs)
    graph_capture_G.json.gz   a CUDA-graph capture made while the profiler was idle
    kernels/<hash>.py         copies of the Inductor kernel sources the trace names
    graphs/NNN.{dot,json}     MLX graphs (MLX bundles)
    rankN/                    a multi-rank capture (``--nproc N``): one complete bundle of the above per
                              rank (rank0/trace.json.gz, rank0/meta.json...); the top meta.json then says
                              ``world_size`` and each rank's exit code

``--force`` replaces a folder only when it is such a bundle: meta.json names tracekit, and every
entry is one of the names above (inside rankN/ too). Anything else in the folder makes tracekit refuse, so a user's
files are never deleted.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from tracekit.errors import TracekitError

META = "meta.json"
TRACE = "trace.json.gz"
EXECUTION_TRACE = "et.json.gz"
KERNELS = "kernels"
GRAPHS = "graphs"
MAX_KERNEL_SOURCE_BYTES = 16 << 20

_TOP_FILES = re.compile(r"(meta\.json|trace\.json(\.gz)?|et\.json(\.gz)?|graph_capture_\d+\.json(\.gz)?)")
_KERNEL_SOURCE = re.compile(r"c[a-z0-9]{20,80}\.py")          # Inductor names sources by their hash
_GRAPH_FILE = re.compile(r"\d+\.(dot|json)")
_RANK_DIR = re.compile(r"rank(0|[1-9]\d{0,5})")


def rank_dir_name(rank: int) -> str:
    """The folder of one rank in a multi-rank bundle: ``rank0``, ``rank1``..."""
    return f"rank{rank}"


def rank_dirs(folder: Path) -> dict[int, Path]:
    """The rankN/ folders of a multi-rank bundle, by rank (empty for a one-process bundle)."""
    found = {}
    if folder.is_dir():
        for entry in folder.iterdir():
            if _RANK_DIR.fullmatch(entry.name) and stat.S_ISDIR(entry.lstat().st_mode):
                found[int(entry.name[4:])] = entry
    return dict(sorted(found.items()))


def graph_capture_name(gid: int) -> str:
    return f"graph_capture_{gid}.json.gz"


def read_meta(folder: Path) -> dict | None:
    """The bundle's meta.json as a dict, or None when it is missing, unreadable or not tracekit's."""
    meta = folder / META
    try:
        if not meta.is_file() or meta.stat().st_size > (1 << 20):
            return None
        doc = json.loads(meta.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or "framework" not in doc or "tracekit_version" not in doc:
        return None
    return doc


def foreign_entries(folder: Path, ranks: bool = True) -> list[str]:
    """Entries of ``folder`` that tracekit does not write into a bundle (sorted, relative names);
    a rankN/ folder is looked into (its entries must be bundle files too, and no deeper rankN/)."""
    foreign = []
    for entry in sorted(folder.iterdir()):
        mode = entry.lstat().st_mode
        if stat.S_ISREG(mode) and _TOP_FILES.fullmatch(entry.name):
            continue
        if ranks and _RANK_DIR.fullmatch(entry.name) and stat.S_ISDIR(mode):
            foreign += [f"{entry.name}/{sub}" for sub in foreign_entries(entry, ranks=False)]
            continue
        pattern = {KERNELS: _KERNEL_SOURCE, GRAPHS: _GRAPH_FILE}.get(entry.name)
        if pattern is not None and stat.S_ISDIR(mode):
            foreign += [f"{entry.name}/{sub.name}" for sub in sorted(entry.iterdir())
                        if not (stat.S_ISREG(sub.lstat().st_mode) and pattern.fullmatch(sub.name))]
            continue
        foreign.append(entry.name)
    return foreign


def prepare_out(out: str | Path, force: bool) -> Path:
    """The bundle folder, absolute and empty. An existing non-empty folder is replaced only with
    ``force`` and only when it is a tracekit bundle holding nothing but bundle files."""
    p = Path(out).absolute()
    if p.exists() or p.is_symlink():
        if p.is_symlink() or not p.is_dir():
            raise TracekitError(f"{p} exists and is not a folder")
        if any(p.iterdir()):
            if not force:
                raise TracekitError(f"{p} already exists (use --force to replace a tracekit bundle)")
            if read_meta(p) is None:
                raise TracekitError(f"{p} is not a tracekit bundle (no tracekit meta.json): "
                                    "refusing to replace it")
            foreign = foreign_entries(p)
            if foreign:
                shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
                raise TracekitError(f"{p} holds files tracekit did not write ({shown}): refusing to replace it")
            _remove_bundle_files(p)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:                      # under a file, in /proc, read-only, full
        raise TracekitError(f"{p}: cannot make the bundle folder ({exc.strerror or exc})") from None
    return p


def _remove_bundle_files(folder: Path) -> None:
    """Delete the bundle's own files (foreign_entries found none), keeping the folder itself."""
    for entry in folder.iterdir():
        if _RANK_DIR.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
            _remove_bundle_files(entry)
            entry.rmdir()
        elif entry.name in (KERNELS, GRAPHS):
            for sub in entry.iterdir():
                sub.unlink()
            entry.rmdir()
        else:
            entry.unlink()


def is_kernel_source(path: str, cache_dirs: list[str]) -> bool:
    """True for an Inductor kernel source: a regular ``c<hash>.py`` file under an Inductor cache
    folder, of bounded size. Anything else a trace's ``kernel_file`` names is not copied."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except (OSError, ValueError, TypeError):
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_KERNEL_SOURCE_BYTES:
        return False
    if not _KERNEL_SOURCE.fullmatch(os.path.basename(real)):
        return False
    roots = [os.path.realpath(d) for d in cache_dirs if d]
    return any(os.path.commonpath([real, root]) == root for root in roots)


_KERNEL_FILE = re.compile(rb'"kernel_file":\s*"((?:[^"\\]|\\.)*)"')


def gzip_trace(json_path: Path, quiet: bool, kernel_paths: set[str], add_fields: dict | None = None) -> Path:
    """json → json.gz (progress bar on stderr for large traces); collects args["kernel_file"] paths.
    ``add_fields``: top-level fields written in front of the trace's own, each only where the trace's
    first block does not already name it (``distributedInfo`` of a rank whose profiler started before
    ``init_process_group``)."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    gz, size, chunk = json_path.with_name(json_path.name + ".gz"), json_path.stat().st_size, 1 << 22
    bar = Progress(TextColumn("tracekit: gzip {task.description}"), BarColumn(), DownloadColumn(),
                   console=Console(stderr=True), transient=True, disable=quiet or size < (32 << 20))
    tail, tmp = b"", gz.with_name(f".{gz.name}.tmp")      # written whole, then renamed into place
    with bar, open(json_path, "rb") as src, gzip.open(tmp, "wb", compresslevel=6) as dst:
        task = bar.add_task(json_path.name, total=size)
        first = True
        while block := src.read(chunk):
            if first and add_fields:
                block = _add_top_fields(block, add_fields)
            first = False
            dst.write(block)
            for m in _KERNEL_FILE.finditer(tail + block):
                kernel_paths.add(json.loads(b'"' + m.group(1) + b'"'))
            tail = block[-4096:]
            bar.advance(task, len(block))
    os.replace(tmp, gz)
    json_path.unlink()
    return gz


def _add_top_fields(block: bytes, fields: dict) -> bytes:
    """Insert ``"key": value,`` right after the opening brace of a JSON object (the first block of it)."""
    head = block.lstrip()
    if not head.startswith(b"{") or head[1:].lstrip().startswith(b"}"):
        return block
    new = b"".join(json.dumps(k).encode() + b": " + json.dumps(v, default=str).encode() + b", "
                   for k, v in fields.items() if json.dumps(k).encode() + b":" not in block.replace(b'": ', b'":'))
    at = len(block) - len(head) + 1
    return block[:at] + new + block[at:] if new else block


def inductor_cache_dirs() -> list[str]:
    """Folders Inductor writes kernel sources to: its configured cache folder and the default one."""
    dirs = [os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")]
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir
        dirs += [cache_dir(), default_cache_dir()]
    except Exception:                              # noqa: BLE001  (no Inductor: only the env var)
        pass
    return [d for d in dirs if d]


def copy_kernel_files(paths: set[str], kdir: Path) -> dict[str, str | None]:
    """Copy each Inductor kernel source into kdir/<basename>; original path → copy name. None: gone,
    or not an Inductor kernel source (only ``c<hash>.py`` files under Inductor's cache are copied)."""
    copied: dict[str, str | None] = {}
    roots = inductor_cache_dirs()
    for src in sorted(paths):
        if not is_kernel_source(src, roots):
            copied[src] = None
            continue
        kdir.mkdir(exist_ok=True)
        shutil.copyfile(os.path.realpath(src), kdir / os.path.basename(src))
        copied[src] = os.path.basename(src)
    return copied


def git_revision(folder: Path) -> dict | None:
    """HEAD commit and dirty flag of the git repository holding ``folder``, or None."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "-uno"))}
    except (OSError, subprocess.SubprocessError):
        return None
