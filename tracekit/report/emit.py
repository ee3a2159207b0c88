"""explain's output: one format on stdout (table, JSON or CSV), warnings on stderr."""

from __future__ import annotations

import sys

from tracekit.errors import one_line
from tracekit.model.trace import Trace
from tracekit.report.document import to_csv, to_json
from tracekit.report.table import print_tables


def emit(traces: list[Trace], fmt: str, top: int = 15, fusion: bool = False) -> None:
    """Write one format to stdout; warnings go to stderr."""
    for t in traces:
        for w in t.warnings:
            print(f"tracekit: warning: {one_line(w, 500)}", file=sys.stderr)     # trace text: one bounded line
    if fmt == "json":
        sys.stdout.buffer.write(to_json(traces) + b"\n")
    elif fmt == "csv":
        sys.stdout.write(to_csv(traces))
    else:
        print_tables(traces, top=top, fusion=fusion)
    sys.stdout.flush()
