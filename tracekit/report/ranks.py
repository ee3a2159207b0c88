"""``tracekit ranks DIR``: per-rank time breakdown of a multi-rank run, through HTA.

HTA (holistictraceanalysis) already reads a folder of per-rank traces and splits each rank's GPU time
into compute, non-compute (memcpy/memset) and idle, and measures how much communication overlaps
computation. tracekit uses it for that rather than re-deriving it; explain stays per trace.
Needs the ``hta`` extra: ``pip install 'tracekit[hta]'``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from pathlib import Path

from tracekit.errors import TracekitError


def rank_breakdown(trace_dir: str | Path) -> list[dict]:
    """One dict per rank: idle/compute/non-compute time (µs and %) and comm/compute overlap (%)."""
    folder = Path(trace_dir)
    if not folder.is_dir():
        raise TracekitError(f"{folder}: not a folder (ranks takes a folder of per-rank traces)")
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
