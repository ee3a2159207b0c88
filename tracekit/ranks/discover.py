"""The ranks of a multi-rank folder: a capture bundle's rankN/ folders, or one trace file per rank."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tracekit import bundle
from tracekit.errors import TracekitError

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_NOT_RANKS = re.compile(r"^(meta\.json|et\.json(\.gz)?|graph_capture.*)$")


@dataclass(frozen=True)
class RankInput:
    """One rank's input: ``key`` numbers the rows (unique even when two traces claim one rank)."""

    key: int
    path: str                   # the trace file, or the rank's bundle folder
    label: str                  # what the report calls it: "rank3" (bundle folder) or the file name
    rank_hint: int | None       # the rank its folder or file name says (the trace's distributedInfo wins)


def trace_files(folder: Path) -> list[Path]:
    """The trace files directly in a folder (*.json, *.json.gz; a bundle's meta/et/capture files left out):
    a file whose name carries a rank number is a rank whatever it holds (a damaged rank is reported, not
    dropped); any other must look like a trace (a ``traceEvents`` key in its first MiB): ``explain /tmp`` had
    read three unrelated JSON files as the ranks of one run."""
    from tracekit.load.kineto import is_trace_like

    found = []
    for p in sorted(folder.iterdir()):
        if p.is_file() and (p.name.endswith(".json") or p.name.endswith(".json.gz")) and not _NOT_RANKS.match(p.name):
            if _RANK_IN_NAME.search(p.name):
                found.append(p)
                continue
            try:
                if is_trace_like(p):
                    found.append(p)
            except TracekitError:             # unreadable, over the limits, and not named as a rank
                continue
    return found


def is_multi_rank(folder: Path) -> bool:
    """A multi-rank capture bundle (rankN/ folders), or a folder of several traces and no bundle meta."""
    if not folder.is_dir():
        return False
    if bundle.rank_dirs(folder):
        return True
    return not (folder / bundle.META).is_file() and len(trace_files(folder)) > 1


def rank_inputs(folder: Path) -> list[RankInput]:
    """Every rank of a multi-rank folder, in rank order (by folder or file name, then name)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TracekitError(f"{folder}: not a folder (a multi-rank run is a folder of per-rank traces)")
    subs = bundle.rank_dirs(folder)
    if subs:
        return [RankInput(i, str(sub), sub.name, rank) for i, (rank, sub) in enumerate(subs.items())]
    files = trace_files(folder)
    if not files:
        raise TracekitError(f"{folder}: folder holds no *.json or *.json.gz trace")

    def hint(p: Path) -> int | None:
        m = _RANK_IN_NAME.search(p.name)
        return int(m.group(1)) if m else None
    files.sort(key=lambda p: (hint(p) is None, hint(p) or 0, p.name))
    return [RankInput(i, str(p), p.name, hint(p)) for i, p in enumerate(files)]
