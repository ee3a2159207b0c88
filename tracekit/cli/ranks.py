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
        trace_dir: str = typer.Argument(..., help="A multi-rank capture bundle (rankN/ folders), or a folder "
                                        "with one trace per rank (HTA's layout)"),
        format: RanksFormat = typer.Option(RanksFormat.table, "--format", "-f"),
    ) -> None:
        """Per rank: exit code, steps, ops, communication (capture bundles); HTA's time breakdown."""
        from pathlib import Path

        from tracekit.bundle import rank_dirs
        from tracekit.report.ranks import rank_breakdown
        rows = rank_breakdown(trace_dir)
        multi = bool(rank_dirs(Path(trace_dir)))
        if format is RanksFormat.json:
            source = "tracekit multi-rank bundle" if multi else "HTA TraceAnalysis"
            sys.stdout.buffer.write(orjson.dumps({"ranks": rows, "source": source}) + b"\n")
            return
        from rich.console import Console
        from rich.table import Table
        if multi:
            _bundle_table(rows, trace_dir)
            return
        table = Table(title="per rank (HTA temporal breakdown; HTA rounds times to whole µs)", show_edge=False)
        for col in ("rank", "kernel time", "compute", "non-compute", "idle", "comm/compute overlap"):
            table.add_column(col, justify="right")
        for r in rows:
            overlap = r["comm_comp_overlap_pct"]
            table.add_row(str(r["rank"]), f"{r['kernel_us'] / 1e3:.2f} ms", f"{r['compute_pct']:.1f}%",
                          f"{r['non_compute_pct']:.1f}%", f"{r['idle_pct']:.1f}%",
                          "-" if overlap is None else f"{overlap:.1f}%")
        Console().print(table)


def _bundle_table(rows: list[dict], trace_dir: str) -> None:
    from rich.console import Console
    from rich.table import Table

    def num(v, fmt="{:,}"):
        return "-" if v is None else fmt.format(v)

    table = Table(title=f"per rank: {trace_dir}", show_edge=False)
    for col in ("rank", "exit", "state", "steps", "step (mean)", "CPU ops", "GPU kernels", "c10d ops",
                "comm ops", "comm bytes", "comm time", "NCCL kernels"):
        table.add_column(col, justify="right")
    for r in rows:
        ck = r.get("comm_kernels") or {}
        table.add_row(str(r["rank"]), num(r["exit_code"], "{}") + (" (stopped)" if r.get("stopped_by_tracekit") else ""),
                      str(r.get("state")), num(r.get("steps")), num(r.get("step_ms_mean"), "{:.2f} ms"),
                      num(r.get("cpu_ops")), num(r.get("kernels")), num(r.get("c10d_ops")), num(r.get("comm_ops")),
                      num(r.get("comm_bytes")), num(None if r.get("comm_us") is None else r["comm_us"] / 1e3, "{:.2f} ms"),
                      num(ck.get("count")))
    Console().print(table)
    kinds = sorted({k for r in rows for k in (r.get("comm_work") or {})})
    if kinds:
        detail = Table(title="communication work per rank (count / bytes)", show_edge=False)
        detail.add_column("rank", justify="right")
        for k in kinds:
            detail.add_column(k, justify="right")
        for r in rows:
            w = r.get("comm_work") or {}
            detail.add_row(str(r["rank"]), *[f"{w[k]['count']} / {num(w[k]['bytes'])}" if k in w else "-" for k in kinds])
        Console().print(detail)
