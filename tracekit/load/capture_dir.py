"""A serving engine's graph-capture traces: the folder, the files of one rank, and what each captured.

Serving engines record the CUDA/HIP-graph capture phase at start-up as separate profiler traces, kept in
a ``capture_traces/`` folder beside the steady-state trace:

- SGLang: ``bs_{bs}_rank{N}.json.gz``, ``bs_{bs}_q_{q}_rank{N}.json.gz`` (q query tokens per sequence:
  speculative decoding), one file per captured batch size;
- vLLM ≥ 0.26: ``graph_capture_rank_{N}.{time}.pt.trace.json.gz``, each capture annotated
  ``capture_{size}_{mode}`` (mode FULL or PIECEWISE);
- either, optionally: ``execution_details.json``, a list of ``{"file", "batch_size", "mode"}``;
- SGLang with ``SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE``: ``graph_capture_profile/
  cuda_graph_capture-{Runner}-TP-{N}.json.gz``, every captured batch size in one file.

A file whose name carries another rank than the trace's is left out; a name without a rank is kept.
The batch size and mode of a file come from ``execution_details.json``, else its name; the capture
annotation inside the file (``graph_replay.find_captures``) refines them per capture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import orjson

from tracekit.errors import TracekitError

FOLDER = "capture_traces"
FOLDERS = (FOLDER, "graph_capture_profile")
DETAILS = "execution_details.json"
SGLANG_NAME = re.compile(r"^bs_(\d+)(?:_q_(\d+))?_rank(\d+)\.json(?:\.gz)?$")
VLLM_NAME = re.compile(r"^graph_capture_rank_(\d+)\..*\.json(?:\.gz)?$")
SGLANG_ALL_NAME = re.compile(r"^cuda_graph_capture-.*-TP-(\d+)\.json(?:\.gz)?$")
TRACE_FILE = re.compile(r"\.json(?:\.gz)?$")


@dataclass(frozen=True)
class CaptureFile:
    """One capture trace: its rank, and the batch size (tokens) and mode it captured where known."""

    path: Path
    rank: int | None = None
    batch_size: int | None = None
    mode: str | None = None


def default_folder(trace: Path) -> Path | None:
    """``capture_traces/`` (else ``graph_capture_profile/``) beside a trace file, or inside a bundle or
    trace folder."""
    folder = trace if trace.is_dir() else trace.parent
    return next((folder / name for name in FOLDERS if (folder / name).is_dir()), None)


def _details(folder: Path) -> dict[str, tuple[int | None, str | None]]:
    """execution_details.json: file name → (batch size, mode); a malformed file is refused."""
    path = folder / DETAILS
    if not path.is_file():
        return {}
    try:
        doc = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        raise TracekitError(f"{path}: invalid JSON") from None
    if not isinstance(doc, list) or not all(isinstance(d, dict) and isinstance(d.get("file"), str) for d in doc):
        raise TracekitError(f"{path}: expected a list of {{\"file\", \"batch_size\", \"mode\"}} objects")
    out = {}
    for d in doc:
        bs, mode = d.get("batch_size"), d.get("mode")
        out[Path(d["file"]).name] = (bs if isinstance(bs, int) and not isinstance(bs, bool) and bs > 0 else None,
                                     mode if isinstance(mode, str) else None)
    return out


def capture_files_in(folder: str | Path, rank: int | None) -> tuple[list[CaptureFile], list[str]]:
    """The capture traces of ``folder`` for ``rank`` (None: the trace names none, rank 0 is taken),
    and notes on what was left out."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TracekitError(f"--graph-captures {folder}: not a folder")
    details = _details(folder)
    want = 0 if rank is None else rank
    files, other_ranks = [], 0
    for path in sorted(p for p in folder.iterdir() if TRACE_FILE.search(p.name) and p.name != DETAILS):
        if not path.is_file():
            continue
        bs, mode = details.get(path.name, (None, None))
        file_rank = None
        if m := SGLANG_NAME.match(path.name):
            file_rank = int(m.group(3))
            bs = bs or int(m.group(1)) * int(m.group(2) or 1)        # tokens: sequences × query tokens each
        elif m := VLLM_NAME.match(path.name) or SGLANG_ALL_NAME.match(path.name):
            file_rank = int(m.group(1))
        if file_rank is not None and file_rank != want:
            other_ranks += 1
            continue
        files.append(CaptureFile(path, file_rank, bs, mode))
    notes = []
    if other_ranks:
        notes.append(f"{folder}: {other_ranks} capture file(s) of other ranks left out (the trace is rank {want}"
                     f"{'' if rank is not None else ', taken as 0: it names none'})")
    if not files:
        notes.append(f"{folder}: no capture trace of rank {want} in it (*.json, *.json.gz)")
    return files, notes
