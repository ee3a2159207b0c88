"""``tracekit ranks DIR`` (and ``tracekit explain DIR`` on a multi-rank folder): one trace per rank,
analysed in parallel, then across ranks (tracekit.ranks; docs/ranks.md)."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Optional

import typer

from tracekit.cli.options import DaskOpt, DeviceOpt, GraphCapturesOpt, NoCacheOpt, SpecOpt, StepMarker, WorkersOpt
from tracekit.gcpause import with_collector_paused


class RanksFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    csv = "csv"


def register(app: typer.Typer) -> None:
    @app.command()
    @with_collector_paused
    def ranks(
        trace_dir: str = typer.Argument(..., help="A multi-rank capture bundle (rankN/ folders), or a folder "
                                        "with one trace per rank"),
        format: RanksFormat = typer.Option(RanksFormat.table, "--format", "-f", help="table, json, markdown or csv"),
        workers: Optional[int] = WorkersOpt,
        dask: Optional[str] = DaskOpt,
        no_cache: bool = NoCacheOpt,
        hta: bool = typer.Option(False, "--hta/--no-hta", metavar="", help="Add HTA's temporal breakdown and overlap per rank "
                                 "(needs the hta extra)"),
        keep: Optional[str] = typer.Option(None, "--keep", help="Keep the per-rank Parquet tables in this folder"),
        skip_steps: int = typer.Option(0, "--skip-steps", min=0, help="Leading steps left out of every rank"),
        step_marker: Optional[str] = StepMarker,
        device: Optional[str] = DeviceOpt,
        spec: Optional[str] = SpecOpt,
        graph_captures: Optional[str] = GraphCapturesOpt,
    ) -> None:
        """Per rank and across ranks: step time, stragglers, skew, gap, collectives, comm/compute overlap."""
        run_ranks(trace_dir, format.value, workers=workers, dask=dask, use_cache=not no_cache, hta=hta, keep=keep,
                  skip=skip_steps, step_marker=step_marker, device=device, spec=spec, graph_captures=graph_captures)


def run_ranks(trace_dir: str, fmt: str, workers=None, dask=None, use_cache: bool = True, hta: bool = False,
              keep=None, skip: int = 0, step_marker=None, device=None, spec=None, graph_captures=None) -> None:
    """Analyse every rank of ``trace_dir`` and write the cross-rank report in ``fmt`` on stdout."""
    from pathlib import Path

    import orjson

    from tracekit.outputs import json_chunks

    from tracekit import bundle
    from tracekit.errors import TracekitError
    from tracekit.ranks.run import analyse_ranks, warn

    folder = Path(trace_dir)
    if not folder.is_dir():
        raise TracekitError(f"{folder}: not a folder (ranks takes a folder of per-rank traces)")
    if workers is not None and workers < 1:
        raise TracekitError("--workers must be at least 1")
    if keep is not None:
        from tracekit.outputs import check_output_folder
        from tracekit.ranks.run import is_table_file
        check_output_folder(keep, "--keep", [folder, spec], own=is_table_file)
    doc = analyse_ranks(folder, step_marker, device, spec, skip, workers=workers, dask=dask, use_cache=use_cache,
                        keep=keep, graph_captures=graph_captures)
    multi = bool(bundle.rank_dirs(folder))
    if multi:
        _add_bundle_facts(doc, folder)
    if hta:
        _add_hta(doc, folder)
    doc["source"] = "tracekit multi-rank bundle" if multi else "tracekit"
    warn(doc)
    if fmt == "json":
        for piece in json_chunks(doc, orjson.OPT_SERIALIZE_NUMPY):        # the per-step rows in pieces
            sys.stdout.buffer.write(piece)
        sys.stdout.buffer.write(b"\n")
        return
    from tracekit.report.multirank import print_table, to_csv, to_markdown
    if fmt == "markdown":
        sys.stdout.write(to_markdown(doc))
    elif fmt == "csv":
        sys.stdout.write(to_csv(doc))
    else:
        print_table(doc)
        if multi:
            _bundle_table(doc["ranks"], trace_dir)


def _add_bundle_facts(doc: dict, folder) -> None:
    """A capture bundle's own facts per rank (exit code, state, CPU ops, communication work) join its row."""
    from tracekit.report.ranks import bundle_ranks

    facts = {f"rank{r['rank']}": r for r in bundle_ranks(folder)}
    for row in doc["ranks"]:
        row.update(facts.get(row["label"], {}))


def _add_hta(doc: dict, folder) -> None:
    from tracekit.report.ranks import hta_of_ranks

    found = hta_of_ranks(folder, {r["rank"]: r["label"] for r in doc["ranks"] if r["error"] is None and r["kernels"]})
    for row in doc["ranks"]:
        row["hta"] = found.get(row["rank"])


def _bundle_table(rows: list[dict], trace_dir: str) -> None:
    from tracekit.report.table import StdoutConsole
    from rich.table import Table

    def num(v, fmt="{:,}"):
        return "-" if v is None else fmt.format(v)

    table = Table(title=f"capture bundle per rank: {trace_dir}", show_edge=False, title_justify="left")
    for col in ("rank", "exit", "state", "CPU ops", "c10d ops", "comm ops", "comm bytes", "comm time"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r["rank"]), num(r.get("exit_code"), "{}") + (" (stopped)" if r.get("stopped_by_tracekit") else ""),
                      str(r.get("state")), num(r.get("cpu_ops")), num(r.get("c10d_ops")), num(r.get("comm_ops")),
                      num(r.get("comm_bytes")), num(r.get("comm_us"), "{:,.2f} µs"))
    StdoutConsole().print(table)
    kinds = sorted({k for r in rows for k in (r.get("comm_work") or {})})
    if kinds:
        detail = Table(title="communication work per rank (count / bytes)", show_edge=False, title_justify="left")
        detail.add_column("rank", justify="right")
        for k in kinds:
            detail.add_column(k, justify="right")
        for r in rows:
            w = r.get("comm_work") or {}
            detail.add_row(str(r["rank"]), *[f"{w[k]['count']} / {num(w[k]['bytes'])}" if k in w else "-" for k in kinds])
        StdoutConsole().print(detail)
