"""The ``tracekit ranks`` command (its work is in ``tracekit.report.ranks``)."""

from __future__ import annotations

import sys
from enum import Enum

import orjson
import typer


class RanksFormat(str, Enum):
    table = "table"
    json = "json"


def register(app: typer.Typer) -> None:
    @app.command()
    def ranks(
        trace_dir: str = typer.Argument(..., help="Folder with one trace per rank (HTA's layout)"),
        format: RanksFormat = typer.Option(RanksFormat.table, "--format", "-f"),
    ) -> None:
        """Per-rank compute / non-compute / idle time and comm-compute overlap (via HTA)."""
        from tracekit.report.ranks import rank_breakdown
        rows = rank_breakdown(trace_dir)
        if format is RanksFormat.json:
            sys.stdout.buffer.write(orjson.dumps({"ranks": rows, "source": "HTA TraceAnalysis"}) + b"\n")
            return
        from rich.console import Console
        from rich.table import Table
        table = Table(title="per rank (HTA temporal breakdown; HTA rounds times to whole µs)", show_edge=False)
        for col in ("rank", "kernel time", "compute", "non-compute", "idle", "comm/compute overlap"):
            table.add_column(col, justify="right")
        for r in rows:
            overlap = r["comm_comp_overlap_pct"]
            table.add_row(str(r["rank"]), f"{r['kernel_us'] / 1e3:.2f} ms", f"{r['compute_pct']:.1f}%",
                          f"{r['non_compute_pct']:.1f}%", f"{r['idle_pct']:.1f}%",
                          "-" if overlap is None else f"{overlap:.1f}%")
        Console().print(table)
