"""explain's output: one format on stdout (table, JSON, CSV or Markdown), warnings on stderr, and the
files asked for (--html, --perfetto). Every format is written from one explain document per trace
(``diagnosis.document``: the JSON contract with ``summary.diagnosis``)."""

from __future__ import annotations

import sys

import orjson

from tracekit.errors import TracekitError, warn
from tracekit.model.trace import Trace
from tracekit.report.diagnosis import document
from tracekit.report.table import print_tables


def emit(traces: list[Trace], fmt: str, top: int = 15, fusion: bool = False, wide: bool = False,
         html: str | None = None, perfetto: str | None = None, by: str = "kernel", sort: str = "time",
         pattern=None, devices: list | None = None, xlsx: str | None = None, width: int | None = None,
         csv_by: str | None = None) -> None:
    """Write one format to stdout and the --html / --perfetto files; warnings go to stderr. ``by``,
    ``sort``, ``pattern`` (a ``limits.UserRegex``): what the top table of the table and Markdown formats
    shows (JSON, CSV and HTML keep every kernel). ``devices`` (specs, explain --devices): stdout holds
    the floors on each device (``report.devices``; JSON: the document gains a ``devices`` key).
    ``xlsx``: also write a workbook, one sheet per table (``report.export``); ``width``: the table's
    width in cells (default: the terminal's, else $COLUMNS, else 200); ``csv_by``: CSV rows grouped by
    kernel, op or category (None: one row per kernel execution)."""
    for t in traces:
        for w in t.warnings:
            warn(w)                                      # trace text: one bounded line, each once
    docs = [document(t) for t in traces] if fmt != "csv" or html or perfetto or xlsx else []
    if perfetto:
        if len(traces) != 1:
            raise TracekitError("--perfetto annotates one torch.profiler trace; this input holds several MLX graphs")
        from tracekit.report.perfetto import write_perfetto
        info = write_perfetto(traces[0], docs[0], perfetto)
        print(f"tracekit: wrote {perfetto} ({info['annotated']} events annotated, {info['added_events']} added, "
              f"{info['bytes']:,} bytes)", file=sys.stderr)
    if html:
        from tracekit.report.html import write_html
        size = write_html(traces, docs, html, devices)
        print(f"tracekit: wrote {html} ({size:,} bytes)", file=sys.stderr)
    if xlsx:
        from tracekit.report.export import module_table, workbook_tables, write_xlsx
        modules = [m for m in (module_table(t, d) for t, d in zip(traces, docs)) if m is not None]
        size = write_xlsx(workbook_tables(traces, modules[0] if len(modules) == 1 else None), xlsx)
        print(f"tracekit: wrote {xlsx} ({size:,} bytes)", file=sys.stderr)
    if devices is not None:
        from tracekit.report.devices_view import write_devices
        write_devices(traces, docs, devices, fmt, top)
    elif fmt == "json":
        doc = docs[0] if len(docs) == 1 else {"graphs": docs}
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS) + b"\n")
    elif fmt == "csv":
        from tracekit.report.export import csv_text
        sys.stdout.write(csv_text(traces, csv_by))
    elif fmt == "markdown":
        from tracekit.report.markdown import markdown
        sys.stdout.write(markdown(traces, docs, top=top, by=by, sort=sort, pattern=pattern))
    else:
        print_tables(traces, top=top, fusion=fusion, wide=wide, docs=docs, by=by, sort=sort, pattern=pattern,
                     width=width)
    sys.stdout.flush()
