"""Per-rank facts of a multi-rank run that are not in the kernel table: a capture bundle's own record of
each rank, and, on request (``ranks --hta``), HTA's temporal breakdown.

A multi-rank capture bundle (``tracekit capture --nproc N``, or ranks captured under torchrun into
``DIR/rankR/``) is read rank by rank from its raw events: each rank's exit code and bundle state, steps,
CPU ops, GPU kernels, the collective calls (``c10d::*`` ops), the backend's communication work
(``gloo:*`` / ``nccl:*`` ranges: count, bytes from their input dims and type, time), NCCL kernels and
``record_param_comms`` ranges. The cross-rank analysis itself is tracekit.ranks.

HTA (holistictraceanalysis) splits each rank's GPU time into compute, non-compute (memcpy/memset) and
idle, and measures how much communication overlaps computation; ``--hta`` adds its figures to each
rank's row as a cross-check (its "kernel time" is the span from the first kernel to the last, and it
rounds times to whole µs). Needs the ``hta`` extra: ``pip install 'tracekit[hta]'``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from pathlib import Path

import re
import tempfile

from tracekit import bundle
from tracekit.errors import TracekitError

COMM_WORK = re.compile(r"^(gloo|nccl):(\w+)$")          # the backend's own range around each collective
TYPE_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4,
              "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8,
              "c10::complex<double>": 16, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1}


def message_bytes(args: dict) -> int | None:
    """numel × item size of a communication range's first input (None when its type is unknown)."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not dims or not types or not isinstance(dims[0], list) or types[0] not in TYPE_BYTES:
        return None
    numel = 1
    for d in dims[0]:
        if not isinstance(d, int):
            return None
        numel *= d
    return numel * TYPE_BYTES[types[0]]


def rank_figures(trace: Path) -> dict:
    """Counts of one rank's trace, from its raw events."""
    from tracekit.load.fields import number
    from tracekit.load.kineto import read_json, trace_events

    events, top = trace_events(read_json(trace), trace)
    cpu_ops = kernels = c10d = param_comms = 0
    steps: list[float] = []
    work: dict[str, dict] = {}
    comm_kernels = {"count": 0, "us": 0.0}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat, name, dur = e.get("cat"), str(e.get("name", "")), number(e.get("dur"))
        dur = dur if dur is not None and 0 <= dur <= 1e13 else 0.0     # the loader's checks: a bad dur counts 0
        if cat in ("cpu_op", "operator"):
            cpu_ops += 1
            c10d += name.startswith("c10d::")
        elif cat in ("kernel", "Kernel"):
            kernels += 1
            if name.lower().startswith("nccl"):
                comm_kernels["count"] += 1
                comm_kernels["us"] += dur
        if name == "record_param_comms":
            param_comms += 1
        elif cat == "user_annotation" and name.startswith("ProfilerStep#"):
            steps.append(dur)
        elif (m := COMM_WORK.match(name)) and cat not in ("kernel", "Kernel"):
            row = work.setdefault(name, {"count": 0, "bytes": 0, "us": 0.0})
            row["count"] += 1
            row["us"] += dur
            size = message_bytes(e.get("args") or {})
            row["bytes"] = None if size is None or row["bytes"] is None else row["bytes"] + size
    info = top.get("distributedInfo") if isinstance(top.get("distributedInfo"), dict) else {}
    return {"trace_rank": info.get("rank"), "backend": info.get("backend"), "steps": len(steps),
            "step_us_mean": sum(steps) / len(steps) if steps else None, "cpu_ops": cpu_ops,
            "kernels": kernels, "c10d_ops": c10d, "record_param_comms": param_comms,
            "comm_work": dict(sorted(work.items())), "comm_ops": sum(w["count"] for w in work.values()),
            "comm_bytes": sum(w["bytes"] or 0 for w in work.values()),
            "comm_us": sum(w["us"] for w in work.values()), "comm_kernels": comm_kernels}


def bundle_ranks(folder: Path) -> list[dict]:
    """One dict per rank of a multi-rank bundle; a rank without a trace keeps its exit code and state."""
    top = bundle.read_meta(folder) or {}
    listed = {r.get("rank"): r for r in top.get("ranks", []) if isinstance(r, dict)}
    rows = []
    for rank, sub in bundle.rank_dirs(folder).items():
        own = bundle.read_meta(sub) or {}
        entry = listed.get(rank, {})
        trace = sub / bundle.TRACE
        row = {"rank": rank, "bundle": sub.name,
               "exit_code": entry.get("exit_code", own.get("exit_code")),
               "stopped_by_tracekit": entry.get("stopped_by_tracekit", False),
               "state": own.get("state"), "trace": f"{sub.name}/{trace.name}" if trace.is_file() else None}
        row.update(rank_figures(trace) if trace.is_file() else {})
        rows.append(row)
    for r in rows:
        r["hta"] = None
    return rows


def hta_of_ranks(folder: Path, labels: dict[int, str]) -> dict[int, dict]:
    """HTA's breakdown of each rank ({rank: label}: a bundle's rankN folder or a trace file in ``folder``),
    handed to HTA as one link per rank in a scratch folder (HTA refuses a trace without GPU kernels)."""
    traces = {}
    for rank, label in labels.items():
        path = folder / label
        path = path / bundle.TRACE if path.is_dir() else path
        if rank is not None and path.is_file():
            traces[rank] = path
    if not traces:
        return {}
    with tempfile.TemporaryDirectory(prefix="tracekit-ranks-") as tmp:
        for rank, trace in traces.items():
            (Path(tmp) / f"rank{rank}.json{'.gz' if trace.name.endswith('.gz') else ''}").symlink_to(trace.resolve())
        return {r["rank"]: r for r in hta_breakdown(Path(tmp))}


def hta_breakdown(folder: Path) -> list[dict]:
    """HTA's per-rank idle/compute/non-compute time (µs and %) and comm/compute overlap (%)."""
    if not any(folder.glob("*.json")) and not any(folder.glob("*.json.gz")):
        raise TracekitError(f"{folder}: folder holds no *.json or *.json.gz trace")
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        raise TracekitError("ranks needs HTA: pip install 'tracekit[hta]'") from None
    logging.getLogger("hta").setLevel(logging.ERROR)
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        try:
            analysis = TraceAnalysis(trace_dir=str(folder))
            temporal = analysis.get_temporal_breakdown(visualize=False)
            overlap = analysis.get_comm_comp_overlap(visualize=False)
        except Exception as exc:      # HTA raises plain exceptions (ValueError, KeyError...) on bad input
            raise TracekitError(f"{folder}: HTA could not analyse it ({type(exc).__name__}: {exc})") from None
    overlap_by_rank = dict(zip(overlap["rank"].tolist(), overlap["comp_comm_overlap_pctg"].tolist()))
    rows = []
    for r in temporal.to_dict("records"):
        rows.append({"rank": int(r["rank"]), "idle_us": float(r["idle_time(us)"]),
                     "compute_us": float(r["compute_time(us)"]), "non_compute_us": float(r["non_compute_time(us)"]),
                     "kernel_us": float(r["kernel_time(us)"]), "idle_pct": float(r["idle_time_pctg"]),
                     "compute_pct": float(r["compute_time_pctg"]), "non_compute_pct": float(r["non_compute_time_pctg"]),
                     "comm_comp_overlap_pct": overlap_by_rank.get(r["rank"])})
    return rows
